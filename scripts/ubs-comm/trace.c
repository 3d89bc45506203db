/* An LD_PRELOAD tracer for the ubs-comm run (scripts/ubs-comm/run.sh): one line on stderr per
 * queue created, per send posted and per buffer polled, so the run can show what UBSocket did
 * with the library. Built against include/umq-2026. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include "umq_api.h"
#include "umq_pro_api.h"

/* The library's own `name`, found once. */
#define REAL(name) \
    static __typeof__(name) *real; \
    if (!real) { \
        real = (__typeof__(name) *)dlsym(RTLD_NEXT, #name); \
    }

uint64_t umq_create(umq_create_option_t *o)
{
    REAL(umq_create);
    uint64_t q = real(o);
    fprintf(stderr, "TRACE create name='%s' flag=%#x -> %#lx\n", o->name, o->create_flag, (unsigned long)q);
    return q;
}

int umq_post(uint64_t umqh, umq_buf_t *b, umq_io_option_t *o, umq_buf_t **bad)
{
    REAL(umq_post);
    uint32_t size = b != NULL ? b->total_data_size : 0;
    int r = real(umqh, b, o, bad);
    if (o != NULL && o->io_direction == UMQ_IO_TX) {
        fprintf(stderr, "TRACE post q=%#lx bytes=%u -> %d\n", (unsigned long)umqh, size, r);
    }
    return r;
}

int umq_poll(uint64_t umqh, umq_io_option_t *o, umq_buf_t **buf, uint32_t n)
{
    REAL(umq_poll);
    int r = real(umqh, o, buf, n);
    for (int i = 0; i < r; i++) {
        umq_buf_pro_t *p = (umq_buf_pro_t *)buf[i]->qbuf_ext;
        fprintf(stderr, "TRACE poll q=%#lx dir=%s tp_flag=%d tp=%u status=%d bytes=%u ctx=%lu\n",
                (unsigned long)umqh, o->io_direction == UMQ_IO_TX ? "tx" : "rx",
                (o->flag & UMQ_IO_OPTION_FLAG_TP_HANDLE_IDX) != 0, o->tp_handle_idx, buf[i]->status,
                buf[i]->total_data_size, (unsigned long)p->umq_ctx);
    }
    return r;
}

uint32_t umq_transport_pool_resource_create(uint64_t q, umq_tp_resource_create_option_t *o)
{
    REAL(umq_transport_pool_resource_create);
    static int made;
    uint32_t idx = real(q, o);
    if (idx == UINT32_MAX) {
        fprintf(stderr, "TRACE tp_resource_create failed after %d\n", made);
    } else if (++made % 100 == 0) {
        fprintf(stderr, "TRACE tp_resource_create %d made\n", made);
    }
    return idx;
}
