/* Rate-limited queues (pacing, umq_ext.h) through the C API: a limited queue's messages arrive
 * whole and in order, one completion each, their immediates and flow control as without a
 * limit; the stats count the packets of at most PMTU bytes the pacer granted, and over shared
 * memory or the network the packets the provider put on the wire, the same number (none to a
 * queue of this process, where there is no wire); bad settings are refused with the
 * documented codes and change nothing. Rates on a real clock are checked by
 * python/tests/test_pacing.py. Runs on the provider UMQ_PROVIDER forces (loopback by default). */
#include "util.h"
#include "umq_ext.h"
#include <unistd.h>

#define SIZE 5000 /* five packets of 1 KiB (the last short), two of 4 KiB */
#define COUNT 40

static int ctl(uint64_t h, uint32_t opcode, uint64_t value)
{
    umq_user_ctl_in_t in = {.addr = value, .opcode = opcode};
    umq_user_ctl_out_t out = {0};
    return umq_user_ctl(h, &in, &out);
}

static umq_ext_pacing_stats_t pacing(uint64_t h)
{
    umq_ext_pacing_stats_t s;
    memset(&s, 0xff, sizeof(s));
    CHECK_EQ(test_ctl(h, UMQ_EXT_OPCODE_PACING_STATS, NULL, 0, &s, sizeof(s)), 0);
    return s;
}

static uint64_t wire_packets(uint64_t h, uint32_t *transport)
{
    umq_ext_transport_stats_t s;
    CHECK_EQ(test_ctl(h, UMQ_EXT_OPCODE_TRANSPORT_STATS, NULL, 0, &s, sizeof(s)), 0);
    *transport = s.transport;
    return s.paced_packets;
}

static uint8_t byte_at(int msg, uint32_t i)
{
    return (uint8_t)(msg * 31 + i * 7);
}

static umq_buf_t *message(uint64_t h, int i)
{
    umq_buf_t *b = umq_buf_alloc(SIZE, 1, h, NULL);
    if (!b)
        exit(2);
    for (uint32_t k = 0; k < SIZE; k++)
        ((uint8_t *)b->buf_data)[k] = byte_at(i, k);
    umq_buf_pro_t *p = (umq_buf_pro_t *)b->qbuf_ext;
    memset(p, 0, sizeof(*p));
    p->opcode = i % 2 ? UMQ_OPC_SEND_IMM : UMQ_OPC_SEND;
    p->imm_data = (uint64_t)i << 8;
    return b;
}

static void post_rx(uint64_t h, int n)
{
    umq_buf_t *head = umq_buf_alloc(SIZE, (uint32_t)n, h, NULL), *bad = NULL;
    CHECK(head != NULL);
    CHECK_EQ(umq_post(h, head, UMQ_IO_RX, &bad), 0);
}

/* Sends COUNT messages at `pmtu` and checks what arrives and what the pacer counted. */
static void stream(uint64_t a, uint64_t b, uint32_t pmtu, uint64_t packets_before)
{
    CHECK_EQ(ctl(a, UMQ_EXT_OPCODE_PACING_PMTU, pmtu), 0);
    uint32_t transport;
    uint64_t wire_before = wire_packets(a, &transport);
    int sent = 0, received = 0, completed = 0;
    umq_buf_t *got[16], *bad = NULL;
    while (received < COUNT) {
        if (sent < COUNT) {
            umq_buf_t *m = message(a, sent);
            int rc = umq_post(a, m, UMQ_IO_TX, &bad);
            if (rc == 0)
                sent++;
            else {
                CHECK_EQ(rc, -UMQ_ERR_EAGAIN);
                umq_buf_free(m);
            }
        }
        int n = umq_poll(a, UMQ_IO_TX, got, 16);
        for (int i = 0; i < n; i++) {
            CHECK_EQ(got[i]->status, UMQ_BUF_SUCCESS);
            umq_buf_free(got[i]);
        }
        completed += n > 0 ? n : 0;
        n = umq_poll(b, UMQ_IO_RX, got, 16);
        for (int i = 0; i < n; i++) {
            umq_buf_t *r = got[i];
            if (r->status == UMQ_BUF_FLOW_CONTROL_UPDATE && r->total_data_size == 0) {
                r->qbuf_next = NULL;
                CHECK_EQ(umq_post(b, r, UMQ_IO_RX, &bad), 0);
                continue;
            }
            umq_buf_pro_t *p = (umq_buf_pro_t *)r->qbuf_ext;
            CHECK_EQ(r->total_data_size, SIZE);
            CHECK_EQ(p->opcode, received % 2 ? UMQ_OPC_SEND_IMM : UMQ_OPC_SEND);
            if (received % 2)
                CHECK_EQ(p->imm_data, (uint64_t)received << 8);
            int intact = 1;
            for (uint32_t k = 0; k < SIZE; k++)
                intact &= ((uint8_t *)r->buf_data)[k] == byte_at(received, k);
            CHECK(intact);
            received++;
            umq_buf_free(r);
            post_rx(b, 1);
        }
    }
    while (completed < COUNT) {
        int n = umq_poll(a, UMQ_IO_TX, got, 16);
        for (int i = 0; i < n; i++)
            umq_buf_free(got[i]);
        completed += n > 0 ? n : 0;
    }
    uint32_t per_message = (SIZE + pmtu - 1) / pmtu;
    uint64_t want = (uint64_t)COUNT * per_message;
    /* The pacer counts a grant's packets just after its queue has sent them, so the last
     * grant's may still be on their way into the count when the last completion is seen: wait
     * for them (a second at most), then the count must be exact. */
    umq_ext_pacing_stats_t s = pacing(a);
    for (int i = 0; i < 1000 && s.packets - packets_before < want; i++) {
        usleep(1000);
        s = pacing(a);
    }
    CHECK_EQ(s.packets - packets_before, want);
    uint64_t on_wire = wire_packets(a, &transport) - wire_before;
    (void)transport; /* every provider, loopback too, puts the granted packets on its wire */
    CHECK_EQ(on_wire, want);
    CHECK_EQ(s.pmtu, pmtu);
    CHECK_EQ(s.held_wr, 0);
}

int main(void)
{
    setenv("UMQ_LOG_LEVEL", "crit", 1);
    umq_init_cfg_t *cfg = calloc(1, sizeof(*cfg));
    cfg->buf_mode = UMQ_BUF_SPLIT;
    cfg->feature = UMQ_FEATURE_API_PRO | UMQ_FEATURE_ENABLE_FLOW_CONTROL;
    cfg->flow_control.initial_window = 8;
    CHECK_EQ(umq_init(cfg), 0);
    free(cfg);
    CHECK_EQ(sizeof(umq_ext_pacing_stats_t), 56);

    uint64_t a, b;
    test_pair(64, UMQ_MODE_POLLING, &a, &b);
    post_rx(b, 16);

    /* Unlimited by default, PMTU 1024, 1024 ticks a second. */
    umq_ext_pacing_stats_t s = pacing(a);
    CHECK_EQ(s.rate_bps, 0);
    CHECK_EQ(s.pmtu, 1024);
    CHECK_EQ(s.ticks_per_s, 1024);

    /* Bad settings: refused, nothing changed. */
    CHECK_EQ(ctl(a, UMQ_EXT_OPCODE_PACING_PMTU, 0), -UMQ_ERR_EINVAL);
    CHECK_EQ(ctl(a, UMQ_EXT_OPCODE_PACING_PMTU, 4097), -UMQ_ERR_EINVAL);
    CHECK_EQ(ctl(a, UMQ_EXT_OPCODE_PACING_TICK_RATE, 0), -UMQ_ERR_EINVAL);
    CHECK_EQ(ctl(a, UMQ_EXT_OPCODE_PACING_TICK_RATE, 1000001), -UMQ_ERR_EINVAL);
    CHECK_EQ(ctl(12345, UMQ_EXT_OPCODE_PACING_RATE, 1000000), -UMQ_ERR_EINVAL);
    umq_ext_pacing_stats_t small;
    umq_user_ctl_in_t in = {.opcode = UMQ_EXT_OPCODE_PACING_STATS};
    umq_user_ctl_out_t out = {.addr = (uint64_t)(uintptr_t)&small, .len = sizeof(small) - 8};
    CHECK_EQ(umq_user_ctl(a, &in, &out), -UMQ_ERR_EINVAL);
    CHECK_EQ(pacing(a).pmtu, 1024);

    /* 8 MiB/s. */
    CHECK_EQ(ctl(a, UMQ_EXT_OPCODE_PACING_RATE, 8ull << 23), 0);
    CHECK_EQ(ctl(a, UMQ_EXT_OPCODE_PACING_TICK_RATE, 2048), -UMQ_ERR_EBUSY);
    CHECK_EQ(pacing(a).rate_bps, 8ull << 23);
    stream(a, b, 1024, 0);
    uint64_t packets = pacing(a).packets;
    stream(a, b, 4096, packets);
    CHECK(pacing(a).ticks_parked > 0);

    /* Unlimited again: the tick rate may change now. */
    CHECK_EQ(ctl(a, UMQ_EXT_OPCODE_PACING_RATE, 0), 0);
    CHECK_EQ(ctl(a, UMQ_EXT_OPCODE_PACING_TICK_RATE, 2048), 0);
    CHECK_EQ(pacing(a).ticks_per_s, 2048);

    umq_destroy(a);
    umq_destroy(b);
    umq_uninit();
    TEST_DONE("pacing");
}
