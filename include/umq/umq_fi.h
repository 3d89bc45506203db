/* libfabric-style queue-room queries on UMQ queues.
 *
 * umq_fi_ep_get() returns an endpoint whose leading layout is libfabric 1.x struct fid_ep, so
 * libfabric's own inline fi_tx_size_left()/fi_rx_size_left() work on it. Without libfabric,
 * the functions below (exported by libumq.so) do the same. Include <rdma/fi_endpoint.h>, if you
 * use it, before this header: its inline definitions then take precedence and ours are not
 * declared.
 *
 * Returns: a lower bound on the operations that can be posted now without EAGAIN (tx counts
 * free send-queue slots and, with flow control, the credit window; rx counts free receive
 * slots); -FI_EINVAL (-22) for a NULL or foreign endpoint; -FI_EOPBADSTATE (-258) for a queue
 * that is not bound. */
#ifndef UMQ_FI_H
#define UMQ_FI_H

#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

struct fid_ep;

/* The endpoint of a queue, valid until the process ends (it reports -FI_EINVAL once the queue
 * is destroyed); NULL with errno UMQ_ERR_EINVAL for a bad handle. */
struct fid_ep *umq_fi_ep_get(uint64_t umqh);

#ifndef FI_ENDPOINT_H
ssize_t fi_tx_size_left(struct fid_ep *ep);
ssize_t fi_rx_size_left(struct fid_ep *ep);
#endif

#ifdef __cplusplus
}
#endif
#endif
