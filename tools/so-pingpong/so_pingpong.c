/* A 64 B ping-pong between two queues of one process, through libumq.so as a C program links
 * it: the count of instructions a C application's posts and polls run
 * (scripts/so-instructions.sh runs it under callgrind). umq-perf links the Rust crate instead,
 * where inlining folds its constant arguments (a direction, a count of one) into the library's
 * code; a C program's calls carry them as values.
 *
 *   so_pingpong ROUNDS [on|off] [pro|base] [idle]
 *       flow control on (default) or off; the pro API (default) or the base API; with idle,
 *       after 100 round trips, ROUNDS receive polls of a queue to which nothing comes (what a
 *       waiting application's loop spins on), and the mean poll in ns
 *
 * Pro API: each side keeps 16 receive buffers posted. A round trip: A posts a SEND, B polls it
 * and posts its buffer back, A polls the send's completion; then the same from B to A.
 * Base API, as the reference's examples run it: A allocates a buffer, enqueues it, B dequeues
 * the message and frees it (the library posts and recycles receive buffers, and frees what it
 * sent); then the same from B to A. Every received byte is checked; the exit status is non-zero
 * on any failure. UMQ_PROVIDER=shm puts the two queues on shared memory. It prints the mean
 * round trip in ns (one thread runs both sides: the sum of their work, no transit). */
#define _DEFAULT_SOURCE 1
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "umq_api.h"
#include "umq_pro_api.h"

#define SIZE 64
#define RX_BUFS 16

static void die(const char *what, int rc)
{
    fprintf(stderr, "so_pingpong: %s failed (%d)\n", what, rc);
    exit(1);
}

static uint64_t make_queue(const char *name)
{
    /* Depth 64 each way, on the address the reference's examples name for UB mode. */
    umq_create_option_t o = {
        .trans_mode = UMQ_TRANS_MODE_UB,
        .dev_info = {.assign_mode = UMQ_DEV_ASSIGN_MODE_IPV4, .ipv4 = {.ip_addr = "127.0.0.1"}},
        .create_flag = UMQ_CREATE_FLAG_RX_DEPTH | UMQ_CREATE_FLAG_TX_DEPTH,
        .rx_depth = 64,
        .tx_depth = 64,
    };
    snprintf(o.name, sizeof(o.name), "%s", name);
    uint64_t h = umq_create(&o);
    if (!h)
        die("umq_create", 0);
    return h;
}

static void bind_pair(uint64_t a, uint64_t b)
{
    uint8_t ia[512], ib[512];
    uint32_t la = umq_bind_info_get(a, ia, sizeof(ia)), lb = umq_bind_info_get(b, ib, sizeof(ib));
    int rc;
    if (!la || !lb)
        die("umq_bind_info_get", 0);
    if ((rc = umq_bind(a, ib, lb)) || (rc = umq_bind(b, ia, la)))
        die("umq_bind", rc);
}

static umq_buf_t *alloc_one(uint64_t h)
{
    umq_buf_t *b = umq_buf_alloc(SIZE, 1, h, NULL);
    if (!b)
        die("umq_buf_alloc", 0);
    return b;
}

static void post_rx(uint64_t h, umq_buf_t *b)
{
    umq_buf_t *bad = NULL;
    int rc = umq_post(h, b, UMQ_IO_RX, &bad);
    if (rc)
        die("umq_post rx", rc);
}

/* The next completion of `dir`. A receive buffer that holds a standalone window update (flow
 * control's status, no data) goes back to the receive queue; one whose SEND carried an update
 * is an ordinary message. */
static umq_buf_t *poll_one(uint64_t h, umq_io_direction_t dir)
{
    for (;;) {
        umq_buf_t *got = NULL;
        int n;
        while ((n = umq_poll(h, dir, &got, 1)) == 0)
            ;
        if (n != 1)
            die(dir == UMQ_IO_RX ? "umq_poll rx" : "umq_poll tx", n);
        if (got->status == UMQ_BUF_SUCCESS)
            return got;
        if (got->status != UMQ_BUF_FLOW_CONTROL_UPDATE || dir != UMQ_IO_RX)
            die("completion status", (int)got->status);
        if (got->total_data_size > 0)
            return got;
        post_rx(h, got);
    }
}

/* One message from `from` to `to`, its payload stamped with `round`. */
static void one_way(uint64_t from, uint64_t to, umq_buf_t *tx, uint32_t round)
{
    umq_buf_t *bad = NULL;
    memset(tx->buf_data, (int)(round & 0xff), SIZE);
    tx->data_size = SIZE;
    tx->total_data_size = SIZE;
    tx->qbuf_next = NULL;
    int rc;
    /* No credit yet only while the peer's first window is on its way (flow control on). */
    while ((rc = umq_post(from, tx, UMQ_IO_TX, &bad)) == -UMQ_ERR_EAGAIN)
        umq_notify(to);
    if (rc)
        die("umq_post tx", rc);
    umq_buf_t *got = poll_one(to, UMQ_IO_RX);
    if (got->data_size != SIZE)
        die("message size", (int)got->data_size);
    for (int i = 0; i < SIZE; i++)
        if ((uint8_t)got->buf_data[i] != (uint8_t)round)
            die("message bytes", i);
    post_rx(to, got);
    if (poll_one(from, UMQ_IO_TX) != tx)
        die("send completion", 0);
}

/* The base API's message from `from` to `to`, its payload stamped with `round`. */
static void one_way_base(uint64_t from, uint64_t to, uint32_t round)
{
    umq_buf_t *tx = alloc_one(from), *bad = NULL;
    memset(tx->buf_data, (int)(round & 0xff), SIZE);
    tx->data_size = SIZE;
    tx->total_data_size = SIZE;
    int rc;
    while ((rc = umq_enqueue(from, tx, &bad)) == -UMQ_ERR_EAGAIN)
        umq_notify(to);
    if (rc)
        die("umq_enqueue", rc);
    umq_buf_t *got;
    while (!(got = umq_dequeue(to)))
        ;
    if (got->total_data_size != SIZE || got->qbuf_next)
        die("dequeued message size", (int)got->total_data_size);
    for (int i = 0; i < SIZE; i++)
        if ((uint8_t)got->buf_data[i] != (uint8_t)round)
            die("dequeued bytes", i);
    umq_buf_free(got);
}

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void report(uint32_t rounds, int pro, int flow, uint64_t began)
{
    double ns = rounds ? (double)(now_ns() - began) / rounds : 0;
    printf("so_pingpong: %u round trips, %s API, flow control %s, %.1f ns a round trip\n", rounds,
           pro ? "pro" : "base", flow ? "on" : "off", ns);
}

int main(int argc, char **argv)
{
    uint32_t rounds = argc > 1 ? (uint32_t)strtoul(argv[1], NULL, 10) : 1000;
    int flow = !(argc > 2 && strcmp(argv[2], "off") == 0);
    int pro = !(argc > 3 && strcmp(argv[3], "base") == 0);
    umq_init_cfg_t *cfg = calloc(1, sizeof(*cfg));
    cfg->buf_mode = UMQ_BUF_COMBINE;
    cfg->feature = (pro ? UMQ_FEATURE_API_PRO : UMQ_FEATURE_API_BASE) |
                   (flow ? UMQ_FEATURE_ENABLE_FLOW_CONTROL : 0);
    cfg->flow_control.initial_window = RX_BUFS;
    cfg->trans_info_num = 1;
    cfg->trans_info[0].trans_mode = UMQ_TRANS_MODE_UB;
    cfg->trans_info[0].dev_info.assign_mode = UMQ_DEV_ASSIGN_MODE_IPV4;
    strcpy(cfg->trans_info[0].dev_info.ipv4.ip_addr, "127.0.0.1");
    int rc = umq_init(cfg);
    free(cfg);
    if (rc)
        die("umq_init", rc);
    uint64_t q[2] = {make_queue("ping"), make_queue("pong")};
    bind_pair(q[0], q[1]);
    if (!pro) {
        uint64_t began = now_ns();
        for (uint32_t r = 0; r < rounds; r++) {
            one_way_base(q[0], q[1], r);
            one_way_base(q[1], q[0], r + 1);
        }
        report(rounds, pro, flow, began);
        return 0;
    }
    umq_buf_t *tx[2];
    for (int s = 0; s < 2; s++) {
        tx[s] = alloc_one(q[s]);
        ((umq_buf_pro_t *)tx[s]->qbuf_ext)->opcode = UMQ_OPC_SEND;
        for (int i = 0; i < RX_BUFS; i++)
            post_rx(q[s], alloc_one(q[s]));
    }
    int idle = argc > 4 && strcmp(argv[4], "idle") == 0;
    uint32_t pingpongs = idle ? 100 : rounds;
    uint64_t began = now_ns();
    for (uint32_t r = 0; r < pingpongs; r++) {
        one_way(q[0], q[1], tx[0], r);
        one_way(q[1], q[0], tx[1], r + 1);
    }
    if (!idle) {
        report(rounds, pro, flow, began);
        return 0;
    }
    umq_buf_t *got = NULL;
    began = now_ns();
    for (uint32_t r = 0; r < rounds; r++)
        if (umq_poll(q[1], UMQ_IO_RX, &got, 1) != 0)
            die("idle poll", (int)r);
    double ns = rounds ? (double)(now_ns() - began) / rounds : 0;
    printf("so_pingpong: %u idle receive polls, flow control %s, %.1f ns a poll\n", rounds,
           flow ? "on" : "off", ns);
    return 0;
}
