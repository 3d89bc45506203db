/* The July 2026 transport pool (UMQ_CREATE_FLAG_SHARE_TRANSPORT, the abi-2026 build): a main
 * queue in interrupt mode makes two transport resources; three logic queues on its shared
 * receive queue, each bound to a peer queue of this process, borrow them to send.
 *   refusals  - the flag where the reference refuses it, the pool calls on other queues
 *   borrow    - posts borrow the oldest idle resource; a third logic queue finds none (EMLINK);
 *               the main queue polls a resource's send completions by its index, which gives
 *               the resource back (the pool's eventfd counts it) to be lent again
 *   limit     - one borrowing may post 1024 * idle / total WRs, at least 2 (ENOBUFS beyond,
 *               the WRs before it posted)
 *   interrupt - a resource's channel is armed through the main queue and fires for the
 *               holder's completions; logic queues have no channel of their own
 *   error     - a resource marked in error takes no post, is not lent again, and is destroyed
 *               once given back (not while held)
 *   receive   - what the peers send reaches the main queue, tagged with the logic queue's ctx
 * Run as is (loopback), and with every bind forced onto shm and onto the network provider. */
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "umq_api.h"
#include "umq_dfx_api.h"
#include "umq_pro_api.h"
#include "util_2026.h"

#define DEPTH 64

static void init(void)
{
    umq_init_cfg_t *cfg = init_cfg_lo(UMQ_FEATURE_API_PRO);
    CHECK_EQ(umq_init(cfg), 0);
    free(cfg);
}

static umq_create_option_t option(const char *name, uint32_t flags, uint64_t main, uint64_t ctx)
{
    umq_create_option_t o = option_lo(name, UMQ_CREATE_FLAG_RX_DEPTH | UMQ_CREATE_FLAG_TX_DEPTH |
                                                UMQ_CREATE_FLAG_QUEUE_MODE | flags);
    o.rx_depth = DEPTH;
    o.tx_depth = DEPTH;
    o.mode = UMQ_MODE_INTERRUPT;
    o.share_rq_umqh = main;
    o.umq_ctx = ctx;
    return o;
}

static uint64_t create(const char *name, uint32_t flags, uint64_t main, uint64_t ctx)
{
    umq_create_option_t o = option(name, flags, main, ctx);
    uint64_t q = umq_create(&o);
    CHECK(q != UMQ_INVALID_HANDLE);
    return q;
}

static umq_buf_t *message(uint64_t q, const char *text)
{
    umq_buf_t *m = umq_buf_alloc(64, 1, q, NULL);
    CHECK(m != NULL);
    m->data_size = m->total_data_size = (uint32_t)(strlen(text) + 1);
    memcpy(m->buf_data, text, m->data_size);
    umq_buf_pro_t *pro = (umq_buf_pro_t *)m->qbuf_ext;
    memset(pro, 0, sizeof(*pro));
    pro->opcode = UMQ_OPC_SEND;
    return m;
}

/* Posts one SEND; returns the post's result (the message freed unless it went). */
static int send(uint64_t q, const char *text)
{
    umq_buf_t *m = message(q, text), *bad = NULL;
    int r = umq_post(q, m, &tx, &bad);
    if (r != 0) {
        CHECK(bad == m);
        umq_buf_free(m);
    }
    return r;
}

static void post_rx(uint64_t q, uint32_t n)
{
    umq_buf_t *bufs = umq_buf_alloc(64, n, q, NULL), *bad = NULL;
    CHECK(bufs != NULL);
    CHECK_EQ(umq_post(q, bufs, &rx, &bad), 0);
}

/* Waits for one received message on q and checks its text (and ctx, unless ~0). */
static void expect_rx(uint64_t q, const char *text, uint64_t ctx)
{
    umq_buf_t *out[2];
    int n = 0;
    for (long i = 0; n == 0 && i < 50000000; i++) {
        n = umq_poll(q, &rx, out, 1);
    }
    CHECK_EQ(n, 1);
    if (n == 1) {
        CHECK(strcmp(out[0]->buf_data, text) == 0);
        if (ctx != ~0ULL) {
            CHECK_EQ(((umq_buf_pro_t *)out[0]->qbuf_ext)->umq_ctx, ctx);
        }
        umq_buf_free(out[0]);
    }
}

/* Polls the send completions of resource idx through the main queue until n came (n 0: once). */
static int poll_resource(uint64_t main, uint32_t idx, int n)
{
    umq_io_option_t o = {.flag = UMQ_IO_OPTION_FLAG_DIRECTION | UMQ_IO_OPTION_FLAG_TP_HANDLE_IDX,
                         .io_direction = UMQ_IO_TX,
                         .tp_handle_idx = idx};
    umq_buf_t *out[8];
    int got = 0;
    for (long i = 0; (got < n || i == 0) && i < 50000000; i++) {
        int k = umq_poll(main, &o, out, 8);
        if (k < 0) {
            CHECK(k >= 0);
            break;
        }
        for (int j = 0; j < k; j++) {
            CHECK_EQ(out[j]->status, UMQ_BUF_SUCCESS);
            umq_buf_free(out[j]);
        }
        got += k;
    }
    return got;
}

static umq_transport_pool_stats_t pool_stats(uint64_t q)
{
    umq_transport_pool_stats_t s;
    CHECK_EQ(umq_stats_transport_pool_get(q, &s), 0);
    return s;
}

static void refusals(uint64_t main, uint64_t plain_main)
{
    umq_create_option_t o = option("alone", UMQ_CREATE_FLAG_SHARE_TRANSPORT, 0, 0);
    CHECK(umq_create(&o) == UMQ_INVALID_HANDLE); /* neither a main queue nor shared */
    o = option("rc", UMQ_CREATE_FLAG_MAIN_UMQ | UMQ_CREATE_FLAG_SHARE_TRANSPORT |
                     UMQ_CREATE_FLAG_TP_MODE, 0, 0);
    o.tp_mode = UMQ_TM_RC;
    CHECK(umq_create(&o) == UMQ_INVALID_HANDLE); /* RM only */
    o = option("deeper", UMQ_CREATE_FLAG_MAIN_UMQ | UMQ_CREATE_FLAG_SHARE_TRANSPORT, 0, 0);
    o.tx_depth = 2 * DEPTH;
    CHECK(umq_create(&o) == UMQ_INVALID_HANDLE); /* the pool's depth is the first main's */
    o = option("mixed", UMQ_CREATE_FLAG_SHARE_TRANSPORT | UMQ_CREATE_FLAG_SHARE_RQ, plain_main, 0);
    CHECK(umq_create(&o) == UMQ_INVALID_HANDLE); /* that main queue does not share it */
    o = option("sub", UMQ_CREATE_FLAG_SHARE_RQ | UMQ_CREATE_FLAG_SUB_UMQ, main, 0);
    CHECK(umq_create(&o) == UMQ_INVALID_HANDLE); /* this one does */

    umq_tp_resource_create_option_t t = {0};
    CHECK_EQ(umq_transport_pool_resource_create(plain_main, &t), UINT32_MAX);
    CHECK_EQ(umq_transport_pool_resource_create(main, NULL), UINT32_MAX);
    t.create_flag = UMQ_TP_CREATE_FLAG_USED_PORTS; /* the main queue names no ports */
    CHECK_EQ(umq_transport_pool_resource_create(main, &t), UINT32_MAX);
    CHECK_EQ(umq_transport_pool_resource_destroy(plain_main, 0), -UMQ_ERR_EINVAL);
    CHECK_EQ(umq_transport_pool_resource_destroy(main, 9), -UMQ_ERR_EINVAL);
    CHECK_EQ(umq_transport_pool_resource_modify(main, 9), -UMQ_ERR_EINVAL);
    CHECK_EQ(umq_transport_pool_eventfd_get(UMQ_INVALID_HANDLE), -UMQ_ERR_EINVAL);
}

int main(void)
{
    init();
    uint32_t logic = UMQ_CREATE_FLAG_SHARE_TRANSPORT | UMQ_CREATE_FLAG_SHARE_RQ | UMQ_CREATE_FLAG_UMQ_CTX;
    uint64_t main_q = create("main", UMQ_CREATE_FLAG_MAIN_UMQ | UMQ_CREATE_FLAG_SHARE_TRANSPORT, 0, 0);
    uint64_t plain_main = create("plain", UMQ_CREATE_FLAG_MAIN_UMQ, 0, 0);
    refusals(main_q, plain_main);

    int efd = umq_transport_pool_eventfd_get(main_q);
    CHECK(efd >= 0);
    umq_tp_resource_create_option_t t = {0};
    CHECK_EQ(umq_transport_pool_resource_create(main_q, &t), 0);
    CHECK_EQ(umq_transport_pool_resource_create(main_q, &t), 1);
    uint64_t idle_counts = 0;
    CHECK_EQ(read(efd, &idle_counts, 8), 8);
    CHECK_EQ(idle_counts, 1 + 2); /* written with the idle count as each became idle */
    umq_transport_pool_stats_t s = pool_stats(plain_main);
    CHECK_EQ(s.total_num, 2);
    CHECK_EQ(s.global_num, 2);

    uint64_t l[3], p[3];
    for (int i = 0; i < 3; i++) {
        char name[8];
        snprintf(name, sizeof(name), "l%d", i);
        l[i] = create(name, logic, main_q, 100 + i);
        snprintf(name, sizeof(name), "p%d", i);
        p[i] = create(name, 0, 0, 0);
        post_rx(p[i], 8);
        bind_pair(l[i], p[i]);
    }
    post_rx(main_q, 16);

    /* borrow */
    CHECK_EQ(send(l[0], "l0-a"), 0); /* borrows resource 0 */
    CHECK_EQ(send(l[1], "l1-a"), 0); /* borrows resource 1 */
    CHECK_EQ(send(l[2], "l2-a"), -UMQ_ERR_EMLINK);
    s = pool_stats(main_q);
    CHECK_EQ(s.in_use_num, 2);
    CHECK_EQ(s.global_num, 0);
    CHECK_EQ(s.acc_alloc_num, 2);
    CHECK_EQ(s.acc_miss_num, 1);
    expect_rx(p[0], "l0-a", ~0ULL);
    expect_rx(p[1], "l1-a", ~0ULL);
    umq_buf_t *out[4];
    CHECK_EQ(umq_poll(main_q, &tx, out, 4), 0); /* sends are polled by resource */
    CHECK_EQ(poll_resource(main_q, 0, 1), 1); /* l0's completion: resource 0 back */
    s = pool_stats(main_q);
    CHECK_EQ(s.in_use_num, 1);
    CHECK_EQ(s.acc_free_num, 1);
    CHECK_EQ(read(efd, &idle_counts, 8), 8);
    CHECK_EQ(idle_counts, 1);
    CHECK_EQ(poll_resource(main_q, 0, 0), 0); /* idle: nothing */

    /* limit: the one idle resource, none idle after it: 2 WRs */
    CHECK_EQ(send(l[2], "l2-b"), 0); /* borrows resource 0 again */
    umq_buf_t *two = message(l[2], "l2-c"), *bad = NULL;
    two->qbuf_next = message(l[2], "l2-d");
    umq_buf_t *second = two->qbuf_next;
    CHECK_EQ(umq_post(l[2], two, &tx, &bad), -UMQ_ERR_ENOBUFS);
    CHECK(bad == second);
    umq_buf_free(second);
    expect_rx(p[2], "l2-b", ~0ULL);
    expect_rx(p[2], "l2-c", ~0ULL);
    CHECK_EQ(poll_resource(main_q, 0, 2), 2);

    /* interrupt: resource 1 holds l1's completion */
    umq_interrupt_option_t io = {.flag = UMQ_INTERRUPT_FLAG_IO_DIRECTION | UMQ_INTERRUPT_FLAG_TP_HANDLE_IDX,
                                 .direction = UMQ_IO_TX,
                                 .tp_handle_idx = 1};
    int fd1 = umq_interrupt_fd_get(main_q, &io);
    CHECK(fd1 >= 0);
    io.tp_handle_idx = 0;
    int fd0 = umq_interrupt_fd_get(main_q, &io);
    CHECK(fd0 >= 0 && fd0 != fd1);
    io.tp_handle_idx = 1;
    CHECK_EQ(umq_rearm_interrupt(main_q, false, &io), 0);
    struct pollfd pfd = {.fd = fd1, .events = POLLIN};
    CHECK_EQ(poll(&pfd, 1, 5000), 1);
    CHECK(umq_get_cq_event(main_q, &io) >= 1);
    umq_interrupt_option_t own = {.flag = UMQ_INTERRUPT_FLAG_IO_DIRECTION, .direction = UMQ_IO_TX};
    CHECK_EQ(umq_interrupt_fd_get(l[1], &own), UMQ_INVALID_FD);
    CHECK_EQ(umq_rearm_interrupt(l[1], false, &own), -UMQ_ERR_EINVAL);
    /* a fresh borrowing of resource 0 fires its channel once the send completes */
    io.tp_handle_idx = 0;
    CHECK_EQ(umq_rearm_interrupt(main_q, false, &io), 0);
    CHECK_EQ(send(l[0], "l0-b"), 0);
    pfd.fd = fd0;
    CHECK_EQ(poll(&pfd, 1, 5000), 1);
    CHECK(umq_get_cq_event(main_q, &io) >= 1);
    expect_rx(p[0], "l0-b", ~0ULL);
    CHECK_EQ(poll_resource(main_q, 0, 1), 1);

    /* error: resource 1, held by l1 */
    CHECK_EQ(umq_transport_pool_resource_destroy(main_q, 1), -UMQ_ERR_EBUSY);
    CHECK_EQ(umq_transport_pool_resource_modify(main_q, 1), 0);
    CHECK_EQ(send(l[1], "l1-b"), -UMQ_ERR_EINVAL);
    CHECK_EQ(pool_stats(main_q).error_num, 1);
    int got = 0;
    for (long i = 0; got == 0 && i < 50000000; i++) {
        got = umq_poll(l[1], &tx, out, 4); /* a logic queue polls its own sends too */
    }
    CHECK_EQ(got, 1);
    for (int i = 0; i < got; i++) {
        umq_buf_free(out[i]);
    }
    CHECK_EQ(send(l[1], "l1-c"), 0); /* resource 0: 1 is not lent again */
    expect_rx(p[1], "l1-c", ~0ULL);
    CHECK_EQ(poll_resource(main_q, 0, 1), 1);
    CHECK_EQ(umq_transport_pool_resource_destroy(main_q, 1), 0);
    s = pool_stats(main_q);
    CHECK_EQ(s.total_num, 1);
    CHECK_EQ(s.error_num, 0);
    CHECK_EQ(s.in_use_num, 0);

    /* receive: the peers' messages reach the main queue with the logic queue's ctx */
    for (int i = 0; i < 3; i++) {
        char text[8];
        snprintf(text, sizeof(text), "to-l%d", i);
        CHECK_EQ(send(p[i], text), 0);
        expect_rx(main_q, text, 100 + i);
    }

    for (int i = 0; i < 3; i++) {
        CHECK_EQ(umq_unbind(p[i]), 0);
        CHECK_EQ(umq_destroy(p[i]), 0);
        CHECK_EQ(umq_destroy(l[i]), 0);
    }
    CHECK_EQ(umq_transport_pool_resource_destroy(main_q, 0), 0);
    CHECK_EQ(umq_destroy(main_q), 0);
    CHECK_EQ(umq_destroy(plain_main), 0);
    umq_uninit();
    printf("tp_pool_2026: %d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
