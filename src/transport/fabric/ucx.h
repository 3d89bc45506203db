/* The UCX engine's own header, shared by its files: ucx.c (the worker, messages, completions,
 * the address) and ucx_rma.c (memory peers reach, UCP's RMA and the operations we carry
 * ourselves). Only with UCX's headers (UMQ_HAVE_UCX). */
#ifndef UMQ_UCX_H
#define UMQ_UCX_H

#include <stddef.h>
#include <stdint.h>
#include <ucp/api/ucp.h>

#include "shim.h"

/* UCP's calls, looked up with dlopen when a queue first asks for this engine (ucx.c). */
struct ucp_calls {
    void *lib;
    ucs_status_t (*config_read)(const char *, const char *, ucp_config_t **);
    ucs_status_t (*config_modify)(ucp_config_t *, const char *, const char *);
    void (*config_release)(ucp_config_t *);
    ucs_status_t (*init_version)(unsigned, unsigned, const ucp_params_t *, const ucp_config_t *,
                                 ucp_context_h *);
    void (*cleanup)(ucp_context_h);
    void (*get_version)(unsigned *, unsigned *, unsigned *);
    ucs_status_t (*worker_create)(ucp_context_h, const ucp_worker_params_t *, ucp_worker_h *);
    void (*worker_destroy)(ucp_worker_h);
    ucs_status_t (*worker_get_address)(ucp_worker_h, ucp_address_t **, size_t *);
    void (*worker_release_address)(ucp_worker_h, ucp_address_t *);
    unsigned (*worker_progress)(ucp_worker_h);
    ucs_status_t (*worker_get_efd)(ucp_worker_h, int *);
    ucs_status_t (*worker_arm)(ucp_worker_h);
    ucs_status_t (*ep_create)(ucp_worker_h, const ucp_ep_params_t *, ucp_ep_h *);
    ucs_status_ptr_t (*ep_close_nbx)(ucp_ep_h, const ucp_request_param_t *);
    void (*request_free)(void *);
    ucs_status_t (*request_check_status)(void *);
    ucs_status_ptr_t (*am_send_nbx)(ucp_ep_h, unsigned, const void *, size_t, const void *,
                                    size_t, const ucp_request_param_t *);
    ucs_status_ptr_t (*tag_send_nbx)(ucp_ep_h, const void *, size_t, ucp_tag_t,
                                     const ucp_request_param_t *);
    ucs_status_ptr_t (*tag_recv_nbx)(ucp_worker_h, void *, size_t, ucp_tag_t, ucp_tag_t,
                                     const ucp_request_param_t *);
    ucp_tag_message_h (*tag_probe_nb)(ucp_worker_h, ucp_tag_t, ucp_tag_t, int,
                                      ucp_tag_recv_info_t *);
    ucs_status_ptr_t (*tag_msg_recv_nbx)(ucp_worker_h, void *, size_t, ucp_tag_message_h,
                                         const ucp_request_param_t *);
    void (*request_cancel)(ucp_worker_h, void *);
    ucs_status_t (*set_am_recv_handler)(ucp_worker_h, const ucp_am_handler_param_t *);
    ucs_status_ptr_t (*put_nbx)(ucp_ep_h, const void *, size_t, uint64_t, ucp_rkey_h,
                                const ucp_request_param_t *);
    ucs_status_ptr_t (*get_nbx)(ucp_ep_h, void *, size_t, uint64_t, ucp_rkey_h,
                                const ucp_request_param_t *);
    ucs_status_ptr_t (*ep_flush_nbx)(ucp_ep_h, const ucp_request_param_t *);
    ucs_status_t (*mem_map)(ucp_context_h, const ucp_mem_map_params_t *, ucp_mem_h *);
    ucs_status_t (*mem_unmap)(ucp_context_h, ucp_mem_h);
    ucs_status_t (*rkey_pack)(ucp_context_h, ucp_mem_h, void **, size_t *);
    void (*rkey_buffer_release)(void *);
    ucs_status_t (*ep_rkey_unpack)(ucp_ep_h, const void *, ucp_rkey_h *);
    void (*rkey_destroy)(ucp_rkey_h);
    const char *(*status_string)(ucs_status_t); /* libucs's, found through libucp's needs */
    char why[256];
};
extern struct ucp_calls U;

#define MAX_REGIONS 8
#define MAX_RKEY 255
/* A packed key a peer sends is at most MAX_RKEY bytes long (rma.rs sends up to 255), and UCP
 * reads at most UNPACK_SLACK bytes past its start: a 64-bit map, a type byte and, for each of up
 * to 64 domains, a length byte, its key and a device byte. */
#define UNPACK_SLACK (sizeof(uint64_t) + 1 + 64 * (1 + 255 + 1))

struct op;

/* A peer we reach, by its index (umqu_connect). */
struct peer {
    ucp_ep_h ep;
    ucp_rkey_h rkeys[MAX_REGIONS];
    int n_rkeys;
    int takes_puts; /* its address says its UCP runs our puts (TAKES_PUTS) */
    ucs_status_t failed; /* UCS_OK while the connection lives */
    struct op *unflushed; /* operations waiting for the next flush, newest first */
    int n_unflushed;
    size_t settled; /* bytes of messages whose send UCP completed, waiting for a flush */
};

/* A receive buffer the node posted, as UCP's receive request holds it (the space UCP keeps in
 * every request of our context, `request_size`): what its completion names, and its place in the
 * list of receives not yet completed. */
struct rx_req {
    struct umqu_ep *e;
    void *ctx;
    struct rx_req *prev, *next;
};

/* The tag of our messages, which go as UCP's tagged messages (ucx.c says why). */

/* The ids of our active messages: writes of a flow-control area (umqu_write), and without a NIC
 * the one-sided operations we carry ourselves (umqu_rma): a WRITE, a READ, and the target's
 * answer to either. (Id 0 carried messages before they went tagged.) */
#define AREA_ID 1
#define CARRIED_WRITE_ID 2
#define CARRIED_READ_ID 3
#define CARRIED_ANSWER_ID 4

/* Where an area write lands: an address inside the region our key `key` names. */
struct area_hdr {
    uint64_t addr;
    uint64_t key;
};

/* Pointers by slot, the free slots kept for reuse: slots_take files one, slots_give_back ends
 * it, slots_at finds it (NULL for a free slot or one never taken). */
struct slots {
    void **at;
    uint32_t *free;
    size_t len, cap, n_free;
};

/* A carried WRITE's or READ's header: where, under which entry of the target's table, and the
 * initiator's handle for the answer (`struct carried_answer`). */
struct carried_hdr {
    uint64_t addr, len, slot, secret, op;
};

/* The target's answer: the operation's handle and whether it was done (a READ's bytes follow). */
struct carried_answer {
    uint64_t op;
    uint64_t refused;
};

struct umqu_ep {
    ucp_context_h ctx;
    ucp_worker_h worker;
    int event_fd; /* the worker's: readable on UCP's events once armed (`umqu_arm_watch`) */
    int wait_fd;  /* the same for a wakeable endpoint, -1 otherwise */
    struct sockaddr_storage host; /* the address queues were asked on; family 0 if none */
    socklen_t host_len;
    ucp_mem_h regions[MAX_REGIONS];
    uint64_t region_base[MAX_REGIONS], region_len[MAX_REGIONS]; /* where each lies */
    size_t region_slot[MAX_REGIONS]; /* its writes' one length and alignment (landing slots) */
    void *rkeys[MAX_REGIONS]; /* packed, for our address */
    size_t rkey_lens[MAX_REGIONS];
    int n_regions;
    struct peer *peers;
    size_t n_peers, cap_peers;
    struct rx_req *posted; /* receives UCP holds, not yet completed (a list) */
    size_t posted_len, posted_cap;
    int starved; /* UCP's unexpected queue may hold messages: progress did something with no
                  * receive posted, and no probe found it empty since */
    struct umqf_cqe *done; /* completions the callbacks appended, a ring */
    size_t done_head, done_len, done_cap;
    int lost; /* a completion found no room: the queue has failed, as a libfabric CQ overrun */
    int ucp_rma;         /* the context runs UCP's RMA (on a NIC, or UMQ_UCX_RMA=ucp); else
                          * ours are carried operations (ucx_rma.c, `carry`) */
    int rma_in_software; /* RMA runs in the target's progress: not UCP's on a NIC */
    uint64_t *to_flush; /* peers with operations waiting for their next flush (`unflushed`) */
    size_t n_to_flush, cap_to_flush;
    size_t flushing; /* flushes UCP has not ended yet */
    struct slots table;    /* memory exposed to carried operations (struct exposed) */
    struct slots awaiting; /* carried operations waiting for their answer (struct op) */
    uint32_t op_generation; /* the high half of the next carried operation's handle */
    size_t answer_copies;   /* bytes of answers copied for UCP to send (ANSWER_COPIES_MAX) */
    uint64_t word; /* every message's tag: our node's secret (umqu_sign) */
    char provider[64];
};

/* An operation's context and length, kept until its callback: the request carries a pointer. */
struct op {
    struct umqu_ep *e;
    void *ctx;
    uint64_t len;
    ucp_dt_iov_t iov[2]; /* a gathered send's pieces: UCP reads the array until completion */
    union {
        struct area_hdr hdr;        /* an area write's, which UCP reads until completion */
        struct carried_hdr carried; /* a carried WRITE's or READ's, likewise */
    };
    int parts;           /* a message's or WRITE's requests still out (its send or put, its
                          * flush), or a carried operation's parts (its send, its answer) */
    ucs_status_t status; /* the first failure among them */
    struct op *next;     /* the next older operation waiting for the same flush */
    ucp_ep_h to;         /* a carried operation's: the peer that answers */
    void *read_into;     /* a carried READ's buffer; NULL for a WRITE */
    uint32_t slot;       /* a carried operation's in `awaiting`, while it waits */
    uint64_t peer;       /* a message's: the peer it went to */
    int settled;         /* a message's: UCP completed its send, its flush is still out (its
                          * bytes count in its peer's `settled`) */
};

/* ucx.c's, for ucx_rma.c: */
int ucx_code_of(ucs_status_t s);
void ucx_complete(struct umqu_ep *e, void *ctx, uint64_t len, ucs_status_t s);
struct op *ucx_op_new(struct umqu_ep *e, void *ctx, uint64_t len);
int ucx_settle(struct umqu_ep *e, ucs_status_ptr_t r, struct op *o);
ucp_request_param_t ucx_completing(struct op *o);
struct peer *ucx_peer_of(struct umqu_ep *e, uint64_t peer);
ucp_ep_h ucx_reach(struct umqu_ep *e, uint64_t peer, int *rc);

void ucx_part_done(struct op *o, ucs_status_t status);
ucp_request_param_t ucx_in_parts(struct op *o);
int ucx_flush_room(struct umqu_ep *e, const struct peer *p);
void ucx_await_flush(struct umqu_ep *e, uint64_t peer, struct op *o);

/* ucx_rma.c's, for ucx.c: */
void ucx_fail_awaiting(struct umqu_ep *e, ucp_ep_h ep, ucs_status_t status);
void ucx_rma_close(struct umqu_ep *e);
ucs_status_t ucx_carried_write_arrived(void *, const void *, size_t, void *, size_t,
                                       const ucp_am_recv_param_t *);
ucs_status_t ucx_carried_read_arrived(void *, const void *, size_t, void *, size_t,
                                      const ucp_am_recv_param_t *);
ucs_status_t ucx_carried_answered(void *, const void *, size_t, void *, size_t,
                                  const ucp_am_recv_param_t *);

#endif
