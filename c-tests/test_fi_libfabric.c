/* libfabric's own inline fi_tx_size_left / fi_rx_size_left (from the system's
 * <rdma/fi_endpoint.h>) on the endpoint umq_fi_ep_get returns. Built only when libfabric-dev
 * is installed. */
#include "util.h"
#include <rdma/fabric.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include "umq_ext.h"
#include "umq_fi.h"

#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

int main(void)
{
    setenv("UMQ_LOG_LEVEL", "crit", 1);
    umq_init_cfg_t *cfg = calloc(1, sizeof(*cfg));
    cfg->buf_mode = UMQ_BUF_SPLIT;
    cfg->feature = UMQ_FEATURE_API_PRO | UMQ_FEATURE_ENABLE_FLOW_CONTROL;
    cfg->flow_control.initial_window = 5;
    CHECK_EQ(umq_init(cfg), 0);
    free(cfg);

    umq_create_option_t o = test_option("lonely", 16, UMQ_MODE_POLLING);
    uint64_t c = umq_create(&o);
    struct fid_ep *ep = umq_fi_ep_get(c);
    CHECK(ep != NULL);
    CHECK_EQ(ep->fid.fclass, FI_CLASS_EP);
    CHECK_EQ(fi_tx_size_left(ep), -FI_EOPBADSTATE);
    CHECK_EQ(fi_rx_size_left(ep), -FI_EOPBADSTATE);
    CHECK_EQ(fi_close(&ep->fid), 0);

    uint64_t a, b;
    test_pair(16, UMQ_MODE_POLLING, &a, &b);
    struct fid_ep *ea = umq_fi_ep_get(a);
    CHECK_EQ(fi_tx_size_left(ea), 0); /* no credit yet */
    CHECK_EQ(fi_rx_size_left(ea), 16);
    umq_buf_t *rx = umq_buf_alloc(64, 5, 0, NULL), *bad = NULL;
    CHECK_EQ(umq_post(b, rx, UMQ_IO_RX, &bad), 0);
    CHECK_EQ(fi_tx_size_left(ea), 5);
    CHECK_EQ(fi_tx_size_left(ea), umq_tx_size_left(a));
    CHECK_EQ(fi_rx_size_left(umq_fi_ep_get(b)), 11);
    TEST_DONE("libfabric inline size_left");
}
