/* Small helpers shared by the C tests. */
#ifndef UMQ_TEST_UTIL_H
#define UMQ_TEST_UTIL_H
#define _DEFAULT_SOURCE 1
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "umq_api.h"
#include "umq_pro_api.h"

static int test_failures;
static int test_checks;
#define CHECK(cond) do { test_checks++; if (!(cond)) { fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond); test_failures++; } } while (0)
#define CHECK_EQ(a, b) do { long long _a = (long long)(a), _b = (long long)(b); test_checks++; \
    if (_a != _b) { fprintf(stderr, "FAIL %s:%d: %s == %s (%lld != %lld)\n", __FILE__, __LINE__, #a, #b, _a, _b); test_failures++; } } while (0)
#define TEST_DONE(name) do { printf("%s: %d checks, %d failed\n", name, test_checks, test_failures); return test_failures ? 1 : 0; } while (0)

static inline umq_create_option_t test_option(const char *name, uint32_t depth, umq_queue_mode_t mode)
{
    umq_create_option_t o;
    memset(&o, 0, sizeof(o));
    o.trans_mode = UMQ_TRANS_MODE_UB;
    o.dev_info.assign_mode = UMQ_DEV_ASSIGN_MODE_IPV4;
    strcpy(o.dev_info.ipv4.ip_addr, "127.0.0.1");
    snprintf(o.name, sizeof(o.name), "%s", name);
    o.create_flag = UMQ_CREATE_FLAG_RX_DEPTH | UMQ_CREATE_FLAG_TX_DEPTH | UMQ_CREATE_FLAG_QUEUE_MODE;
    o.rx_depth = depth;
    o.tx_depth = depth;
    o.mode = mode;
    return o;
}

/* Creates two queues and binds them to each other. */
static inline void test_pair(uint32_t depth, umq_queue_mode_t mode, uint64_t *a, uint64_t *b)
{
    umq_create_option_t oa = test_option("a", depth, mode), ob = test_option("b", depth, mode);
    *a = umq_create(&oa);
    *b = umq_create(&ob);
    uint8_t ia[512], ib[512];
    uint32_t la = umq_bind_info_get(*a, ia, sizeof(ia)), lb = umq_bind_info_get(*b, ib, sizeof(ib));
    if (!*a || !*b || !la || !lb || umq_bind(*a, ib, lb) || umq_bind(*b, ia, la)) {
        fprintf(stderr, "test_pair: setup failed\n");
        exit(2);
    }
}

/* umq_user_ctl with `in` (in.addr, in.len) and `out` (out.addr, out.len) naming the buffers
 * given, or 0 for those not given; its return code. */
static inline int test_ctl(uint64_t h, uint32_t opcode, const void *in, uint32_t in_len, void *out,
                           uint32_t out_len)
{
    umq_user_ctl_in_t i = {.addr = (uint64_t)(uintptr_t)in, .len = in_len, .opcode = opcode};
    umq_user_ctl_out_t o = {.addr = (uint64_t)(uintptr_t)out, .len = out_len};
    return umq_user_ctl(h, &i, &o);
}

static inline int test_poll_one(uint64_t h, umq_io_direction_t dir, umq_buf_t **out)
{
    for (int i = 0; i < 1000000; i++) {
        int n = umq_poll(h, dir, out, 1);
        if (n != 0)
            return n;
    }
    return 0;
}
#endif
