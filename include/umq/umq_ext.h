/* libumq extensions to the UMQ API (not part of openEuler UMDK). Written by hand; the sizes and
 * values are checked against the library by c-tests/test_flow.c. */
#ifndef UMQ_EXT_H
#define UMQ_EXT_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* umq_user_ctl opcodes, far from UMQ's own values. */

/* in->addr = 1: queued-send mode on; 0: off. A send beyond the credit window then waits in the
 * send queue (bounded by tx_depth, order kept) instead of failing with -UMQ_ERR_EAGAIN, and goes
 * out as credit arrives. Its completion is polled like any other. */
#define UMQ_EXT_OPCODE_FLOW_CONTROL_QUEUED_MODE 0x554d0001u
/* in->addr = milliseconds a queue may have zero credit with sends pending before it reports a
 * stall: a log line, a UMQ_EVENT_QH_LIMIT async event, and credit_stalls below. Default 1000,
 * or UMQ_CREDIT_STALL_MS from the environment at umq_init. */
#define UMQ_EXT_OPCODE_FLOW_CONTROL_STALL_TIMEOUT 0x554d0002u
/* Fills a umq_ext_flow_control_stats_t at out->addr (out->len = its size). */
#define UMQ_EXT_OPCODE_FLOW_CONTROL_EXT_STATS 0x554d0003u

typedef struct umq_ext_flow_control_stats {
    uint64_t piggybacked;     /* announcements carried by user SENDs */
    uint64_t standalone;      /* zero-length standalone announcements sent */
    uint64_t area_only;       /* announcements published only in the peer-readable area */
    uint64_t area_refreshes;  /* times the send path found new credit in the peer's area */
    uint64_t ctrl_grants;     /* control-budget top-ups granted to the peer */
    uint64_t ctrl_budget;     /* receive buffers held back for the peer's standalones */
    uint64_t ctrl_credit;     /* standalones we may still send to the peer */
    uint64_t queued_wr;       /* send WRs waiting in the send queue (queued mode) */
    uint64_t credit_stalls;   /* stalls reported (zero credit with work pending too long) */
    uint32_t initial_window;  /* after clamping */
    uint32_t notify_interval; /* after clamping */
    uint32_t queued_mode;
    uint32_t atomic_window;   /* 1: umq_init set use_atomic_window (nothing else changes) */
    uint64_t rx_without_buffer; /* messages that found no posted receive buffer here (RNR) */
} umq_ext_flow_control_stats_t;

/* Fills a umq_ext_transport_stats_t at out->addr (out->len = its size). */
#define UMQ_EXT_OPCODE_TRANSPORT_STATS 0x554d0004u

/* umq_ext_transport_stats_t.transport: what the library chose to serve the binding. */
#define UMQ_EXT_TRANSPORT_NONE 0u     /* not bound */
#define UMQ_EXT_TRANSPORT_LOOPBACK 1u /* the peer queue is in this process */
#define UMQ_EXT_TRANSPORT_SHM 2u      /* another process of this host, over shared memory */
#define UMQ_EXT_TRANSPORT_FABRIC 3u   /* over the network (libfabric), or forced with UMQ_PROVIDER=fabric */

typedef struct umq_ext_transport_stats {
    uint32_t transport;
    uint32_t shared_pool;       /* 1 once umq_buf_alloc with this queue's handle made its pool */
    uint64_t shared_pool_bytes; /* memory the shared pool occupies */
    uint64_t by_ref_wr;         /* WRs sent by reference (one copy, by the receiver) since the
                                   queue was created: shm, out of the shared pool; network,
                                   read in place by libfabric (some of their bytes) */
    uint64_t by_ref_bytes;
    uint64_t placed_wr;         /* SENDs written straight into the peer's receive buffers (one
                                   copy, by the sender) since the queue was created */
    uint64_t placed_bytes;      /* a stream's message split between the two copies (the
                                   sender places its first half, the receiver copies the rest)
                                   counts in both placed_wr and by_ref_wr, each with its
                                   part's bytes */
    uint64_t placed_rx;         /* messages that arrived already in our receive buffers, whole
                                   or their first half */
    uint64_t paced_packets;     /* packets of this queue's rate-limited messages put on the
                                   wire (shm, network; 0 for a peer in this process) */
    uint64_t one_sided_mapped_wr; /* shm: WRITEs and READs this queue carried out itself, the
                                     target process running nothing: copied through the
                                     target queue's shared pool, which this process maps, */
    uint64_t one_sided_kernel_wr; /* and moved by the kernel (cross-memory attach) */
    uint64_t calls_sent;        /* network: rings of the peer's call bell for WRITEs, READs and
                                   WRITE_IMMs its library must carry out (one a round trip);
                                   shm: rings in place of an interrupt-mode peer's doorbell
                                   that could not be duplicated (pidfd_getfd refused) */
    uint64_t calls_answered;    /* network: such rings from the peer answered here (its WRs
                                   ran), by the progress thread when the application did not
                                   call in */
    uint64_t one_sided_rma_wr;  /* network: WRITEs and READs that went by libfabric RMA, the
                                   target's library taking no part (added last: a caller
                                   passing the earlier 96-byte struct gets the fields above) */
} umq_ext_transport_stats_t;

/* Pacing (rate limits). in->addr = the queue's limit in bit/s; 0 (the default) is unlimited. A
 * limited queue's messages go in packets of at most its PMTU at that rate: over shared memory
 * and the network each packet is put on the wire as it is granted, and the peer reassembles
 * the message (one completion); to a peer in this process a message lands once its last packet
 * is granted. A change takes effect from the next tick. A rate may be set before or after
 * bind. */
#define UMQ_EXT_OPCODE_PACING_RATE 0x554d0005u
/* in->addr = the queue's PMTU in bytes, 1..4096 (default 1024). */
#define UMQ_EXT_OPCODE_PACING_PMTU 0x554d0006u
/* Fills a umq_ext_pacing_stats_t at out->addr (out->len = its size). */
#define UMQ_EXT_OPCODE_PACING_STATS 0x554d0007u
/* in->addr = the process's pacing ticks per second, 1..1000000 (default 1024), through any
 * queue's handle; -UMQ_ERR_EBUSY while a queue is rate limited. */
#define UMQ_EXT_OPCODE_PACING_TICK_RATE 0x554d0008u

typedef struct umq_ext_pacing_stats {
    uint64_t rate_bps;     /* the limit (0: unlimited) */
    uint64_t packets;      /* packets granted */
    uint64_t bytes;        /* bytes of the messages released */
    uint64_t ticks_parked; /* ticks the queue had messages waiting for their send time */
    uint64_t achieved_bps; /* bit/s released since the limit was set */
    uint32_t pmtu;
    uint32_t ticks_per_s;  /* the process's tick rate */
    uint64_t held_wr;      /* messages waiting for the pacer now */
} umq_ext_pacing_stats_t;

/* Link-level pause and priority flow control (PAUSE 802.3x, PFC 802.1Qbb; docs/PFC.md). A link
 * is every queue bound to the same peer process; its MAC control frames travel in-band. A
 * priority the peer pauses stops its queues from starting new messages; the others run on.
 * in->addr = the queue's priority, 0..7 (default 0); bound or not. */
#define UMQ_EXT_OPCODE_PFC_PRIORITY 0x554d0009u
/* Sets the link's settings from the umq_ext_pfc_config_t at in->addr (in->len its size) when
 * in->addr is set; writes them to out->addr (out->len its size) when that is set. The queue
 * must be bound to another process. */
#define UMQ_EXT_OPCODE_PFC_CONFIG 0x554d000au
/* Fills a umq_ext_pfc_stats_t at out->addr: the link's counters. */
#define UMQ_EXT_OPCODE_PFC_STATS 0x554d000bu
/* Sends the raw MAC control frame in the umq_ext_pfc_frame_t at in->addr (len 14..1518). */
#define UMQ_EXT_OPCODE_PFC_SEND_FRAME 0x554d000cu
/* The oldest control frame the link passed to the application (pass_control), into the
 * umq_ext_pfc_frame_t at out->addr; len 0 when there is none. */
#define UMQ_EXT_OPCODE_PFC_RECV_FRAME 0x554d000du

/* umq_ext_pfc_config_t.flags; the defaults are RFE | PFCE. */
#define UMQ_EXT_PFC_RFE 1u     /* act on the peer's pause frames */
#define UMQ_EXT_PFC_PFCE 2u    /* act on PFC frames per priority (with RFE) */
#define UMQ_EXT_PFC_UNICAST 4u /* also accept pause frames sent to the link's address */
#define UMQ_EXT_PFC_EMIT 8u    /* our receive backlog of a priority sends XOFF / XON for it */

/* UMQ_EVENT_OTHER with original_code = this + the priority: the storm watchdog stopped
 * honouring a priority the peer kept paused while we had work, and later honoured it again. */
#define UMQ_EXT_EVENT_PFC_STORM 0x554d0100
#define UMQ_EXT_EVENT_PFC_STORM_RESTORED 0x554d0110

typedef struct umq_ext_pfc_config {
    uint32_t flags;
    uint32_t pass_control;        /* 0: drop non-pause control frames; 1: pass them to the
                                     application; 2: pass pause frames too */
    uint64_t speed_bps;           /* for the length of a pause quantum (512 bit times) */
    uint64_t xoff_bytes;          /* backlog of a priority above which we ask for a pause */
    uint64_t xon_bytes;           /* and below which we ask to resume */
    uint64_t watchdog_detect_ns;  /* default 200 ms */
    uint64_t watchdog_restore_ns; /* default 200 ms */
    uint16_t pause_quanta;        /* quanta our XOFF frames ask for (refreshed at half) */
    uint8_t address[6];           /* the link's own address */
} umq_ext_pfc_config_t;

typedef struct umq_ext_pfc_priority_stats {
    uint64_t indications; /* pause frames received for the priority */
    uint64_t requests;    /* pause frames sent for it */
    uint64_t paused_ns;
    uint64_t watchdog_trips;
} umq_ext_pfc_priority_stats_t;

typedef struct umq_ext_pfc_stats {
    umq_ext_pfc_priority_stats_t priority[8];
    uint64_t link_pauses; /* 802.3x PAUSE frames received */
    uint64_t link_paused_ns;
    uint64_t other_control;  /* control frames that were not pause frames for this link */
    uint64_t passed_dropped; /* passed frames dropped unread (more than 64 waiting) */
    uint32_t paused_now;     /* bit p: priority p paused now */
    uint32_t queues;         /* queues on the link */
} umq_ext_pfc_stats_t;

typedef struct umq_ext_pfc_frame {
    uint32_t len;
    uint32_t rsvd;
    uint8_t bytes[1520];
} umq_ext_pfc_frame_t;

/* fi_tx_size_left / fi_rx_size_left by queue handle (see umq_fi.h): a lower bound on the posts
 * that succeed now; -22 (FI_EINVAL) for a bad handle, -258 (FI_EOPBADSTATE) when unbound. */
int64_t umq_tx_size_left(uint64_t umqh);
int64_t umq_rx_size_left(uint64_t umqh);

#ifdef __cplusplus
}
#endif
#endif
