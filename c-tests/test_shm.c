/* Two processes over the shared-memory transport: each side forks, calls umq_init itself, and
 * exchanges bind info over a socketpair, as the reference examples do over TCP. Cases:
 *   stream   - flow control on, 1e6 messages child -> parent in order, partial posts on EAGAIN
 *   rdma     - WRITE and READ on a buffer the parent exposes (address and token sent over the socket)
 *   base     - base API enqueue / dequeue both ways, a fragmented 40 KB message
 *   irq      - interrupt mode: the parent sleeps in umq_wait_interrupt until the child sends
 *   last_words - the child sends and exits at once: its completed sends still arrive, in order
 *   shared_pool - large sends out of the queue's shared pool cross by reference (one copy):
 *              single-buffer, gathered and SEND_IMM arrive byte-exact, small or process-pool
 *              sends still go through the ring, eight sends of one post cross by reference
 *              together and complete with success although the receiver unbinds before the
 *              sender looks, the counters say which went how, and the pool's buffers stay
 *              usable after the queue is destroyed
 *   placement - process-pool sends into receive buffers from the receiver's shared pool are
 *              written straight into them (one copy) and arrive byte-exact, also after a
 *              refused WRITE_IMM put the sender's count one buffer ahead, and into a
 *              process-pool receive buffer among them
 *   placement_unbind - the receiver unbinds while the sender places 4 MiB messages into its
 *              shared-pool buffers: every buffer it gets back stays as it leaves it, and the
 *              same queue binds again to a new sender and works, six times over
 *   churn    - eight cycles of a stream of 64 B to 200 KB messages from either pool into buffers
 *              of either pool (ring, placement, by-reference and split copies), unbound mid-stream
 *              by the receiver at a different point each time: order and bytes hold, returned
 *              buffers stay untouched, the same queue binds again each cycle
 *   pfc      - link-level pause: a PFC frame from the child stops the parent's priority-3 queue
 *              and not its priority-0 one, a zero-time frame resumes it with nothing lost, a
 *              non-pause control frame is passed to the application, bad settings refused
 *   death    - the child is killed with SIGKILL mid-stream: the parent's queue goes to ERR, a
 *              QH_ERR event is raised, sends in flight flush, an interrupt waiter returns. */
#include "util.h"
#include "umq_ext.h"
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int sock_send(int s, const void *p, uint32_t n)
{
    return write(s, &n, 4) == 4 && write(s, p, n) == (ssize_t)n ? 0 : -1;
}

static uint32_t sock_recv(int s, void *p, uint32_t cap)
{
    uint32_t n = 0;
    if (read(s, &n, 4) != 4 || n > cap)
        return 0;
    uint32_t got = 0;
    while (got < n) {
        ssize_t r = read(s, (char *)p + got, n - got);
        if (r <= 0)
            return 0;
        got += (uint32_t)r;
    }
    return n;
}

static void init(int pro, int flow_control)
{
    umq_init_cfg_t cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.feature = (pro ? UMQ_FEATURE_API_PRO : 0) | (flow_control ? UMQ_FEATURE_ENABLE_FLOW_CONTROL : 0);
    cfg.flow_control.initial_window = 16;
    cfg.trans_info_num = 1;
    cfg.trans_info[0].trans_mode = UMQ_TRANS_MODE_IPC;
    cfg.trans_info[0].dev_info.assign_mode = UMQ_DEV_ASSIGN_MODE_IPV4;
    strcpy(cfg.trans_info[0].dev_info.ipv4.ip_addr, "127.0.0.1");
    if (umq_init(&cfg) != 0) {
        fprintf(stderr, "umq_init failed\n");
        exit(2);
    }
}

/* Binds queue `q` to the process at the other end of `s` (bind info both ways). */
static void bind_to_peer(int s, uint64_t q, const char *name)
{
    uint8_t mine[512], theirs[512];
    uint32_t n = umq_bind_info_get(q, mine, sizeof(mine));
    if (!q || !n || sock_send(s, mine, n) != 0) {
        fprintf(stderr, "%s: setup failed\n", name);
        exit(2);
    }
    uint32_t m = sock_recv(s, theirs, sizeof(theirs));
    if (!m || umq_bind(q, theirs, m) != 0) {
        fprintf(stderr, "%s: bind failed\n", name);
        exit(2);
    }
}

/* Creates a queue and binds it to the process at the other end of `s`. */
static uint64_t connect_queue(int s, const char *name, uint32_t depth, umq_queue_mode_t mode)
{
    umq_create_option_t o = test_option(name, depth, mode);
    o.trans_mode = UMQ_TRANS_MODE_IPC;
    uint64_t q = umq_create(&o);
    bind_to_peer(s, q, name);
    return q;
}

static void post_rx(uint64_t q, int n, uint32_t size)
{
    while (n > 0) {
        int k = n > 32 ? 32 : n;
        umq_buf_t *b = umq_buf_alloc(size, (uint32_t)k, 0, NULL), *bad = NULL;
        int rc = umq_post(q, b, UMQ_IO_RX, &bad);
        if (rc != 0) {
            umq_buf_free(bad);
            return;
        }
        n -= k;
    }
}

static umq_buf_t *message(uint64_t seq, uint32_t size)
{
    umq_buf_t *b = umq_buf_alloc(size, 1, 0, NULL);
    memset(b->qbuf_ext, 0, sizeof(b->qbuf_ext));
    ((umq_buf_pro_t *)b->qbuf_ext)->opcode = UMQ_OPC_SEND;
    memcpy(b->buf_data, &seq, sizeof(seq));
    b->data_size = b->total_data_size = size;
    return b;
}

/* Sends `count` sequence-numbered messages, retrying on EAGAIN, and waits for every completion. */
static int stream_send(uint64_t q, uint64_t count)
{
    uint64_t next = 0, done = 0;
    umq_buf_t *pending = NULL, *c[64];
    while (done < count) {
        if (!pending && next < count)
            pending = message(next, 64);
        if (pending) {
            umq_buf_t *bad = NULL;
            int rc = umq_post(q, pending, UMQ_IO_TX, &bad);
            if (rc == 0) {
                pending = NULL;
                next++;
            } else if (rc != -UMQ_ERR_EAGAIN) {
                return -1;
            }
        }
        int n = umq_poll(q, UMQ_IO_TX, c, 64);
        if (n < 0)
            return -1;
        for (int i = 0; i < n; i++) {
            if (c[i]->status != UMQ_BUF_SUCCESS)
                return -1;
            umq_buf_free(c[i]);
        }
        done += (uint64_t)n;
    }
    return 0;
}

static void test_stream(int s, int child)
{
    const uint64_t count = 1000000;
    init(1, 1);
    uint64_t q = connect_queue(s, child ? "stream-c" : "stream-p", 64, UMQ_MODE_POLLING);
    if (child) {
        int rc = stream_send(q, count);
        char ok = rc == 0;
        sock_send(s, &ok, 1);
        umq_uninit();
        _exit(rc == 0 ? 0 : 1);
    }
    post_rx(q, 64, 64);
    uint64_t expect = 0, out_of_order = 0, updates = 0;
    umq_buf_t *c[64];
    while (expect < count) {
        int n = umq_poll(q, UMQ_IO_RX, c, 64);
        for (int i = 0; i < n; i++) {
            if (c[i]->total_data_size == 0) {
                updates++;
            } else {
                uint64_t seq;
                memcpy(&seq, c[i]->buf_data, sizeof(seq));
                out_of_order += seq != expect++;
            }
            c[i]->qbuf_next = NULL;
            umq_buf_t *bad = NULL;
            if (umq_post(q, c[i], UMQ_IO_RX, &bad) != 0)
                umq_buf_free(c[i]);
        }
    }
    char ok = 0;
    CHECK_EQ(sock_recv(s, &ok, 1), 1);
    CHECK(ok);
    CHECK_EQ(out_of_order, 0);
    CHECK_EQ(expect, count);
    umq_ext_flow_control_stats_t e;
    umq_user_ctl_in_t in = {.opcode = UMQ_EXT_OPCODE_FLOW_CONTROL_EXT_STATS};
    umq_user_ctl_out_t out = {.addr = (uint64_t)(uintptr_t)&e, .len = sizeof(e)};
    CHECK_EQ(umq_user_ctl(q, &in, &out), 0);
    CHECK_EQ(e.rx_without_buffer, 0); /* flow control kept every message within our buffers */
    printf("stream: %llu messages in order, %llu standalone updates\n", (unsigned long long)expect,
           (unsigned long long)updates);
    umq_uninit();
}

struct exposed {
    uint64_t addr;
    uint32_t len, token_id, token_value;
};

static umq_buf_t *poll_one(uint64_t q, umq_io_direction_t dir)
{
    umq_buf_t *b = NULL;
    for (int i = 0; i < 20000000 && umq_poll(q, dir, &b, 1) == 0; i++)
        ;
    return b;
}

static void test_rdma(int s, int child)
{
    init(1, 0);
    uint64_t q = connect_queue(s, child ? "rdma-c" : "rdma-p", 16, UMQ_MODE_POLLING);
    if (!child) {
        umq_buf_t *t = umq_buf_alloc(256, 1, q, NULL);
        memset(t->buf_data, '.', 256);
        struct exposed x = {(uint64_t)(uintptr_t)t->buf_data, 256, t->token_id, t->token_value};
        sock_send(s, &x, sizeof(x));
        char done = 0;
        CHECK_EQ(sock_recv(s, &done, 1), 1);
        CHECK(memcmp(t->buf_data, "written by the child", 20) == 0);
        CHECK_EQ(t->buf_data[20], '.');
        umq_buf_free(t);
        umq_uninit();
        return;
    }
    struct exposed x;
    int fails = sock_recv(s, &x, sizeof(x)) != sizeof(x);
    umq_buf_t *w = umq_buf_alloc(20, 1, 0, NULL);
    memset(w->qbuf_ext, 0, sizeof(w->qbuf_ext));
    memcpy(w->buf_data, "written by the child", 20);
    umq_buf_pro_t *p = (umq_buf_pro_t *)w->qbuf_ext;
    p->opcode = UMQ_OPC_WRITE;
    p->remote_sge = (umq_ref_sge_t){.addr = x.addr, .length = 20, .token_id = x.token_id, .token_value = x.token_value};
    umq_buf_t *bad = NULL;
    fails += umq_post(q, w, UMQ_IO_TX, &bad) != 0;
    umq_buf_t *c = poll_one(q, UMQ_IO_TX);
    fails += !c || c->status != UMQ_BUF_SUCCESS;
    /* READ back 24 bytes: the 20 written and 4 of the original dots. */
    p->opcode = UMQ_OPC_READ;
    p->remote_sge.length = 24;
    memset(w->buf_data, 0, 24);
    fails += umq_post(q, w, UMQ_IO_TX, &bad) != 0;
    c = poll_one(q, UMQ_IO_TX);
    fails += !c || c->status != UMQ_BUF_SUCCESS || c->total_data_size != 24;
    fails += memcmp(w->buf_data, "written by the child....", 24) != 0;
    /* A wrong token is refused by the target. */
    p->opcode = UMQ_OPC_WRITE;
    p->remote_sge.token_value ^= 1;
    fails += umq_post(q, w, UMQ_IO_TX, &bad) != 0;
    c = poll_one(q, UMQ_IO_TX);
    fails += !c || c->status != UMQ_BUF_REM_ACCESS_ABORT_ERR;
    umq_buf_free(w);
    char done = 1;
    sock_send(s, &done, 1);
    umq_uninit();
    _exit(fails ? 1 : 0);
}

static void test_base(int s, int child)
{
    init(0, 0);
    uint64_t q = connect_queue(s, child ? "base-c" : "base-p", 32, UMQ_MODE_POLLING);
    static char big[40000];
    for (size_t i = 0; i < sizeof(big); i++)
        big[i] = (char)(i * 7);
    if (child) {
        int fails = 0;
        for (int i = 0; i < 100; i++) {
            umq_buf_t *b = umq_buf_alloc(16, 1, q, NULL), *bad = NULL;
            b->data_size = b->total_data_size = (uint32_t)snprintf(b->buf_data, 16, "base-%d", i);
            while (umq_enqueue(q, b, &bad) == -UMQ_ERR_EAGAIN)
                umq_notify(q);
        }
        umq_buf_t *b = umq_buf_alloc(sizeof(big), 1, q, NULL), *bad = NULL;
        memcpy(b->buf_data, big, sizeof(big));
        b->data_size = b->total_data_size = sizeof(big);
        fails += umq_enqueue(q, b, &bad) != 0;
        char ack = 0;
        fails += sock_recv(s, &ack, 1) != 1;
        umq_uninit();
        _exit(fails ? 1 : 0);
    }
    int in_order = 1, got = 0;
    for (long spins = 0; got < 101 && spins < 50000000; spins++) {
        umq_buf_t *m = umq_dequeue(q);
        if (!m)
            continue;
        if (got < 100) {
            char want[16];
            int n = snprintf(want, sizeof(want), "base-%d", got);
            in_order &= m->total_data_size == (uint32_t)n && memcmp(m->buf_data, want, (size_t)n) == 0;
        } else {
            size_t off = 0;
            for (umq_buf_t *f = m; f; f = f->qbuf_next) {
                in_order &= memcmp(f->buf_data, big + off, f->data_size) == 0;
                off += f->data_size;
            }
            CHECK_EQ(off, sizeof(big));
            CHECK_EQ(m->total_data_size, sizeof(big));
        }
        got++;
        umq_buf_free(m);
    }
    CHECK_EQ(got, 101);
    CHECK(in_order);
    char ack = 1;
    sock_send(s, &ack, 1);
    umq_uninit();
}

static void test_irq(int s, int child)
{
    init(1, 0);
    uint64_t q = connect_queue(s, child ? "irq-c" : "irq-p", 16, UMQ_MODE_INTERRUPT);
    umq_interrupt_option_t rx = {UMQ_INTERRUPT_FLAG_IO_DIRECTION, UMQ_IO_RX};
    if (child) {
        char go = 0;
        int fails = sock_recv(s, &go, 1) != 1;
        usleep(50000); /* the parent is asleep in umq_wait_interrupt by now */
        umq_buf_t *b = message(42, 64), *bad = NULL;
        fails += umq_post(q, b, UMQ_IO_TX, &bad) != 0;
        umq_interrupt_option_t tx = {UMQ_INTERRUPT_FLAG_IO_DIRECTION, UMQ_IO_TX};
        umq_buf_t *c = NULL;
        for (int i = 0; i < 1000 && !c; i++) {
            umq_rearm_interrupt(q, false, &tx);
            if (umq_poll(q, UMQ_IO_TX, &c, 1) == 0 && umq_wait_interrupt(q, 10, &tx) > 0)
                umq_poll(q, UMQ_IO_TX, &c, 1);
        }
        fails += !c;
        umq_uninit();
        _exit(fails ? 1 : 0);
    }
    post_rx(q, 4, 64);
    CHECK_EQ(umq_rearm_interrupt(q, false, &rx), 0);
    char go = 1;
    sock_send(s, &go, 1);
    /* The usual loop: a wake-up may be spurious (never lost), so poll after each one. Without
     * one, wait on: a poll then could take the message before its wake-up came, and what this
     * tests is the wake-up. */
    umq_buf_t *b = NULL;
    int wakeups = 0;
    for (int round = 0; round < 50 && !b; round++) {
        int n = umq_wait_interrupt(q, 100, &rx);
        wakeups += n > 0;
        umq_ack_interrupt(q, (uint32_t)(n > 0 ? n : 0), &rx);
        if (n > 0 && umq_poll(q, UMQ_IO_RX, &b, 1) != 1)
            b = NULL;
        umq_rearm_interrupt(q, false, &rx);
    }
    CHECK(wakeups > 0);
    CHECK(b != NULL);
    uint64_t seq = 0;
    if (b) {
        memcpy(&seq, b->buf_data, sizeof(seq));
        umq_buf_free(b);
    }
    CHECK_EQ(seq, 42);
    umq_uninit();
}

/* A peer that sends and dies at once: its sends completed (they were in our ring), so the
 * messages must still arrive, in order, before the queue reports the loss. */
static void test_last_words(int s, int child)
{
    init(1, 0);
    uint64_t q = connect_queue(s, child ? "last-c" : "last-p", 16, UMQ_MODE_POLLING);
    if (child) {
        char go = 0;
        int fails = sock_recv(s, &go, 1) != 1;
        for (uint64_t i = 0; i < 5; i++) {
            umq_buf_t *b = message(100 + i, 256), *bad = NULL;
            fails += umq_post(q, b, UMQ_IO_TX, &bad) != 0;
        }
        for (int i = 0; i < 5; i++) {
            umq_buf_t *c = poll_one(q, UMQ_IO_TX);
            fails += !c || c->status != UMQ_BUF_SUCCESS;
        }
        _exit(fails ? 1 : 0); /* no unbind, no uninit: as if it crashed */
    }
    post_rx(q, 8, 256);
    char go = 1;
    sock_send(s, &go, 1);
    for (int i = 0; i < 2000 && umq_state_get(q) != QUEUE_STATE_ERR; i++)
        usleep(1000); /* not polling: the loss is noticed by the library alone */
    CHECK_EQ(umq_state_get(q), QUEUE_STATE_ERR);
    umq_buf_t *c[16];
    int got = 0, in_order = 1;
    for (int n; (n = umq_poll(q, UMQ_IO_RX, c, 16)) > 0;)
        for (int i = 0; i < n; i++) {
            uint64_t seq = 0;
            memcpy(&seq, c[i]->buf_data, sizeof(seq));
            if (c[i]->status == UMQ_BUF_SUCCESS) {
                in_order &= seq == 100 + (uint64_t)got;
                got++;
            }
            umq_buf_free(c[i]);
        }
    CHECK_EQ(got, 5);
    CHECK(in_order);
    umq_uninit();
}

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static umq_ext_transport_stats_t transport_stats(uint64_t q);

static void test_death(int s, int child, pid_t pid)
{
    init(1, 0);
    uint64_t q = connect_queue(s, child ? "death-c" : "death-p", 16, UMQ_MODE_INTERRUPT);
    if (child) {
        char ready = 1; /* posts no receive buffer and never calls in again */
        sock_send(s, &ready, 1);
        for (;;)
            pause();
    }
    char ready = 0;
    CHECK_EQ(sock_recv(s, &ready, 1), 1);
    /* 4 MiB each. Over shared memory three fill the peer's 16 MiB ring (a SEND completes once in
     * the ring) and the other five wait in our send queue; over the network fewer complete (once
     * copied into the 4 MiB of send buffers). Either way some complete and the rest wait. */
    for (int i = 0; i < 8; i++) {
        umq_buf_t *b = message((uint64_t)i, 4u << 20), *bad = NULL;
        CHECK_EQ(umq_post(q, b, UMQ_IO_TX, &bad), 0);
    }
    umq_interrupt_option_t tx = {UMQ_INTERRUPT_FLAG_IO_DIRECTION, UMQ_IO_TX};
    umq_buf_t *c[16];
    int done = 0;
    /* The first completions (a network connection is made on the first send), then 20 ms more
     * for any others that can complete. */
    for (double until = now_ms() + 5000, settled = 0; now_ms() < until;) {
        for (int n; (n = umq_poll(q, UMQ_IO_TX, c, 16)) > 0;)
            for (int i = 0; i < n; i++, done++)
                umq_buf_free(c[i]);
        if (done > 0 && settled == 0)
            settled = now_ms() + 20;
        if (settled > 0 && now_ms() >= settled)
            break;
        usleep(1000);
    }
    /* Over the network the peer's library takes in what arrives while its application does
     * not call in (it copies arrivals out of its receive buffers), so on a loaded machine all
     * eight may have completed by now; over shared memory exactly three have. */
    int network = transport_stats(q).transport != UMQ_EXT_TRANSPORT_SHM;
    if (!network)
        CHECK_EQ(done, 3);
    CHECK(done >= 1 && (done < 8 || network));
    int before_death = done;
    CHECK_EQ(umq_state_get(q), QUEUE_STATE_READY);
    CHECK_EQ(umq_rearm_interrupt(q, false, &tx), 0);
    double t0 = now_ms(), waited = -1;
    kill(pid, SIGKILL);
    /* Wake-ups until the error state: the flush completes the sends. Over the network a send
     * the peer's kernel had taken before the kill may still complete first, with success. */
    int flushed = 0, success_after_flush = 0;
    while (now_ms() - t0 < 10000 && (waited < 0 || done < 8)) {
        int n = umq_wait_interrupt(q, 1000, &tx);
        CHECK(n >= 0);
        if (waited < 0 && umq_state_get(q) == QUEUE_STATE_ERR)
            waited = now_ms() - t0;
        for (int k; (k = umq_poll(q, UMQ_IO_TX, c, 16)) > 0;)
            for (int i = 0; i < k; i++, done++) {
                int flush = c[i]->status == UMQ_BUF_WR_FLUSH_ERR;
                success_after_flush += !flush && flushed > 0;
                flushed += flush;
                umq_buf_free(c[i]);
            }
        CHECK_EQ(umq_rearm_interrupt(q, false, &tx), 0);
    }
    CHECK(waited >= 0);
    CHECK_EQ(umq_state_get(q), QUEUE_STATE_ERR);
    CHECK_EQ(done, 8); /* every send came back: nothing leaked */
    /* The ones the dead peer never took were flushed, after every one it took (completions
     * stay in order): over shared memory exactly the five beyond its ring. Over the network the
     * peer's kernel may have taken all that waited before the kill (its library copies
     * arrivals out while its application does not call in), and then none is flushed (seen
     * under AddressSanitizer with meson's parallel tests). */
    CHECK(flushed <= 8 - before_death);
    CHECK_EQ(success_after_flush, 0);
    if (transport_stats(q).transport == UMQ_EXT_TRANSPORT_SHM)
        CHECK_EQ(flushed, 5);
    umq_async_event_t ev;
    int got_err = 0;
    while (umq_get_async_event(&(umq_trans_info_t){0}, &ev) == 0) {
        got_err |= ev.event_type == UMQ_EVENT_QH_ERR && ev.element.umqh == q;
        umq_ack_async_event(&ev);
    }
    CHECK(got_err);
    umq_buf_t *b = message(99, 64), *bad = NULL;
    CHECK_EQ(umq_post(q, b, UMQ_IO_TX, &bad), -UMQ_ERR_EINVAL); /* refused, still ours */
    CHECK(bad == b);
    umq_buf_free(b);
    printf("death: peer loss noticed after %.1f ms\n", waited);
    umq_uninit();
}

static void fill(umq_buf_t *b, uint32_t len, uint8_t seed)
{
    for (uint32_t i = 0; i < len; i++)
        ((uint8_t *)b->buf_data)[i] = (uint8_t)(seed + i * 7);
}

/* Whether `len` bytes starting at `from` of a pattern `fill` made with `seed` are at `p`. */
static int has_pattern(const uint8_t *p, uint32_t from, uint32_t len, uint8_t seed)
{
    for (uint32_t i = 0; i < len; i++)
        if (p[i] != (uint8_t)(seed + (from + i) * 7))
            return 0;
    return 1;
}

static umq_ext_transport_stats_t transport_stats(uint64_t q)
{
    umq_ext_transport_stats_t t;
    memset(&t, 0xff, sizeof(t));
    umq_user_ctl_in_t in = {.opcode = UMQ_EXT_OPCODE_TRANSPORT_STATS};
    umq_user_ctl_out_t out = {.addr = (uint64_t)(uintptr_t)&t, .len = sizeof(t)};
    if (umq_user_ctl(q, &in, &out) != 0)
        memset(&t, 0xff, sizeof(t));
    return t;
}

/* Posts one WR and waits for its send completion; returns its status. */
static int send_and_wait(uint64_t q, umq_buf_t *wr, umq_opcode_t op, uint64_t imm)
{
    umq_buf_pro_t *p = (umq_buf_pro_t *)wr->qbuf_ext;
    p->opcode = op;
    p->imm_data = imm;
    umq_buf_t *bad = NULL;
    int rc;
    while ((rc = umq_post(q, wr, UMQ_IO_TX, &bad)) == -UMQ_ERR_EAGAIN)
        ;
    if (rc != 0)
        return -1;
    umq_buf_t *c = poll_one(q, UMQ_IO_TX);
    return c == wr ? (int)c->status : -1;
}

/* One buffer of `len` bytes (pattern `seed`) from queue `pool` (0: the process pool). */
static umq_buf_t *patterned(uint64_t pool, uint32_t len, uint8_t seed)
{
    umq_buf_t *b = umq_buf_alloc(len, 1, pool, NULL);
    if (!b)
        return NULL;
    memset(b->qbuf_ext, 0, sizeof(b->qbuf_ext));
    fill(b, len, seed);
    b->data_size = b->total_data_size = len;
    return b;
}

/* Sends of one post that cross by reference together. */
#define STREAM 8

static void test_shared_pool(int s, int child)
{
    init(1, 1);
    uint64_t q = connect_queue(s, child ? "pool-c" : "pool-p", 64, UMQ_MODE_POLLING);
    if (child) {
        int fails = 0;
        umq_ext_transport_stats_t t = transport_stats(q);
        fails += t.transport != UMQ_EXT_TRANSPORT_SHM || t.shared_pool != 0;
        {   /* a wrong length or a NULL buffer is refused and nothing is written (96 bytes, the
             * struct before one_sided_rma_wr, is a right length) */
            umq_user_ctl_in_t in = {.opcode = UMQ_EXT_OPCODE_TRANSPORT_STATS};
            umq_user_ctl_out_t out = {.addr = (uint64_t)(uintptr_t)&t, .len = sizeof(t) - 4};
            memset(&t, 0x5a, sizeof(t));
            fails += umq_user_ctl(q, &in, &out) != -UMQ_ERR_EINVAL || t.by_ref_wr != 0x5a5a5a5a5a5a5a5aull;
            out.addr = 0;
            out.len = sizeof(t);
            fails += umq_user_ctl(q, &in, &out) != -UMQ_ERR_EINVAL;
            fails += umq_user_ctl(0x1234, &in, &out) != -UMQ_ERR_EINVAL;
        }
        umq_buf_t *big = patterned(q, 65536, 1);
        /* Gathered: 40000 + 30000 bytes in two buffers of the pool. */
        umq_buf_t *g1 = patterned(q, 40000, 2), *g2 = umq_buf_alloc(30000, 1, q, NULL);
        fails += !big || !g1 || !g2;
        if (fails) _exit(1);
        for (uint32_t i = 0; i < 30000; i++)
            ((uint8_t *)g2->buf_data)[i] = (uint8_t)(2 + (40000 + i) * 7);
        g2->data_size = 30000;
        g1->total_data_size = 70000;
        g1->qbuf_next = g2;
        umq_buf_t *imm = patterned(q, 20000, 3), *small = patterned(q, 64, 4);
        umq_buf_t *plain = patterned(0, 32768, 5);
        fails += send_and_wait(q, big, UMQ_OPC_SEND, 0) != UMQ_BUF_SUCCESS;
        fails += send_and_wait(q, g1, UMQ_OPC_SEND, 0) != UMQ_BUF_SUCCESS;
        fails += send_and_wait(q, imm, UMQ_OPC_SEND_IMM, 76) != UMQ_BUF_SUCCESS;
        fails += send_and_wait(q, small, UMQ_OPC_SEND, 0) != UMQ_BUF_SUCCESS;
        fails += send_and_wait(q, plain, UMQ_OPC_SEND, 0) != UMQ_BUF_SUCCESS;
        /* A stream from the pool: one post of STREAM sends, several by reference in flight at
         * once; they complete in order, each once the receiver has copied it. It starts once
         * the parent has taken everything above (a stream that starts by reference needs an
         * idle pair; `plain` completed when it entered the ring). */
        char idle = 0;
        fails += sock_recv(s, &idle, 1) != 1;
        umq_buf_t *stream[STREAM];
        for (int i = 0; i < STREAM; i++) {
            stream[i] = patterned(q, 20000, (uint8_t)(10 + i));
            fails += !stream[i];
            if (fails) _exit(1);
            ((umq_buf_pro_t *)stream[i]->qbuf_ext)->opcode = UMQ_OPC_SEND;
            if (i > 0)
                stream[i - 1]->qbuf_next = stream[i];
        }
        /* Credit may cover part of it: the refused rest goes again from *bad. */
        umq_buf_t *next = stream[0], *bad = NULL;
        int rc;
        while ((rc = umq_post(q, next, UMQ_IO_TX, &bad)) == -UMQ_ERR_EAGAIN)
            next = bad;
        fails += rc != 0;
        /* The parent takes all of them and unbinds before we look: WRs it executed before it
         * left complete with success, not flushed. */
        char go = 0;
        fails += sock_recv(s, &go, 1) != 1;
        for (int i = 0; i < STREAM && !fails; i++) {
            umq_buf_t *c = poll_one(q, UMQ_IO_TX);
            fails += c != stream[i] || c->status != UMQ_BUF_SUCCESS;
        }
        t = transport_stats(q);
        /* Only the large sends from the pool went by reference: three alone, then the stream. */
        fails += t.shared_pool != 1 || t.shared_pool_bytes < 65536 + 70000 + 20000;
        fails += t.by_ref_wr != 3 + STREAM || t.by_ref_bytes != 65536 + 70000 + 20000 + STREAM * 20000;
        if (fails)
            fprintf(stderr, "shared_pool: transport %u pool %u by_ref %llu / %llu bytes\n", t.transport,
                    t.shared_pool, (unsigned long long)t.by_ref_wr, (unsigned long long)t.by_ref_bytes);
        /* The pool outlives its queue: its buffers stay the application's until freed. */
        fails += umq_destroy(q) != 0;
        fill(big, 65536, 9);
        umq_buf_free(big);
        umq_buf_free(g1);
        umq_buf_free(imm);
        umq_buf_free(small);
        umq_buf_free(plain);
        for (int i = 0; i < STREAM; i++)
            umq_buf_free(stream[i]);
        fails += umq_buf_alloc(64, 1, q, NULL) != NULL; /* the queue is gone */
        umq_uninit();
        _exit(fails ? 1 : 0);
    }
    post_rx(q, 32, 131072);
    struct expected { uint32_t len; uint8_t seed; umq_opcode_t op; uint64_t imm; } want[5 + STREAM] = {
        {65536, 1, UMQ_OPC_SEND, 0}, {70000, 2, UMQ_OPC_SEND, 0}, {20000, 3, UMQ_OPC_SEND_IMM, 76},
        {64, 4, UMQ_OPC_SEND, 0}, {32768, 5, UMQ_OPC_SEND, 0},
    };
    for (int i = 0; i < STREAM; i++)
        want[5 + i] = (struct expected){20000, (uint8_t)(10 + i), UMQ_OPC_SEND, 0};
    for (int i = 0; i < 5 + STREAM;) {
        umq_buf_t *b = poll_one(q, UMQ_IO_RX);
        CHECK(b != NULL);
        if (!b)
            break;
        if (b->status == UMQ_BUF_FLOW_CONTROL_UPDATE && b->total_data_size == 0) {
            b->qbuf_next = NULL;
            continue; /* a standalone window update */
        }
        umq_buf_pro_t *p = (umq_buf_pro_t *)b->qbuf_ext;
        CHECK_EQ(b->total_data_size, want[i].len);
        CHECK_EQ(p->opcode, want[i].op);
        CHECK_EQ(p->imm_data, want[i].imm);
        CHECK(has_pattern((const uint8_t *)b->buf_data, 0, want[i].len, want[i].seed));
        umq_buf_free(b);
        if (++i == 5) {
            char idle = 1;
            sock_send(s, &idle, 1);
        }
    }
    umq_uninit();
    char go = 1;
    sock_send(s, &go, 1);
}

/* Receive buffers from the receiver's shared pool, sends from the sender's process pool: a
 * message of 1 KiB or more, posted alone, is written by the sender straight into the buffer it
 * lands in (placement, one copy) and completed by the receiver without a copy. A WRITE_IMM
 * refused for its token takes no receive buffer, so from then on the sender's placements are
 * one buffer ahead of the one each message takes: they still arrive byte-exact and in order
 * (the receiver copies them across), as does a message for a process-pool buffer. */
#define PLACED_MSGS 10
#define PLACED_REFUSED 3 /* the WRITE_IMM */
#define PLACED_PROCESS_BUF 8 /* the one receive buffer from the process pool */

static void test_placement(int s, int child)
{
    static const uint32_t len[PLACED_MSGS] = {8192, 40000, 64, 16, 8192, 4096, 2048, 1500, 8192, 8192};
    init(1, 1);
    uint64_t q = connect_queue(s, child ? "place-c" : "place-p", 64, UMQ_MODE_POLLING);
    if (child) {
        char go = 0;
        int fails = sock_recv(s, &go, 1) != 1;
        for (int i = 0; i < PLACED_MSGS && !fails; i++) {
            umq_buf_t *b = patterned(0, len[i], (uint8_t)(20 + i));
            umq_buf_pro_t *p = (umq_buf_pro_t *)b->qbuf_ext;
            if (i == PLACED_REFUSED) {
                p->remote_sge = (umq_ref_sge_t){.addr = 4096, .length = 16, .token_id = 1, .token_value = 1};
                fails += send_and_wait(q, b, UMQ_OPC_WRITE_IMM, 2) != UMQ_BUF_REM_ACCESS_ABORT_ERR;
            } else {
                fails += send_and_wait(q, b, i == 1 ? UMQ_OPC_SEND_IMM : UMQ_OPC_SEND, i == 1 ? 76 : 0) !=
                         UMQ_BUF_SUCCESS;
            }
            umq_buf_free(b);
        }
        umq_ext_transport_stats_t t = transport_stats(q);
        /* Placed: all but the 64-byte send (below 1 KiB, through the ring), the WRITE_IMM, and
         * message 8, whose buffer (by the sender's count) is the process-pool one. */
        fails += t.placed_wr != 7 || t.placed_bytes != 8192 + 40000 + 8192 + 4096 + 2048 + 1500 + 8192;
        fails += t.by_ref_wr != 0;
        if (fails)
            fprintf(stderr, "placement: placed %llu / %llu bytes\n", (unsigned long long)t.placed_wr,
                    (unsigned long long)t.placed_bytes);
        sock_send(s, &go, 1);
        umq_uninit();
        _exit(fails ? 1 : 0);
    }
    /* More than the messages: flow control keeps a few back for window updates. */
    for (int i = 0; i < 20; i++) {
        umq_buf_t *b = umq_buf_alloc(65536, 1, i == PLACED_PROCESS_BUF ? 0 : q, NULL), *bad = NULL;
        CHECK(b != NULL);
        if (b)
            CHECK_EQ(umq_post(q, b, UMQ_IO_RX, &bad), 0);
    }
    char go = 1;
    sock_send(s, &go, 1);
    for (int i = 0; i < PLACED_MSGS; i++) {
        if (i == PLACED_REFUSED)
            continue;
        umq_buf_t *b = poll_one(q, UMQ_IO_RX);
        CHECK(b != NULL);
        if (!b)
            break;
        umq_buf_pro_t *p = (umq_buf_pro_t *)b->qbuf_ext;
        CHECK_EQ(b->status, UMQ_BUF_SUCCESS);
        CHECK_EQ(b->total_data_size, len[i]);
        CHECK_EQ(p->opcode, i == 1 ? UMQ_OPC_SEND_IMM : UMQ_OPC_SEND);
        CHECK_EQ(p->imm_data, i == 1 ? 76u : 0u);
        CHECK(has_pattern((const uint8_t *)b->buf_data, 0, len[i], (uint8_t)(20 + i)));
        umq_buf_free(b);
    }
    CHECK_EQ(sock_recv(s, &go, 1), 1);
    /* Landed without a copy: the first two (the 64-byte one came through the ring, and after
     * the refused WRITE_IMM every placed message sat one buffer ahead). */
    umq_ext_transport_stats_t t = transport_stats(q);
    CHECK_EQ(t.placed_rx, 2u);
    CHECK_EQ(t.placed_wr, 0u);
    umq_uninit();
}

typedef void (*pair_test)(int s, int child);

/* Unbinding while the sender places: cycles in which the child sends 4 MiB messages one at a
 * time, each written straight into one of our shared-pool receive buffers, while we take the
 * first one or two and unbind. Every buffer we get back is then ours again: we fill it, and check, once
 * the child has stopped, that nothing wrote into it since. The messages are large so that the
 * unbind usually lands in the middle of a copy. */
#define UNBIND_CYCLES 6
#define UNBIND_BUFS 16
#define UNBIND_LEN (4u << 20)

/* Child: sends one buffer over and over (a SEND completes once in the peer's ring, so it is
 * free again at once) until the receiver has left: a send refused or flushed, or 2 s without
 * credit. Returns how many went. */
static uint32_t send_until_unbound(uint64_t q)
{
    umq_buf_t *b = patterned(0, UNBIND_LEN, 0), *bad = NULL, *c = NULL;
    ((umq_buf_pro_t *)b->qbuf_ext)->opcode = UMQ_OPC_SEND;
    uint32_t sent = 0;
    for (;; sent++) {
        int rc;
        double t0 = now_ms();
        while ((rc = umq_post(q, b, UMQ_IO_TX, &bad)) == -UMQ_ERR_EAGAIN && now_ms() - t0 < 2000)
            if (umq_poll(q, UMQ_IO_RX, &c, 1) == 1) /* window updates */
                umq_post(q, c, UMQ_IO_RX, &bad);
        if (rc != 0)
            break;
        c = poll_one(q, UMQ_IO_TX);
        if (c != b || c->status != UMQ_BUF_SUCCESS)
            break;
    }
    umq_buf_free(b);
    return sent;
}

/* A copy into the buffer that was under way would reach its end last: fill that first. */
static void fill_from_the_end(void *p, uint32_t len)
{
    for (uint32_t at = len; at > 0; at -= at < 4096 ? at : 4096) {
        uint32_t k = at < 4096 ? at : 4096;
        memset((uint8_t *)p + at - k, 0xa5, k);
    }
}

/* Parent, at the start of a cycle: the same queue every cycle, created at the first and bound
 * again after, so each binding must start clean whatever the last one's sender was doing when
 * we left. */
static uint64_t rebind_cycle(int s, uint64_t q, int cycle, const char *name)
{
    if (cycle == 0)
        return connect_queue(s, name, 64, UMQ_MODE_POLLING);
    bind_to_peer(s, q, name);
    return q;
}

/* Child, at the end of a cycle: tells the parent it stopped sending, and drops its queue. */
static void child_cycle_done(int s, uint64_t q, int fails)
{
    char note = 0;
    sock_send(s, &note, 1);
    umq_destroy(q);
    if (fails)
        _exit(1);
}

/* After an unbind: takes back every receive buffer (flushed, or with a message that made it
 * before the unbind) and fills it, the end first (see fill_from_the_end). */
static int take_back(uint64_t q, umq_buf_t **back, int from, int count, uint32_t len)
{
    umq_buf_t *c;
    int n = from;
    while (n < count && (c = poll_one(q, UMQ_IO_RX)) != NULL) {
        fill_from_the_end(c->buf_data, len);
        back[n++] = c;
    }
    return n;
}

/* Once the sender has stopped: nothing wrote into the buffers we took back; frees them. */
static void check_untouched(umq_buf_t **back, int n, uint32_t len)
{
    for (int i = 0; i < n; i++) {
        const uint8_t *p = (const uint8_t *)back[i]->buf_data;
        int intact = 1;
        for (uint32_t k = 0; k < len; k++)
            intact &= p[k] == 0xa5;
        CHECK(intact);
        umq_buf_free(back[i]);
    }
}

static void test_placement_unbind(int s, int child)
{
    init(1, 1);
    uint64_t q = 0;
    for (int cycle = 0; cycle < UNBIND_CYCLES; cycle++) {
        char note = 0;
        if (child) {
            q = connect_queue(s, "unbind-c", 64, UMQ_MODE_POLLING);
            int fails = sock_recv(s, &note, 1) != 1;
            uint32_t sent = send_until_unbound(q);
            umq_ext_transport_stats_t t = transport_stats(q);
            /* At least what the parent took went, straight into its buffers. (A send that began
             * as the parent left may have gone into the ring it no longer reads.) */
            uint32_t taken = 1u + (uint32_t)cycle % 2;
            fails += sent < taken || t.placed_wr < taken || t.placed_wr > sent;
            if (fails)
                fprintf(stderr, "placement_unbind: cycle %d, %u sent, %llu placed\n", cycle, sent,
                        (unsigned long long)t.placed_wr);
            child_cycle_done(s, q, fails);
            continue;
        }
        q = rebind_cycle(s, q, cycle, "unbind-p");
        umq_buf_t *mine[UNBIND_BUFS], *c = NULL, *bad = NULL;
        for (int i = 0; i < UNBIND_BUFS; i++) {
            mine[i] = umq_buf_alloc(UNBIND_LEN, 1, q, NULL);
            CHECK(mine[i] != NULL && umq_post(q, mine[i], UMQ_IO_RX, &bad) == 0);
        }
        sock_send(s, &note, 1);
        /* One or two arrive (the child has credit for all 16 and goes on copying), then we leave
         * at once. */
        umq_buf_t *back[UNBIND_BUFS];
        int taken = 0, n = 0;
        while (taken < 1 + cycle % 2 && (c = poll_one(q, UMQ_IO_RX)) != NULL)
            back[taken++] = c;
        CHECK_EQ(umq_unbind(q), 0);
        /* Every buffer comes back, flushed or with a message that made it before the unbind; the
         * next one in line, the likeliest to be under the child's copy, is filled first. */
        n = take_back(q, back, taken, UNBIND_BUFS, UNBIND_LEN);
        for (int i = 0; i < taken; i++) {
            CHECK_EQ(back[i]->status, UMQ_BUF_SUCCESS);
            CHECK(has_pattern((const uint8_t *)back[i]->buf_data, 0, UNBIND_LEN, 0));
            memset(back[i]->buf_data, 0xa5, UNBIND_LEN);
        }
        CHECK_EQ(n, UNBIND_BUFS);
        CHECK_EQ(sock_recv(s, &note, 1), 1);
        check_untouched(back, n, UNBIND_LEN);
    }
    if (!child)
        umq_destroy(q);
    umq_uninit();
}

/* Churn: cycles of a stream whose messages vary in size (64 B to 200 KB) and come from either
 * pool, one to four in flight, into receive buffers from either pool, so that the ring,
 * placement and by-reference copies all run; the receiver takes a different number each cycle, checking
 * order and bytes, and unbinds mid-stream. What it gets back stays as it leaves it, and the
 * same receiving queue binds again to a new sender every cycle. */
#define CHURN_CYCLES 8
#define CHURN_BUFS 16
#define CHURN_MAX 200000

static const uint32_t churn_sizes[] = {64, 1000, 4096, 20000, 65536, CHURN_MAX};

static uint32_t churn_size(uint32_t seq)
{
    return churn_sizes[(seq * 2654435761u >> 7) % (sizeof(churn_sizes) / sizeof(churn_sizes[0]))];
}

/* Posts sends `next` on, `n` of them (one or two) in one list; returns how many were taken, or
 * -1 when the queue refuses for good. Two in one post are a stream: a large send between both
 * shared pools then goes split between the two copies. */
static int churn_post(uint64_t q, uint32_t next, int n)
{
    umq_buf_t *b[2] = {NULL, NULL}, *bad = NULL;
    for (int i = 0; i < n; i++) {
        uint32_t seq = next + (uint32_t)i;
        b[i] = patterned(seq % 2 ? q : 0, churn_size(seq), (uint8_t)seq);
        memcpy(b[i]->buf_data, &seq, sizeof(seq));
        ((umq_buf_pro_t *)b[i]->qbuf_ext)->opcode = UMQ_OPC_SEND;
        if (i > 0)
            b[i - 1]->qbuf_next = b[i];
    }
    int rc = umq_post(q, b[0], UMQ_IO_TX, &bad);
    int taken = rc == 0 ? n : bad == b[1] && b[1] ? 1 : 0;
    for (int i = taken; i < n; i++) {
        b[i]->qbuf_next = NULL;
        umq_buf_free(b[i]);
    }
    return rc == 0 || rc == -UMQ_ERR_EAGAIN ? taken : -1;
}

/* Child: streams, `depth` sends in flight at most (now and then two posted together), until
 * the receiver has left; returns how many sends completed with success. */
static uint32_t churn_send(uint64_t q, uint32_t depth)
{
    uint32_t next = 0, ok = 0, in_flight = 0;
    double idle_since = now_ms();
    for (;;) {
        umq_buf_t *c[16], *bad = NULL;
        if (in_flight < depth) {
            int taken = churn_post(q, next, in_flight + 2 <= depth && next % 4 == 1 ? 2 : 1);
            if (taken < 0)
                break;
            if (taken > 0) {
                next += (uint32_t)taken;
                in_flight += (uint32_t)taken;
                idle_since = now_ms();
            }
        }
        int n = umq_poll(q, UMQ_IO_ALL, c, 16);
        if (n < 0)
            break;
        int over = 0;
        for (int i = 0; i < n; i++) {
            if (c[i]->io_direction == UMQ_IO_RX) { /* window updates */
                umq_post(q, c[i], UMQ_IO_RX, &bad);
                continue;
            }
            in_flight--;
            ok += c[i]->status == UMQ_BUF_SUCCESS;
            over |= c[i]->status != UMQ_BUF_SUCCESS;
            c[i]->qbuf_next = NULL; /* a pair's first still names the second, freed on its own */
            umq_buf_free(c[i]);
        }
        if (over || umq_state_get(q) == QUEUE_STATE_ERR || now_ms() - idle_since > 2000)
            break;
    }
    /* What is still in flight comes back: flushed, or with success when the receiver took it
     * before it left (the error state can be seen before that completion is polled). */
    for (double t0 = now_ms(); in_flight > 0 && now_ms() - t0 < 2000;) {
        umq_buf_t *c = NULL;
        if (umq_poll(q, UMQ_IO_TX, &c, 1) == 1) {
            in_flight--;
            ok += c->status == UMQ_BUF_SUCCESS;
            c->qbuf_next = NULL;
            umq_buf_free(c);
        }
    }
    return ok;
}

static void test_churn(int s, int child)
{
    init(1, 1);
    uint64_t q = 0, by_ref = 0, placed = 0;
    for (int cycle = 0; cycle < CHURN_CYCLES; cycle++) {
        char note = 0;
        int take = 3 + 5 * cycle;
        if (child) {
            q = connect_queue(s, "churn-c", 64, UMQ_MODE_POLLING);
            int fails = sock_recv(s, &note, 1) != 1;
            uint32_t ok = churn_send(q, 1 + (uint32_t)cycle % 4);
            umq_ext_transport_stats_t t = transport_stats(q);
            by_ref += t.by_ref_wr;
            placed += t.placed_wr;
            fails += ok < (uint32_t)take;
            /* Over the cycles, both one-copy paths ran (with one send in flight, the pair is
             * idle at every large send from the shared pool, so it goes by reference). */
            fails += cycle == CHURN_CYCLES - 1 && (by_ref == 0 || placed == 0);
            if (fails)
                fprintf(stderr, "churn: cycle %d, %u sent, %llu by reference, %llu placed\n", cycle, ok,
                        (unsigned long long)by_ref, (unsigned long long)placed);
            child_cycle_done(s, q, fails);
            continue;
        }
        q = rebind_cycle(s, q, cycle, "churn-p");
        umq_buf_t *c = NULL, *bad = NULL;
        for (int i = 0; i < CHURN_BUFS; i++) {
            /* Pairs of each pool: with the sender alternating pools, all four meet. */
            umq_buf_t *b = umq_buf_alloc(CHURN_MAX, 1, i / 2 % 2 ? q : 0, NULL);
            CHECK(b != NULL && umq_post(q, b, UMQ_IO_RX, &bad) == 0);
        }
        sock_send(s, &note, 1);
        for (int got = 0; got < take;) {
            c = poll_one(q, UMQ_IO_RX);
            CHECK(c != NULL);
            if (!c)
                break;
            if (c->total_data_size > 0) {
                uint32_t seq = 0, len = churn_size((uint32_t)got);
                memcpy(&seq, c->buf_data, sizeof(seq));
                CHECK_EQ(c->status, UMQ_BUF_SUCCESS);
                CHECK_EQ(seq, (uint32_t)got);
                CHECK_EQ(c->total_data_size, len);
                CHECK(has_pattern((const uint8_t *)c->buf_data + 4, 4, len - 4, (uint8_t)got));
                got++;
            }
            CHECK_EQ(umq_post(q, c, UMQ_IO_RX, &bad), 0);
        }
        CHECK_EQ(umq_unbind(q), 0);
        umq_buf_t *back[CHURN_BUFS];
        int n = take_back(q, back, 0, CHURN_BUFS, CHURN_MAX);
        CHECK_EQ(n, CHURN_BUFS);
        CHECK_EQ(sock_recv(s, &note, 1), 1);
        check_untouched(back, n, CHURN_MAX);
    }
    if (!child) {
        umq_ext_transport_stats_t t = transport_stats(q);
        CHECK(t.placed_rx > 0); /* some landed in place, over the cycles */
        umq_destroy(q);
    }
    umq_uninit();
}


/* Flow control off: immediates are the user's 64 bits, bit 0 included (with it on, bit 0 marks
 * the library's own). Both the receiver's completion and the sender's WR keep them. */
static void test_imm64(int s, int child)
{
    const uint64_t imm = 0x8000000000000003ull;
    init(1, 0);
    uint64_t q = connect_queue(s, child ? "imm-c" : "imm-p", 16, UMQ_MODE_POLLING);
    if (!child) {
        post_rx(q, 1, 64);
        char go = 1;
        sock_send(s, &go, 1);
        umq_buf_t *r = poll_one(q, UMQ_IO_RX);
        CHECK(r != NULL);
        if (r) {
            umq_buf_pro_t *p = (umq_buf_pro_t *)r->qbuf_ext;
            CHECK_EQ(r->status, UMQ_BUF_SUCCESS);
            CHECK_EQ(p->opcode, UMQ_OPC_SEND_IMM);
            CHECK_EQ(p->imm_data, imm);
            CHECK_EQ(r->total_data_size, 8);
            CHECK(memcmp(r->buf_data, "odd imm!", 8) == 0);
            umq_buf_free(r);
        }
        CHECK_EQ(sock_recv(s, &go, 1), 1);
        umq_uninit();
        return;
    }
    char go = 0;
    int fails = sock_recv(s, &go, 1) != 1;
    umq_buf_t *w = message(0, 8);
    memcpy(w->buf_data, "odd imm!", 8);
    fails += send_and_wait(q, w, UMQ_OPC_SEND_IMM, imm) != UMQ_BUF_SUCCESS;
    umq_buf_pro_t *p = (umq_buf_pro_t *)w->qbuf_ext;
    fails += p->opcode != UMQ_OPC_SEND_IMM || p->imm_data != imm;
    umq_buf_free(w);
    sock_send(s, &go, 1);
    umq_uninit();
    _exit(fails ? 1 : 0);
}

/* ---- pfc: link-level pause between the two processes (umq_ext.h) ---- */

static uint32_t crc32_le(const uint8_t *p, size_t n)
{
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++)
            c = c & 1 ? (c >> 1) ^ 0xedb88320u : c >> 1;
    }
    return ~c;
}

/* A 64-byte MAC control frame: opcode 0x0101 (PFC) pausing the priorities in `enabled` for
 * `quanta`, or another opcode (not a pause frame); FCS least significant byte first. */
static umq_ext_pfc_frame_t control_frame(uint16_t opcode, uint8_t enabled, uint16_t quanta)
{
    umq_ext_pfc_frame_t f;
    memset(&f, 0, sizeof(f));
    static const uint8_t head[14] = {0x01, 0x80, 0xc2, 0, 0, 0x01, 0x02, 0, 0, 0, 0, 0x0c, 0x88, 0x08};
    memcpy(f.bytes, head, sizeof(head));
    f.bytes[14] = (uint8_t)(opcode >> 8);
    f.bytes[15] = (uint8_t)opcode;
    f.bytes[17] = enabled;
    for (int p = 0; p < 8; p++) {
        f.bytes[18 + 2 * p] = (uint8_t)(quanta >> 8);
        f.bytes[19 + 2 * p] = (uint8_t)quanta;
    }
    uint32_t fcs = crc32_le(f.bytes, 60);
    for (int i = 0; i < 4; i++)
        f.bytes[60 + i] = (uint8_t)(fcs >> (8 * i));
    f.len = 64;
    return f;
}

static umq_ext_pfc_stats_t pfc_stats(uint64_t q)
{
    umq_ext_pfc_stats_t st;
    memset(&st, 0xff, sizeof(st));
    CHECK_EQ(test_ctl(q, UMQ_EXT_OPCODE_PFC_STATS, NULL, 0, &st, sizeof(st)), 0);
    return st;
}

static int send_frame_on(uint64_t q, umq_ext_pfc_frame_t f)
{
    return test_ctl(q, UMQ_EXT_OPCODE_PFC_SEND_FRAME, &f, sizeof(f), NULL, 0);
}

/* Receives `n` sequence-numbered messages on `q` within about a second; how many came in order. */
static int receive_in_order(uint64_t q, int n, int *next)
{
    int got = 0;
    for (int spin = 0; spin < 20000000 && got < n; spin++) {
        umq_buf_t *b = NULL;
        if (umq_poll(q, UMQ_IO_RX, &b, 1) != 1)
            continue;
        uint64_t seq = 0;
        memcpy(&seq, b->buf_data, sizeof(seq));
        got += b->status == UMQ_BUF_SUCCESS && seq == (uint64_t)(*next)++;
        umq_buf_free(b);
    }
    return got;
}

/* The child pauses priority 3 with a hand-built PFC frame: the parent's priority-3 queue starts
 * nothing while its priority-0 queue runs on; a zero-time frame resumes it, nothing lost; a
 * control frame that is not a pause frame is counted and, with pass_control 1, handed to the
 * parent's application byte for byte; bad settings and frames are refused and change nothing. */
static void test_pfc(int s, int child)
{
    init(1, 0);
    uint64_t q0 = connect_queue(s, child ? "pfc0-c" : "pfc0-p", 16, UMQ_MODE_POLLING);
    uint64_t q3 = connect_queue(s, child ? "pfc3-c" : "pfc3-p", 16, UMQ_MODE_POLLING);
    char go = 0;
    if (child) {
        umq_user_ctl_in_t i = {.addr = 3, .opcode = UMQ_EXT_OPCODE_PFC_PRIORITY};
        umq_user_ctl_out_t o = {0};
        int fails = umq_user_ctl(q3, &i, &o) != 0;
        post_rx(q0, 8, 64);
        post_rx(q3, 8, 64);
        /* Only once the parent has set its link speed: a frame it took before would pause for
         * 0xffff quanta at the default speed, a few hundred microseconds. */
        fails += sock_recv(s, &go, 1) != 1;
        fails += send_frame_on(q0, control_frame(0x0101, 1 << 3, 0xffff)) != 0;
        sock_send(s, &go, 1);
        fails += sock_recv(s, &go, 1) != 1; /* the parent sent 4 + 4 */
        int next0 = 0, next3 = 0;
        fails += receive_in_order(q0, 4, &next0) != 4;
        umq_buf_t *b = NULL;
        for (int spin = 0; spin < 2000000; spin++)
            fails += umq_poll(q3, UMQ_IO_RX, &b, 1) != 0; /* priority 3 paused: nothing */
        fails += send_frame_on(q0, control_frame(0x0101, 1 << 3, 0)) != 0;
        fails += receive_in_order(q3, 4, &next3) != 4;
        fails += send_frame_on(q0, control_frame(0x0002, 0, 0)) != 0; /* not a pause frame */
        sock_send(s, &go, 1);
        fails += sock_recv(s, &go, 1) != 1;
        umq_uninit();
        _exit(fails ? 1 : 0);
    }
    umq_user_ctl_in_t i = {.addr = 3, .opcode = UMQ_EXT_OPCODE_PFC_PRIORITY};
    umq_user_ctl_out_t o = {0};
    CHECK_EQ(umq_user_ctl(q3, &i, &o), 0);
    i.addr = 8;
    CHECK_EQ(umq_user_ctl(q3, &i, &o), -UMQ_ERR_EINVAL);
    umq_ext_pfc_config_t c, again;
    CHECK_EQ(test_ctl(q0, UMQ_EXT_OPCODE_PFC_CONFIG, NULL, 0, &c, sizeof(c)), 0);
    CHECK_EQ(c.flags, UMQ_EXT_PFC_RFE | UMQ_EXT_PFC_PFCE);
    CHECK_EQ(c.watchdog_detect_ns, 200000000);
    umq_ext_pfc_config_t bad = c;
    bad.xon_bytes = c.xoff_bytes + 1;
    CHECK_EQ(test_ctl(q0, UMQ_EXT_OPCODE_PFC_CONFIG, &bad, sizeof(bad), NULL, 0), -UMQ_ERR_EINVAL);
    CHECK_EQ(test_ctl(q0, UMQ_EXT_OPCODE_PFC_CONFIG, &c, sizeof(c) - 1, NULL, 0), -UMQ_ERR_EINVAL);
    c.speed_bps = 1000000ull;           /* 0xffff quanta: 33.5 s, until the zero-time frame */
    c.watchdog_detect_ns = 60000000000ull; /* no storm here */
    c.pass_control = 1;
    CHECK_EQ(test_ctl(q0, UMQ_EXT_OPCODE_PFC_CONFIG, &c, sizeof(c), &again, sizeof(again)), 0);
    CHECK(memcmp(&c, &again, sizeof(c)) == 0);
    umq_ext_pfc_frame_t short_frame = control_frame(0x0101, 1, 1);
    short_frame.len = 13;
    CHECK_EQ(send_frame_on(q0, short_frame), -UMQ_ERR_EINVAL);
    /* NULL or short buffers, a stale handle: refused, nothing written. */
    CHECK_EQ(test_ctl(q0, UMQ_EXT_OPCODE_PFC_SEND_FRAME, NULL, sizeof(short_frame), NULL, 0), -UMQ_ERR_EINVAL);
    CHECK_EQ(test_ctl(q0, UMQ_EXT_OPCODE_PFC_STATS, NULL, 0, NULL, sizeof(umq_ext_pfc_stats_t)), -UMQ_ERR_EINVAL);
    umq_ext_pfc_frame_t untouched;
    memset(&untouched, 0x5a, sizeof(untouched));
    CHECK_EQ(test_ctl(q0, UMQ_EXT_OPCODE_PFC_RECV_FRAME, NULL, 0, &untouched, sizeof(untouched) - 1), -UMQ_ERR_EINVAL);
    CHECK_EQ(untouched.len, 0x5a5a5a5a);
    CHECK_EQ(test_ctl(0xdead, UMQ_EXT_OPCODE_PFC_STATS, NULL, 0, &untouched, sizeof(umq_ext_pfc_stats_t)), -UMQ_ERR_EINVAL);
    CHECK_EQ(untouched.len, 0x5a5a5a5a);
    sock_send(s, &go, 1);              /* configured: the child may pause us */
    CHECK_EQ(sock_recv(s, &go, 1), 1); /* the child sent its pause */
    int paused = 0;
    for (int spin = 0; spin < 20000000 && !paused; spin++) {
        umq_buf_t *b = NULL;
        umq_poll(q0, UMQ_IO_TX, &b, 1);
        paused = (pfc_stats(q3).paused_now & (1u << 3)) != 0;
    }
    CHECK(paused);
    for (int k = 0; k < 4; k++) {
        umq_buf_t *bad_wr = NULL;
        CHECK_EQ(umq_post(q3, message((uint64_t)k, 64), UMQ_IO_TX, &bad_wr), 0);
        CHECK_EQ(send_and_wait(q0, message((uint64_t)k, 64), UMQ_OPC_SEND, 0), UMQ_BUF_SUCCESS);
    }
    umq_buf_t *done[8];
    CHECK_EQ(umq_poll(q3, UMQ_IO_TX, done, 8), 0); /* nothing of priority 3 went */
    sock_send(s, &go, 1);
    int completed = 0;
    for (int spin = 0; spin < 20000000 && completed < 4; spin++) {
        int n = umq_poll(q3, UMQ_IO_TX, done, 8);
        for (int k = 0; k < n; k++) {
            CHECK_EQ(done[k]->status, UMQ_BUF_SUCCESS);
            umq_buf_free(done[k]);
        }
        completed += n > 0 ? n : 0;
    }
    CHECK_EQ(completed, 4);
    CHECK_EQ(sock_recv(s, &go, 1), 1); /* the child has them all, and sent a non-pause frame */
    umq_ext_pfc_frame_t passed;
    memset(&passed, 0, sizeof(passed));
    for (int spin = 0; spin < 2000000 && passed.len == 0; spin++)
        CHECK_EQ(test_ctl(q0, UMQ_EXT_OPCODE_PFC_RECV_FRAME, NULL, 0, &passed, sizeof(passed)), 0);
    umq_ext_pfc_frame_t sent = control_frame(0x0002, 0, 0);
    CHECK_EQ(passed.len, 64);
    CHECK(memcmp(passed.bytes, sent.bytes, 64) == 0);
    umq_ext_pfc_stats_t st = pfc_stats(q0);
    CHECK_EQ(st.priority[3].indications, 2);
    CHECK_EQ(st.priority[0].indications, 0);
    CHECK(st.priority[3].paused_ns > 0);
    CHECK_EQ(st.paused_now, 0);
    CHECK_EQ(st.other_control, 1);
    CHECK_EQ(st.queues, 2);
    sock_send(s, &go, 1);
    umq_destroy(q0);
    umq_destroy(q3);
    umq_uninit();
}

static void run(const char *name, pair_test t, int death)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
        exit(2);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        close(sv[0]);
        if (death)
            test_death(sv[1], 1, 0);
        else
            t(sv[1], 1);
        _exit(0);
    }
    close(sv[1]);
    if (death)
        test_death(sv[0], 0, pid);
    else
        t(sv[0], 0);
    int status = 0;
    waitpid(pid, &status, 0);
    if (!death)
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    close(sv[0]);
    printf("%s: done (%d failures so far)\n", name, test_failures);
}

int main(int argc, char **argv)
{
    const char *only = argc > 1 ? argv[1] : NULL;
    struct { const char *name; pair_test t; } cases[] = {
        {"stream", test_stream}, {"rdma", test_rdma}, {"base", test_base}, {"irq", test_irq},
        {"last_words", test_last_words}, {"shared_pool", test_shared_pool}, {"imm64", test_imm64},
        {"placement", test_placement}, {"placement_unbind", test_placement_unbind},
        {"churn", test_churn}, {"pfc", test_pfc},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        if (!only || strcmp(only, cases[i].name) == 0)
            run(cases[i].name, cases[i].t, 0);
    if (!only || strcmp(only, "death") == 0)
        run("death", NULL, 1);
    TEST_DONE("shm");
}
