/* Small helpers shared by the July 2026 C tests (the abi-2026 build, include/umq-2026). */
#ifndef UMQ_TEST_UTIL_2026_H
#define UMQ_TEST_UTIL_2026_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "umq_api.h"
#include "umq_pro_api.h"

static int failures, checks;
#define CHECK(cond) do { checks++; if (!(cond)) { fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond); failures++; } } while (0)
#define CHECK_EQ(a, b) do { long long _a = (long long)(a), _b = (long long)(b); checks++; \
    if (_a != _b) { fprintf(stderr, "FAIL %s:%d: %s == %s (%lld != %lld)\n", __FILE__, __LINE__, #a, #b, _a, _b); failures++; } } while (0)

static umq_io_option_t tx = {.io_direction = UMQ_IO_TX};
static umq_io_option_t rx = {.io_direction = UMQ_IO_RX};

/* Names the host's loopback interface, EID index 0: the device every machine has. */
static inline void name_lo(umq_dev_assign_t *d)
{
    memset(d, 0, sizeof(*d));
    d->assign_mode = UMQ_DEV_ASSIGN_MODE_DEV;
    strcpy(d->dev.dev_name, "lo");
    d->dev.eid_idx = 0;
}

/* A zeroed init configuration with one UB entry on the loopback interface and `feature` set;
 * the caller adds its knobs, calls umq_init and frees it. */
static inline umq_init_cfg_t *init_cfg_lo(uint32_t feature)
{
    umq_init_cfg_t *cfg = calloc(1, sizeof(*cfg));
    cfg->feature = feature;
    cfg->trans_info_num = 1;
    cfg->trans_info[0].trans_mode = UMQ_TRANS_MODE_UB;
    name_lo(&cfg->trans_info[0].dev_info);
    return cfg;
}

/* A zeroed UB create option on the loopback interface with `name` and `create_flag`; the
 * caller sets the fields the flags enable. */
static inline umq_create_option_t option_lo(const char *name, uint32_t create_flag)
{
    umq_create_option_t o;
    memset(&o, 0, sizeof(o));
    o.trans_mode = UMQ_TRANS_MODE_UB;
    name_lo(&o.dev_info);
    snprintf(o.name, sizeof(o.name), "%s", name);
    o.create_flag = create_flag;
    return o;
}

/* Binds two queues of this process to each other. */
static inline void bind_pair(uint64_t a, uint64_t b)
{
    uint8_t ia[512], ib[512];
    uint32_t la = umq_bind_info_get(a, ia, sizeof(ia)), lb = umq_bind_info_get(b, ib, sizeof(ib));
    CHECK(la > 0 && lb > 0);
    CHECK_EQ(umq_bind(a, ib, lb), 0);
    CHECK_EQ(umq_bind(b, ia, la), 0);
}
#endif
