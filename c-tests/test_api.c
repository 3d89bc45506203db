/* Every exported function of umq_api.h / umq_pro_api.h, on the in-process transport: the happy
 * paths with byte-level checks, and the error paths (NULL, bad handles, bad sizes). */
#include "util.h"
#include <poll.h>
#include <stdlib.h>
#include <unistd.h>

static int log_lines;
static char last_log[512];
static void capture_log(int level, char *msg)
{
    (void)level;
    log_lines++;
    snprintf(last_log, sizeof(last_log), "%s", msg);
}

static umq_buf_t *alloc_msg(const char *text, umq_opcode_t op, uint64_t ctx)
{
    umq_buf_t *b = umq_buf_alloc((uint32_t)strlen(text), 1, 0, NULL);
    if (!b)
        return NULL;
    memcpy(b->buf_data, text, strlen(text));
    umq_buf_pro_t *pro = (umq_buf_pro_t *)b->qbuf_ext;
    pro->opcode = op;
    pro->user_ctx = ctx;
    return b;
}

static void test_before_init(void)
{
    umq_create_option_t o = test_option("x", 8, UMQ_MODE_POLLING);
    errno = 0;
    CHECK_EQ(umq_create(&o), UMQ_INVALID_HANDLE);
    CHECK_EQ(errno, UMQ_ERR_EINVAL);
    CHECK(umq_buf_alloc(8, 1, 0, NULL) == NULL);
    CHECK_EQ(umq_init(NULL), -UMQ_ERR_EINVAL);
    umq_init_cfg_t *cfg = calloc(1, sizeof(*cfg));
    cfg->buf_mode = 7;
    CHECK_EQ(umq_init(cfg), -UMQ_ERR_EINVAL);
    cfg->buf_mode = UMQ_BUF_COMBINE;
    cfg->feature = 1u << 30;
    CHECK_EQ(umq_init(cfg), -UMQ_ERR_EINVAL);
    cfg->feature = 0;
    cfg->trans_info_num = 1;
    cfg->trans_info[0].trans_mode = UMQ_TRANS_MODE_UB;
    cfg->trans_info[0].dev_info.assign_mode = UMQ_DEV_ASSIGN_MODE_IPV4;
    strcpy(cfg->trans_info[0].dev_info.ipv4.ip_addr, "not-an-ip");
    CHECK_EQ(umq_init(cfg), -UMQ_ERR_EINVAL);
    free(cfg);
}

static void test_init_and_log(void)
{
    umq_init_cfg_t *cfg = calloc(1, sizeof(*cfg));
    cfg->buf_mode = UMQ_BUF_COMBINE;
    cfg->feature = UMQ_FEATURE_API_PRO | UMQ_FEATURE_ENABLE_STATS;
    cfg->headroom_size = 64;
    cfg->trans_info_num = 1;
    cfg->trans_info[0].trans_mode = UMQ_TRANS_MODE_UB;
    cfg->trans_info[0].dev_info.assign_mode = UMQ_DEV_ASSIGN_MODE_IPV4;
    strcpy(cfg->trans_info[0].dev_info.ipv4.ip_addr, "127.0.0.1");
    CHECK_EQ(umq_init(cfg), 0);
    CHECK_EQ(umq_init(cfg), -UMQ_ERR_EEXIST);
    free(cfg);

    CHECK_EQ(umq_log_config_set(NULL), -UMQ_ERR_EINVAL);
    CHECK_EQ(umq_log_config_get(NULL), -UMQ_ERR_EINVAL);
    umq_log_config_t lc = {.log_flag = UMQ_LOG_FLAG_FUNC | UMQ_LOG_FLAG_LEVEL, .func = capture_log, .level = UMQ_LOG_LEVEL_ERR};
    CHECK_EQ(umq_log_config_set(&lc), 0);
    umq_log_config_t got;
    CHECK_EQ(umq_log_config_get(&got), 0);
    CHECK(got.func == capture_log);
    CHECK_EQ(got.level, UMQ_LOG_LEVEL_ERR);
    lc.log_flag = 1u << 9;
    CHECK_EQ(umq_log_config_set(&lc), -UMQ_ERR_EINVAL);
    /* A failing call says why through the callback, naming the function. */
    log_lines = 0;
    CHECK_EQ(umq_destroy(12345), -UMQ_ERR_EINVAL);
    CHECK(log_lines >= 1);
    CHECK(strstr(last_log, "umq_destroy") != NULL);
    /* Rate limit: at most 2 lines per 10 s window. */
    umq_log_config_t rl = {.log_flag = UMQ_LOG_FLAG_RATE_LIMITED, .rate_limited = {.interval_ms = 10000, .num = 2}};
    CHECK_EQ(umq_log_config_set(&rl), 0);
    log_lines = 0;
    for (int i = 0; i < 5; i++)
        umq_destroy(999);
    CHECK_EQ(log_lines, 2);
    rl.rate_limited.num = 0;
    CHECK_EQ(umq_log_config_set(&rl), 0);
}

static void test_create_errors(void)
{
    errno = 0;
    CHECK_EQ(umq_create(NULL), 0);
    CHECK_EQ(errno, UMQ_ERR_EINVAL);
    umq_create_option_t o = test_option("bad", 8, UMQ_MODE_POLLING);
    strcpy(o.dev_info.ipv4.ip_addr, "300.1.1.1");
    CHECK_EQ(umq_create(&o), 0);
    o = test_option("bad", 0, UMQ_MODE_POLLING);
    CHECK_EQ(umq_create(&o), 0);
    o = test_option("bad", 8, UMQ_MODE_MAX);
    CHECK_EQ(umq_create(&o), 0);
    o = test_option("bad", 8, UMQ_MODE_POLLING);
    memset(o.name, 'x', sizeof(o.name));
    CHECK_EQ(umq_create(&o), 0);
    o = test_option("bad", 8, UMQ_MODE_POLLING);
    o.create_flag |= 1u << 20;
    CHECK_EQ(umq_create(&o), 0);
    /* Every trans mode and assign mode the reference examples use is accepted. */
    umq_trans_mode_t modes[] = {UMQ_TRANS_MODE_UB, UMQ_TRANS_MODE_IB, UMQ_TRANS_MODE_UB_PLUS, UMQ_TRANS_MODE_IB_PLUS, UMQ_TRANS_MODE_IPC};
    for (unsigned i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
        o = test_option("ok", 8, UMQ_MODE_POLLING);
        o.trans_mode = modes[i];
        uint64_t h = umq_create(&o);
        CHECK(h != 0);
        CHECK_EQ(umq_state_get(h), QUEUE_STATE_IDLE);
        CHECK_EQ(umq_destroy(h), 0);
        CHECK_EQ(umq_destroy(h), -UMQ_ERR_EINVAL);
    }
    o = test_option("v6", 8, UMQ_MODE_POLLING);
    o.dev_info.assign_mode = UMQ_DEV_ASSIGN_MODE_IPV6;
    strcpy(o.dev_info.ipv6.ip_addr, "::1");
    uint64_t h6 = umq_create(&o);
    CHECK(h6 != 0);
    umq_destroy(h6);
    o.dev_info.assign_mode = UMQ_DEV_ASSIGN_MODE_DEV;
    strcpy(o.dev_info.dev.dev_name, "udma0");
    h6 = umq_create(&o);
    CHECK(h6 != 0);
    umq_destroy(h6);
    errno = 0;
    CHECK_EQ(umq_state_get(0), QUEUE_STATE_MAX);
    CHECK_EQ(errno, UMQ_ERR_EINVAL);
}

static void test_bind_errors(void)
{
    umq_create_option_t oa = test_option("a", 8, UMQ_MODE_POLLING), ob = test_option("b", 8, UMQ_MODE_POLLING);
    uint64_t a = umq_create(&oa), b = umq_create(&ob);
    uint8_t info[512], junk[512];
    CHECK_EQ(umq_bind_info_get(a, info, 8), 0);
    CHECK_EQ(umq_bind_info_get(a, NULL, 512), 0);
    CHECK_EQ(umq_bind_info_get(777, info, 512), 0);
    uint32_t len = umq_bind_info_get(b, info, sizeof(info));
    CHECK(len > 0 && len <= 512);
    memset(junk, 0x5a, sizeof(junk));
    CHECK_EQ(umq_bind(a, junk, sizeof(junk)), -UMQ_ERR_EINVAL);
    CHECK_EQ(umq_bind(a, info, len - 1), -UMQ_ERR_EINVAL);
    CHECK_EQ(umq_bind(a, NULL, len), -UMQ_ERR_EINVAL);
    memcpy(junk, info, len);
    junk[30] ^= 1;
    CHECK_EQ(umq_bind(a, junk, len), -UMQ_ERR_EINVAL);
    uint8_t self[512];
    uint32_t self_len = umq_bind_info_get(a, self, sizeof(self));
    CHECK_EQ(umq_bind(a, self, self_len), -UMQ_ERR_EINVAL);
    CHECK_EQ(umq_state_get(a), QUEUE_STATE_IDLE);
    CHECK_EQ(umq_bind(a, info, len), 0);
    CHECK_EQ(umq_state_get(a), QUEUE_STATE_READY);
    CHECK_EQ(umq_bind(a, info, len), -UMQ_ERR_EEXIST);
    CHECK_EQ(umq_unbind(a), 0);
    CHECK_EQ(umq_unbind(a), -UMQ_ERR_EINVAL);
    CHECK_EQ(umq_state_get(a), QUEUE_STATE_IDLE);
    umq_destroy(b);
    /* Bind info of a destroyed queue is stale. */
    CHECK_EQ(umq_bind(a, info, len), -UMQ_ERR_EINVAL);
    umq_destroy(a);
}

static void test_send_recv(uint64_t a, uint64_t b)
{
    umq_buf_t *rx = umq_buf_alloc(256, 3, 0, NULL);
    CHECK(rx != NULL);
    /* A post that takes everything leaves bad_qbuf NULL, as the reference does, whatever it
     * held before. */
    umq_buf_t *bad = rx;
    CHECK_EQ(umq_post(b, rx, UMQ_IO_RX, &bad), 0);
    CHECK(bad == NULL);

    umq_buf_t *m = alloc_msg("hello, umq", UMQ_OPC_SEND, 0xc0ffee);
    bad = m;
    CHECK_EQ(umq_post(a, m, UMQ_IO_TX, &bad), 0);
    CHECK(bad == NULL);
    umq_buf_t *c[4];
    CHECK_EQ(test_poll_one(a, UMQ_IO_TX, c), 1);
    CHECK(c[0] == m);
    CHECK_EQ(c[0]->status, UMQ_BUF_SUCCESS);
    CHECK_EQ(((umq_buf_pro_t *)c[0]->qbuf_ext)->user_ctx, 0xc0ffee);
    CHECK_EQ(test_poll_one(b, UMQ_IO_RX, c), 1);
    CHECK_EQ(c[0]->data_size, 10);
    CHECK(memcmp(c[0]->buf_data, "hello, umq", 10) == 0);
    CHECK_EQ(c[0]->status, UMQ_BUF_SUCCESS);
    CHECK_EQ(c[0]->io_direction, UMQ_IO_RX);
    CHECK_EQ(c[0]->umqh, b);
    CHECK_EQ(((umq_buf_pro_t *)c[0]->qbuf_ext)->opcode, UMQ_OPC_SEND);
    umq_buf_free(c[0]);
    umq_buf_free(m);

    /* SEND_IMM carries the immediate, all 64 bits without flow control (bit 0 included), and
     * the sender's WR comes back as posted. */
    m = alloc_msg("imm", UMQ_OPC_SEND_IMM, 1);
    ((umq_buf_pro_t *)m->qbuf_ext)->imm_data = 0x8000001234567891ull;
    CHECK_EQ(umq_post(a, m, UMQ_IO_TX, &bad), 0);
    CHECK_EQ(test_poll_one(b, UMQ_IO_RX, c), 1);
    CHECK_EQ(((umq_buf_pro_t *)c[0]->qbuf_ext)->imm_data, 0x8000001234567891ull);
    CHECK_EQ(((umq_buf_pro_t *)c[0]->qbuf_ext)->opcode, UMQ_OPC_SEND_IMM);
    umq_buf_free(c[0]);
    CHECK_EQ(test_poll_one(a, UMQ_IO_TX, c), 1);
    CHECK(c[0] == m);
    CHECK_EQ(((umq_buf_pro_t *)c[0]->qbuf_ext)->opcode, UMQ_OPC_SEND_IMM);
    CHECK_EQ(((umq_buf_pro_t *)c[0]->qbuf_ext)->imm_data, 0x8000001234567891ull);
    umq_buf_free(c[0]);

    /* One WR gathered from three buffers: total_data_size on the first delimits it. */
    umq_buf_t *g = umq_buf_alloc(100, 3, 0, NULL);
    umq_buf_t *g2 = g->qbuf_next, *g3 = g2->qbuf_next;
    memset(g->buf_data, 'a', 100);
    memset(g2->buf_data, 'b', 100);
    memset(g3->buf_data, 'c', 50);
    g3->data_size = 50;
    g->total_data_size = 250;
    ((umq_buf_pro_t *)g->qbuf_ext)->opcode = UMQ_OPC_SEND;
    CHECK_EQ(umq_post(a, g, UMQ_IO_TX, &bad), 0);
    CHECK_EQ(test_poll_one(b, UMQ_IO_RX, c), 1);
    CHECK_EQ(c[0]->data_size, 250);
    CHECK(c[0]->buf_data[0] == 'a' && c[0]->buf_data[100] == 'b' && c[0]->buf_data[249] == 'c');
    umq_buf_free(c[0]);
    CHECK_EQ(test_poll_one(a, UMQ_IO_TX, c), 1);
    CHECK(c[0] == g && g->qbuf_next == g2);
    umq_buf_free(g);

    /* total_data_size that does not add up: refused, buffer still ours. */
    g = umq_buf_alloc(10, 2, 0, NULL);
    g->total_data_size = 15;
    ((umq_buf_pro_t *)g->qbuf_ext)->opcode = UMQ_OPC_SEND;
    bad = NULL;
    CHECK_EQ(umq_post(a, g, UMQ_IO_TX, &bad), -UMQ_ERR_EINVAL);
    CHECK(bad == g);
    g->total_data_size = 10;
    ((umq_buf_pro_t *)g->qbuf_ext)->opcode = 0x33;
    CHECK_EQ(umq_post(a, g, UMQ_IO_TX, &bad), -UMQ_ERR_EINVAL);
    CHECK(bad == g);
    umq_buf_free(g);

    /* Valid WRs before an invalid one: the whole call is refused, nothing is posted (as the
     * reference does), and the list is as it was. */
    g = umq_buf_alloc(10, 3, 0, NULL);
    umq_buf_t *g1 = g->qbuf_next, *g2b = g1->qbuf_next;
    for (umq_buf_t *p = g; p; p = p->qbuf_next)
        ((umq_buf_pro_t *)p->qbuf_ext)->opcode = UMQ_OPC_SEND;
    ((umq_buf_pro_t *)g2b->qbuf_ext)->opcode = 0x33;
    bad = NULL;
    CHECK_EQ(umq_post(a, g, UMQ_IO_TX, &bad), -UMQ_ERR_EINVAL);
    CHECK(bad == g);
    CHECK_EQ(umq_poll(a, UMQ_IO_TX, c, 4), 0);
    CHECK(g->qbuf_next == g1 && g1->qbuf_next == g2b && g2b->qbuf_next == NULL);
    umq_buf_free(g);
}

static void test_ordering_and_rnr(uint64_t a, uint64_t b)
{
    /* Messages sent before the receiver posts buffers wait (RNR) and arrive in order. */
    umq_buf_t *bad = NULL, *c[64];
    umq_buf_t *list = umq_buf_alloc(8, 10, 0, NULL), *p = list;
    for (int i = 0; p; i++, p = p->qbuf_next) {
        snprintf(p->buf_data, 9, "msg%05d", i % 100000);
        ((umq_buf_pro_t *)p->qbuf_ext)->opcode = UMQ_OPC_SEND;
    }
    CHECK_EQ(umq_post(a, list, UMQ_IO_TX, &bad), 0);
    CHECK_EQ(umq_poll(a, UMQ_IO_TX, c, 64), 0);
    umq_buf_t *rx = umq_buf_alloc(64, 10, 0, NULL);
    CHECK_EQ(umq_post(b, rx, UMQ_IO_RX, &bad), 0);
    int got = 0;
    while (got < 10) {
        int n = umq_poll(b, UMQ_IO_RX, c, 64);
        CHECK(n >= 0);
        for (int i = 0; i < n; i++, got++) {
            char want[16];
            snprintf(want, sizeof(want), "msg%05d", got % 100000);
            CHECK(memcmp(c[i]->buf_data, want, 8) == 0);
            umq_buf_free(c[i]);
        }
    }
    got = 0;
    while (got < 10) {
        int n = umq_poll(a, UMQ_IO_TX, c, 64);
        for (int i = 0; i < n; i++, got++) {
            CHECK_EQ(c[i]->status, UMQ_BUF_SUCCESS);
            umq_buf_free(c[i]);
        }
    }
}

static void test_batch_limits(uint64_t a, uint64_t b)
{
    umq_buf_t *bad = NULL, *c[4];
    /* 65 WRs: refused whole, nothing posted, all still the caller's. */
    umq_buf_t *l1 = umq_buf_alloc(8, 64, 0, NULL), *l2 = umq_buf_alloc(8, 1, 0, NULL), *p = l1;
    while (p->qbuf_next)
        p = p->qbuf_next;
    p->qbuf_next = l2;
    for (p = l1; p; p = p->qbuf_next)
        ((umq_buf_pro_t *)p->qbuf_ext)->opcode = UMQ_OPC_NOP;
    CHECK_EQ(umq_post(a, l1, UMQ_IO_TX, &bad), -UMQ_ERR_EINVAL);
    CHECK(bad == l1);
    CHECK_EQ(umq_poll(a, UMQ_IO_TX, c, 4), 0);
    CHECK_EQ(umq_post(b, l1, UMQ_IO_RX, &bad), -UMQ_ERR_EINVAL);
    CHECK(bad == l1);
    CHECK_EQ(umq_poll(b, UMQ_IO_RX, c, 4), 0);
    umq_buf_free(l1);

    /* Bad handle, NULL list, bad direction. */
    umq_buf_t *m = alloc_msg("x", UMQ_OPC_SEND, 0);
    bad = NULL;
    CHECK_EQ(umq_post(0x12345, m, UMQ_IO_TX, &bad), -UMQ_ERR_EINVAL);
    CHECK(bad == m);
    CHECK_EQ(umq_post(a, NULL, UMQ_IO_TX, &bad), -UMQ_ERR_EINVAL);
    CHECK_EQ(umq_post(a, m, UMQ_IO_ALL, &bad), -UMQ_ERR_EINVAL);
    CHECK_EQ(umq_post(a, m, 9, NULL), -UMQ_ERR_EINVAL);
    CHECK_EQ(umq_poll(a, 9, c, 4), -UMQ_ERR_EINVAL);
    CHECK_EQ(umq_poll(a, UMQ_IO_TX, NULL, 4), -UMQ_ERR_EINVAL);
    CHECK_EQ(umq_poll(a, UMQ_IO_TX, c, 0), -UMQ_ERR_EINVAL);
    CHECK_EQ(umq_poll(0, UMQ_IO_TX, c, 4), -UMQ_ERR_EINVAL);
    umq_buf_free(m);
}

static void test_depth_eagain(void)
{
    uint64_t a, b;
    test_pair(4, UMQ_MODE_POLLING, &a, &b);
    umq_buf_t *bad = NULL, *c[8];
    umq_buf_t *rx = umq_buf_alloc(16, 6, 0, NULL);
    CHECK_EQ(umq_post(b, rx, UMQ_IO_RX, &bad), -UMQ_ERR_EAGAIN);
    CHECK(bad != NULL && bad != rx);
    umq_buf_free(bad);
    umq_buf_t *tx = umq_buf_alloc(4, 6, 0, NULL);
    for (umq_buf_t *p = tx; p; p = p->qbuf_next)
        ((umq_buf_pro_t *)p->qbuf_ext)->opcode = UMQ_OPC_SEND;
    umq_buf_t *fifth = tx->qbuf_next->qbuf_next->qbuf_next->qbuf_next;
    CHECK_EQ(umq_post(a, tx, UMQ_IO_TX, &bad), -UMQ_ERR_EAGAIN);
    CHECK(bad == fifth);
    CHECK(fifth->qbuf_next != NULL);
    umq_buf_free(bad);
    CHECK_EQ(umq_poll(a, UMQ_IO_TX, c, 8), 4);
    for (int i = 0; i < 4; i++)
        umq_buf_free(c[i]);
    CHECK_EQ(umq_poll(b, UMQ_IO_RX, c, 8), 4);
    for (int i = 0; i < 4; i++)
        umq_buf_free(c[i]);
    umq_destroy(a);
    umq_destroy(b);
}

static void test_rdma(uint64_t a, uint64_t b)
{
    umq_buf_t *bad = NULL, *c[4];
    /* B exposes a buffer: its address, token_id and token_value go to A (here: directly). */
    umq_buf_t *target = umq_buf_alloc(64, 1, 0, NULL);
    memset(target->buf_data, '.', 64);
    umq_buf_t *w = alloc_msg("remote!", UMQ_OPC_WRITE, 7);
    umq_buf_pro_t *pro = (umq_buf_pro_t *)w->qbuf_ext;
    pro->remote_sge.addr = (uint64_t)(uintptr_t)(target->buf_data + 8);
    pro->remote_sge.length = 32;
    pro->remote_sge.token_id = target->token_id;
    pro->remote_sge.token_value = target->token_value;
    CHECK_EQ(umq_post(a, w, UMQ_IO_TX, &bad), 0);
    CHECK_EQ(test_poll_one(a, UMQ_IO_TX, c), 1);
    CHECK_EQ(c[0]->status, UMQ_BUF_SUCCESS);
    CHECK(memcmp(target->buf_data, "........remote!.", 16) == 0);

    /* Wrong token: remote access error, memory untouched. */
    pro->remote_sge.token_value ^= 0x10;
    memcpy(w->buf_data, "XXXXXXX", 7);
    CHECK_EQ(umq_post(a, w, UMQ_IO_TX, &bad), 0);
    CHECK_EQ(test_poll_one(a, UMQ_IO_TX, c), 1);
    CHECK_EQ(c[0]->status, UMQ_BUF_REM_ACCESS_ABORT_ERR);
    CHECK(memcmp(target->buf_data + 8, "remote!", 7) == 0);

    /* READ the remote bytes into a local buffer. */
    umq_buf_t *r = umq_buf_alloc(0, 1, 0, NULL);
    umq_buf_pro_t *rp = (umq_buf_pro_t *)r->qbuf_ext;
    rp->opcode = UMQ_OPC_READ;
    rp->remote_sge.addr = (uint64_t)(uintptr_t)target->buf_data;
    rp->remote_sge.length = 20;
    rp->remote_sge.token_id = target->token_id;
    rp->remote_sge.token_value = target->token_value;
    CHECK_EQ(umq_post(a, r, UMQ_IO_TX, &bad), 0);
    CHECK_EQ(test_poll_one(a, UMQ_IO_TX, c), 1);
    CHECK(c[0] == r);
    CHECK_EQ(r->status, UMQ_BUF_SUCCESS);
    CHECK_EQ(r->data_size, 20);
    CHECK(memcmp(r->buf_data, "........remote!.....", 20) == 0);

    /* WRITE_IMM: data lands in remote memory, the receiver gets a completion with the imm. */
    umq_buf_t *rx = umq_buf_alloc(64, 1, 0, NULL);
    CHECK_EQ(umq_post(b, rx, UMQ_IO_RX, &bad), 0);
    memcpy(w->buf_data, "IMMDATA", 7);
    pro->opcode = UMQ_OPC_WRITE_IMM;
    pro->imm_data = 42;
    pro->remote_sge.token_value = target->token_value;
    pro->remote_sge.addr = (uint64_t)(uintptr_t)target->buf_data;
    CHECK_EQ(umq_post(a, w, UMQ_IO_TX, &bad), 0);
    CHECK_EQ(test_poll_one(b, UMQ_IO_RX, c), 1);
    CHECK(c[0] == rx);
    CHECK_EQ(((umq_buf_pro_t *)rx->qbuf_ext)->imm_data, 42);
    CHECK_EQ(((umq_buf_pro_t *)rx->qbuf_ext)->opcode, UMQ_OPC_WRITE_IMM);
    CHECK(memcmp(target->buf_data, "IMMDATA", 7) == 0);
    CHECK_EQ(test_poll_one(a, UMQ_IO_TX, c), 1);

    /* NOP completes. */
    pro->opcode = UMQ_OPC_NOP;
    CHECK_EQ(umq_post(a, w, UMQ_IO_TX, &bad), 0);
    CHECK_EQ(test_poll_one(a, UMQ_IO_TX, c), 1);
    CHECK_EQ(c[0]->status, UMQ_BUF_SUCCESS);
    umq_buf_free(w);
    umq_buf_free(r);
    umq_buf_free(rx);
    umq_buf_free(target);
}

static void test_too_small_rx(uint64_t a, uint64_t b)
{
    umq_buf_t *bad = NULL, *c[2];
    umq_buf_t *rx = umq_buf_alloc(16, 1, 0, NULL);
    CHECK_EQ(umq_post(b, rx, UMQ_IO_RX, &bad), 0);
    umq_buf_t *big = umq_buf_alloc(20000, 1, 0, NULL);
    ((umq_buf_pro_t *)big->qbuf_ext)->opcode = UMQ_OPC_SEND;
    CHECK_EQ(umq_post(a, big, UMQ_IO_TX, &bad), 0);
    CHECK_EQ(test_poll_one(b, UMQ_IO_RX, c), 1);
    CHECK_EQ(c[0]->status, UMQ_BUF_LOC_LEN_ERR);
    CHECK_EQ(test_poll_one(a, UMQ_IO_TX, c), 1);
    CHECK_EQ(c[0]->status, UMQ_BUF_REM_OPERATION_ERR);
    umq_buf_free(rx);
    umq_buf_free(big);
}

/* umq_buf_headroom_reset of a list, as the reference does it: each message's first buffer gets
 * the new headroom and the message's total_data_size is laid out again over its buffers; a
 * reset that would make a message need more buffers is refused and changes nothing. */
static void headroom_reset_lays_messages_out_again(umq_alloc_option_t *opt)
{
    umq_buf_t *m = umq_buf_alloc(100, 3, 0, opt); /* headroom 32 */
    umq_buf_t *second = m->qbuf_next, *lone = second->qbuf_next;
    uint32_t cap = m->buf_size + m->headroom_size;
    /* m and second: one message filling m and 10 bytes of second; lone: a message of its own. */
    second->first_fragment = 0;
    m->data_size = m->buf_size;
    second->data_size = 10;
    m->total_data_size = m->buf_size + 10;
    CHECK_EQ(umq_buf_headroom_reset(m, 64), 0);
    CHECK_EQ(m->headroom_size, 64);
    CHECK_EQ(m->buf_size, cap - 64);
    CHECK_EQ(m->data_size, cap - 64);
    CHECK_EQ(second->data_size, 42);
    CHECK_EQ(second->headroom_size, 32); /* a later fragment keeps its own */
    CHECK_EQ(lone->headroom_size, 64);
    CHECK_EQ(lone->data_size, 100);

    /* A full one-buffer message with more headroom would need a second buffer. */
    lone->data_size = lone->total_data_size = lone->buf_size;
    umq_buf_t before = *m;
    CHECK_EQ(umq_buf_headroom_reset(m, 65), -UMQ_ERR_EINVAL);
    CHECK_EQ(memcmp(m, &before, sizeof(before)), 0);
    CHECK_EQ(lone->headroom_size, 64);

    /* A list that loops back on itself is refused, not walked forever. */
    lone->qbuf_next = second;
    CHECK_EQ(umq_buf_headroom_reset(m, 0), -UMQ_ERR_EINVAL);
    CHECK_EQ(m->headroom_size, 64);
    lone->qbuf_next = NULL;
    umq_buf_free(m);
}

static void test_buffers(void)
{
    CHECK(umq_buf_alloc(8, 0, 0, NULL) == NULL);
    CHECK(umq_buf_alloc(8, UMQ_BATCH_SIZE + 1, 0, NULL) == NULL);
    errno = 0;
    CHECK(umq_buf_alloc(UMQ_MAX_BUF_REQUEST_SIZE + 1, 1, 0, NULL) == NULL);
    CHECK_EQ(errno, UMQ_ERR_EINVAL);
    CHECK(umq_buf_alloc(8, 1, 0xdead, NULL) == NULL);
    umq_alloc_option_t opt = {.flag = UMQ_ALLOC_FLAG_HEAD_ROOM_SIZE, .headroom_size = 32};
    umq_buf_t *b = umq_buf_alloc(100, 2, 0, &opt);
    CHECK(b && b->qbuf_next && !b->qbuf_next->qbuf_next);
    CHECK_EQ(b->headroom_size, 32);
    CHECK_EQ(b->data_size, 100);
    CHECK(b->buf_size >= 100);
    CHECK(b->buf_data == (char *)b + 128 + 32); /* combine mode: data follows the header */
    CHECK(umq_data_to_head(b->buf_data + 50) == b);
    CHECK(umq_data_to_head((char *)&opt) == NULL);
    CHECK_EQ(umq_buf_headroom_reset(b, 0), 0);
    CHECK(b->buf_data == (char *)b + 128);
    CHECK_EQ(umq_buf_headroom_reset(b, 65535), -UMQ_ERR_EINVAL);
    CHECK_EQ(umq_buf_headroom_reset(NULL, 0), -UMQ_ERR_EINVAL);
    CHECK_EQ(b->qbuf_next->headroom_size, 0); /* the whole list, as the reference resets it */
    CHECK(b->qbuf_next->buf_data == (char *)b->qbuf_next + 128);
    headroom_reset_lays_messages_out_again(&opt);
    b->data_size = 3;
    CHECK_EQ(umq_buf_reset(b), 0);
    CHECK_EQ(b->headroom_size, 32);
    CHECK_EQ(b->data_size, 100);
    CHECK_EQ(umq_buf_reset(NULL), -UMQ_ERR_EINVAL);
    umq_buf_t *second = b->qbuf_next;
    CHECK_EQ(umq_buf_split(b, b), -UMQ_ERR_EINVAL);
    CHECK_EQ(umq_buf_split(b, (umq_buf_t *)&opt), -UMQ_ERR_EINVAL);
    CHECK_EQ(umq_buf_split(NULL, b), -UMQ_ERR_EINVAL);
    CHECK_EQ(umq_buf_split(b, second), 0);
    CHECK(b->qbuf_next == NULL);
    b->qbuf_next = second;
    /* break_and_free: frees the first message, returns the next. */
    CHECK(umq_buf_break_and_free(b) == second);
    CHECK(umq_buf_break_and_free(second) == NULL);
    CHECK(umq_buf_break_and_free(NULL) == NULL);
    /* Double free and foreign pointers are refused without corrupting the pool. */
    umq_buf_t *x = umq_buf_alloc(8, 1, 0, NULL);
    umq_buf_free(x);
    umq_buf_free(x);
    umq_buf_t fake;
    memset(&fake, 0, sizeof(fake));
    umq_buf_free(&fake);
    umq_buf_t *y = umq_buf_alloc(8, 2, 0, NULL);
    CHECK(y != y->qbuf_next);
    umq_buf_free(y);
    umq_buf_free(NULL);
}

static void test_interrupts(void)
{
    uint64_t a, b;
    test_pair(16, UMQ_MODE_INTERRUPT, &a, &b);
    umq_interrupt_option_t rx = {.flag = UMQ_INTERRUPT_FLAG_IO_DIRECTION, .direction = UMQ_IO_RX};
    umq_interrupt_option_t tx = {.flag = UMQ_INTERRUPT_FLAG_IO_DIRECTION, .direction = UMQ_IO_TX};
    umq_interrupt_option_t all = {.flag = UMQ_INTERRUPT_FLAG_IO_DIRECTION, .direction = UMQ_IO_ALL};
    umq_interrupt_option_t noflag = {.flag = 0, .direction = UMQ_IO_RX};
    CHECK_EQ(umq_interrupt_fd_get(b, NULL), UMQ_INVALID_FD);
    CHECK_EQ(umq_interrupt_fd_get(b, &all), UMQ_INVALID_FD);
    CHECK_EQ(umq_interrupt_fd_get(b, &noflag), UMQ_INVALID_FD);
    CHECK_EQ(umq_rearm_interrupt(b, false, &all), -UMQ_ERR_EINVAL);
    CHECK_EQ(umq_wait_interrupt(b, 0, NULL), -UMQ_ERR_EINVAL);
    CHECK_EQ(umq_wait_interrupt(99, 0, &rx), -UMQ_ERR_EINVAL);
    CHECK_EQ(umq_get_cq_event(b, &all), -UMQ_ERR_EINVAL);
    int fd = umq_interrupt_fd_get(b, &rx);
    CHECK(fd >= 0);
    CHECK(umq_interrupt_fd_get(b, &tx) >= 0 && umq_interrupt_fd_get(b, &tx) != fd);

    umq_buf_t *bad = NULL, *c[4];
    umq_buf_t *r = umq_buf_alloc(64, 2, 0, NULL);
    CHECK_EQ(umq_post(b, r, UMQ_IO_RX, &bad), 0);
    CHECK_EQ(umq_rearm_interrupt(b, false, &rx), 0);
    CHECK_EQ(umq_wait_interrupt(b, 0, &rx), 0); /* nothing yet */
    CHECK_EQ(umq_wait_interrupt(b, 20, &rx), 0);
    umq_buf_t *m = alloc_msg("wake", UMQ_OPC_SEND, 0);
    CHECK_EQ(umq_post(a, m, UMQ_IO_TX, &bad), 0);
    struct pollfd p = {.fd = fd, .events = POLLIN};
    CHECK_EQ(poll(&p, 1, 1000), 1);
    CHECK(umq_wait_interrupt(b, 1000, &rx) >= 1);
    umq_ack_interrupt(b, 1, &rx);
    CHECK_EQ(umq_poll(b, UMQ_IO_RX, c, 4), 1);
    CHECK(memcmp(c[0]->buf_data, "wake", 4) == 0);
    umq_buf_free(c[0]);
    /* Not re-armed: the next completion does not signal. */
    CHECK_EQ(test_poll_one(a, UMQ_IO_TX, c), 1);
    CHECK_EQ(umq_post(a, m, UMQ_IO_TX, &bad), 0);
    CHECK_EQ(umq_get_cq_event(b, &rx), 0);
    /* Re-arming with a completion already waiting signals at once (no lost wake-up). */
    CHECK_EQ(umq_rearm_interrupt(b, true, &rx), 0);
    CHECK(umq_get_cq_event(b, &rx) >= 1);
    CHECK_EQ(umq_poll(b, UMQ_IO_RX, c, 4), 1);
    umq_buf_free(c[0]);
    /* tx channel */
    CHECK_EQ(umq_rearm_interrupt(a, false, &tx), 0);
    CHECK(umq_wait_interrupt(a, 1000, &tx) >= 1);
    int n = umq_poll(a, UMQ_IO_TX, c, 4);
    CHECK(n >= 1);
    umq_buf_free(m);
    /* Polling-mode queues have no interrupt channel. */
    uint64_t pa, pb;
    test_pair(4, UMQ_MODE_POLLING, &pa, &pb);
    CHECK_EQ(umq_interrupt_fd_get(pa, &rx), UMQ_INVALID_FD);
    CHECK_EQ(umq_rearm_interrupt(pa, false, &rx), -UMQ_ERR_EINVAL);
    umq_destroy(pa);
    umq_destroy(pb);
    umq_destroy(a);
    umq_destroy(b);
}

static void test_dfx(uint64_t a, uint64_t b)
{
    umq_dfx_cmd_t cmd;
    umq_dfx_result_t res;
    memset(&cmd, 0, sizeof(cmd));
    cmd.module_id = UMQ_DFX_MODULE_STATS;
    cmd.stats_cmd_id = UMQ_STATS_CMD_CLEAR;
    umq_dfx_cmd_process(&cmd, &res);
    CHECK_EQ(res.err_code, 0);
    cmd.module_id = UMQ_DFX_MODULE_PERF;
    cmd.perf_cmd_id = UMQ_PERF_CMD_START;
    cmd.perf_in_parm.thresh_num = 2;
    cmd.perf_in_parm.thresh_array[0] = 1000;
    cmd.perf_in_parm.thresh_array[1] = 1000000;
    umq_dfx_cmd_process(&cmd, &res);
    CHECK_EQ(res.err_code, 0);

    umq_buf_t *bad = NULL, *c[8];
    umq_buf_t *rx = umq_buf_alloc(32, 3, 0, NULL);
    CHECK_EQ(umq_post(b, rx, UMQ_IO_RX, &bad), 0);
    for (int i = 0; i < 3; i++) {
        umq_buf_t *m = alloc_msg("stat", UMQ_OPC_SEND, 0);
        CHECK_EQ(umq_post(a, m, UMQ_IO_TX, &bad), 0);
        CHECK_EQ(test_poll_one(a, UMQ_IO_TX, c), 1);
        umq_buf_free(c[0]);
        CHECK_EQ(test_poll_one(b, UMQ_IO_RX, c), 1);
        umq_buf_free(c[0]);
    }
    cmd.module_id = UMQ_DFX_MODULE_STATS;
    cmd.stats_cmd_id = UMQ_STATS_CMD_GET_RESULT;
    umq_dfx_cmd_process(&cmd, &res);
    CHECK_EQ(res.err_code, 0);
    umq_stats_infos_t *s = res.stats_out_parm;
    CHECK(s != NULL);
    int found = 0;
    for (uint32_t i = 0; s && i < s->stats_info_num; i++) {
        if (s->stats_info[i].umqh == a) {
            CHECK_EQ(s->stats_info[i].stats[UMQ_STATS_TYPE_SEND], 3);
            found++;
        }
        if (s->stats_info[i].umqh == b) {
            CHECK_EQ(s->stats_info[i].stats[UMQ_STATS_TYPE_RECEIVE], 3);
            found++;
        }
    }
    CHECK_EQ(found, 2);
    cmd.module_id = UMQ_DFX_MODULE_PERF;
    cmd.perf_cmd_id = UMQ_PERF_CMD_GET_RESULT;
    umq_dfx_cmd_process(&cmd, &res);
    CHECK_EQ(res.err_code, 0);
    CHECK_EQ(res.perf_out_parm->perf_record_num, 1);
    umq_perf_record_t *rec = res.perf_out_parm->perf_record[0];
    CHECK_EQ(rec->type_record[UMQ_PERF_RECORD_POST_TX].cnt, 3);
    uint64_t sum = 0;
    for (int i = 0; i < 9; i++)
        sum += rec->type_record[UMQ_PERF_RECORD_POST_TX].bucket[i];
    CHECK_EQ(sum, 3);
    CHECK(rec->type_record[UMQ_PERF_RECORD_POST_TX].min <= rec->type_record[UMQ_PERF_RECORD_POST_TX].max);
    cmd.perf_cmd_id = UMQ_PERF_CMD_STOP;
    umq_dfx_cmd_process(&cmd, &res);
    cmd.module_id = 9;
    umq_dfx_cmd_process(&cmd, &res);
    CHECK_EQ(res.err_code, -UMQ_ERR_EINVAL);
    umq_dfx_cmd_process(NULL, &res);
    umq_dfx_cmd_process(&cmd, NULL);
}

static void test_misc(uint64_t a)
{
    umq_trans_info_t ti;
    memset(&ti, 0, sizeof(ti));
    ti.trans_mode = UMQ_TRANS_MODE_UB;
    ti.dev_info.assign_mode = UMQ_DEV_ASSIGN_MODE_IPV4;
    strcpy(ti.dev_info.ipv4.ip_addr, "127.0.0.1");
    CHECK_EQ(umq_dev_add(&ti), 0);
    CHECK_EQ(umq_dev_add(NULL), -UMQ_ERR_EINVAL);
    ti.trans_mode = 99;
    CHECK_EQ(umq_dev_add(&ti), -UMQ_ERR_EINVAL);
    ti.trans_mode = UMQ_TRANS_MODE_UB;

    umq_route_t route;
    memset(&route, 0, sizeof(route));
    route.src.in4.addr = 1;
    route.dst.in4.addr = 2;
    umq_route_list_t list;
    memset(&list, 0xff, sizeof(list));
    CHECK_EQ(umq_get_route_list(&route, UMQ_TRANS_MODE_UB, &list), 0);
    CHECK_EQ(list.len, 1);
    CHECK_EQ(list.buf[0].dst.in4.addr, 2);
    CHECK_EQ(list.buf[0].flag.bs.rtp, 1);
    CHECK_EQ(umq_get_route_list(NULL, UMQ_TRANS_MODE_UB, &list), -UMQ_ERR_EINVAL);
    CHECK_EQ(umq_get_route_list(&route, UMQ_TRANS_MODE_MAX, &list), -UMQ_ERR_EINVAL);

    umq_flowcontrol_stats_t st;
    umq_user_ctl_in_t in = {.opcode = UMQ_OPCODE_FLOW_CONTROL_STATS_QUERY};
    umq_user_ctl_out_t out = {.addr = (uint64_t)(uintptr_t)&st, .len = sizeof(st)};
    CHECK_EQ(umq_user_ctl(a, &in, &out), 0);
    out.len = sizeof(st) - 1;
    CHECK_EQ(umq_user_ctl(a, &in, &out), -UMQ_ERR_EINVAL);
    out.len = sizeof(st);
    out.addr = 0;
    CHECK_EQ(umq_user_ctl(a, &in, &out), -UMQ_ERR_EINVAL);
    out.addr = (uint64_t)(uintptr_t)&st;
    in.opcode = 77;
    CHECK_EQ(umq_user_ctl(a, &in, &out), -UMQ_ERR_EINVAL);
    in.opcode = UMQ_OPCODE_FLOW_CONTROL_STATS_QUERY;
    CHECK_EQ(umq_user_ctl(a, NULL, &out), -UMQ_ERR_EINVAL);
    CHECK_EQ(umq_user_ctl(a, &in, NULL), -UMQ_ERR_EINVAL);
    CHECK_EQ(umq_user_ctl(42, &in, &out), -UMQ_ERR_EINVAL);

    umq_async_event_t ev;
    CHECK(umq_async_event_fd_get(&ti) >= 0);
    CHECK_EQ(umq_async_event_fd_get(NULL), UMQ_INVALID_FD);
    CHECK_EQ(umq_get_async_event(NULL, &ev), -UMQ_ERR_EINVAL);
    CHECK_EQ(umq_get_async_event(&ti, NULL), -UMQ_ERR_EINVAL);
    umq_ack_async_event(NULL);
}

/* The async event fd, the events raised before taken and acknowledged. */
static int quiet_event_fd(umq_trans_info_t *ti)
{
    memset(ti, 0, sizeof(*ti));
    int efd = umq_async_event_fd_get(ti);
    umq_async_event_t ev;
    while (umq_get_async_event(ti, &ev) == 0)
        umq_ack_async_event(&ev);
    return efd;
}

static void test_rnr_timeout_and_events(void)
{
    /* UMQ_RNR_TIMEOUT_MS=200 is set before umq_init in main. */
    uint64_t a, b;
    test_pair(8, UMQ_MODE_POLLING, &a, &b);
    umq_trans_info_t ti;
    int efd = quiet_event_fd(&ti);
    umq_async_event_t ev;
    umq_buf_t *bad = NULL, *c[4];
    umq_buf_t *m = umq_buf_alloc(4, 2, 0, NULL);
    ((umq_buf_pro_t *)m->qbuf_ext)->opcode = UMQ_OPC_SEND;
    ((umq_buf_pro_t *)m->qbuf_next->qbuf_ext)->opcode = UMQ_OPC_SEND;
    CHECK_EQ(umq_post(a, m, UMQ_IO_TX, &bad), 0);
    int n = 0;
    for (int i = 0; i < 300 && n == 0; i++) {
        usleep(10000);
        n = umq_poll(a, UMQ_IO_TX, c, 4);
    }
    CHECK_EQ(n, 2);
    CHECK_EQ(c[0]->status, UMQ_BUF_RNR_RETRY_CNT_EXC_ERR);
    CHECK_EQ(c[1]->status, UMQ_BUF_WR_FLUSH_ERR);
    CHECK_EQ(umq_state_get(a), QUEUE_STATE_ERR);
    struct pollfd p = {.fd = efd, .events = POLLIN};
    CHECK_EQ(poll(&p, 1, 1000), 1);
    CHECK_EQ(umq_get_async_event(&ti, &ev), 0);
    CHECK_EQ(ev.event_type, UMQ_EVENT_QH_ERR);
    CHECK_EQ(ev.element.umqh, a);
    umq_ack_async_event(&ev);
    CHECK_EQ(umq_get_async_event(&ti, &ev), -UMQ_ERR_EAGAIN);
    /* Posting on a queue in the error state fails cleanly; the buffers stay ours. */
    CHECK_EQ(umq_post(a, m, UMQ_IO_TX, &bad), -UMQ_ERR_EINVAL);
    CHECK(bad == m);
    umq_buf_free(m);
    umq_destroy(a);
    umq_destroy(b);
}

static void test_rnr_timeout_without_polling(void)
{
    /* The sender's WR waits for a receive buffer its peer never posts, and the application
     * does not poll: at the RNR timeout (200 ms, set in main) the queue still goes to the error
     * state, raises its event and holds the WR completed in error, as a NIC's retry limit
     * would. Nothing but the progress engine runs the timeout here. */
    uint64_t a, b;
    test_pair(8, UMQ_MODE_POLLING, &a, &b);
    umq_trans_info_t ti;
    int efd = quiet_event_fd(&ti);
    umq_async_event_t ev;
    umq_buf_t *bad = NULL, *c[4];
    umq_buf_t *m = umq_buf_alloc(4, 1, 0, NULL);
    ((umq_buf_pro_t *)m->qbuf_ext)->opcode = UMQ_OPC_SEND;
    CHECK_EQ(umq_post(a, m, UMQ_IO_TX, &bad), 0);
    /* Events of queues of the tests before (a peer unbound under them) may come first. */
    int seen = 0;
    for (int waited = 0; waited < 50 && !seen; waited++) {
        struct pollfd p = {.fd = efd, .events = POLLIN};
        poll(&p, 1, 100);
        while (umq_get_async_event(&ti, &ev) == 0) {
            seen |= ev.event_type == UMQ_EVENT_QH_ERR && ev.element.umqh == a;
            umq_ack_async_event(&ev);
        }
    }
    CHECK(seen);
    CHECK_EQ(umq_state_get(a), QUEUE_STATE_ERR);
    CHECK_EQ(umq_poll(a, UMQ_IO_TX, c, 4), 1);
    CHECK_EQ(c[0], m);
    CHECK_EQ(c[0]->status, UMQ_BUF_RNR_RETRY_CNT_EXC_ERR);
    umq_buf_free(m);
    umq_destroy(a);
    umq_destroy(b);
}

/* A log callback may call the API. Destroying the queue whose call is logging would free it
 * under that call: refused with EBUSY, and the queue still works afterwards. */
static uint64_t victim;
static int destroy_in_callback = 1;
static void destroying_log(int level, char *msg)
{
    (void)level;
    (void)msg;
    if (victim) {
        uint64_t v = victim;
        victim = 0;
        destroy_in_callback = umq_destroy(v);
    }
}

static void test_destroy_from_callback(void)
{
    uint64_t a, b;
    test_pair(8, UMQ_MODE_POLLING, &a, &b);
    umq_log_config_t lc = {.log_flag = UMQ_LOG_FLAG_FUNC, .func = destroying_log};
    CHECK_EQ(umq_log_config_set(&lc), 0);
    umq_buf_t *c[1];
    victim = a;
    CHECK_EQ(umq_poll(a, (umq_io_direction_t)99, c, 1), -UMQ_ERR_EINVAL);
    CHECK_EQ(destroy_in_callback, -UMQ_ERR_EBUSY);
    CHECK(umq_state_get(a) != QUEUE_STATE_MAX);
    /* Another queue may be destroyed from a callback. */
    victim = b;
    CHECK_EQ(umq_poll(a, (umq_io_direction_t)99, c, 1), -UMQ_ERR_EINVAL);
    CHECK_EQ(destroy_in_callback, 0);
    CHECK_EQ(umq_state_get(b), QUEUE_STATE_MAX);
    lc.func = capture_log;
    CHECK_EQ(umq_log_config_set(&lc), 0);
    CHECK_EQ(umq_destroy(a), 0);
}

static void test_unbind_flush(void)
{
    uint64_t a, b;
    test_pair(8, UMQ_MODE_POLLING, &a, &b);
    umq_buf_t *bad = NULL, *c[8];
    umq_buf_t *rx = umq_buf_alloc(32, 3, 0, NULL);
    CHECK_EQ(umq_post(b, rx, UMQ_IO_RX, &bad), 0);
    CHECK_EQ(umq_unbind(b), 0);
    CHECK_EQ(umq_poll(b, UMQ_IO_RX, c, 8), 3);
    for (int i = 0; i < 3; i++) {
        CHECK_EQ(c[i]->status, UMQ_BUF_WR_FLUSH_ERR);
        umq_buf_free(c[i]);
    }
    CHECK_EQ(umq_state_get(a), QUEUE_STATE_ERR);
    umq_destroy(a);
    umq_destroy(b);
    CHECK_EQ(umq_state_get(a), QUEUE_STATE_MAX);
}

int main(void)
{
    setenv("UMQ_RNR_TIMEOUT_MS", "200", 1);
    setenv("UMQ_LOG_LEVEL", "crit", 1);
    test_before_init();
    test_init_and_log();
    test_create_errors();
    test_bind_errors();
    uint64_t a, b;
    test_pair(64, UMQ_MODE_POLLING, &a, &b);
    test_send_recv(a, b);
    test_ordering_and_rnr(a, b);
    test_batch_limits(a, b);
    test_rdma(a, b);
    test_too_small_rx(a, b);
    test_dfx(a, b);
    test_misc(a);
    test_buffers();
    test_depth_eagain();
    test_interrupts();
    test_rnr_timeout_and_events();
    test_rnr_timeout_without_polling();
    test_unbind_flush();
    test_destroy_from_callback();
    umq_destroy(a);
    umq_destroy(b);
    umq_uninit();
    /* init works again after uninit */
    umq_init_cfg_t *cfg = calloc(1, sizeof(*cfg));
    cfg->feature = UMQ_FEATURE_API_PRO;
    CHECK_EQ(umq_init(cfg), 0);
    free(cfg);
    umq_uninit();
    TEST_DONE("test_api");
}
