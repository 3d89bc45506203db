/* Receive-window flow control through the C API (docs/FLOW_CONTROL.md): the initial window and
 * the IDLE -> READY step, partial acceptance with EAGAIN and bad_qbuf, refused WRs untouched,
 * piggybacked and standalone announcements (status 128), 63-bit user immediates, recovery when
 * the send queue refuses a WR that carried credit, queued-send mode, stall reports, the nine
 * statistics and their identities, queue-room queries, and bind agreement.
 *
 * Run with argument "atomic" for use_atomic_window = true; the expectations are the same. */
#include "util.h"
#include "umq_ext.h"
#include "umq_fi.h"
#include <poll.h>
#include <unistd.h>

/* Fills `out` (len bytes, poisoned first so a field the library skips shows) through a
 * umq_user_ctl query opcode. */
static void query(uint64_t h, uint32_t opcode, void *out, uint32_t len)
{
    memset(out, 0xff, len);
    CHECK_EQ(test_ctl(h, opcode, NULL, 0, out, len), 0);
}

static umq_flowcontrol_stats_t stats(uint64_t h)
{
    umq_flowcontrol_stats_t s;
    query(h, UMQ_OPCODE_FLOW_CONTROL_STATS_QUERY, &s, sizeof(s));
    return s;
}

static umq_ext_flow_control_stats_t ext(uint64_t h)
{
    umq_ext_flow_control_stats_t s;
    query(h, UMQ_EXT_OPCODE_FLOW_CONTROL_EXT_STATS, &s, sizeof(s));
    return s;
}

static uint32_t transport_of(uint64_t h)
{
    umq_ext_transport_stats_t s;
    query(h, UMQ_EXT_OPCODE_TRANSPORT_STATS, &s, sizeof(s));
    return s.transport;
}

static int ctl(uint64_t h, uint32_t opcode, uint64_t value)
{
    umq_user_ctl_in_t in = {.addr = value, .opcode = opcode};
    umq_user_ctl_out_t out = {0};
    return umq_user_ctl(h, &in, &out);
}

/* The three identities of the spec, at a quiescent point of the pair: both sides have run
 * progress (umq_notify), so a window update in flight over shared memory has landed. */
static void check_identities(uint64_t a, uint64_t b)
{
    umq_notify(a);
    umq_notify(b);
    umq_notify(a);
    umq_flowcontrol_stats_t sa = stats(a), sb = stats(b);
    CHECK_EQ(sa.remote_rx_window, sa.total_remote_rx_received - sa.total_remote_rx_consumed);
    CHECK_EQ(sb.remote_rx_window, sb.total_remote_rx_received - sb.total_remote_rx_consumed);
    CHECK_EQ(sa.local_rx_posted, sa.total_local_rx_posted - sa.total_local_rx_notified);
    CHECK_EQ(sb.local_rx_posted, sb.total_local_rx_posted - sb.total_local_rx_notified);
    CHECK_EQ(sa.total_local_rx_notified, sb.total_remote_rx_received);
    CHECK_EQ(sb.total_local_rx_notified, sa.total_remote_rx_received);
}

static umq_buf_pro_t *pro(umq_buf_t *b)
{
    return (umq_buf_pro_t *)b->qbuf_ext;
}

/* A chain of `n` one-buffer WRs with text "<tag>-<i>". */
static umq_buf_t *sends(const char *tag, int n, umq_opcode_t op)
{
    umq_buf_t *head = umq_buf_alloc(64, (uint32_t)n, 0, NULL), *b = head;
    for (int i = 0; i < n; i++, b = b->qbuf_next) {
        int len = snprintf(b->buf_data, 64, "%s-%d", tag, i);
        b->data_size = (uint32_t)len;
        b->total_data_size = (uint32_t)len;
        memset(b->qbuf_ext, 0, sizeof(b->qbuf_ext));
        pro(b)->opcode = op;
    }
    return head;
}

static umq_buf_t *rx_bufs(int n)
{
    return umq_buf_alloc(64, (uint32_t)n, 0, NULL);
}

static int post_rx(uint64_t h, umq_buf_t *list)
{
    umq_buf_t *bad = NULL;
    return umq_post(h, list, UMQ_IO_RX, &bad);
}

/* Polls exactly `n` buffers in direction `dir` into out[]. */
static int poll_n(uint64_t h, umq_io_direction_t dir, umq_buf_t **out, int n)
{
    int got = 0;
    for (int spin = 0; spin < 100000 && got < n; spin++) {
        int r = umq_poll(h, dir, out + got, (uint32_t)(n - got));
        if (r < 0)
            return r;
        got += r;
    }
    return got;
}

/* Chains polled buffers back into one list (for reposting). */
static umq_buf_t *chain(umq_buf_t **v, int n)
{
    for (int i = 0; i < n; i++)
        v[i]->qbuf_next = i + 1 < n ? v[i + 1] : NULL;
    return v[0];
}

static uint32_t fnv1a(const uint8_t *p, size_t n)
{
    uint32_t h = 0x811c9dc5u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x01000193u;
    return h;
}

static void test_bind_agreement(uint64_t b)
{
    uint8_t info[512];
    uint32_t len = umq_bind_info_get(b, info, sizeof(info));
    CHECK(len >= 76);
    umq_create_option_t o = test_option("agree", 16, UMQ_MODE_POLLING);
    uint64_t c = umq_create(&o);
    for (int field = 10; field <= 11; field++) {
        uint8_t forged[512];
        memcpy(forged, info, len);
        forged[field] = field == 10 ? 0 : 2; /* flow control off / protocol version 2 */
        uint32_t sum = fnv1a(forged, len - 4);
        memcpy(forged + len - 4, &sum, 4);
        CHECK_EQ(umq_bind(c, forged, len), -UMQ_ERR_EINVAL);
    }
    CHECK_EQ(umq_state_get(c), QUEUE_STATE_IDLE);
    /* Unbound: room queries report a bad state. */
    struct fid_ep *ep = umq_fi_ep_get(c);
    CHECK(ep != NULL);
    CHECK_EQ(fi_tx_size_left(ep), -258);
    CHECK_EQ(fi_rx_size_left(ep), -258);
    CHECK_EQ(umq_tx_size_left(c), -258);
    CHECK_EQ(umq_destroy(c), 0);
    CHECK_EQ(fi_tx_size_left(ep), -22); /* stale endpoint */
}

static void test_bad_input(uint64_t a)
{
    umq_ext_flow_control_stats_t e;
    umq_user_ctl_in_t in = {.opcode = UMQ_EXT_OPCODE_FLOW_CONTROL_EXT_STATS};
    umq_user_ctl_out_t out = {.addr = (uint64_t)(uintptr_t)&e, .len = sizeof(e) - 8};
    CHECK_EQ(umq_user_ctl(a, &in, &out), -UMQ_ERR_EINVAL);
    out.len = sizeof(umq_flowcontrol_stats_t);
    in.opcode = UMQ_OPCODE_FLOW_CONTROL_STATS_QUERY;
    out.len = sizeof(umq_flowcontrol_stats_t) + 8;
    CHECK_EQ(umq_user_ctl(a, &in, &out), -UMQ_ERR_EINVAL);
    CHECK_EQ(ctl(a, UMQ_EXT_OPCODE_FLOW_CONTROL_QUEUED_MODE, 2), -UMQ_ERR_EINVAL);
    CHECK_EQ(ctl(a, UMQ_EXT_OPCODE_FLOW_CONTROL_STALL_TIMEOUT, 0), -UMQ_ERR_EINVAL);
    CHECK_EQ(ctl(a, 0x554d00ffu, 0), -UMQ_ERR_EINVAL);
    CHECK_EQ(ctl(12345, UMQ_EXT_OPCODE_FLOW_CONTROL_QUEUED_MODE, 1), -UMQ_ERR_EINVAL);
    CHECK_EQ(fi_tx_size_left(NULL), -22);
    CHECK_EQ(fi_rx_size_left(NULL), -22);
    long foreign[16] = {0};
    CHECK_EQ(fi_tx_size_left((struct fid_ep *)foreign), -22);
    errno = 0;
    CHECK(umq_fi_ep_get(0) == NULL);
    CHECK_EQ(errno, UMQ_ERR_EINVAL);
    CHECK_EQ(umq_tx_size_left(999), -22);
    CHECK_EQ(umq_rx_size_left(999), -22);
}

/* A batch mixing a plain SEND with user immediates: every user immediate, and only those,
 * loses bit 0, whatever its place in the batch. */
static void test_immediates_in_one_batch(void)
{
    uint64_t a, b;
    test_pair(16, UMQ_MODE_POLLING, &a, &b);
    umq_buf_t *bad = NULL, *got[4];
    CHECK_EQ(post_rx(a, rx_bufs(8)), 0);
    CHECK_EQ(post_rx(b, rx_bufs(8)), 0);
    umq_buf_t *batch = sends("c", 1, UMQ_OPC_SEND);
    umq_buf_t *imms = sends("i", 2, UMQ_OPC_SEND_IMM);
    pro(imms)->imm_data = UINT64_MAX;
    pro(imms->qbuf_next)->imm_data = 7;
    batch->qbuf_next = imms;
    CHECK_EQ(umq_post(a, batch, UMQ_IO_TX, &bad), 0);
    CHECK_EQ(poll_n(a, UMQ_IO_TX, got, 3), 3);
    for (int i = 0; i < 3; i++)
        umq_buf_free(got[i]);
    CHECK_EQ(poll_n(b, UMQ_IO_RX, got, 3), 3);
    CHECK_EQ(pro(got[0])->opcode, UMQ_OPC_SEND);
    CHECK_EQ(pro(got[0])->imm_data, 0);
    CHECK(got[0]->total_data_size == 3 && memcmp(got[0]->buf_data, "c-0", 3) == 0);
    CHECK_EQ(pro(got[1])->opcode, UMQ_OPC_SEND_IMM);
    CHECK_EQ(pro(got[1])->imm_data, UINT64_MAX - 1);
    CHECK_EQ(pro(got[2])->opcode, UMQ_OPC_SEND_IMM);
    CHECK_EQ(pro(got[2])->imm_data, 6);
    for (int i = 0; i < 3; i++)
        umq_buf_free(got[i]);
    CHECK_EQ(umq_unbind(a), 0);
    CHECK_EQ(umq_unbind(b), 0);
    CHECK_EQ(umq_destroy(a), 0);
    CHECK_EQ(umq_destroy(b), 0);
}

/* Partial credit in a batch that mixes WRs needing credit with WRs that do not: a window of four
 * against NOP, SEND, NOP, SEND, ... (five SENDs) lets through everything before the fifth SEND,
 * NOPs included, and bad_qbuf is that SEND, untouched. */
static void test_partial_credit_in_a_mixed_batch(void)
{
    uint64_t a, b;
    test_pair(16, UMQ_MODE_POLLING, &a, &b);
    umq_buf_t *bad = NULL, *got[16];
    CHECK_EQ(post_rx(b, rx_bufs(4)), 0);
    umq_notify(a);
    CHECK_EQ(umq_state_get(a), QUEUE_STATE_READY);
    umq_buf_t *batch = sends("x", 10, UMQ_OPC_SEND), *last = NULL;
    int i = 0;
    for (umq_buf_t *w = batch; w != NULL; w = w->qbuf_next, i++) {
        if (i % 2 == 0)
            pro(w)->opcode = UMQ_OPC_NOP;
        last = w;
    }
    umq_flowcontrol_stats_t before = stats(a);
    CHECK_EQ(umq_post(a, batch, UMQ_IO_TX, &bad), -UMQ_ERR_EAGAIN);
    CHECK(bad == last);
    CHECK_EQ(pro(last)->opcode, UMQ_OPC_SEND);
    CHECK(last->qbuf_next == NULL && strcmp(last->buf_data, "x-9") == 0);
    umq_flowcontrol_stats_t after = stats(a);
    CHECK_EQ(after.total_remote_rx_consumed - before.total_remote_rx_consumed, 4);
    CHECK_EQ(after.total_flow_controlled_wr - before.total_flow_controlled_wr, 1);
    CHECK_EQ(after.remote_rx_window, 0);
    CHECK_EQ(poll_n(a, UMQ_IO_TX, got, 9), 9);
    for (i = 0; i < 9; i++) {
        CHECK_EQ(pro(got[i])->opcode, i % 2 ? UMQ_OPC_SEND : UMQ_OPC_NOP);
        umq_buf_free(got[i]);
    }
    CHECK_EQ(poll_n(b, UMQ_IO_RX, got, 4), 4);
    for (i = 0; i < 4; i++) {
        char want[8];
        snprintf(want, sizeof(want), "x-%d", 2 * i + 1);
        CHECK(got[i]->total_data_size == 3 && memcmp(got[i]->buf_data, want, 3) == 0);
        umq_buf_free(got[i]);
    }
    umq_buf_free(last);
    CHECK_EQ(umq_unbind(a), 0);
    CHECK_EQ(umq_unbind(b), 0);
    CHECK_EQ(umq_destroy(a), 0);
    CHECK_EQ(umq_destroy(b), 0);
}

int main(int argc, char **argv)
{
    int atomic = argc > 1 && strcmp(argv[1], "atomic") == 0;
    setenv("UMQ_LOG_LEVEL", "crit", 1);
    umq_init_cfg_t *cfg = calloc(1, sizeof(*cfg));
    cfg->buf_mode = UMQ_BUF_SPLIT;
    cfg->feature = UMQ_FEATURE_API_PRO | UMQ_FEATURE_ENABLE_FLOW_CONTROL;
    cfg->flow_control.initial_window = 4;
    cfg->flow_control.notify_interval = 2;
    cfg->flow_control.use_atomic_window = atomic;
    CHECK_EQ(umq_init(cfg), 0);
    free(cfg);
    CHECK_EQ(sizeof(umq_ext_flow_control_stats_t), 96);

    uint64_t a, b;
    test_pair(16, UMQ_MODE_POLLING, &a, &b);
    umq_buf_t *bad = NULL, *got[32];

    /* The run's premises: the window flavour asked for, and the transport UMQ_PROVIDER forces
     * (the "_over_shm" runs) or loopback, the in-process default. */
    CHECK_EQ(ext(a).atomic_window, atomic);
    CHECK_EQ(ext(b).atomic_window, atomic);
    const char *provider = getenv("UMQ_PROVIDER");
    uint32_t want = provider && strcmp(provider, "shm") == 0 ? UMQ_EXT_TRANSPORT_SHM : UMQ_EXT_TRANSPORT_LOOPBACK;
    CHECK_EQ(transport_of(a), want);
    CHECK_EQ(transport_of(b), want);

    /* 1. No receive buffer at the peer yet: IDLE, and a SEND is refused whole. */
    CHECK_EQ(umq_state_get(a), QUEUE_STATE_IDLE);
    umq_buf_t *m0 = sends("early", 1, UMQ_OPC_SEND);
    CHECK_EQ(umq_post(a, m0, UMQ_IO_TX, &bad), -UMQ_ERR_EAGAIN);
    CHECK(bad == m0);
    CHECK_EQ(pro(m0)->opcode, UMQ_OPC_SEND);
    CHECK(strncmp(m0->buf_data, "early-0", 7) == 0);
    CHECK_EQ(stats(a).total_flow_controlled_wr, 1);
    CHECK_EQ(umq_tx_size_left(a), 0);
    CHECK_EQ(umq_rx_size_left(a), 16);
    umq_buf_free(m0);

    /* 2. The initial window is published when B has posted initial_window buffers. */
    CHECK_EQ(post_rx(b, rx_bufs(3)), 0);
    CHECK_EQ(umq_state_get(a), QUEUE_STATE_IDLE);
    CHECK_EQ(post_rx(b, rx_bufs(1)), 0);
    CHECK_EQ(umq_state_get(a), QUEUE_STATE_READY);
    umq_flowcontrol_stats_t sa = stats(a), sb = stats(b);
    CHECK_EQ(sa.remote_rx_window, 4);
    CHECK_EQ(sa.total_remote_rx_received, 4);
    CHECK_EQ(sb.local_rx_posted, 0);
    CHECK_EQ(sb.total_local_rx_posted, 4);
    CHECK_EQ(sb.total_local_rx_notified, 4);
    struct fid_ep *ep = umq_fi_ep_get(a);
    CHECK_EQ(fi_tx_size_left(ep), 4);
    CHECK_EQ(fi_rx_size_left(ep), 16);
    CHECK_EQ(umq_rx_size_left(b), 12);

    /* 3. Six SENDs against a window of four: four go, bad_qbuf is the fifth, the rest untouched. */
    umq_buf_t *six = sends("m", 6, UMQ_OPC_SEND), *fifth = six->qbuf_next->qbuf_next->qbuf_next->qbuf_next;
    umq_buf_t *sixth = fifth->qbuf_next;
    CHECK_EQ(umq_post(a, six, UMQ_IO_TX, &bad), -UMQ_ERR_EAGAIN);
    CHECK(bad == fifth);
    CHECK(fifth->qbuf_next == sixth && sixth->qbuf_next == NULL);
    CHECK_EQ(pro(fifth)->opcode, UMQ_OPC_SEND);
    CHECK(strcmp(fifth->buf_data, "m-4") == 0 && strcmp(sixth->buf_data, "m-5") == 0);
    sa = stats(a);
    CHECK_EQ(sa.total_remote_rx_consumed, 4);
    CHECK_EQ(sa.remote_rx_window, 0);
    CHECK_EQ(sa.total_flow_controlled_wr, 3);
    CHECK_EQ(poll_n(a, UMQ_IO_TX, got, 4), 4);
    for (int i = 0; i < 4; i++)
        CHECK_EQ(got[i]->status, UMQ_BUF_SUCCESS);
    CHECK_EQ(poll_n(b, UMQ_IO_RX, got, 4), 4);
    for (int i = 0; i < 4; i++) {
        char want[32];
        snprintf(want, sizeof(want), "m-%d", i);
        CHECK_EQ(got[i]->status, UMQ_BUF_SUCCESS);
        CHECK_EQ(got[i]->total_data_size, strlen(want));
        CHECK(memcmp(got[i]->buf_data, want, strlen(want)) == 0);
    }
    umq_buf_free(fifth);

    /* 4. NOP needs no credit. */
    umq_buf_t *nop = sends("nop", 1, UMQ_OPC_NOP);
    CHECK_EQ(umq_post(a, nop, UMQ_IO_TX, &bad), 0);
    CHECK_EQ(poll_n(a, UMQ_IO_TX, &nop, 1), 1);
    umq_buf_free(nop);

    /* 5. B reposts the four: A has no credit left, so B announces at once. One buffer stays
     * back as the landing zone for A's standalone updates (control budget 16/16 = 1); A has
     * posted nothing, so the announcement goes through B's readable area only. */
    CHECK_EQ(post_rx(b, chain(got, 4)), 0);
    sa = stats(a);
    sb = stats(b);
    CHECK_EQ(sa.remote_rx_window, 3);
    CHECK_EQ(sa.total_remote_rx_received, 7);
    CHECK_EQ(sb.local_rx_posted, 1);
    CHECK_EQ(sb.total_local_rx_posted, 8);
    CHECK_EQ(sb.total_local_rx_notified, 7);
    umq_ext_flow_control_stats_t eb = ext(b);
    CHECK_EQ(eb.area_only, 1);
    CHECK_EQ(eb.standalone, 0);
    CHECK_EQ(eb.ctrl_budget, 1);
    CHECK_EQ(eb.initial_window, 4);
    CHECK_EQ(eb.notify_interval, 2);
    CHECK_EQ(umq_tx_size_left(a), 3);
    check_identities(a, b);

    /* 6. A posts its own receive buffers: initial window 4 for B, then a control reserve of 1
     * and two more, which makes a piggyback due on A's next SEND. */
    CHECK_EQ(post_rx(a, rx_bufs(4)), 0);
    CHECK_EQ(umq_state_get(b), QUEUE_STATE_READY);
    CHECK_EQ(post_rx(a, rx_bufs(3)), 0);
    umq_buf_t *p = sends("piggy", 1, UMQ_OPC_SEND);
    CHECK_EQ(umq_post(a, p, UMQ_IO_TX, &bad), 0);
    CHECK_EQ(poll_n(a, UMQ_IO_TX, got, 1), 1);
    CHECK(got[0] == p);
    CHECK_EQ(pro(p)->opcode, UMQ_OPC_SEND); /* the carrier goes back as the SEND it was */
    CHECK_EQ(pro(p)->imm_data, 0);
    umq_buf_free(p);
    CHECK_EQ(poll_n(b, UMQ_IO_RX, got, 1), 1);
    CHECK_EQ(got[0]->status, UMQ_BUF_FLOW_CONTROL_UPDATE);
    CHECK_EQ(pro(got[0])->opcode, UMQ_OPC_SEND);
    CHECK_EQ(pro(got[0])->imm_data, 0);
    CHECK_EQ(got[0]->total_data_size, 7);
    CHECK(memcmp(got[0]->buf_data, "piggy-0", 7) == 0);
    umq_buf_t *b_polled[4];
    b_polled[0] = got[0];
    CHECK_EQ(stats(b).remote_rx_window, 6);
    CHECK_EQ(ext(a).piggybacked, 1);
    CHECK_EQ(stats(a).local_rx_posted, 1);
    check_identities(a, b);

    /* 7. User immediates keep 63 bits: bit 0 is cleared on send. */
    umq_buf_t *imm = sends("imm", 1, UMQ_OPC_SEND_IMM);
    pro(imm)->imm_data = UINT64_MAX;
    CHECK_EQ(umq_post(b, imm, UMQ_IO_TX, &bad), 0);
    CHECK_EQ(poll_n(b, UMQ_IO_TX, got, 1), 1);
    umq_buf_free(imm);
    imm = sends("imm6", 1, UMQ_OPC_SEND_IMM);
    pro(imm)->imm_data = 6;
    CHECK_EQ(umq_post(a, imm, UMQ_IO_TX, &bad), 0);
    CHECK_EQ(poll_n(a, UMQ_IO_TX, got, 1), 1);
    umq_buf_free(imm);
    CHECK_EQ(poll_n(b, UMQ_IO_RX, got, 1), 1);
    CHECK_EQ(got[0]->status, UMQ_BUF_SUCCESS);
    CHECK_EQ(pro(got[0])->opcode, UMQ_OPC_SEND_IMM);
    CHECK_EQ(pro(got[0])->imm_data, 6);
    b_polled[1] = got[0];

    /* 8. B reposts two: A's credit is low, so B sends a standalone update into the buffer A
     * reserved for it. A sees it as a zero-length receive with status 128. */
    CHECK_EQ(post_rx(b, chain(b_polled, 2)), 0);
    CHECK_EQ(ext(b).standalone, 1);
    CHECK_EQ(poll_n(a, UMQ_IO_RX, got, 2), 2);
    CHECK_EQ(got[0]->status, UMQ_BUF_SUCCESS);
    CHECK_EQ(pro(got[0])->imm_data, UINT64_MAX - 1);
    CHECK_EQ(got[1]->status, UMQ_BUF_FLOW_CONTROL_UPDATE);
    CHECK_EQ(got[1]->total_data_size, 0);
    sa = stats(a);
    CHECK_EQ(sa.remote_rx_window, 3);
    CHECK_EQ(sa.local_rx_posted, 0);
    check_identities(a, b);

    /* 9. The send queue refuses a WR that would have carried an announcement: its credit and
     * the announcement go back, and the WR is exactly as the caller left it. */
    CHECK_EQ(post_rx(a, chain(got, 2)), 0);
    CHECK_EQ(post_rx(a, rx_bufs(1)), 0);
    umq_buf_t *nops = sends("fill", 16, UMQ_OPC_NOP);
    CHECK_EQ(umq_post(a, nops, UMQ_IO_TX, &bad), 0);
    CHECK_EQ(umq_tx_size_left(a), 0);
    umq_flowcontrol_stats_t before = stats(a);
    umq_buf_t *carrier = sends("carrier", 1, UMQ_OPC_SEND);
    pro(carrier)->imm_data = 0x1234;
    CHECK_EQ(umq_post(a, carrier, UMQ_IO_TX, &bad), -UMQ_ERR_EAGAIN);
    CHECK(bad == carrier);
    CHECK_EQ(pro(carrier)->opcode, UMQ_OPC_SEND);
    CHECK_EQ(pro(carrier)->imm_data, 0x1234);
    umq_flowcontrol_stats_t after = stats(a);
    CHECK(memcmp(&before, &after, sizeof(before)) == 0);
    CHECK_EQ(poll_n(a, UMQ_IO_TX, got, 16), 16);
    umq_buf_free(nops);
    CHECK_EQ(umq_tx_size_left(a), 3);
    CHECK_EQ(umq_post(a, carrier, UMQ_IO_TX, &bad), 0);
    CHECK_EQ(poll_n(a, UMQ_IO_TX, got, 1), 1);
    umq_buf_free(carrier);
    CHECK_EQ(poll_n(b, UMQ_IO_RX, got, 1), 1);
    CHECK_EQ(got[0]->status, UMQ_BUF_FLOW_CONTROL_UPDATE);
    CHECK(memcmp(got[0]->buf_data, "carrier-0", 9) == 0);
    CHECK_EQ(post_rx(b, got[0]), 0);
    check_identities(a, b);

    /* 10. size_left is a promise: that many single posts all succeed. */
    int64_t n = umq_tx_size_left(a);
    CHECK(n > 0);
    for (int64_t i = 0; i < n; i++) {
        umq_buf_t *s = sends("promise", 1, UMQ_OPC_SEND);
        CHECK_EQ(umq_post(a, s, UMQ_IO_TX, &bad), 0);
    }
    CHECK_EQ(poll_n(a, UMQ_IO_TX, got, (int)n), n);
    for (int64_t i = 0; i < n; i++)
        umq_buf_free(got[i]);
    CHECK_EQ(poll_n(b, UMQ_IO_RX, got, (int)n), n);
    CHECK_EQ(post_rx(b, chain(got, (int)n)), 0);
    check_identities(a, b);

    /* 11. Queued mode: sends beyond the window wait, in order, and go as credit comes back. */
    CHECK_EQ(ctl(a, UMQ_EXT_OPCODE_FLOW_CONTROL_QUEUED_MODE, 1), 0);
    CHECK_EQ(ext(a).queued_mode, 1);
    int64_t window = (int64_t)stats(a).remote_rx_window;
    umq_buf_t *q = sends("queued", 12, UMQ_OPC_SEND);
    CHECK_EQ(umq_post(a, q, UMQ_IO_TX, &bad), 0);
    CHECK_EQ(ext(a).queued_wr, 12 - window);
    CHECK_EQ(umq_tx_size_left(a), 4); /* 16 slots, 12 in use */
    int received = 0, sent = 0;
    for (int round = 0; round < 100 && received < 12; round++) {
        int r = umq_poll(b, UMQ_IO_RX, got, 32);
        for (int i = 0; i < r; i++) {
            char want[32];
            snprintf(want, sizeof(want), "queued-%d", received + i);
            CHECK(memcmp(got[i]->buf_data, want, strlen(want)) == 0);
        }
        if (r > 0)
            CHECK_EQ(post_rx(b, chain(got, r)), 0);
        received += r;
        int t = umq_poll(a, UMQ_IO_TX, got, 32);
        for (int i = 0; i < t; i++)
            umq_buf_free(got[i]);
        sent += t;
    }
    CHECK_EQ(received, 12);
    sent += poll_n(a, UMQ_IO_TX, got, 12 - sent);
    CHECK_EQ(sent, 12);
    CHECK_EQ(ext(a).queued_wr, 0);
    CHECK_EQ(ctl(a, UMQ_EXT_OPCODE_FLOW_CONTROL_QUEUED_MODE, 0), 0);
    check_identities(a, b);

    /* 12. A peer that returns no credit is reported once the stall timeout passes. */
    umq_trans_info_t ti;
    memset(&ti, 0, sizeof(ti));
    umq_async_event_t ev;
    while (umq_get_async_event(&ti, &ev) == 0)
        ;
    CHECK_EQ(ctl(a, UMQ_EXT_OPCODE_FLOW_CONTROL_STALL_TIMEOUT, 5), 0);
    umq_buf_t *drain = sends("drain", 16, UMQ_OPC_SEND);
    int rc = umq_post(a, drain, UMQ_IO_TX, &bad);
    CHECK_EQ(rc, -UMQ_ERR_EAGAIN);
    umq_buf_t *stuck = bad;
    int done = poll_n(a, UMQ_IO_TX, got, 16);
    CHECK(done > 0);
    CHECK_EQ(ext(a).credit_stalls, 0);
    usleep(20000);
    CHECK_EQ(umq_post(a, stuck, UMQ_IO_TX, &bad), -UMQ_ERR_EAGAIN);
    CHECK(bad == stuck);
    CHECK_EQ(ext(a).credit_stalls, 1);
    CHECK_EQ(umq_get_async_event(&ti, &ev), 0);
    CHECK_EQ(ev.event_type, UMQ_EVENT_QH_LIMIT);
    CHECK_EQ(ev.element.umqh, a);
    umq_buf_free(stuck);
    for (int i = 0; i < done; i++)
        umq_buf_free(got[i]);
    done = poll_n(b, UMQ_IO_RX, got, 32);
    if (done > 0)
        CHECK_EQ(post_rx(b, chain(got, done)), 0);
    check_identities(a, b);

    CHECK_EQ(ext(a).rx_without_buffer, 0);
    CHECK_EQ(ext(b).rx_without_buffer, 0);
    test_bad_input(a);
    test_bind_agreement(b);
    test_immediates_in_one_batch();
    test_partial_credit_in_a_mixed_batch();
    CHECK_EQ(umq_unbind(a), 0);
    CHECK_EQ(umq_tx_size_left(a), -258);
    umq_uninit();
    TEST_DONE(atomic ? "flow (atomic window)" : "flow (plain window)");
}
