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
    uint64_t from; /* a received message's sender's word (umqf_sign), 0 when it carried none */
};

/* How umqf_rma and umqu_rma move bytes: a READ (else a WRITE), and for a WRITE whether it may
 * complete once sent (a later piece of the same WR follows it) rather than once placed. */
#define UMQF_RMA_READ 1
#define UMQF_RMA_SENT 2

#endif
