/* The July 2026 credit flow control on a shared receive queue (the abi-2026 build): a main
 * queue of depth 8 whose two sub-queues are bound to senders in this process, the pool limited
 * to posted buffers.
 *   turn    - one sender takes all the pool's credit; the other's request finds it empty and is
 *             parked, not refused; the main queue's next receive post answers it first, although
 *             the first sender has asked again meanwhile (the starvation the reference fixed)
 *   stream  - both senders stream, retrying what EAGAIN refuses; every message arrives once,
 *             in each sender's order, tagged with its sub-queue's umq_ctx
 *   stats   - umq_stats_flow_control_get on the main queue reports the shared pool, and each
 *             sender the credit it acquired and used
 * Run as is (loopback), and with every bind forced onto shm and onto the network provider. */
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "umq_api.h"
#include "umq_dfx_api.h"
#include "umq_pro_api.h"
#include "util_2026.h"

#define DEPTH 8
#define STREAM 300

static void init(void)
{
    umq_init_cfg_t *cfg = init_cfg_lo(UMQ_FEATURE_API_PRO | UMQ_FEATURE_ENABLE_FLOW_CONTROL);
    cfg->flow_control.initial_credit = 4;
    cfg->flow_control.is_limited = true;
    cfg->flow_control.timeout_ms = 60000; /* no idle return during the test */
    /* A parked request waits as long as the test keeps the pool empty (seconds under
     * AddressSanitizer over the network): no request timeout (python/tests/test_credit.py
     * tests it). */
    cfg->flow_control.fc_req_timeout_ms = -1;
    CHECK_EQ(umq_init(cfg), 0);
    free(cfg);
}

static uint64_t create(const char *name, uint32_t flags, uint64_t main, uint64_t ctx)
{
    umq_create_option_t o = option_lo(name, UMQ_CREATE_FLAG_RX_DEPTH | UMQ_CREATE_FLAG_TX_DEPTH | flags);
    o.rx_depth = DEPTH;
    o.tx_depth = 64;
    o.share_rq_umqh = main;
    o.umq_ctx = ctx;
    uint64_t q = umq_create(&o);
    CHECK(q != UMQ_INVALID_HANDLE);
    return q;
}

static void post_rx(uint64_t q, uint32_t n)
{
    umq_buf_t *bufs = umq_buf_alloc(64, n, q, NULL), *bad = NULL;
    CHECK(bufs != NULL);
    CHECK_EQ(umq_post(q, bufs, &rx, &bad), 0);
}

/* One SEND "<tag>-<seq>" from q: 1 when posted, 0 on EAGAIN (no credit). */
static int try_send(uint64_t q, char tag, int seq)
{
    umq_buf_t *m = umq_buf_alloc(64, 1, q, NULL), *bad = NULL;
    CHECK(m != NULL);
    int len = snprintf(m->buf_data, 64, "%c-%d", tag, seq) + 1;
    m->data_size = m->total_data_size = (uint32_t)len;
    umq_buf_pro_t *pro = (umq_buf_pro_t *)m->qbuf_ext;
    memset(pro, 0, sizeof(*pro));
    pro->opcode = UMQ_OPC_SEND;
    int r = umq_post(q, m, &tx, &bad);
    if (r != 0) {
        CHECK_EQ(r, -UMQ_ERR_EAGAIN);
        umq_buf_free(m);
        return 0;
    }
    return 1;
}

/* Frees what q has to poll now (send completions, credit updates); returns the updates. */
static int reap(uint64_t q)
{
    umq_buf_t *out[64];
    int updates = 0;
    for (int d = 0; d < 2; d++) {
        int n = umq_poll(q, d ? &rx : &tx, out, 64);
        for (int i = 0; i < n; i++) {
            updates += out[i]->status == UMQ_FAKE_BUF_FC_UPDATE;
            umq_buf_free(out[i]);
        }
    }
    return updates;
}

static int64_t window(uint64_t q)
{
    umq_flow_control_stats_t s;
    CHECK_EQ(umq_stats_flow_control_get(q, &s), 0);
    return (int64_t)s.queue_credit.queue_acquired;
}

/* What the main queue received: each message checked against its sender's next number. */
static int take(uint64_t main, int next[3], int repost)
{
    umq_buf_t *out[DEPTH];
    int n = umq_poll(main, &rx, out, DEPTH), got = 0;
    for (int i = 0; i < n; i++) {
        if (out[i]->status == UMQ_FAKE_BUF_FC_UPDATE) {
            umq_buf_free(out[i]);
            continue;
        }
        uint64_t ctx = ((umq_buf_pro_t *)out[i]->qbuf_ext)->umq_ctx;
        CHECK(ctx == 1 || ctx == 2);
        char want[16];
        snprintf(want, sizeof(want), "%c-%d", ctx == 1 ? 'a' : 'b', next[ctx & 3]++);
        CHECK(strcmp(out[i]->buf_data, want) == 0);
        umq_buf_free(out[i]);
        got++;
    }
    if (repost && got > 0) {
        post_rx(main, (uint32_t)got);
    }
    return got;
}

/* Sends from `a` until its credit is used up: nothing more goes for a good while (each answer
 * to its requests taken in; over a network an answer is a round trip away). */
static int drain_credit(uint64_t a, char tag, int *seq)
{
    int sent = 0;
    for (int idle = 0; idle < 300000; idle++) {
        reap(a);
        if (try_send(a, tag, *seq)) {
            (*seq)++;
            sent++;
            idle = 0;
        }
    }
    return sent;
}

static void turn(uint64_t main, uint64_t a, uint64_t b, int seq[3], int next[3])
{
    post_rx(main, DEPTH);
    /* a takes every credit the pool has: DEPTH messages land, none more; it has asked again. */
    CHECK_EQ(drain_credit(a, 'a', &seq[1]), DEPTH);
    /* b asks and is parked: no answer while nothing is posted. */
    CHECK_EQ(try_send(b, 'b', seq[2]), 0);
    for (int i = 0; i < 20000; i++) {
        reap(b);
        CHECK_EQ(try_send(b, 'b', seq[2]), 0);
    }
    CHECK_EQ(window(b), 0);
    /* a stays greedy while the main queue takes messages in and posts their buffers again:
     * requests are answered in the order they came, so b's turn comes after a's one parked
     * request, not never. */
    int a_meanwhile = 0, b_sent = 0;
    for (long spins = 0; !b_sent && spins < 20000000; spins++) {
        reap(a);
        if (try_send(a, 'a', seq[1])) {
            seq[1]++;
            a_meanwhile++;
        }
        take(main, next, 1);
        reap(b);
        b_sent = try_send(b, 'b', seq[2]);
    }
    CHECK_EQ(b_sent, 1);
    seq[2]++;
    CHECK(a_meanwhile <= 2 * DEPTH);
}

static void stream(uint64_t main, uint64_t a, uint64_t b, int seq[3], int next[3])
{
    for (long spins = 0; (next[1] < STREAM || next[2] < STREAM) && spins < 20000000; spins++) {
        if (seq[1] < STREAM && try_send(a, 'a', seq[1])) {
            seq[1]++;
        }
        if (seq[2] < STREAM && try_send(b, 'b', seq[2])) {
            seq[2]++;
        }
        reap(a);
        reap(b);
        take(main, next, 1);
    }
    CHECK_EQ(next[1], STREAM);
    CHECK_EQ(next[2], STREAM);
    CHECK_EQ(seq[1], STREAM);
}

static void stats(uint64_t main, uint64_t a, uint64_t b)
{
    umq_flow_control_stats_t m, sa, sb;
    /* Answers still on their way (a network's round trip) are granted and not yet acquired. */
    for (int i = 0; i < 100000; i++) {
        reap(a);
        reap(b);
        CHECK_EQ(umq_stats_flow_control_get(main, &m), 0);
        CHECK_EQ(umq_stats_flow_control_get(a, &sa), 0);
        CHECK_EQ(umq_stats_flow_control_get(b, &sb), 0);
        if (m.pool_credit.total_pool_be_allocated ==
            sa.queue_credit.total_queue_acquired + sb.queue_credit.total_queue_acquired) {
            break;
        }
    }
    CHECK(m.pool_credit.pool_idle + m.pool_credit.pool_be_allocated <= DEPTH);
    CHECK_EQ(m.pool_credit.total_pool_be_allocated,
             sa.queue_credit.total_queue_acquired + sb.queue_credit.total_queue_acquired);
    CHECK_EQ(sa.queue_credit.total_queue_post_tx_success, STREAM);
    CHECK_EQ(sb.queue_credit.total_queue_post_tx_success, STREAM);
    CHECK(sa.packet_stats.send_cnt > 1 && sb.packet_stats.send_cnt > 1);
    CHECK_EQ(sa.packet_stats.recv_duplicate_rsp_cnt, 0);
}

/* Flow control's fds beside the completion channels: a shared receive queue member's event
 * fd (readable once its idle credit went back), another queue's retry fd (never readable:
 * control messages here never wait for room), neither the other way round. */
static void fc_fds(void)
{
    umq_init_cfg_t *cfg = init_cfg_lo(UMQ_FEATURE_API_PRO | UMQ_FEATURE_ENABLE_FLOW_CONTROL);
    cfg->flow_control.initial_credit = 4;
    cfg->flow_control.timeout_ms = 20;
    CHECK_EQ(umq_init(cfg), 0);
    free(cfg);
    uint64_t main_q = create("main", UMQ_CREATE_FLAG_MAIN_UMQ, 0, 0);
    uint64_t s = create("s", UMQ_CREATE_FLAG_SHARE_RQ | UMQ_CREATE_FLAG_SUB_UMQ | UMQ_CREATE_FLAG_UMQ_CTX,
                        main_q, 7);
    uint64_t a = create("a", 0, 0, 0);
    umq_interrupt_option_t event = {.flag = UMQ_INTERRUPT_FLAG_IO_DIRECTION, .direction = UMQ_IO_TX,
                                    .fd_type = UMQ_FD_EVENT};
    umq_interrupt_option_t retry = event;
    retry.fd_type = UMQ_FD_RETRY;
    int efd = umq_interrupt_fd_get(s, &event);
    CHECK(efd >= 0);
    CHECK_EQ(umq_interrupt_fd_get(s, &event), efd);
    CHECK_EQ(umq_interrupt_fd_get(s, &retry), UMQ_INVALID_FD);
    CHECK_EQ(umq_interrupt_fd_get(a, &event), UMQ_INVALID_FD);
    CHECK(umq_interrupt_fd_get(a, &retry) >= 0);
    CHECK(umq_interrupt_fd_get(main_q, &retry) >= 0);
    /* a's posted buffers offer s a first credit; s sends nothing, so after timeout_ms it goes
     * back, and s's event fd says so. */
    bind_pair(s, a);
    post_rx(a, DEPTH);
    post_rx(main_q, DEPTH);
    /* s sends past the offered credit: its request's answer shows as an update buffer of s's
     * (its ctx) through the main queue's receive poll, as in the reference. */
    int sent = 0, updates = 0;
    for (long i = 0; i < 2000000 && (sent < 2 * DEPTH || updates == 0); i++) {
        if (sent < 2 * DEPTH) {
            sent += try_send(s, 's', sent);
        }
        reap(s);
        umq_buf_t *out[DEPTH];
        int n = umq_poll(main_q, &rx, out, DEPTH);
        for (int k = 0; k < n; k++) {
            updates += out[k]->status == UMQ_FAKE_BUF_FC_UPDATE &&
                       ((umq_buf_pro_t *)out[k]->qbuf_ext)->umq_ctx == 7;
            umq_buf_free(out[k]);
        }
        n = umq_poll(a, &rx, out, DEPTH);
        for (int k = 0; k < n; k++) {
            umq_buf_free(out[k]);
        }
        if (n > 0) {
            post_rx(a, (uint32_t)n);
        }
    }
    CHECK_EQ(sent, 2 * DEPTH);
    CHECK(updates >= 1);
    struct pollfd p = {.fd = efd, .events = POLLIN};
    int ready = 0;
    for (int i = 0; i < 500 && !ready; i++) {
        reap(s);
        ready = poll(&p, 1, 10);
    }
    CHECK_EQ(ready, 1);
    umq_flow_control_stats_t st;
    CHECK_EQ(umq_stats_flow_control_get(s, &st), 0);
    /* Some went back: s holds less than it acquired and did not use. */
    CHECK(st.queue_credit.queue_acquired <
          st.queue_credit.total_queue_acquired - st.queue_credit.total_queue_post_tx_success);
    CHECK_EQ(umq_unbind(a), 0);
    uint64_t all[] = {a, s, main_q};
    for (int i = 0; i < 3; i++) {
        CHECK_EQ(umq_destroy(all[i]), 0);
    }
    umq_uninit();
}

int main(void)
{
    init();
    uint64_t main_q = create("main", UMQ_CREATE_FLAG_MAIN_UMQ, 0, 0);
    uint32_t sub = UMQ_CREATE_FLAG_SHARE_RQ | UMQ_CREATE_FLAG_SUB_UMQ | UMQ_CREATE_FLAG_UMQ_CTX;
    uint64_t s1 = create("s1", sub, main_q, 1), s2 = create("s2", sub, main_q, 2);
    uint64_t a = create("a", 0, 0, 0), b = create("b", 0, 0, 0);
    bind_pair(s1, a);
    bind_pair(s2, b);
    int seq[3] = {0}, next[3] = {0};
    turn(main_q, a, b, seq, next);
    stream(main_q, a, b, seq, next);
    stats(main_q, a, b);
    CHECK_EQ(umq_unbind(a), 0);
    CHECK_EQ(umq_unbind(b), 0);
    uint64_t all[] = {a, b, s1, s2, main_q};
    for (int i = 0; i < 5; i++) {
        CHECK_EQ(umq_destroy(all[i]), 0);
    }
    umq_uninit();
    fc_fds();
    printf("credit_2026: %d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
