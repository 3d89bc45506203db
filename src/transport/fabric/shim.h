/* What the network provider's two engines (libfabric in shim.c, UCX in ucx.c) share with the
 * Rust side: a completion, flattened. Rust never sees an engine's own struct. */
#ifndef UMQ_FABRIC_SHIM_H
#define UMQ_FABRIC_SHIM_H

#include <stdint.h>

struct umqf_cqe {
    void *ctx; /* which buffer: the context its operation was posted with */
    uint64_t len;
    int32_t err;    /* 0, or a positive FI_E* code (errno values below 256) */
    int32_t prov_errno;
};

#endif
