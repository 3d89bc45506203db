/* The July 2026 API (the abi-2026 build, our include/umq-2026 headers): devices from the host's
 * interfaces, init and create with device names, post and poll with umq_io_option_t, batches
 * of 256, umq_cfg_get, umq_state_set and its async event, routes, logging through an
 * ext_func, the interrupt fd list, the perf statistics, the application's locks and thread keys,
 * the call trace, the provider timing, and the transport-pool calls. Two queues of one process. */
#define _DEFAULT_SOURCE 1
#include <arpa/inet.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "umq_api.h"
#include "umq_dfx_api.h"
#include "umq_pro_api.h"
#include "util_2026.h"


static int ext_lines;
static char ext_last[256];
static void ext_log(int level, const char *file, const char *function, int line, char *msg)
{
    (void)level; (void)function; (void)line;
    if (file != NULL && strcmp(file, "libumq") == 0) {
        ext_lines++;
        snprintf(ext_last, sizeof(ext_last), "%s", msg);
    }
}

static void init_with_lo(void)
{
    umq_init_cfg_t *cfg = calloc(1, sizeof(*cfg));
    cfg->feature = UMQ_FEATURE_API_PRO | UMQ_FEATURE_ENABLE_FLOW_CONTROL;
    cfg->flow_control.initial_credit = 64;
    /* No idle credit goes back during the tests (the default returns part of a window after
     * 10 ms without a send): the statistics' identities below count credit acquired and used,
     * and a slow run (sanitizers, a busy host) had a return take 62 credits out of the window. */
    cfg->flow_control.timeout_ms = 60000;
    cfg->io_lock_free = 1;
    cfg->trans_info_num = 2;
    cfg->trans_info[0].trans_mode = UMQ_TRANS_MODE_UB;
    name_lo(&cfg->trans_info[0].dev_info);
    cfg->trans_info[1].trans_mode = UMQ_TRANS_MODE_IB;
    cfg->trans_info[1].dev_info.assign_mode = UMQ_DEV_ASSIGN_MODE_DUMMY;
    cfg->buf_pool_cfg.small_block_size = BLOCK_SIZE_4K;
    CHECK_EQ(umq_init(cfg), 0);
    CHECK_EQ(umq_init(cfg), -UMQ_ERR_EEXIST);
    free(cfg);
}

static void devices(void)
{
    umq_dev_info_t *info = malloc(sizeof(*info));
    CHECK_EQ(umq_dev_info_get("lo", UMQ_TRANS_MODE_UB, info), 0);
    CHECK(strcmp(info->dev_name, "lo") == 0);
    CHECK(info->ub.eid_cnt >= 1);
    uint8_t mapped[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1};
    CHECK(memcmp(info->ub.eid_list[0].eid.raw, mapped, 16) == 0);
    CHECK_EQ(info->ub.eid_list[0].eid_index, 0);
    CHECK_EQ(umq_dev_info_get("no-such-dev0", UMQ_TRANS_MODE_UB, info), -UMQ_ERR_ENODEV);
    /* A mode init was not given is refused; one a DUMMY entry named is enabled (ubs-comm
     * names its mode so and adds the device later with umq_dev_add). */
    CHECK_EQ(umq_dev_info_get("lo", UMQ_TRANS_MODE_UB_PLUS, info), -UMQ_ERR_EINVAL);
    CHECK_EQ(umq_dev_info_get("lo", UMQ_TRANS_MODE_IB, info), 0);
    CHECK_EQ(umq_dev_info_get(NULL, UMQ_TRANS_MODE_UB, info), -UMQ_ERR_EINVAL);
    int n = -1;
    umq_dev_info_t *list = umq_dev_info_list_get(UMQ_TRANS_MODE_UB, &n);
    CHECK(list != NULL && n >= 1);
    int has_lo = 0;
    for (int i = 0; list != NULL && i < n; i++) {
        has_lo |= strcmp(list[i].dev_name, "lo") == 0;
    }
    CHECK(has_lo);
    umq_dev_info_list_free(UMQ_TRANS_MODE_UB, list);
    CHECK(umq_dev_info_list_get(UMQ_TRANS_MODE_UB, NULL) == NULL);
    /* A device added after init enables its mode. */
    CHECK(umq_dev_info_list_get(UMQ_TRANS_MODE_IB_PLUS, &n) == NULL);
    umq_trans_info_t add;
    memset(&add, 0, sizeof(add));
    add.trans_mode = UMQ_TRANS_MODE_IB_PLUS;
    name_lo(&add.dev_info);
    CHECK_EQ(umq_dev_add(NULL), -UMQ_ERR_EINVAL);
    add.trans_mode = UMQ_TRANS_MODE_MAX;
    CHECK_EQ(umq_dev_add(&add), -UMQ_ERR_EINVAL);
    add.trans_mode = UMQ_TRANS_MODE_IB_PLUS;
    CHECK(umq_dev_info_list_get(UMQ_TRANS_MODE_IB_PLUS, &n) == NULL); /* refusals enable nothing */
    CHECK_EQ(umq_dev_add(&add), 0);
    list = umq_dev_info_list_get(UMQ_TRANS_MODE_IB_PLUS, &n);
    CHECK(list != NULL && n >= 1);
    umq_dev_info_list_free(UMQ_TRANS_MODE_IB_PLUS, list);

    umq_route_key_t key;
    memset(&key, 0, sizeof(key));
    key.src_bonding_eid = info->ub.eid_list[0].eid;
    key.dst_bonding_eid.raw[15] = 7;
    umq_route_list_t routes;
    CHECK_EQ(umq_get_route_list(&key, UMQ_TRANS_MODE_UB, &routes), 0);
    CHECK_EQ(routes.route_num, 1);
    CHECK(memcmp(routes.routes[0].src_eid.raw, mapped, 16) == 0);
    CHECK_EQ(routes.routes[0].dst_eid.raw[15], 7);
    CHECK_EQ(umq_get_route_list(NULL, UMQ_TRANS_MODE_UB, &routes), -UMQ_ERR_EINVAL);
    free(info);
}

static uint64_t create(const char *name, umq_queue_mode_t mode, uint64_t ctx)
{
    umq_create_option_t o;
    memset(&o, 0, sizeof(o));
    o.trans_mode = UMQ_TRANS_MODE_UB;
    name_lo(&o.dev_info);
    snprintf(o.name, sizeof(o.name), "%s", name);
    o.create_flag = UMQ_CREATE_FLAG_RX_DEPTH | UMQ_CREATE_FLAG_TX_DEPTH | UMQ_CREATE_FLAG_QUEUE_MODE |
        UMQ_CREATE_FLAG_TP_MODE | UMQ_CREATE_FLAG_TP_TYPE | UMQ_CREATE_FLAG_UMQ_CTX | UMQ_CREATE_FLAG_PRIORITY;
    o.rx_depth = 512;
    o.tx_depth = 512;
    o.mode = mode;
    o.tp_mode = UMQ_TM_RM;
    o.tp_type = UMQ_TP_TYPE_CTP;
    o.umq_ctx = ctx;
    o.priority = 3;
    return umq_create(&o);
}

static void settings(uint64_t a)
{
    umq_cfg_get_t c;
    memset(&c, 0xee, sizeof(c));
    CHECK_EQ(umq_cfg_get(a, &c), 0);
    CHECK_EQ(c.rx_depth, 512);
    CHECK_EQ(c.tx_depth, 512);
    CHECK_EQ(c.umq_ctx, 0xc0ffee);
    CHECK_EQ(c.tp_mode, UMQ_TM_RM);
    CHECK_EQ(c.tp_type, UMQ_TP_TYPE_CTP);
    CHECK_EQ(c.priority, 3);
    CHECK_EQ(c.trans_mode, UMQ_TRANS_MODE_UB);
    CHECK_EQ(c.mode, UMQ_MODE_POLLING);
    CHECK_EQ(c.state, umq_state_get(a));
    CHECK_EQ(c.share_rq_umqh, 0);
    CHECK_EQ(umq_cfg_get(a, NULL), -UMQ_ERR_EINVAL);
    CHECK_EQ(umq_cfg_get(12345, &c), -UMQ_ERR_EINVAL);

    /* A sub-queue of a queue that is no main queue is refused (and with flow control on, any). */
    umq_create_option_t o;
    memset(&o, 0, sizeof(o));
    o.trans_mode = UMQ_TRANS_MODE_UB;
    name_lo(&o.dev_info);
    o.create_flag = UMQ_CREATE_FLAG_SUB_UMQ | UMQ_CREATE_FLAG_SHARE_RQ;
    o.share_rq_umqh = a;
    errno = 0;
    CHECK(umq_create(&o) == UMQ_INVALID_HANDLE);
    CHECK_EQ(errno, UMQ_ERR_EINVAL);
    name_lo(&o.dev_info);
    strcpy(o.dev_info.dev.dev_name, "no-such-dev0");
    o.create_flag = 0;
    CHECK(umq_create(&o) == UMQ_INVALID_HANDLE);
}

static int poll_one(uint64_t h, umq_io_option_t *dir, umq_buf_t **out)
{
    for (int i = 0; i < 1000000; i++) {
        int n = umq_poll(h, dir, out, 1);
        if (n != 0) {
            return n;
        }
    }
    return 0;
}

static void messages(uint64_t a, uint64_t b)
{
    /* 256 receive buffers in one call: this revision's batch. */
    umq_buf_t *bufs = umq_buf_alloc(64, 256, b, NULL);
    CHECK(bufs != NULL);
    umq_buf_t *bad = NULL;
    CHECK_EQ(umq_post(b, bufs, &rx, &bad), 0);
    CHECK(umq_buf_alloc(64, 257, 0, NULL) == NULL);

    umq_alloc_option_t tiny = {.flag = UMQ_ALLOC_FLAG_POOL_TYPE, .pool_type = UMQ_ALLOC_POOL_TINY};
    umq_buf_t *m = umq_buf_alloc(64, 1, a, &tiny);
    CHECK(m != NULL);
    umq_alloc_option_t wrong = {.flag = UMQ_ALLOC_FLAG_POOL_TYPE, .pool_type = UMQ_ALLOC_POOL_MAX};
    CHECK(umq_buf_alloc(64, 1, a, &wrong) == NULL);
    memcpy(m->buf_data, "july 2026", 10);
    m->data_size = 10;
    m->total_data_size = 10;
    umq_buf_pro_t *pro = (umq_buf_pro_t *)m->qbuf_ext;
    memset(pro, 0, sizeof(*pro));
    pro->opcode = UMQ_OPC_SEND;
    pro->user_ctx = 42;

    CHECK_EQ(umq_post(a, m, NULL, &bad), -UMQ_ERR_EINVAL);
    CHECK_EQ(umq_post(a, m, &tx, NULL), -UMQ_ERR_EINVAL);
    /* Credit is requested, not announced; b, whose buffers were posted, offered a its first
     * credit unasked, so the post goes (an offer, being no answer, shows no update buffer). */
    CHECK_EQ(umq_post(a, m, &tx, &bad), 0);
    umq_buf_t *out[2];
    CHECK_EQ(umq_poll(a, &(umq_io_option_t){.io_direction = UMQ_IO_ALL}, out, 1), -UMQ_ERR_EINVAL);
    CHECK_EQ(umq_poll(a, NULL, out, 1), -UMQ_ERR_EINVAL);
    CHECK_EQ(poll_one(a, &tx, out), 1);
    CHECK(out[0] == m);
    CHECK_EQ(((umq_buf_pro_t *)out[0]->qbuf_ext)->user_ctx, 42);
    CHECK_EQ(poll_one(b, &rx, out), 1);
    CHECK_EQ(out[0]->status, UMQ_BUF_SUCCESS);
    CHECK_EQ(out[0]->total_data_size, 10);
    CHECK(memcmp(out[0]->buf_data, "july 2026", 10) == 0);
    umq_buf_free(out[0]);
    umq_buf_free(m);
}

/* Takes what b received, checks it is the next in order, and posts as many buffers again. */
static void take_in_order(uint64_t b, uint32_t *received)
{
    umq_buf_t *out[256];
    int n = umq_poll(b, &rx, out, 256);
    for (int i = 0; i < n; i++) {
        uint32_t seq;
        memcpy(&seq, out[i]->buf_data, 4);
        CHECK_EQ(seq, *received);
        (*received)++;
        umq_buf_free(out[i]);
    }
    if (n > 0) {
        umq_buf_t *more = umq_buf_alloc(64, (uint32_t)n, b, NULL), *bad = NULL;
        CHECK_EQ(umq_post(b, more, &rx, &bad), 0);
    }
}

/* Batches of 256 WRs under flow control, more than the window lets through: each post takes
 * what credit there is and refuses the rest (EAGAIN, *bad at the first refused), the receiver
 * reposts what it takes, and every message arrives once, in order, with no credit lost. (A
 * 64-bit mask of the WRs needing credit once lost the credit of WRs past the 64th.) */
static void credit_for_long_batches(uint64_t a, uint64_t b)
{
    enum { TOTAL = 2048 };
    umq_buf_t *wrs = umq_buf_alloc(64, 256, a, NULL);
    CHECK(wrs != NULL);
    umq_buf_t *w[256];
    int k = 0;
    for (umq_buf_t *x = wrs; x != NULL; x = x->qbuf_next) {
        w[k++] = x;
    }
    CHECK_EQ(k, 256);
    uint32_t sent = 0, received = 0, completed = 0;
    int rounds = 0, refusals = 0;
    umq_buf_t *out[256];
    while (received < TOTAL && rounds++ < 400000) {
        if (sent == completed && sent < TOTAL) {
            for (int i = 0; i < 256; i++) {
                memcpy(w[i]->buf_data, &(uint32_t){sent + (uint32_t)i}, 4);
                w[i]->data_size = w[i]->total_data_size = 4;
                umq_buf_pro_t *pro = (umq_buf_pro_t *)w[i]->qbuf_ext;
                memset(pro, 0, sizeof(*pro));
                pro->opcode = UMQ_OPC_SEND;
            }
            /* What a refused post leaves (bad onwards) is posted again once b took some in. */
            umq_buf_t *from = w[0], *bad = NULL;
            int r;
            while ((r = umq_post(a, from, &tx, &bad)) == -UMQ_ERR_EAGAIN && rounds++ < 400000) {
                refusals++;
                take_in_order(b, &received);
                from = bad;
            }
            CHECK_EQ(r, 0);
            sent += 256;
        }
        take_in_order(b, &received);
        completed += (uint32_t)umq_poll(a, &tx, out, 256);
    }
    CHECK_EQ(received, TOTAL);
    CHECK(refusals > 0);
    while (completed < sent) {
        completed += (uint32_t)umq_poll(a, &tx, out, 256);
    }
    umq_buf_free(wrs);
}

/* Flow-control statistics in this revision's terms, and a queue's identity. */
static void queue_statistics(uint64_t a, uint64_t b)
{
    umq_flow_control_stats_t fa, fb;
    CHECK_EQ(umq_stats_flow_control_get(a, &fa), 0);
    CHECK_EQ(umq_stats_flow_control_get(b, &fb), 0);
    /* Every SEND of a used one credit that a acquired from b; b announced what a acquired. */
    CHECK(fa.queue_credit.total_queue_post_tx_success >= 2049);
    CHECK(fa.queue_credit.total_queue_acquired >= fa.queue_credit.total_queue_post_tx_success);
    CHECK_EQ(fa.queue_credit.queue_acquired,
             fa.queue_credit.total_queue_acquired - fa.queue_credit.total_queue_post_tx_success);
    CHECK(fa.queue_credit.total_queue_post_tx_err > 0);
    CHECK(fb.pool_credit.total_pool_idle >= 2048 + 256);
    CHECK(fb.pool_credit.total_pool_be_allocated >= fa.queue_credit.total_queue_post_tx_success);
    CHECK_EQ(umq_stats_flow_control_get(a, NULL), -UMQ_ERR_EINVAL);
    CHECK_EQ(umq_stats_flow_control_get(99, &fa), -UMQ_ERR_EINVAL);
    char text[2048];
    int len = umq_flow_control_stats_to_str(&fa, text, sizeof(text));
    CHECK(len > 0 && strstr(text, "total_queue_post_tx_success") != NULL);
    CHECK_EQ(umq_flow_control_stats_to_str(NULL, text, sizeof(text)), -UMQ_ERR_EINVAL);

    /* Window updates as packets: some went, the reset starts from zero, and a's updates are
     * what b received. */
    umq_packet_stats_t pa, pb;
    CHECK_EQ(umq_stats_io_get(a, &pa), 0);
    CHECK_EQ(umq_stats_io_get(b, &pb), 0);
    CHECK_EQ(pa.send_cnt, pa.send_success + pa.send_eagain_cnt);
    CHECK(pb.send_cnt > 0);
    CHECK_EQ(pa.recv_cnt, pb.send_success);
    CHECK_EQ(fb.packet_stats.send_success, pb.send_success);
    CHECK_EQ(umq_stats_io_reset(b), 0);
    CHECK_EQ(umq_stats_io_get(b, &pb), 0);
    CHECK_EQ(pb.send_cnt, 0);
    CHECK_EQ(pb.recv_cnt, 0);
    CHECK_EQ(umq_stats_io_get(a, NULL), -UMQ_ERR_EINVAL);
    CHECK_EQ(umq_stats_io_reset(99), -UMQ_ERR_EINVAL);
    len = umq_io_stats_to_str(&pa, text, sizeof(text));
    CHECK(len > 0 && strstr(text, "send_eagain_cnt") != NULL);

    /* The one memory pool is imported once bound; refreshing needs remote memory access. */
    umq_mempool_state_t ms = {.import_state = MEMPOOL_STATE_NON_IMPORTED};
    CHECK_EQ(umq_mempool_state_get(a, 0, &ms), 0);
    CHECK_EQ(ms.import_state, MEMPOOL_STATE_IMPORTED);
    CHECK_EQ(umq_mempool_state_get(a, 1, &ms), -UMQ_ERR_EINVAL);
    CHECK_EQ(umq_mempool_state_get(a, 0, NULL), -UMQ_ERR_EINVAL);
    CHECK_EQ(umq_mempool_state_refresh(a, 0), -UMQ_ERR_EPERM);

    /* The process pool: its smallest class serves 64 B, and five buffers taken are five
     * fewer free. */
    umq_qbuf_pool_stats_t *ps = malloc(sizeof(*ps));
    CHECK_EQ(umq_stats_qbuf_pool_get(0, ps), 0);
    CHECK(ps->num >= 1);
    CHECK_EQ(ps->qbuf_pool_info[0].type, UMQ_QBUF_POOL_TYPE_SMALL);
    CHECK(ps->qbuf_pool_info[0].total_block_num > 0);
    CHECK_EQ(ps->qbuf_pool_info[0].umq_buf_t_size, sizeof(umq_buf_t));
    uint64_t free_before = ps->qbuf_pool_info[0].available_mem.combine.block_num_with_data;
    CHECK(free_before >= 5 && free_before <= ps->qbuf_pool_info[0].total_block_num);
    umq_buf_t *five = umq_buf_alloc(64, 5, 0, NULL);
    CHECK_EQ(umq_stats_qbuf_pool_get(0, ps), 0);
    CHECK_EQ(ps->qbuf_pool_info[0].available_mem.combine.block_num_with_data, free_before - 5);
    umq_buf_free(five);
    /* The five went back to this thread's cache of the class: a thread-local pool of ours. */
    CHECK_EQ(umq_stats_qbuf_pool_get(0, ps), 0);
    CHECK(ps->local_qbuf_pool_num >= 1 && ps->local_qbuf_pool_num <= UMQ_LOCAL_QBUF_POOL_MAX_NUM);
    const umq_local_qbuf_pool_stats_t *mine = NULL;
    for (uint32_t i = 0; i < ps->local_qbuf_pool_num; i++) {
        if (ps->local_qbuf_pool_stats[i].tid == (uint64_t)syscall(SYS_gettid) &&
            ps->local_qbuf_pool_stats[i].type == UMQ_QBUF_POOL_TYPE_SMALL)
            mine = &ps->local_qbuf_pool_stats[i];
    }
    CHECK(mine != NULL);
    if (mine != NULL) {
        CHECK(mine->buf_cnt_with_data >= 5 && mine->buf_cnt_with_data <= mine->capacity_with_data);
        CHECK(mine->tls_fetch_cnt_with_data >= 1);
        CHECK(mine->tls_fetch_buf_cnt_with_data >= mine->tls_fetch_cnt_with_data);
    }
    CHECK_EQ(ps->qbuf_pool_info[0].available_mem.combine.block_num_with_data, free_before);
    CHECK_EQ(umq_stats_qbuf_pool_get(a, ps), 0);
    CHECK(ps->num >= 1);
    CHECK_EQ(umq_stats_qbuf_pool_get(0, NULL), -UMQ_ERR_EINVAL);
    CHECK_EQ(umq_stats_qbuf_pool_get(99, ps), -UMQ_ERR_EINVAL);
    len = umq_qbuf_pool_stats_to_str(ps, text, sizeof(text));
    CHECK(len > 0 && strstr(text, "block_size") != NULL);
    free(ps);

    umq_info_t info;
    CHECK_EQ(umq_info_get(a, &info), 0);
    CHECK_EQ(info.trans_mode, UMQ_TRANS_MODE_UB);
    uint8_t mapped[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1};
    CHECK(memcmp(info.ub.eid.raw, mapped, 16) == 0);
    CHECK(strcmp(info.ub.dev_name, "lo") == 0);
    CHECK_EQ(info.ub.umq_id, (uint32_t)a);
    CHECK_EQ(info.ub.remote_io_jetty_id, (uint32_t)b);
    CHECK_EQ(umq_info_get(a, NULL), -UMQ_ERR_EINVAL);
    len = umq_info_to_str(&info, text, sizeof(text));
    CHECK(len > 0 && strstr(text, "127.0.0.1") != NULL && strstr(text, "lo") != NULL);
}

static int perf_calls[UMQ_PERF_RECORD_TYPE_MAX];
static umq_buf_t *perf_last;
static void io_perf_seen(umq_perf_record_type_t type, umq_buf_t *qbuf)
{
    if (type < UMQ_PERF_RECORD_TYPE_MAX) {
        perf_calls[type]++;
    }
    perf_last = qbuf;
}

/* The I/O perf callback sees WRs with a user immediate: posted and received. */
static void io_perf_hook(uint64_t a, uint64_t b)
{
    CHECK_EQ(umq_io_perf_callback_register(NULL), -UMQ_ERR_EINVAL);
    CHECK_EQ(umq_io_perf_callback_register(io_perf_seen), 0);
    umq_buf_t *r = umq_buf_alloc(64, 1, b, NULL), *bad = NULL;
    CHECK_EQ(umq_post(b, r, &rx, &bad), 0);
    umq_buf_t *m = umq_buf_alloc(64, 2, a, NULL);
    umq_buf_t *second = m->qbuf_next;
    for (umq_buf_t *x = m; x != NULL; x = x->qbuf_next) {
        x->data_size = x->total_data_size = 8;
        umq_buf_pro_t *pro = (umq_buf_pro_t *)x->qbuf_ext;
        memset(pro, 0, sizeof(*pro));
        pro->opcode = UMQ_OPC_SEND;
    }
    ((umq_buf_pro_t *)second->qbuf_ext)->opcode = UMQ_OPC_SEND_IMM;
    ((umq_buf_pro_t *)second->qbuf_ext)->imm_data = 0x70;
    m->qbuf_next = NULL; /* a plain SEND first: no call */
    CHECK_EQ(umq_post(a, m, &tx, &bad), 0);
    CHECK_EQ(perf_calls[UMQ_PERF_RECORD_TRANSPORT_POST_SEND], 0);
    m->qbuf_next = second; /* a list whose second WR is a SEND_IMM: one call, with the list */
    umq_buf_t *out[2];
    CHECK_EQ(poll_one(a, &tx, out), 1);
    CHECK_EQ(poll_one(b, &rx, out), 1);
    umq_buf_free(out[0]);
    umq_buf_t *two = umq_buf_alloc(64, 2, b, NULL);
    CHECK_EQ(umq_post(b, two, &rx, &bad), 0);
    CHECK_EQ(umq_post(a, m, &tx, &bad), 0);
    CHECK_EQ(perf_calls[UMQ_PERF_RECORD_TRANSPORT_POST_SEND], 1);
    CHECK(perf_last == m);
    int got = 0;
    for (int i = 0; i < 1000000 && got < 2; i++) {
        int n = umq_poll(b, &rx, out, 2);
        for (int k = 0; k < n; k++) {
            umq_buf_free(out[k]);
        }
        got += n > 0 ? n : 0;
    }
    CHECK_EQ(got, 2);
    CHECK_EQ(perf_calls[UMQ_PERF_RECORD_TRANSPORT_POLL_RX], 1);
    int done = 0;
    for (int i = 0; i < 1000000 && done < 2; i++) {
        int n = umq_poll(a, &tx, out, 2);
        done += n > 0 ? n : 0;
    }
    CHECK_EQ(done, 2);
    umq_buf_free(m);
}

static void perf_statistics(uint64_t a)
{
    CHECK_EQ(umq_stats_perf_start(), 0);
    umq_perf_stats_cfg_t cfg;
    CHECK_EQ(umq_stats_perf_reset(&cfg), 0);
    umq_buf_t *out[4];
    for (int i = 0; i < 100; i++) {
        CHECK_EQ(umq_poll(a, &tx, out, 4), 0);
    }
    CHECK_EQ(umq_stats_perf_stop(), 0);
    umq_perf_stats_t *s = malloc(sizeof(*s));
    CHECK_EQ(umq_stats_perf_get(s), 0);
    umq_perf_stats_t *r = s;
    CHECK_EQ(r->type_record[UMQ_PERF_RECORD_POLL_TX_EMPTY].sample_num, 100);
    CHECK_EQ(r->type_record[UMQ_PERF_RECORD_POLL_TX_EMPTY].type, UMQ_PERF_RECORD_POLL_TX_EMPTY);
    uint64_t *q = r->type_record[UMQ_PERF_RECORD_POLL_TX_EMPTY].quantile;
    CHECK(q[0] > 0 && q[0] <= q[1] && q[1] <= q[2] && q[2] <= q[3]);
    CHECK(q[3] <= r->type_record[UMQ_PERF_RECORD_POLL_TX_EMPTY].maxinum);
    CHECK(r->type_record[UMQ_PERF_RECORD_POLL_TX_EMPTY].mininum <= r->type_record[UMQ_PERF_RECORD_POLL_TX_EMPTY].average);
    CHECK_EQ(r->type_record[UMQ_PERF_RECORD_CREATE].sample_num, 0);
    char text[4096];
    int len = umq_stats_perf_to_str(s, text, sizeof(text));
    CHECK(len > 0 && len < (int)sizeof(text) && strstr(text, "samples") != NULL);
    CHECK_EQ(umq_stats_perf_to_str(s, text, 8), len);
    CHECK_EQ(strlen(text), 7);
    free(s);
}

static void logging_and_state(uint64_t a)
{
    umq_log_config_t lc = {.log_flag = UMQ_LOG_FLAG_EXT_FUNC | UMQ_LOG_FLAG_LEVEL, .ext_func = ext_log,
                           .level = UMQ_LOG_LEVEL_ERR};
    CHECK_EQ(umq_log_config_set(&lc), 0);
    umq_log_config_t got;
    memset(&got, 0, sizeof(got));
    CHECK_EQ(umq_log_config_get(&got), 0);
    CHECK(got.ext_func == ext_log);
    CHECK_EQ(got.level, UMQ_LOG_LEVEL_ERR);
    CHECK_EQ(umq_state_set(a, QUEUE_STATE_READY), -UMQ_ERR_EINVAL);
    CHECK(ext_lines >= 1 && strstr(ext_last, "QUEUE_STATE_ERR") != NULL);

    umq_trans_info_t ti;
    memset(&ti, 0, sizeof(ti));
    ti.trans_mode = UMQ_TRANS_MODE_UB;
    name_lo(&ti.dev_info);
    umq_async_event_t ev;
    while (umq_get_async_event(&ti, &ev) == 0) {
        umq_ack_async_event(&ev);
    }
    CHECK_EQ(umq_state_set(a, QUEUE_STATE_ERR), 0);
    CHECK_EQ(umq_state_get(a), QUEUE_STATE_ERR);
    CHECK_EQ(umq_state_set(a, QUEUE_STATE_ERR), 0);
    memset(&ev, 0, sizeof(ev));
    CHECK_EQ(umq_get_async_event(&ti, &ev), 0);
    CHECK_EQ(ev.event_type, UMQ_EVENT_QH_ERR);
    CHECK_EQ(ev.element.umqh, a);
    CHECK_EQ(ev.trans_info.trans_mode, UMQ_TRANS_MODE_UB);
    umq_ack_async_event(&ev);
    CHECK_EQ(umq_get_async_event(&ti, &ev), -UMQ_ERR_EAGAIN);
    lc.log_flag = UMQ_LOG_FLAG_FUNC;
    lc.func = NULL;
    CHECK_EQ(umq_log_config_set(&lc), 0);
}

static void interrupt_fds(void)
{
    uint64_t i = create("irq", UMQ_MODE_INTERRUPT, 1);
    CHECK(i != 0);
    umq_interrupt_fd_list_t list;
    memset(&list, 0, sizeof(list));
    umq_interrupt_option_t all = {.flag = UMQ_INTERRUPT_FLAG_IO_DIRECTION, .direction = UMQ_IO_ALL};
    CHECK_EQ(umq_interrupt_fd_list_get(i, &all, &list), 0);
    CHECK_EQ(list.fd_num, 2);
    umq_interrupt_option_t one = {.flag = UMQ_INTERRUPT_FLAG_IO_DIRECTION, .direction = UMQ_IO_RX};
    CHECK_EQ(list.fd[1], umq_interrupt_fd_get(i, &one));
    CHECK(list.fd[0] >= 0 && list.fd[0] != list.fd[1]);
    CHECK_EQ(umq_interrupt_fd_list_get(i, &all, NULL), -UMQ_ERR_EINVAL);
    umq_mempool_state_t ms;
    CHECK_EQ(umq_mempool_state_get(i, 0, &ms), -UMQ_ERR_EINVAL); /* not bound */
    CHECK_EQ(umq_destroy(i), 0);
}

/* The application's locks: pthread ones, counted. */
static int mutex_calls[4], rwlock_calls[5], key_calls[4]; /* create, lock/read, unlock, destroy (, write) */
static umq_external_mutex_t *app_mutex_create(umq_external_mutex_attr_t attr)
{
    CHECK_EQ(attr, MUTEX_ATTR_EXCLUSIVE);
    pthread_mutex_t *m = malloc(sizeof(*m));
    pthread_mutex_init(m, NULL);
    __atomic_fetch_add(&mutex_calls[0], 1, __ATOMIC_SEQ_CST);
    return (umq_external_mutex_t *)m;
}
static int app_mutex_lock(umq_external_mutex_t *m)
{
    __atomic_fetch_add(&mutex_calls[1], 1, __ATOMIC_SEQ_CST);
    return pthread_mutex_lock((pthread_mutex_t *)m);
}
static int app_mutex_unlock(umq_external_mutex_t *m)
{
    __atomic_fetch_add(&mutex_calls[2], 1, __ATOMIC_SEQ_CST);
    return pthread_mutex_unlock((pthread_mutex_t *)m);
}
static int app_mutex_trylock(umq_external_mutex_t *m)
{
    return pthread_mutex_trylock((pthread_mutex_t *)m);
}
static int app_mutex_destroy(umq_external_mutex_t *m)
{
    __atomic_fetch_add(&mutex_calls[3], 1, __ATOMIC_SEQ_CST);
    pthread_mutex_destroy((pthread_mutex_t *)m);
    free(m);
    return 0;
}
static umq_external_rwlock_t *app_rw_create(void)
{
    pthread_rwlock_t *l = malloc(sizeof(*l));
    pthread_rwlock_init(l, NULL);
    __atomic_fetch_add(&rwlock_calls[0], 1, __ATOMIC_SEQ_CST);
    return (umq_external_rwlock_t *)l;
}
static int app_rw_read(umq_external_rwlock_t *l)
{
    __atomic_fetch_add(&rwlock_calls[1], 1, __ATOMIC_SEQ_CST);
    return pthread_rwlock_rdlock((pthread_rwlock_t *)l);
}
static int app_rw_write(umq_external_rwlock_t *l)
{
    __atomic_fetch_add(&rwlock_calls[4], 1, __ATOMIC_SEQ_CST);
    return pthread_rwlock_wrlock((pthread_rwlock_t *)l);
}
static int app_rw_unlock(umq_external_rwlock_t *l)
{
    __atomic_fetch_add(&rwlock_calls[2], 1, __ATOMIC_SEQ_CST);
    return pthread_rwlock_unlock((pthread_rwlock_t *)l);
}
static int app_rw_try(umq_external_rwlock_t *l)
{
    return pthread_rwlock_tryrdlock((pthread_rwlock_t *)l);
}
static int app_rw_destroy(umq_external_rwlock_t *l)
{
    __atomic_fetch_add(&rwlock_calls[3], 1, __ATOMIC_SEQ_CST);
    pthread_rwlock_destroy((pthread_rwlock_t *)l);
    free(l);
    return 0;
}
static util_external_thread_key_t *app_key_create(void (*destr)(void *))
{
    pthread_key_t *k = malloc(sizeof(*k));
    pthread_key_create(k, destr);
    key_calls[0]++;
    return (util_external_thread_key_t *)k;
}
static int app_key_delete(util_external_thread_key_t *k)
{
    key_calls[3]++;
    pthread_key_delete(*(pthread_key_t *)k);
    free(k);
    return 0;
}
static int app_key_set(util_external_thread_key_t *k, const void *data)
{
    key_calls[1]++;
    return pthread_setspecific(*(pthread_key_t *)k, data);
}
static void *app_key_get(util_external_thread_key_t *k)
{
    key_calls[2]++;
    return pthread_getspecific(*(pthread_key_t *)k);
}

/* Registered before umq_init, as the reference requires; incomplete sets are refused. */
static void register_app_locks(void)
{
    umq_external_mutex_lock_ops_t m = {app_mutex_create, app_mutex_destroy, app_mutex_lock, app_mutex_unlock, NULL};
    CHECK_EQ(umq_external_mutex_lock_ops_register(NULL), -UMQ_ERR_EINVAL);
    CHECK_EQ(umq_external_mutex_lock_ops_register(&m), -UMQ_ERR_EINVAL);
    m.trylock = app_mutex_trylock;
    CHECK_EQ(umq_external_mutex_lock_ops_register(&m), 0);
    umq_external_rwlock_ops_t rw = {app_rw_create, app_rw_destroy, app_rw_read, app_rw_write, app_rw_unlock,
                                    app_rw_try, NULL};
    CHECK_EQ(umq_external_rwlock_ops_register(&rw), -UMQ_ERR_EINVAL);
    rw.try_write_lock = app_rw_try;
    CHECK_EQ(umq_external_rwlock_ops_register(&rw), 0);
    umq_external_thread_key_ops_t k = {app_key_create, app_key_delete, app_key_set, NULL};
    CHECK_EQ(umq_external_thread_key_ops_register(&k), -UMQ_ERR_EINVAL);
    k.getspecific = app_key_get;
    CHECK_EQ(umq_external_thread_key_ops_register(&k), 0);
}

/* After the queues' lives: the library locked through the application's functions, in pairs.
 * Its mutexes here are the handle table's and the async-event queue's; its reader-writer lock
 * the buffer pool's hook list (no provider of this process registers memory, so it is only
 * read, as the pool grows). */
static void app_locks_used(int queues_made)
{
    CHECK(mutex_calls[0] >= 2);
    CHECK(mutex_calls[1] >= queues_made); /* the handle table's, at least once a create */
    CHECK_EQ(mutex_calls[1], mutex_calls[2]);
    CHECK_EQ(mutex_calls[3], 0);          /* both live as long as the runtime or longer */
    CHECK_EQ(rwlock_calls[0], 1);
    CHECK_EQ(rwlock_calls[4], 0);
    CHECK(rwlock_calls[1] >= 1);
    CHECK_EQ(rwlock_calls[1], rwlock_calls[2]);
    CHECK_EQ(rwlock_calls[3], 0);
}

static int trace_posts, trace_polls, trace_items;
static void trace_log(int level, const char *file, const char *function, int line, char *msg)
{
    (void)level; (void)file; (void)function; (void)line;
    trace_posts += strstr(msg, "type=POST") != NULL;
    trace_polls += strstr(msg, "type=POLL") != NULL;
    trace_items += strstr(msg, "item[0] size=10;") != NULL;
}

/* One SEND from a to b, taken at both ends. */
static void one_message(uint64_t a, uint64_t b)
{
    umq_buf_t *r = umq_buf_alloc(64, 1, b, NULL), *m = umq_buf_alloc(64, 1, a, NULL), *bad = NULL, *out[1];
    CHECK_EQ(umq_post(b, r, &rx, &bad), 0);
    m->data_size = m->total_data_size = 10;
    umq_buf_pro_t *pro = (umq_buf_pro_t *)m->qbuf_ext;
    memset(pro, 0, sizeof(*pro));
    pro->opcode = UMQ_OPC_SEND;
    CHECK_EQ(umq_post(a, m, &tx, &bad), 0);
    CHECK_EQ(poll_one(a, &tx, out), 1);
    CHECK_EQ(poll_one(b, &rx, out), 1);
    CHECK_EQ(out[0]->total_data_size, 10);
    umq_buf_free(out[0]);
    umq_buf_free(m);
}

/* The call trace: refusals, then three messages recorded and written to the log at the stop,
 * each thread's ring hung from the application's thread key. */
static void call_trace(uint64_t a, uint64_t b)
{
    umq_trace_cfg_t cfg = {.flag = UMQ_TRACE_FLAG_RECORD_NUM, .record_num = 0};
    CHECK_EQ(umq_stats_trace_start(NULL), -UMQ_ERR_EINVAL);
    CHECK_EQ(umq_stats_trace_start(&cfg), -UMQ_ERR_EINVAL);
    CHECK_EQ(umq_stats_trace_stop(), -UMQ_ERR_EINVAL);
    umq_log_config_t lc = {.log_flag = UMQ_LOG_FLAG_EXT_FUNC | UMQ_LOG_FLAG_LEVEL, .ext_func = trace_log,
                           .level = UMQ_LOG_LEVEL_INFO};
    CHECK_EQ(umq_log_config_set(&lc), 0);
    cfg.record_num = 64;
    CHECK_EQ(umq_stats_trace_start(&cfg), 0);
    CHECK_EQ(umq_stats_trace_start(&cfg), -UMQ_ERR_EINVAL);
    CHECK_EQ(key_calls[0], 1);
    for (int i = 0; i < 3; i++) {
        one_message(a, b);
    }
    CHECK_EQ(trace_posts, 0); /* written once a second or at the stop */
    CHECK_EQ(umq_stats_trace_stop(), 0);
    CHECK_EQ(trace_posts, 6); /* a receive post and a send post a message */
    CHECK(trace_polls >= 6);  /* at least the two polls that took something */
    CHECK_EQ(trace_items, 3 * 3); /* the sent buffer at its post, its TX poll and b's RX poll */
    CHECK_EQ(key_calls[1], 2); /* this thread's ring, set once, and cleared at the stop */
    CHECK(key_calls[2] >= 12);
    CHECK_EQ(key_calls[3], 0); /* the key lives as long as the process */
    CHECK_EQ(umq_stats_trace_stop(), -UMQ_ERR_EINVAL);
    int posts = trace_posts;
    one_message(a, b);
    CHECK_EQ(trace_posts, posts); /* stopped: nothing more recorded */
    lc.log_flag = UMQ_LOG_FLAG_FUNC | UMQ_LOG_FLAG_LEVEL;
    lc.func = NULL;
    lc.level = UMQ_LOG_LEVEL_ERR;
    CHECK_EQ(umq_log_config_set(&lc), 0);
}

/* The providers' part of posts and polls, timed and given as the reference's table. */
static void provider_timing(uint64_t a, uint64_t b)
{
    CHECK_EQ(umq_stats_tp_perf_start(UMQ_TRANS_MODE_MAX), -UMQ_ERR_EINVAL);
    CHECK_EQ(umq_stats_tp_perf_start(UMQ_TRANS_MODE_UB), 0);
    for (int i = 0; i < 5; i++) {
        one_message(a, b);
    }
    CHECK_EQ(umq_stats_tp_perf_stop(UMQ_TRANS_MODE_UB), 0);
    one_message(a, b);
    char text[4096];
    uint32_t len = 16;
    memset(text, 'x', sizeof(text));
    CHECK_EQ(umq_stats_tp_perf_info_get(UMQ_TRANS_MODE_UB, text, &len), -UMQ_ERR_EINVAL);
    CHECK_EQ(len, 16);
    CHECK_EQ(text[0], 'x');
    CHECK_EQ(umq_stats_tp_perf_info_get(UMQ_TRANS_MODE_UB, text, NULL), -UMQ_ERR_EINVAL);
    len = sizeof(text);
    CHECK_EQ(umq_stats_tp_perf_info_get(UMQ_TRANS_MODE_UB, text, &len), 0);
    CHECK_EQ(len, strlen(text));
    /* Each post's provider step (the delivery to b in this process), five while timed. */
    /* URMA's line that ubs-comm parses as its retransmission count (the bonding layer's path
     * switches; one path here). */
    unsigned long long retries = 1;
    const char *retry = strstr(text, "  retry_count: ");
    CHECK(retry != NULL && sscanf(retry, "  retry_count: %llu", &retries) == 1);
    CHECK_EQ(retries, 0);
    const char *row = strstr(text, "provider_send");
    CHECK(row != NULL);
    if (row != NULL) {
        unsigned long samples = 0;
        CHECK_EQ(sscanf(row, "provider_send | %lu", &samples), 1);
        CHECK_EQ(samples, 5);
    }
}

/* On a queue that is not a main queue sharing its transport the pool's calls are refused, but
 * for its eventfd and statistics (the process's pool's, empty here: test_tp_pool_2026.c uses
 * one). */
static void transport_pool(uint64_t a)
{
    umq_tp_resource_create_option_t o;
    memset(&o, 0, sizeof(o));
    CHECK_EQ(umq_transport_pool_resource_create(a, NULL), UINT32_MAX);
    CHECK_EQ(umq_transport_pool_resource_create(a, &o), UINT32_MAX);
    CHECK_EQ(umq_transport_pool_resource_modify(a, 0), -UMQ_ERR_EINVAL);
    CHECK_EQ(umq_transport_pool_resource_destroy(a, 0), -UMQ_ERR_EINVAL);
    CHECK(umq_transport_pool_eventfd_get(a) >= 0);
    CHECK_EQ(umq_transport_pool_eventfd_get(12345), -UMQ_ERR_EINVAL);
    umq_transport_pool_stats_t s;
    memset(&s, 0xee, sizeof(s));
    CHECK_EQ(umq_stats_transport_pool_get(a, &s), 0);
    CHECK(s.total_num == 0 && s.in_use_num == 0 && s.acc_alloc_num == 0 && s.acc_miss_num == 0);
    CHECK_EQ(umq_stats_transport_pool_get(12345, &s), -UMQ_ERR_EINVAL);
    CHECK_EQ(umq_stats_transport_pool_get(a, NULL), -UMQ_ERR_EINVAL);
    char text[512];
    int len = umq_transport_pool_stats_to_str(&s, text, sizeof(text));
    CHECK(len > 0 && strstr(text, "in_use_num") != NULL);
    CHECK_EQ(umq_transport_pool_stats_to_str(NULL, text, sizeof(text)), -UMQ_ERR_EINVAL);
}

int main(void)
{
    umq_dev_info_t info;
    register_app_locks();
    CHECK_EQ(umq_dev_info_get("lo", UMQ_TRANS_MODE_UB, &info), -UMQ_ERR_EINVAL);
    init_with_lo();
    devices();
    uint64_t a = create("a", UMQ_MODE_POLLING, 0xc0ffee), b = create("b", UMQ_MODE_POLLING, 2);
    CHECK(a != 0 && b != 0);
    bind_pair(a, b);
    settings(a);
    messages(a, b);
    credit_for_long_batches(a, b);
    umq_cfg_get_t c;
    CHECK_EQ(umq_cfg_get(a, &c), 0);
    CHECK_EQ(c.state, QUEUE_STATE_READY);
    queue_statistics(a, b);
    io_perf_hook(a, b);
    perf_statistics(a);
    call_trace(a, b);
    provider_timing(a, b);
    transport_pool(a);
    interrupt_fds();
    logging_and_state(a);
    CHECK_EQ(umq_destroy(a), 0);
    CHECK_EQ(umq_destroy(b), 0);
    app_locks_used(3);
    umq_uninit();
    CHECK_EQ(rwlock_calls[3], 1); /* the pool went with the runtime, its lock with it */
    printf("api_2026: %d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
