/* Drop-in behaviours that unmodified programs written for the reference implementation depend on,
 * run the way the reference's own qps tool runs: one client streaming batches of 64 buffers, one
 * server counting and checking what arrives.
 *
 *   test_dropin TRANSPORT EVENTS FC API [ROUNDS]
 *     TRANSPORT  loopback (client and server are two threads of one process)
 *                shm      (client and server are two processes; the client forks the server)
 *                fabric   (as shm, every bind forced onto the network provider: UMQ_PROVIDER)
 *     EVENTS     poll | irq
 *     FC         fc (flow control on, a small initial window) | nofc
 *     API        pro:  the client posts the SAME 64-buffer list head every round (umq_post must
 *                      leave its qbuf_next links alone); every message's bytes and order are
 *                      checked at the server, and the list is checked after every round
 *                base: a setup loop polls TX (0 on a base-API queue) and dequeues from empty
 *                      queues (NULL with errno untouched); then each round enqueues 64 x 64 B
 *                      as one list, which must arrive as 64 dequeues of one 64 B message each,
 *                      in order
 *     ROUNDS     default 10000 (pro) / 1000 (base)
 *
 * The transport the library chose is asserted through the transport-stats extension. */
#include "util.h"
#include "umq_ext.h"
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define BATCH 64
#define MSG 64
#define DEPTH 256
#define WAIT_MS 10000
#define DEQUEUE_MOST 64 /* the most messages one umq_dequeue returns */

static struct {
    int shm, fabric, irq, fc, pro;
    long rounds;
} cfg;

static void die(const char *who, const char *what)
{
    fprintf(stderr, "%s: %s\n", who, what);
    exit(1);
}

/* ---- setup ---- */

static void init(void)
{
    umq_init_cfg_t *c = calloc(1, sizeof(*c));
    c->buf_mode = UMQ_BUF_SPLIT;
    c->feature = (cfg.pro ? UMQ_FEATURE_API_PRO : UMQ_FEATURE_API_BASE) |
                 (cfg.fc ? UMQ_FEATURE_ENABLE_FLOW_CONTROL : 0);
    c->flow_control.initial_window = 24; /* smaller than a batch: posts run out of credit */
    c->trans_info_num = 1;
    c->trans_info[0].trans_mode = UMQ_TRANS_MODE_UB;
    c->trans_info[0].dev_info.assign_mode = UMQ_DEV_ASSIGN_MODE_IPV4;
    strcpy(c->trans_info[0].dev_info.ipv4.ip_addr, "127.0.0.1");
    if (umq_init(c) != UMQ_SUCCESS)
        die("init", "umq_init failed");
    free(c);
}

static void sock_send(int s, const void *p, uint32_t n)
{
    if (write(s, &n, 4) != 4 || write(s, p, n) != (ssize_t)n)
        die("setup", "socket write");
}

static uint32_t sock_recv(int s, void *p, uint32_t cap)
{
    uint32_t n = 0, got = 0;
    if (read(s, &n, 4) != 4 || n > cap)
        die("setup", "socket read");
    while (got < n) {
        ssize_t r = read(s, (char *)p + got, n - got);
        if (r <= 0)
            die("setup", "socket read");
        got += (uint32_t)r;
    }
    return n;
}

static uint64_t connect_queue(int s, const char *name)
{
    umq_create_option_t o = test_option(name, DEPTH, cfg.irq ? UMQ_MODE_INTERRUPT : UMQ_MODE_POLLING);
    uint64_t q = umq_create(&o);
    uint8_t mine[512], theirs[512];
    uint32_t n = q ? umq_bind_info_get(q, mine, sizeof(mine)) : 0;
    if (!n)
        die(name, "umq_create / umq_bind_info_get");
    sock_send(s, mine, n);
    uint32_t m = sock_recv(s, theirs, sizeof(theirs));
    if (umq_bind(q, theirs, m) != UMQ_SUCCESS)
        die(name, "umq_bind");
    umq_ext_transport_stats_t st;
    memset(&st, 0, sizeof(st));
    umq_user_ctl_in_t in = {.opcode = UMQ_EXT_OPCODE_TRANSPORT_STATS};
    umq_user_ctl_out_t out = {.addr = (uint64_t)(uintptr_t)&st, .len = sizeof(st)};
    if (umq_user_ctl(q, &in, &out) != 0)
        die(name, "transport stats");
    uint32_t want = cfg.fabric ? UMQ_EXT_TRANSPORT_FABRIC
                    : cfg.shm  ? UMQ_EXT_TRANSPORT_SHM
                               : UMQ_EXT_TRANSPORT_LOOPBACK;
    if (st.transport != want)
        die(name, "the binding is not on the transport this run is for");
    return q;
}

/* Both sides reach the same point before either goes on. */
static void barrier(int s)
{
    char t = 'b';
    sock_send(s, &t, 1);
    sock_recv(s, &t, 1);
}

/* In interrupt mode: arm the direction's channel and sleep until it fires (arming with
 * completions already waiting fires at once, so none is missed between the look and the arm). */
static void wait_event(uint64_t q, umq_io_direction_t dir, const char *who)
{
    if (!cfg.irq)
        return;
    umq_interrupt_option_t o;
    memset(&o, 0, sizeof(o));
    o.flag = UMQ_INTERRUPT_FLAG_IO_DIRECTION;
    o.direction = dir;
    if (umq_rearm_interrupt(q, false, &o) != UMQ_SUCCESS)
        die(who, "umq_rearm_interrupt");
    int n = umq_wait_interrupt(q, WAIT_MS, &o);
    if (n < 0)
        die(who, "umq_wait_interrupt");
    if (n > 0)
        umq_ack_interrupt(q, (uint32_t)n, &o);
}

/* The byte at offset i of message number seq. */
static char pattern(uint64_t seq, uint32_t i)
{
    return (char)(seq * 131 + i * 7 + (seq >> 8));
}

static void fill(umq_buf_t *b, uint64_t seq)
{
    memcpy(b->buf_data, &seq, sizeof(seq));
    for (uint32_t i = sizeof(seq); i < MSG; i++)
        b->buf_data[i] = pattern(seq, i);
}

/* Whether b holds exactly message seq. */
static int holds(const umq_buf_t *b, uint64_t seq)
{
    uint64_t got;
    if (b->data_size != MSG)
        return 0;
    memcpy(&got, b->buf_data, sizeof(got));
    if (got != seq)
        return 0;
    for (uint32_t i = sizeof(seq); i < MSG; i++)
        if (b->buf_data[i] != pattern(seq, i))
            return 0;
    return 1;
}

/* ---- pro API: the same list posted round after round ---- */

static void post_rx(uint64_t q, umq_buf_t *list, const char *who)
{
    umq_buf_t *bad = NULL;
    if (umq_post(q, list, UMQ_IO_RX, &bad) != UMQ_SUCCESS)
        die(who, "umq_post rx");
}

static void pro_server(int s)
{
    uint64_t q = connect_queue(s, "server");
    for (int i = 0; i < DEPTH / BATCH; i++)
        post_rx(q, umq_buf_alloc(MSG, BATCH, 0, NULL), "server");
    barrier(s);
    uint64_t want = (uint64_t)cfg.rounds * BATCH, next = 0;
    umq_buf_t *got[BATCH];
    while (next < want) {
        int n = umq_poll(q, UMQ_IO_RX, got, BATCH);
        if (n < 0)
            die("server", "umq_poll rx");
        if (n == 0) {
            wait_event(q, UMQ_IO_RX, "server");
            continue;
        }
        for (int i = 0; i < n; i++) {
            if (got[i]->status != UMQ_BUF_SUCCESS && got[i]->status != UMQ_BUF_FLOW_CONTROL_UPDATE)
                die("server", "receive status");
            if (got[i]->status == UMQ_BUF_FLOW_CONTROL_UPDATE && got[i]->data_size == 0) {
                post_rx(q, got[i], "server"); /* a standalone window update: no message */
                continue;
            }
            if (got[i]->qbuf_next != NULL)
                die("server", "a receive completion's qbuf_next is not NULL");
            if (!holds(got[i], next)) {
                fprintf(stderr, "server: message %llu: wrong bytes or out of order\n", (unsigned long long)next);
                exit(1);
            }
            umq_buf_reset(got[i]);
            post_rx(q, got[i], "server");
            next++;
        }
    }
    barrier(s);
    if (umq_unbind(q) != UMQ_SUCCESS || umq_destroy(q) != UMQ_SUCCESS)
        die("server", "teardown");
}

/* Takes TX completions until `outstanding` is zero; each must be the next buffer of the list
 * (completions come in posting order) and carry success. Returns how many came. */
static int reap_tx(uint64_t q, umq_buf_t **list, int from, int outstanding)
{
    umq_buf_t *done[BATCH];
    int n = umq_poll(q, UMQ_IO_TX, done, (uint32_t)outstanding);
    if (n < 0)
        die("client", "umq_poll tx");
    for (int i = 0; i < n; i++) {
        if (done[i] != list[from + i] || done[i]->status != UMQ_BUF_SUCCESS)
            die("client", "TX completion out of order or failed");
        if (done[i]->qbuf_next != (from + i + 1 < BATCH ? list[from + i + 1] : NULL))
            die("client", "a TX completion's qbuf_next is not what was posted");
    }
    return n;
}

/* As the reference's qps client does each turn: take what arrived (window updates) and post
 * the buffers again. */
static void recycle_rx(uint64_t q)
{
    umq_buf_t *got[BATCH];
    int n = umq_poll(q, UMQ_IO_RX, got, BATCH);
    if (n < 0)
        die("client", "umq_poll rx");
    for (int i = 0; i < n; i++) {
        if (got[i]->status != UMQ_BUF_FLOW_CONTROL_UPDATE || got[i]->data_size != 0)
            die("client", "the client received something other than a window update");
        umq_buf_reset(got[i]);
        post_rx(q, got[i], "client");
    }
}

static void pro_client(int s)
{
    uint64_t q = connect_queue(s, "client");
    umq_buf_t *head = umq_buf_alloc(MSG, BATCH, 0, NULL), *list[BATCH];
    int k = 0;
    for (umq_buf_t *b = head; b; b = b->qbuf_next, k++) {
        if (k == BATCH)
            die("client", "umq_buf_alloc gave more than 64 buffers");
        list[k] = b;
        memset(b->qbuf_ext, 0, sizeof(b->qbuf_ext));
        ((umq_buf_pro_t *)b->qbuf_ext)->opcode = UMQ_OPC_SEND;
        ((umq_buf_pro_t *)b->qbuf_ext)->user_ctx = (uint64_t)k;
    }
    if (k != BATCH)
        die("client", "umq_buf_alloc gave fewer than 64 buffers");
    post_rx(q, umq_buf_alloc(MSG, 16, 0, NULL), "client");
    barrier(s);
    uint64_t seq = 0;
    long eagain = 0;
    for (long r = 0; r < cfg.rounds; r++) {
        for (int i = 0; i < BATCH; i++)
            fill(list[i], seq + (uint64_t)i);
        /* Post the same head; on EAGAIN post the rest from *bad once completions came back. */
        int posted = 0, completed = 0;
        umq_buf_t *from = head;
        while (completed < BATCH) {
            if (posted < BATCH) {
                umq_buf_t *bad = NULL;
                int rc = umq_post(q, from, UMQ_IO_TX, &bad);
                if (rc == 0) {
                    posted = BATCH;
                } else if (rc == -UMQ_ERR_EAGAIN) {
                    eagain++;
                    int i = posted;
                    while (i < BATCH && list[i] != bad)
                        i++;
                    if (i == BATCH)
                        die("client", "*bad_qbuf is not a buffer of the list");
                    posted = i;
                    from = bad;
                } else {
                    die("client", "umq_post tx");
                }
            }
            recycle_rx(q);
            int n = posted > completed ? reap_tx(q, list, completed, posted - completed) : 0;
            completed += n;
            if (n == 0 && completed < posted)
                wait_event(q, UMQ_IO_TX, "client");
            if (n == 0 && posted < BATCH)
                umq_notify(q);
        }
        /* The list is as it was allocated: 64 long, same buffers, same order. */
        umq_buf_t *b = head;
        for (int i = 0; i < BATCH; i++, b = b->qbuf_next)
            if (b != list[i])
                die("client", "umq_post changed the list's qbuf_next links");
        if (b != NULL)
            die("client", "the list grew");
        seq += BATCH;
    }
    barrier(s);
    printf("client: %ld rounds of the same 64-buffer list, %ld posts refused for credit or room\n",
           cfg.rounds, eagain);
    umq_buf_free(head);
    if (umq_unbind(q) != UMQ_SUCCESS || umq_destroy(q) != UMQ_SUCCESS)
        die("client", "teardown");
}

/* ---- base API: enqueue a 64-buffer list, dequeue 64 messages ---- */

/* What a program written for both APIs does while it sets up: poll TX completions (0 expected:
 * a base-API queue has none for the application) and look for messages (none yet). */
static void base_setup_loop(uint64_t q, const char *who)
{
    umq_buf_t *c[BATCH];
    for (int i = 0; i < 100; i++) {
        errno = 0;
        if (umq_poll(q, UMQ_IO_TX, c, BATCH) != 0)
            die(who, "umq_poll(TX) on a base-API queue is not 0");
        if (umq_dequeue(q) != NULL)
            die(who, "a message before any was sent");
        if (errno != 0)
            die(who, "an empty umq_dequeue set errno");
    }
}

static void base_server(int s)
{
    uint64_t q = connect_queue(s, "server");
    base_setup_loop(q, "server");
    barrier(s);
    uint64_t want = (uint64_t)cfg.rounds * BATCH, next = 0, dequeues = 0, most = 0;
    long empty = 0;
    while (next < want) {
        errno = 0;
        umq_buf_t *m = umq_dequeue(q);
        if (m == NULL) {
            if (errno != 0)
                die("server", "an empty umq_dequeue set errno");
            empty++;
            wait_event(q, UMQ_IO_RX, "server");
            continue;
        }
        /* The messages waiting, as one list: each a span of its head's total_data_size (one
         * 64 B buffer here), walked as the reference's qps server walks it. */
        uint64_t first = next;
        for (umq_buf_t *b = m; b != NULL; b = b->qbuf_next) {
            if (b->total_data_size != MSG || !holds(b, next)) {
                fprintf(stderr, "server: message %llu: wrong size, bytes or order\n", (unsigned long long)next);
                exit(1);
            }
            next++;
        }
        if (next - first > DEQUEUE_MOST)
            die("server", "one dequeue returned more than 64 messages");
        most = next - first > most ? next - first : most;
        dequeues++;
        umq_buf_free(m);
    }
    barrier(s);
    printf("server: %llu messages in %llu dequeues (up to %llu in one), %ld empty ones left errno alone\n",
           (unsigned long long)next, (unsigned long long)dequeues, (unsigned long long)most, empty);
    if (umq_unbind(q) != UMQ_SUCCESS || umq_destroy(q) != UMQ_SUCCESS)
        die("server", "teardown");
}

static void base_client(int s)
{
    uint64_t q = connect_queue(s, "client");
    base_setup_loop(q, "client");
    barrier(s);
    uint64_t seq = 0;
    for (long r = 0; r < cfg.rounds; r++) {
        umq_buf_t *head = umq_buf_alloc(MSG, BATCH, q, NULL), *bad = NULL;
        if (!head)
            die("client", "umq_buf_alloc");
        int k = 0;
        for (umq_buf_t *b = head; b; b = b->qbuf_next, k++)
            fill(b, seq + (uint64_t)k);
        if (k != BATCH)
            die("client", "umq_buf_alloc did not give 64 buffers");
        /* As the reference's qps client does: retry the whole list until it is taken. */
        int rc;
        while ((rc = umq_enqueue(q, head, &bad)) == -UMQ_ERR_EAGAIN) {
            if (bad != head)
                die("client", "a refused enqueue did not hand back the whole list");
            umq_notify(q);
        }
        if (rc != 0)
            die("client", "umq_enqueue");
        umq_notify(q);
        seq += BATCH;
    }
    barrier(s);
    if (umq_unbind(q) != UMQ_SUCCESS || umq_destroy(q) != UMQ_SUCCESS)
        die("client", "teardown");
}

/* ---- running the two sides ---- */

static void *server_thread(void *arg)
{
    int s = *(int *)arg;
    if (cfg.pro)
        pro_server(s);
    else
        base_server(s);
    return NULL;
}

static void client(int s)
{
    if (cfg.pro)
        pro_client(s);
    else
        base_client(s);
}

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: see the comment at the top of test_dropin.c\n");
        return 2;
    }
    (void)test_checks; /* util.h's counters: this program stops at the first failure */
    (void)test_failures;
    setenv("UMQ_LOG_LEVEL", "crit", 1);
    cfg.fabric = strcmp(argv[1], "fabric") == 0;
    cfg.shm = cfg.fabric || strcmp(argv[1], "shm") == 0; /* two processes either way */
    if (cfg.fabric)
        setenv("UMQ_PROVIDER", "fabric", 1);
    cfg.irq = strcmp(argv[2], "irq") == 0;
    cfg.fc = strcmp(argv[3], "fc") == 0;
    cfg.pro = strcmp(argv[4], "pro") == 0;
    cfg.rounds = argc > 5 ? atol(argv[5]) : cfg.pro ? 10000 : 1000;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
        die("setup", "socketpair");
    if (cfg.shm) {
        pid_t child = fork();
        if (child == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL); /* a failed client takes its server along */
            close(sv[0]);
            init();
            server_thread(&sv[1]);
            umq_uninit();
            fflush(stdout);
            _exit(0);
        }
        close(sv[1]);
        init();
        client(sv[0]);
        int status = 0;
        if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
            die("client", "the server process failed");
    } else {
        init();
        pthread_t t;
        if (pthread_create(&t, NULL, server_thread, &sv[1]))
            die("setup", "pthread_create");
        client(sv[0]);
        pthread_join(t, NULL);
    }
    umq_uninit();
    printf("dropin %s %s %s %s: %ld rounds, 1 passed, 0 failed\n", argv[1], argv[2], argv[3], argv[4], cfg.rounds);
    return 0;
}
