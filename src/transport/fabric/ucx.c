/* The network provider's second engine: UCX's UCP, behind the same narrow interface as
 * libfabric's (shim.c), so the node above runs unchanged on either (UMQ_FABRIC_PROVIDER=ucx).
 *
 * What libfabric gives as objects, UCP gives as a worker: one worker is the node's endpoint,
 * its completion queue and its address vector. Messages are UCP active messages under one id,
 * sent eagerly. The node's receive buffers wait in a FIFO of ours, and the handler UCP calls as
 * a message arrives copies it into the oldest, as fi_recv fills buffers in posting order; a
 * message that finds none waits in a backlog of ours until one is posted. Tagged messages would
 * post each buffer to UCP, match every arrival against the posted ones and free a request per
 * message: matching we do not use, paid on every receive. UCP completes sends by callback,
 * from inside ucp_worker_progress; the callbacks and the handler append to a completion list
 * that umqu_poll hands out as libfabric's completion queue would.
 *
 * UCP names a peer's memory by a packed remote key rather than a 64-bit one, so a region we
 * expose is named in our address: the address is our worker's, after the packed keys of the
 * regions exposed so far, and the "key" a peer writes under is the region's index there.
 *
 * Like shim.c it references no UCX symbol by name: the calls are looked up with dlopen
 * ("libucp.so.0") when a queue first asks for this engine, so libumq.so loads without UCX.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shim.h"

struct umqu_ep;

#ifdef UMQ_HAVE_UCX
#include <arpa/inet.h>
#include <dirent.h>
#include <dlfcn.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <ucp/api/ucp.h>

static struct {
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
} U;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;

#define FIND(field, name) (*(void **)&U.field = dlsym(U.lib, name)) != NULL

static void load(void)
{
    U.lib = dlopen("libucp.so.0", RTLD_NOW | RTLD_LOCAL);
    if (!U.lib) {
        snprintf(U.why, sizeof(U.why),
                 "libucp.so.0 cannot be loaded (%s): install UCX (Debian: apt-get install libucx0)",
                 dlerror());
        return;
    }
    int found = FIND(config_read, "ucp_config_read") && FIND(config_modify, "ucp_config_modify") &&
                FIND(config_release, "ucp_config_release") &&
                FIND(init_version, "ucp_init_version") && FIND(cleanup, "ucp_cleanup") &&
                FIND(get_version, "ucp_get_version") &&
                FIND(worker_create, "ucp_worker_create") &&
                FIND(worker_destroy, "ucp_worker_destroy") &&
                FIND(worker_get_address, "ucp_worker_get_address") &&
                FIND(worker_release_address, "ucp_worker_release_address") &&
                FIND(worker_progress, "ucp_worker_progress") &&
                FIND(worker_get_efd, "ucp_worker_get_efd") &&
                FIND(worker_arm, "ucp_worker_arm") && FIND(ep_create, "ucp_ep_create") &&
                FIND(ep_close_nbx, "ucp_ep_close_nbx") && FIND(request_free, "ucp_request_free") &&
                FIND(request_check_status, "ucp_request_check_status") &&
                FIND(am_send_nbx, "ucp_am_send_nbx") &&
                FIND(set_am_recv_handler, "ucp_worker_set_am_recv_handler") &&
                FIND(put_nbx, "ucp_put_nbx") && FIND(get_nbx, "ucp_get_nbx") &&
                FIND(ep_flush_nbx, "ucp_ep_flush_nbx") && FIND(mem_map, "ucp_mem_map") &&
                FIND(mem_unmap, "ucp_mem_unmap") && FIND(rkey_pack, "ucp_rkey_pack") &&
                FIND(rkey_buffer_release, "ucp_rkey_buffer_release") &&
                FIND(ep_rkey_unpack, "ucp_ep_rkey_unpack") &&
                FIND(rkey_destroy, "ucp_rkey_destroy") &&
                FIND(status_string, "ucs_status_string");
    if (!found) {
        snprintf(U.why, sizeof(U.why), "libucp.so.0 lacks ucp_am_send_nbx or its kin: UCX before 1.11?");
        dlclose(U.lib);
        U.lib = NULL;
    }
}

static int umqu_load(char *why, size_t n)
{
    pthread_once(&load_once, load);
    if (!U.lib) {
        snprintf(why, n, "%s", U.why);
        return -1;
    }
    return 0;
}

/* A UCS status as the positive errno-style code a libfabric completion carries. */
static int code_of(ucs_status_t s)
{
    switch (s) {
    case UCS_OK: return 0;
    case UCS_ERR_NO_RESOURCE: return EAGAIN;
    case UCS_ERR_NO_MEMORY: return ENOMEM;
    case UCS_ERR_INVALID_PARAM: return EINVAL;
    case UCS_ERR_UNSUPPORTED: return ENOSYS;
    case UCS_ERR_CANCELED: return ECANCELED;
    case UCS_ERR_MESSAGE_TRUNCATED: return EMSGSIZE;
    case UCS_ERR_CONNECTION_RESET: return ECONNRESET;
    case UCS_ERR_ENDPOINT_TIMEOUT: return ETIMEDOUT;
    case UCS_ERR_UNREACHABLE: return EHOSTUNREACH;
    case UCS_ERR_REJECTED: return EACCES;
    default: return EIO;
    }
}

/* Our address starts with these four bytes, so neither engine takes the other's for its own. */
static const char MAGIC[4] = {'U', 'C', 'X', '2'};
/* In our address's flags byte: our UCP context runs UCP's RMA (on a NIC only: rma_on_nic). */
#define TAKES_PUTS 1
#define MAX_REGIONS 8
#define MAX_RKEY 255
/* A packed key a peer sends is at most MAX_RKEY bytes long (rma.rs sends up to 255), and UCP
 * reads at most UNPACK_SLACK bytes past its start: a 64-bit map, a type byte and, for each of up
 * to 64 domains, a length byte, its key and a device byte. */
#define UNPACK_SLACK (sizeof(uint64_t) + 1 + 64 * (1 + 255 + 1))
/* UCP progress calls one poll makes at most while they move data but complete nothing. */
#define MAX_BITES 64
/* Arms of the event fd a watch tries while UCP reports events, progressing between them. */
#define ARM_TRIES 4
/* WRITEs to a peer one flush serves at most: the first of a long stream does not wait for the
 * last to be placed before it completes. */
#define FLUSH_BATCH 16

struct op;

struct peer {
    ucp_ep_h ep;
    ucp_rkey_h rkeys[MAX_REGIONS];
    int n_rkeys;
    int takes_puts; /* its address says its UCP runs our puts (TAKES_PUTS) */
    ucs_status_t failed; /* UCS_OK while the connection lives */
    struct op *unflushed; /* WRITEs put since the last flush, newest first */
    int n_unflushed;
};

/* A receive buffer the node posted, waiting for a message. */
struct posted {
    void *buf;
    size_t len;
    void *ctx;
};

/* A message that arrived while no buffer was posted: a copy, kept in order. */
struct held {
    struct held *next;
    size_t len;
    unsigned char bytes[];
};

/* The ids of our active messages: messages, writes of a flow-control area (umqu_write), and
 * without a NIC the one-sided operations we carry ourselves (umqu_rma): a WRITE, a READ, and the
 * target's answer to either. */
#define MESSAGE_ID 0
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

static int slots_take(struct slots *t, void *p, uint32_t *slot)
{
    if (!t->n_free && t->len == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 64;
        void **at = realloc(t->at, cap * sizeof(*at));
        uint32_t *f = at ? realloc(t->free, cap * sizeof(*f)) : NULL;
        if (at)
            t->at = at;
        if (!f)
            return -ENOMEM;
        t->free = f;
        t->cap = cap;
    }
    *slot = t->n_free ? t->free[--t->n_free] : (uint32_t)t->len++;
    t->at[*slot] = p;
    return 0;
}

static void slots_give_back(struct slots *t, uint32_t slot)
{
    t->at[slot] = NULL;
    t->free[t->n_free++] = slot;
}

static void *slots_at(const struct slots *t, uint64_t slot)
{
    return slot < t->len ? t->at[slot] : NULL;
}

static void slots_free(struct slots *t)
{
    free(t->at);
    free(t->free);
}

/* Memory exposed for the peers' WRITEs and READs (umqu_expose_packed): UCP's mapping, or where
 * UCP carries no RMA of ours (tcp), an entry of our table, found by `slot` and checked by a
 * random `secret` (a packed key: CARRIED_MAGIC, slot, secret). */
struct exposed {
    ucp_context_h ctx;
    ucp_mem_h mem; /* NULL: an entry of e's table */
    struct umqu_ep *e;
    uint32_t slot;
    uint64_t secret, base, len;
};

static const char CARRIED_MAGIC[4] = {'U', 'M', 'Q', 'K'};
/* A packed key of our table: CARRIED_MAGIC, then the slot and the secret, 64 bits each. */
#define CARRIED_KEY_LEN (sizeof(CARRIED_MAGIC) + 2 * sizeof(uint64_t))

/* A peer's key, unpacked (umqu_unpack_key): UCP's, or one of our table's at the peer. */
struct remote_key {
    ucp_rkey_h ucp; /* NULL: `slot` and `secret` name an entry of the peer's table */
    uint64_t slot, secret;
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
    void *rkeys[MAX_REGIONS]; /* packed, for our address */
    size_t rkey_lens[MAX_REGIONS];
    int n_regions;
    struct peer *peers;
    size_t n_peers, cap_peers;
    struct posted *posted; /* a ring: the buffers waiting, oldest first */
    size_t posted_head, posted_len, posted_cap;
    struct held *held, **held_tail; /* messages waiting for a buffer, oldest first */
    struct umqf_cqe *done; /* completions the callbacks appended, a ring */
    size_t done_head, done_len, done_cap;
    int lost; /* a completion found no room: the queue has failed, as a libfabric CQ overrun */
    int rma_in_software; /* UCP's RMA would be software (rma_on_nic): it runs none, ours are
                          * carried operations (`carry`) */
    uint64_t *to_flush; /* peers with WRITEs put since their last flush (`unflushed`) */
    size_t n_to_flush, cap_to_flush;
    struct slots table;    /* memory exposed to carried operations (struct exposed) */
    struct slots awaiting; /* carried operations waiting for their answer (struct op) */
    uint32_t op_generation; /* the high half of the next carried operation's handle */
    size_t answer_copies;   /* bytes of answers copied for UCP to send (ANSWER_COPIES_MAX) */
    char provider[64];
};

/* Room for `cap` completions, those waiting kept in order; 0, or -1 out of memory. */
static int make_room(struct umqu_ep *e, size_t cap)
{
    struct umqf_cqe *q = malloc(cap * sizeof(*q));
    if (!q)
        return -1;
    for (size_t i = 0; i < e->done_len; i++)
        q[i] = e->done[(e->done_head + i) % e->done_cap];
    free(e->done);
    e->done = q;
    e->done_head = 0;
    e->done_cap = cap;
    return 0;
}

/* Appends a completion. The ring holds the node's completion queue size from the start, which
 * bounds what can be in flight; past it the ring grows, and a completion that still finds no
 * room fails the queue (umqu_poll), as an overrun libfabric queue does, rather than vanish. */
static void complete(struct umqu_ep *e, void *ctx, uint64_t len, ucs_status_t s)
{
    if (e->done_len == e->done_cap && make_room(e, e->done_cap * 2)) {
        e->lost = 1;
        return;
    }
    e->done[(e->done_head + e->done_len++) % e->done_cap] =
        (struct umqf_cqe){.ctx = ctx, .len = len, .err = code_of(s), .prov_errno = (int32_t)s};
}

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
    int parts;           /* a WRITE's requests still out (its put and its flush), or a carried
                          * operation's parts (its send, its answer) */
    ucs_status_t status; /* the first failure among them */
    struct op *next;     /* the next older WRITE waiting for the same flush */
    ucp_ep_h to;         /* a carried operation's: the peer that answers */
    void *read_into;     /* a carried READ's buffer; NULL for a WRITE */
    uint32_t slot;       /* a carried operation's in `awaiting`, while it waits */
    int waits;           /* it waits for its answer */
};

static void sent(void *request, ucs_status_t status, void *user_data)
{
    struct op *o = user_data;
    complete(o->e, o->ctx, o->len, status);
    free(o);
    U.request_free(request);
}

/* Fills the oldest posted buffer with a message; a message longer than it completes truncated,
 * as fi_recv's would (the node posts buffers as long as any message it is sent). */
static void fill(struct umqu_ep *e, const void *data, size_t len)
{
    struct posted b = e->posted[e->posted_head];
    e->posted_head = (e->posted_head + 1) % e->posted_cap;
    e->posted_len--;
    if (len > b.len) {
        complete(e, b.ctx, 0, UCS_ERR_MESSAGE_TRUNCATED);
        return;
    }
    memcpy(b.buf, data, len);
    complete(e, b.ctx, len, UCS_OK);
}

/* UCP's handler for our messages, inside ucp_worker_progress: into a posted buffer, or behind
 * the messages already waiting for one (UCP's data lives only as long as the call). */
static ucs_status_t arrived(void *arg, const void *header, size_t header_len, void *data,
                            size_t len, const ucp_am_recv_param_t *param)
{
    (void)header, (void)header_len;
    struct umqu_ep *e = arg;
    if (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV)
        return UCS_OK; /* never sent by us (every send is eager): a stranger's, dropped */
    if (e->posted_len && !e->held) {
        fill(e, data, len);
        return UCS_OK;
    }
    struct held *h = malloc(sizeof(*h) + len);
    if (!h) {
        e->lost = 1; /* a message we cannot keep fails the queue rather than vanish */
        return UCS_OK;
    }
    h->next = NULL;
    h->len = len;
    memcpy(h->bytes, data, len);
    *e->held_tail = h;
    e->held_tail = &h->next;
    return UCS_OK;
}

/* UCP's handler for a peer's write of its flow-control area into our landing words (umqu_write):
 * copied where it names, if that lies inside the region its key names; else dropped, as a
 * stranger's or a stale peer's write to memory we never exposed. */
static ucs_status_t area_arrived(void *arg, const void *header, size_t header_len, void *data,
                                 size_t len, const ucp_am_recv_param_t *param)
{
    struct umqu_ep *e = arg;
    struct area_hdr h;
    if (header_len != sizeof(h) || (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV))
        return UCS_OK;
    memcpy(&h, header, sizeof(h));
    if (h.key >= (uint64_t)e->n_regions)
        return UCS_OK;
    uint64_t base = e->region_base[h.key], size = e->region_len[h.key];
    if (h.addr < base || len > size || h.addr - base > size - len)
        return UCS_OK;
    memcpy((void *)(uintptr_t)h.addr, data, len);
    return UCS_OK;
}

/* Messages that waited take the buffers now posted, oldest first. */
static void take_held(struct umqu_ep *e)
{
    while (e->held && e->posted_len) {
        struct held *h = e->held;
        e->held = h->next;
        if (!e->held)
            e->held_tail = &e->held;
        fill(e, h->bytes, h->len);
        free(h);
    }
}

static void fail_awaiting(struct umqu_ep *e, ucp_ep_h ep, ucs_status_t status);

static void peer_failed(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    struct peer *p = NULL;
    struct umqu_ep *e = arg;
    for (size_t i = 0; i < e->n_peers && !p; i++)
        if (e->peers[i].ep == ep)
            p = &e->peers[i];
    if (p)
        p->failed = status;
    fail_awaiting(e, ep, status);
}

/* Where an operation stands as it returns: done now (its completion appended), handed to UCP
 * (its callback appends it and frees `o`), or failed (a negative code). */
static int settle(struct umqu_ep *e, ucs_status_ptr_t r, struct op *o)
{
    if (r == NULL) {
        complete(e, o->ctx, o->len, UCS_OK);
        free(o);
        return 0;
    }
    if (UCS_PTR_IS_ERR(r)) {
        free(o);
        return -code_of(UCS_PTR_STATUS(r));
    }
    return 0;
}

static struct op *op_new(struct umqu_ep *e, void *ctx, uint64_t len)
{
    struct op *o = malloc(sizeof(*o));
    if (o)
        *o = (struct op){.e = e, .ctx = ctx, .len = len};
    return o;
}

/* A send's or write's parameters: its completion, by callback, carries `o`. */
static ucp_request_param_t completing(struct op *o)
{
    return (ucp_request_param_t){
        .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
        .cb.send = sent,
        .user_data = o};
}

/* A message's send: eagerly (every message fits a buffer the peer keeps posted), under our id. */
static ucs_status_ptr_t send_message(ucp_ep_h ep, const void *buf, size_t count,
                                     ucp_request_param_t *param)
{
    param->op_attr_mask |= UCP_OP_ATTR_FIELD_FLAGS;
    param->flags = UCP_AM_SEND_FLAG_EAGER;
    return U.am_send_nbx(ep, MESSAGE_ID, NULL, 0, buf, count, param);
}

/* The interface whose address is `node`, for UCX's NET_DEVICES; 0 when none has it. */
static int device_of(const struct sockaddr *a, char *name, size_t n)
{
    struct ifaddrs *all, *i;
    int found = 0;
    if (getifaddrs(&all))
        return 0;
    for (i = all; i && !found; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != a->sa_family)
            continue;
        if (a->sa_family == AF_INET)
            found = ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
                    ((const struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr;
        else
            found = !memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
                            &((const struct sockaddr_in6 *)i->ifa_addr)->sin6_addr, 16);
        if (found)
            snprintf(name, n, "%s", i->ifa_name);
    }
    freeifaddrs(all);
    return found;
}

/* The first IPv4 address of an interface that is up, not the loopback unless `loopback`. */
static int default_host(struct sockaddr_in *out, int loopback)
{
    struct ifaddrs *all, *i;
    int found = 0;
    if (getifaddrs(&all))
        return 0;
    for (i = all; i && !found; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !(i->ifa_flags & IFF_UP) ||
            !!(i->ifa_flags & IFF_LOOPBACK) != loopback)
            continue;
        *out = *(const struct sockaddr_in *)i->ifa_addr;
        out->sin_port = 0;
        found = 1;
    }
    freeifaddrs(all);
    return found;
}

/* The address the node serves on: `node`, else (as libfabric's tcp picks one) the first
 * interface's that is up, the loopback last. */
static void choose_host(struct umqu_ep *e, const char *node)
{
    struct sockaddr_in *v4 = (struct sockaddr_in *)&e->host;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&e->host;
    if (node && inet_pton(AF_INET, node, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        e->host_len = sizeof(*v4);
    } else if (node && inet_pton(AF_INET6, node, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        e->host_len = sizeof(*v6);
    } else if (!node && (default_host(v4, 0) || default_host(v4, 1))) {
        e->host_len = sizeof(*v4);
    }
}

/* The transports and device UCX may use, and how it sends: UCX_TLS, UCX_RNDV_THRESH and
 * UCX_NET_DEVICES when the user set them, else tcp, always eagerly, on the interface that
 * carries the node's address (`choose_host`). */
static ucs_status_t configure(struct umqu_ep *e, ucp_config_t *cfg)
{
    ucs_status_t s = UCS_OK;
    char dev[IF_NAMESIZE + 1];
    if (!getenv("UCX_TLS"))
        s = U.config_modify(cfg, "TLS", "tcp");
    /* Every message fits a receive buffer the node keeps posted (at most a bounce buffer):
     * eagerly is one trip, where a rendezvous (UCX's choice from a few KiB) is three, which
     * halved a stream of 64 KiB messages. */
    if (s == UCS_OK && !getenv("UCX_RNDV_THRESH"))
        s = U.config_modify(cfg, "RNDV_THRESH", "inf");
    if (s == UCS_OK && !getenv("UCX_NET_DEVICES") && e->host_len &&
        device_of((struct sockaddr *)&e->host, dev, sizeof(dev)))
        s = U.config_modify(cfg, "NET_DEVICES", dev);
    return s;
}

/* Whether the transport list (UCX_TLS) may name an RDMA transport: "all", an exclusion list
 * ("^tcp"), or an InfiniBand one (rc, dc, ud and their kin, "ib"). */
static int names_rdma(const char *tls)
{
    if (tls[0] == '^')
        return 1;
    char list[256];
    snprintf(list, sizeof(list), "%s", tls);
    char *save = NULL;
    for (char *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save))
        if (!strcmp(t, "all") || !strncmp(t, "rc", 2) || !strncmp(t, "dc", 2) ||
            !strncmp(t, "ud", 2) || !strcmp(t, "ib"))
            return 1;
    return 0;
}

/* Whether UCP's RMA can run on a NIC: UCX_TLS names an RDMA transport and the host has an RDMA
 * device. Elsewhere UCP's RMA is software over tcp (`UCX_TLS=all` between processes of one
 * host too): handlers that write and read where a peer names, and abort the process when
 * their answer cannot go, so the context runs none (`umqu_open`) and ours are carried. */
static int rma_on_nic(const char *tls)
{
    if (!tls || !names_rdma(tls))
        return 0;
    DIR *d = opendir("/sys/class/infiniband");
    if (!d)
        return 0;
    int found = 0;
    for (struct dirent *de; !found && (de = readdir(d));)
        found = de->d_name[0] != '.';
    closedir(d);
    return found;
}

void umqu_close(struct umqu_ep *e);
static void flush_writes(struct umqu_ep *e);
static ucs_status_t carried_write_arrived(void *, const void *, size_t, void *, size_t,
                                          const ucp_am_recv_param_t *);
static ucs_status_t carried_read_arrived(void *, const void *, size_t, void *, size_t,
                                         const ucp_am_recv_param_t *);
static ucs_status_t carried_answered(void *, const void *, size_t, void *, size_t,
                                     const ucp_am_recv_param_t *);

static int fail(struct umqu_ep *e, char *why, size_t n, const char *what, ucs_status_t s)
{
    snprintf(why, n, "%s: %s (%d)", what, U.status_string(s), (int)s);
    umqu_close(e);
    return -code_of(s);
}

/* A UCP worker for the node on `node` (an address of this host, or NULL), with a wait fd when
 * `wakeable`, and room for `cq_size` completions. `prov` and `eager` are libfabric's (UCX picks
 * its own protocols). 0 and *out, or a negative code and `why`. */
int umqu_open(const char *prov, const char *node, size_t cq_size, int wakeable, size_t eager,
              struct umqu_ep **out, char *why, size_t n)
{
    (void)prov, (void)eager;
    if (umqu_load(why, n))
        return -ENOSYS;
    struct umqu_ep *e = calloc(1, sizeof(*e));
    if (!e)
        return -ENOMEM;
    e->wait_fd = e->event_fd = -1;
    e->held_tail = &e->held;
    /* Every posted receive ends in a completion, so the completion queue's size bounds them
     * too: both rings are made at that size here. */
    e->posted_cap = cq_size ? cq_size : 1;
    e->posted = malloc(e->posted_cap * sizeof(*e->posted));
    if (!e->posted || make_room(e, e->posted_cap)) {
        free(e->posted);
        free(e);
        return -ENOMEM;
    }
    choose_host(e, node);
    ucp_config_t *cfg;
    ucs_status_t s = U.config_read(NULL, NULL, &cfg);
    if (s != UCS_OK)
        return fail(e, why, n, "ucp_config_read", s);
    s = configure(e, cfg);
    const char *tls = getenv("UCX_TLS");
    e->rma_in_software = !rma_on_nic(tls);
    /* Every worker has its event fd, wakeable or not: the progress thread watches it while a
     * peer's long WRs arrive for a process that is not calling in (`umqu_arm_watch`). Where
     * UCP's RMA would be software (rma_on_nic) the context does none: UCP's handlers, which
     * write and read wherever a peer names, are then not installed, and a peer's put or get is
     * dropped (our own WRITEs and READs are carried as messages we check: `carry`). */
    ucp_params_t params = {
        .field_mask = UCP_PARAM_FIELD_FEATURES,
        .features = UCP_FEATURE_AM | UCP_FEATURE_WAKEUP |
                    (e->rma_in_software ? 0 : UCP_FEATURE_RMA)};
    if (s == UCS_OK)
        s = U.init_version(UCP_API_MAJOR, UCP_API_MINOR, &params, cfg, &e->ctx);
    U.config_release(cfg);
    if (s != UCS_OK)
        return fail(e, why, n, "ucp_init", s);
    /* Every call is made under the node's lock, from whichever thread holds it. */
    ucp_worker_params_t wp = {.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
                              .thread_mode = UCS_THREAD_MODE_SERIALIZED};
    s = U.worker_create(e->ctx, &wp, &e->worker);
    if (s != UCS_OK)
        return fail(e, why, n, "ucp_worker_create", s);
    ucp_am_handler_param_t handler = {
        .field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_FLAGS |
                      UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG,
        .id = MESSAGE_ID,
        .flags = UCP_AM_FLAG_WHOLE_MSG,
        .cb = arrived,
        .arg = e};
    if ((s = U.set_am_recv_handler(e->worker, &handler)) != UCS_OK)
        return fail(e, why, n, "ucp_worker_set_am_recv_handler", s);
    static const struct {
        unsigned id;
        ucp_am_recv_callback_t cb;
    } ours[] = {{AREA_ID, area_arrived},
                {CARRIED_WRITE_ID, carried_write_arrived},
                {CARRIED_READ_ID, carried_read_arrived},
                {CARRIED_ANSWER_ID, carried_answered}};
    for (size_t i = 0; i < sizeof(ours) / sizeof(ours[0]); i++) {
        handler.id = ours[i].id;
        handler.cb = ours[i].cb;
        if ((s = U.set_am_recv_handler(e->worker, &handler)) != UCS_OK)
            return fail(e, why, n, "ucp_worker_set_am_recv_handler", s);
    }
    if ((s = U.worker_get_efd(e->worker, &e->event_fd)) != UCS_OK)
        return fail(e, why, n, "ucp_worker_get_efd", s);
    if (wakeable)
        e->wait_fd = e->event_fd;
    unsigned major, minor, release;
    U.get_version(&major, &minor, &release);
    snprintf(e->provider, sizeof(e->provider), "ucx %u.%u.%u (%s)", major, minor, release,
             tls ? tls : "tcp");
    *out = e;
    return 0;
}

void umqu_close(struct umqu_ep *e)
{
    if (!e)
        return;
    flush_writes(e); /* the closes below end these flushes too, and free their WRITEs */
    for (size_t i = 0; i < e->n_peers; i++) {
        struct peer *p = &e->peers[i];
        for (int k = 0; k < p->n_rkeys; k++)
            U.rkey_destroy(p->rkeys[k]);
        ucp_request_param_t param = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
                                     .flags = UCP_EP_CLOSE_FLAG_FORCE};
        ucs_status_ptr_t r = U.ep_close_nbx(p->ep, &param);
        for (int spins = 0; r && !UCS_PTR_IS_ERR(r) && spins < 100000; spins++) {
            U.worker_progress(e->worker);
            if (U.request_check_status(r) != UCS_INPROGRESS)
                break;
        }
        if (r && !UCS_PTR_IS_ERR(r))
            U.request_free(r);
    }
    for (int i = 0; i < e->n_regions; i++) {
        U.rkey_buffer_release(e->rkeys[i]);
        U.mem_unmap(e->ctx, e->regions[i]);
    }
    if (e->worker)
        U.worker_destroy(e->worker);
    if (e->ctx)
        U.cleanup(e->ctx);
    for (size_t i = 0; i < e->awaiting.len; i++)
        free(e->awaiting.at[i]); /* their peers are gone: no answer comes */
    slots_free(&e->awaiting);
    slots_free(&e->table);
    while (e->held) {
        struct held *h = e->held;
        e->held = h->next;
        free(h);
    }
    free(e->to_flush);
    free(e->peers);
    free(e->posted);
    free(e->done);
    free(e);
}

const char *umqu_provider(const struct umqu_ep *e)
{
    return e->provider;
}

/* Small messages go with UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL: sent now, or "no room" at once. */
size_t umqu_inject_size(const struct umqu_ep *e)
{
    (void)e;
    return 512;
}

int umqu_sends_in_place(const struct umqu_ep *e)
{
    (void)e;
    return 1;
}

/* UCP needs no registration for messages (it registers what it sends from as it needs). */
int umqu_register(struct umqu_ep *e, void *buf, size_t len, void **desc)
{
    (void)e, (void)buf, (void)len;
    *desc = NULL;
    return 0;
}

/* Maps `len` bytes at `buf` for the peers' writes; *key is its index in our address, which
 * grows by its packed key (read the address again after this). */
int umqu_expose(struct umqu_ep *e, void *buf, size_t len, uint64_t *addr, uint64_t *key)
{
    if (e->n_regions == MAX_REGIONS)
        return -ENOSPC;
    ucp_mem_map_params_t mp = {
        .field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH,
        .address = buf,
        .length = len};
    ucp_mem_h m;
    ucs_status_t s = U.mem_map(e->ctx, &mp, &m);
    if (s != UCS_OK)
        return -code_of(s);
    void *packed;
    size_t packed_len;
    s = U.rkey_pack(e->ctx, m, &packed, &packed_len);
    if (s == UCS_OK && packed_len > MAX_RKEY) {
        U.rkey_buffer_release(packed);
        s = UCS_ERR_EXCEEDS_LIMIT;
    }
    if (s != UCS_OK) {
        U.mem_unmap(e->ctx, m);
        return -code_of(s);
    }
    e->regions[e->n_regions] = m;
    e->region_base[e->n_regions] = (uint64_t)(uintptr_t)buf;
    e->region_len[e->n_regions] = len;
    e->rkeys[e->n_regions] = packed;
    e->rkey_lens[e->n_regions] = packed_len;
    *addr = (uint64_t)(uintptr_t)buf;
    *key = (uint64_t)e->n_regions++;
    return 0;
}

static struct peer *peer_of(struct umqu_ep *e, uint64_t peer)
{
    return peer < e->n_peers ? &e->peers[peer] : NULL;
}

/* The peer's usable endpoint, or NULL (and *rc) when it is unknown or its connection failed. */
static ucp_ep_h reach(struct umqu_ep *e, uint64_t peer, int *rc)
{
    struct peer *p = peer_of(e, peer);
    if (!p) {
        *rc = -EINVAL;
        return NULL;
    }
    if (p->failed != UCS_OK) {
        *rc = -code_of(p->failed);
        return NULL;
    }
    return p->ep;
}

int umqu_write(struct umqu_ep *e, const void *buf, size_t len, void *desc, uint64_t peer,
               uint64_t addr, uint64_t key, void *ctx)
{
    (void)desc;
    int rc = 0;
    ucp_ep_h ep = reach(e, peer, &rc);
    if (!ep)
        return rc;
    struct peer *p = peer_of(e, peer);
    if (key >= (uint64_t)p->n_rkeys)
        return -EINVAL;
    struct op *o = op_new(e, ctx, len);
    if (!o)
        return -ENOMEM;
    ucp_request_param_t param = completing(o);
    if (!e->rma_in_software && p->takes_puts)
        return settle(e, U.put_nbx(ep, buf, len, addr, p->rkeys[key], &param), o);
    /* Over tcp UCP's put is a message the target answers, and UCX 1.13 aborts the target's
     * process when that answer cannot go (the initiator closed or died with the put on its way:
     * "unexpected error: Endpoint timeout" in ucp_put_handler); and a target without a NIC runs no
     * put at all (`umqu_open`). Our own message needs no answer. */
    o->hdr = (struct area_hdr){.addr = addr, .key = key};
    param.op_attr_mask |= UCP_OP_ATTR_FIELD_FLAGS;
    param.flags = UCP_AM_SEND_FLAG_EAGER;
    return settle(e, U.am_send_nbx(ep, AREA_ID, &o->hdr, sizeof(o->hdr), buf, len, &param), o);
}

/* Peers' RMA into the process pool (rma.rs): bit 4, keys are packed by the target
 * (umqu_expose_packed: UCP's, or without a NIC entries of our table) and sent to the initiator, which
 * unpacks them (umqu_unpack_key); bit 2, a peer names our memory by its virtual address; bit 8,
 * RMA is carried in software, as messages the target's progress runs (tcp has no RMA lanes:
 * `ucx_info -e -u ra`; ours are carried operations, `carry`). */
int umqu_rma_keyed(const struct umqu_ep *e)
{
    return (e->rma_in_software ? 8 : 0) | 4 | 2 | 1;
}

int umqu_expose_keyed(struct umqu_ep *e, void *buf, size_t len, uint64_t key, void **mr)
{
    (void)e, (void)buf, (void)len, (void)key, (void)mr;
    return -ENOSYS;
}

/* Enters `x` in the table of memory exposed to carried operations, under a fresh secret. */
static int enter(struct umqu_ep *e, struct exposed *x)
{
    if (getrandom(&x->secret, sizeof(x->secret), 0) != (ssize_t)sizeof(x->secret))
        return -EIO;
    return slots_take(&e->table, x, &x->slot);
}

/* Exposes `len` bytes at `buf` for the peers' RMA reads and writes; *mr is the exposure, for
 * umqu_unexpose, and `packed` (room for *packed_len bytes) gets the key a peer unpacks, its
 * length in *packed_len. -ENOSPC when the key does not fit. Where UCP carries no RMA of ours
 * (tcp) the key is an entry of our table, which our handlers check (carried_target): UCP's own
 * software RMA checks no key (docs/TRANSPORTS.md, "Trust"). */
int umqu_expose_packed(struct umqu_ep *e, void *buf, size_t len, void **mr, void *packed,
                       size_t *packed_len)
{
    struct exposed *x = calloc(1, sizeof(*x));
    if (!x)
        return -ENOMEM;
    x->e = e;
    x->base = (uint64_t)(uintptr_t)buf;
    x->len = len;
    if (e->rma_in_software) {
        int rc = *packed_len < CARRIED_KEY_LEN ? -ENOSPC : enter(e, x);
        if (rc) {
            free(x);
            return rc;
        }
        uint8_t *out = packed;
        memcpy(out, CARRIED_MAGIC, sizeof(CARRIED_MAGIC));
        uint64_t slot = x->slot;
        memcpy(out + sizeof(CARRIED_MAGIC), &slot, sizeof(slot));
        memcpy(out + sizeof(CARRIED_MAGIC) + sizeof(slot), &x->secret, sizeof(x->secret));
        *packed_len = CARRIED_KEY_LEN;
        *mr = x;
        return 0;
    }
    ucp_mem_map_params_t mp = {
        .field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH,
        .address = buf,
        .length = len};
    ucs_status_t s = U.mem_map(e->ctx, &mp, &x->mem);
    if (s != UCS_OK) {
        free(x);
        return -code_of(s);
    }
    void *key;
    size_t key_len;
    s = U.rkey_pack(e->ctx, x->mem, &key, &key_len);
    if (s == UCS_OK && key_len > *packed_len) {
        U.rkey_buffer_release(key);
        s = UCS_ERR_EXCEEDS_LIMIT;
    }
    if (s != UCS_OK) {
        U.mem_unmap(e->ctx, x->mem);
        free(x);
        return s == UCS_ERR_EXCEEDS_LIMIT ? -ENOSPC : -code_of(s);
    }
    memcpy(packed, key, key_len);
    *packed_len = key_len;
    U.rkey_buffer_release(key);
    x->ctx = e->ctx;
    *mr = x;
    return 0;
}

/* Ends an exposure of umqu_expose_packed. A carried operation under its key is refused from
 * now (its slot's next entry has another secret); over an RDMA NIC so is a peer's RMA. */
int umqu_unexpose(void *mr)
{
    struct exposed *x = mr;
    ucs_status_t s = UCS_OK;
    if (x->mem) {
        s = U.mem_unmap(x->ctx, x->mem);
    } else {
        slots_give_back(&x->e->table, x->slot);
    }
    free(x);
    return -code_of(s);
}

/* A key the peer packed, unpacked for our operations to it: *key, until umqu_drop_key. The
 * bytes are the peer's, so hostile. A key of the peer's table is taken as it is (the peer
 * checks it); one of UCP's only where our UCP context does RMA (on a NIC). */
int umqu_unpack_key(struct umqu_ep *e, uint64_t peer, const void *packed, size_t len,
                    uint64_t *key)
{
    int rc = 0;
    ucp_ep_h ep = reach(e, peer, &rc);
    if (!ep)
        return rc;
    if (len == 0 || len > MAX_RKEY)
        return -EINVAL;
    struct remote_key *k = calloc(1, sizeof(*k));
    if (!k)
        return -ENOMEM;
    const uint8_t *in = packed;
    if (len == CARRIED_KEY_LEN && !memcmp(in, CARRIED_MAGIC, sizeof(CARRIED_MAGIC))) {
        memcpy(&k->slot, in + sizeof(CARRIED_MAGIC), sizeof(k->slot));
        memcpy(&k->secret, in + sizeof(CARRIED_MAGIC) + sizeof(k->slot), sizeof(k->secret));
        *key = (uint64_t)(uintptr_t)k;
        return 0;
    }
    if (e->rma_in_software) {
        free(k);
        return -ENOSYS;
    }
    /* ucp_ep_rkey_unpack takes no length: it reads a map of memory domains, then a length
     * byte and a key for each, as the bytes say. So it reads a copy, zeroed past the peer's
     * bytes as far as any map could make it read. */
    unsigned char *copy = calloc(1, MAX_RKEY + UNPACK_SLACK);
    if (!copy) {
        free(k);
        return -ENOMEM;
    }
    memcpy(copy, packed, len);
    ucs_status_t s = U.ep_rkey_unpack(ep, copy, &k->ucp);
    free(copy);
    if (s != UCS_OK) {
        free(k);
        return -code_of(s);
    }
    *key = (uint64_t)(uintptr_t)k;
    return 0;
}

void umqu_drop_key(uint64_t key)
{
    struct remote_key *k = (struct remote_key *)(uintptr_t)key;
    if (k->ucp)
        U.rkey_destroy(k->ucp);
    free(k);
}

static void flush_peer(struct peer *p);

/* One part of a WRITE (its put, its flush) is over: the last completes it. */
static void part_done(struct op *o, ucs_status_t status)
{
    if (status != UCS_OK && o->status == UCS_OK)
        o->status = status;
    if (--o->parts == 0) {
        complete(o->e, o->ctx, o->len, o->status);
        free(o);
    }
}

static void put_done(void *request, ucs_status_t status, void *user_data)
{
    U.request_free(request);
    part_done(user_data, status);
}

/* A flush is over: each WRITE that waited for it has its flush part done. */
static void flushed(struct op *batch, ucs_status_t status)
{
    while (batch) {
        struct op *next = batch->next;
        part_done(batch, status);
        batch = next;
    }
}

static void flush_done(void *request, ucs_status_t status, void *user_data)
{
    U.request_free(request);
    flushed(user_data, status);
}

/* A WRITE completes once its bytes are placed at the peer, as libfabric's FI_DELIVERY_COMPLETE:
 * a put's own completion means only that our buffer is free again, so a flush of the endpoint
 * follows, and the later of the two completes the WRITE. One flush serves the WRITEs put to the
 * peer before the next poll (flush_writes), up to FLUSH_BATCH: a stream of WRITEs pays one
 * flush a batch. */
static int write_placed(struct umqu_ep *e, uint64_t peer, const void *buf, size_t len,
                        uint64_t addr, ucp_rkey_h k, struct op *o)
{
    struct peer *p = peer_of(e, peer);
    if (!p->unflushed && e->n_to_flush == e->cap_to_flush) {
        size_t cap = e->cap_to_flush ? e->cap_to_flush * 2 : 16;
        uint64_t *q = realloc(e->to_flush, cap * sizeof(*q));
        if (!q) {
            free(o);
            return -ENOMEM;
        }
        e->to_flush = q;
        e->cap_to_flush = cap;
    }
    ucp_request_param_t param = {.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK |
                                                 UCP_OP_ATTR_FIELD_USER_DATA,
                                 .cb.send = put_done,
                                 .user_data = o};
    ucs_status_ptr_t put = U.put_nbx(p->ep, buf, len, addr, k, &param);
    if (UCS_PTR_IS_ERR(put)) {
        free(o);
        return -code_of(UCS_PTR_STATUS(put));
    }
    o->parts = 1 + (put != NULL);
    if (!p->unflushed)
        e->to_flush[e->n_to_flush++] = peer;
    o->next = p->unflushed;
    p->unflushed = o;
    if (++p->n_unflushed >= FLUSH_BATCH)
        flush_peer(p);
    return 0;
}

/* Flushes `p` for the WRITEs put to it since its last flush. */
static void flush_peer(struct peer *p)
{
    struct op *batch = p->unflushed;
    if (!batch)
        return;
    p->unflushed = NULL;
    p->n_unflushed = 0;
    ucp_request_param_t param = {.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK |
                                                 UCP_OP_ATTR_FIELD_USER_DATA,
                                 .cb.send = flush_done,
                                 .user_data = batch};
    ucs_status_ptr_t r = U.ep_flush_nbx(p->ep, &param);
    if (r == NULL || UCS_PTR_IS_ERR(r))
        flushed(batch, UCS_PTR_STATUS(r));
}

/* Flushes each peer that WRITEs were put to since its last flush, for all of them at once. */
static void flush_writes(struct umqu_ep *e)
{
    for (size_t i = 0; i < e->n_to_flush; i++)
        flush_peer(&e->peers[e->to_flush[i]]);
    e->n_to_flush = 0;
}

/* Carried operations. Without a NIC UCP's own RMA is software too: a message the target's UCP runs,
 * writing or reading wherever it names without checking a key, and aborting the target's
 * process when its answer cannot go. So a WRITE or READ there is a message of ours: the target's
 * handler checks the key against its table and the bytes against the exposed memory, does it or
 * refuses, and answers; the answer completes the operation, a WRITE's once its bytes are placed
 * (FI_DELIVERY_COMPLETE). An operation waits for its answer in `awaiting`, under a handle (its
 * slot and a generation) that the answer names, and only the peer it went to may answer it. */

/* A carried operation's or answer's send: eager, naming us for the answer, completed by `cb`
 * with `user_data`. */
static ucp_request_param_t carried_send(ucp_send_nbx_callback_t cb, void *user_data)
{
    return (ucp_request_param_t){.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK |
                                                 UCP_OP_ATTR_FIELD_USER_DATA |
                                                 UCP_OP_ATTR_FIELD_FLAGS,
                                 .cb.send = cb,
                                 .user_data = user_data,
                                 .flags = UCP_AM_SEND_FLAG_EAGER | UCP_AM_SEND_FLAG_REPLY};
}

/* Files `o`, which waits for an answer from `to`: o->carried.op is its handle. */
static int await_answer(struct umqu_ep *e, struct op *o, ucp_ep_h to)
{
    if (slots_take(&e->awaiting, o, &o->slot))
        return -ENOMEM;
    o->to = to;
    o->waits = 1;
    o->carried.op = (uint64_t)++e->op_generation << 32 | o->slot;
    return 0;
}

/* `o` waits no longer: answered, or no answer can come. */
static void stop_waiting(struct umqu_ep *e, struct op *o)
{
    slots_give_back(&e->awaiting, o->slot);
    o->waits = 0;
}

/* The operation `handle` names, if it waits for an answer from `from`. */
static struct op *answered_by(struct umqu_ep *e, uint64_t handle, ucp_ep_h from)
{
    struct op *o = slots_at(&e->awaiting, (uint32_t)handle);
    return o && o->carried.op == handle && o->to == from ? o : NULL;
}

/* `o` has its answer part done with `status`: the answer came, or none can. */
static void answer_part(struct op *o, ucs_status_t status)
{
    stop_waiting(o->e, o);
    part_done(o, status);
}

static void carried_sent(void *request, ucs_status_t status, void *user_data)
{
    struct op *o = user_data;
    U.request_free(request);
    if (status != UCS_OK && o->waits) {
        stop_waiting(o->e, o); /* it never reached the target: no answer comes */
        o->parts--;            /* the send's part, done below, is the last */
    }
    part_done(o, status);
}

/* The operations waiting for `ep`'s answers fail with `status`: its connection failed. */
static void fail_awaiting(struct umqu_ep *e, ucp_ep_h ep, ucs_status_t status)
{
    for (size_t i = 0; i < e->awaiting.len; i++) {
        struct op *o = e->awaiting.at[i];
        if (o && o->to == ep)
            answer_part(o, status);
    }
}

/* Sends the carried WRITE (`len` bytes at `buf`) or READ (`len` bytes into `buf`) to the memory
 * at `addr` of the peer at `ep`, under the entry `k` of its table: the operation `o`. */
static int carry(struct umqu_ep *e, int read, void *buf, size_t len, ucp_ep_h ep,
                 uint64_t addr, const struct remote_key *k, struct op *o)
{
    if (await_answer(e, o, ep)) {
        free(o);
        return -ENOMEM;
    }
    o->read_into = read ? buf : NULL;
    o->carried.addr = addr;
    o->carried.len = len;
    o->carried.slot = k->slot;
    o->carried.secret = k->secret;
    ucp_request_param_t param = carried_send(carried_sent, o);
    ucs_status_ptr_t r = U.am_send_nbx(ep, read ? CARRIED_READ_ID : CARRIED_WRITE_ID,
                                       &o->carried, sizeof(o->carried), read ? NULL : buf,
                                       read ? 0 : len, &param);
    if (UCS_PTR_IS_ERR(r)) {
        stop_waiting(e, o);
        free(o);
        return -code_of(UCS_PTR_STATUS(r));
    }
    o->parts = 1 + (r != NULL);
    return 0;
}

/* The memory a carried operation's header names, if an entry of our table exposes all of it
 * under the secret the header gives; else NULL. */
static void *carried_target(struct umqu_ep *e, const struct carried_hdr *h)
{
    struct exposed *x = slots_at(&e->table, h->slot);
    if (!x || x->secret != h->secret || h->addr < x->base || h->len > x->len ||
        h->addr - x->base > x->len - h->len)
        return NULL;
    return (void *)(uintptr_t)h->addr;
}

/* A carried operation's header, if the message is one: whole, eager, with a peer to answer. */
static int carried_request(const void *header, size_t header_len,
                           const ucp_am_recv_param_t *param, struct carried_hdr *h)
{
    if (header_len != sizeof(*h) || (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) ||
        !(param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP))
        return 0;
    memcpy(h, header, sizeof(*h));
    return 1;
}

/* Bytes of answers copied for UCP to send later that a node keeps at most: past them a READ is
 * refused. A peer's requests are hostile, and one that asked for READs without ever reading
 * the answers would otherwise have the target copy its memory without end. Our own peers keep
 * at most 8 MiB of READs in flight each (READS_ALONE in node.rs), most answered at once. */
#define ANSWER_COPIES_MAX ((size_t)256 << 20)

struct answer_msg {
    struct umqu_ep *e;
    struct carried_answer hdr;
    size_t len;
    unsigned char bytes[];
};

static void answer_sent(void *request, ucs_status_t status, void *user_data)
{
    (void)status;
    struct answer_msg *m = user_data;
    U.request_free(request);
    m->e->answer_copies -= m->len;
    free(m);
}

/* Answers the carried operation `op` of the peer at `to`: done, with a READ's `len` bytes at
 * `bytes`, or refused. UCP sends what it can at once from our memory; else (a long READ) the
 * bytes are copied, as the memory may be withdrawn before UCP reads them, up to
 * ANSWER_COPIES_MAX in all (past it the READ is refused). An answer we cannot allocate is not
 * sent: the peer's operation then waits until its binding breaks. */
static void answer(struct umqu_ep *e, ucp_ep_h to, uint64_t op, int done, const void *bytes,
                   size_t len)
{
    struct carried_answer a = {.op = op, .refused = !done};
    ucp_request_param_t now = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS |
                                               UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL,
                               .flags = UCP_AM_SEND_FLAG_EAGER | UCP_AM_SEND_FLAG_REPLY};
    ucs_status_ptr_t r = U.am_send_nbx(to, CARRIED_ANSWER_ID, &a, sizeof(a), bytes, len, &now);
    if (r == NULL || (UCS_PTR_IS_ERR(r) && UCS_PTR_STATUS(r) != UCS_ERR_NO_RESOURCE))
        return;
    if (!UCS_PTR_IS_ERR(r)) {
        U.request_free(r); /* not expected under FORCE_IMM_CMPL: it went */
        return;
    }
    if (len > ANSWER_COPIES_MAX - e->answer_copies) {
        a.refused = 1;
        len = 0;
    }
    struct answer_msg *m = malloc(sizeof(*m) + len);
    if (!m)
        return;
    m->e = e;
    m->hdr = a;
    m->len = len;
    memcpy(m->bytes, bytes, len);
    e->answer_copies += len;
    ucp_request_param_t later = carried_send(answer_sent, m);
    r = U.am_send_nbx(to, CARRIED_ANSWER_ID, &m->hdr, sizeof(m->hdr), m->bytes, len, &later);
    if (r == NULL || UCS_PTR_IS_ERR(r)) {
        e->answer_copies -= len;
        free(m);
    }
}

/* A peer's carried WRITE: placed if our table exposes where it names, then answered. */
static ucs_status_t carried_write_arrived(void *arg, const void *header, size_t header_len,
                                          void *data, size_t len,
                                          const ucp_am_recv_param_t *param)
{
    struct umqu_ep *e = arg;
    struct carried_hdr h;
    if (!carried_request(header, header_len, param, &h))
        return UCS_OK;
    void *at = h.len == len ? carried_target(e, &h) : NULL;
    if (at)
        memcpy(at, data, len);
    answer(e, param->reply_ep, h.op, at != NULL, NULL, 0);
    return UCS_OK;
}

/* A peer's carried READ: answered with the bytes if our table exposes them, else refused. */
static ucs_status_t carried_read_arrived(void *arg, const void *header, size_t header_len,
                                         void *data, size_t len,
                                         const ucp_am_recv_param_t *param)
{
    (void)data;
    struct umqu_ep *e = arg;
    struct carried_hdr h;
    if (!carried_request(header, header_len, param, &h))
        return UCS_OK;
    void *at = len == 0 ? carried_target(e, &h) : NULL;
    answer(e, param->reply_ep, h.op, at != NULL, at, at ? h.len : 0);
    return UCS_OK;
}

/* The target's answer to a carried operation of ours: a READ's bytes land, and the operation's
 * answer part is done. One that names no operation waiting for this peer is dropped. */
static ucs_status_t carried_answered(void *arg, const void *header, size_t header_len,
                                     void *data, size_t len, const ucp_am_recv_param_t *param)
{
    struct umqu_ep *e = arg;
    struct carried_answer a;
    if (header_len != sizeof(a) || (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) ||
        !(param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP))
        return UCS_OK;
    memcpy(&a, header, sizeof(a));
    struct op *o = answered_by(e, a.op, param->reply_ep);
    if (!o)
        return UCS_OK;
    ucs_status_t s = a.refused ? UCS_ERR_REJECTED : UCS_OK;
    size_t expected = o->read_into && !a.refused ? o->len : 0;
    if (s == UCS_OK && len != expected)
        s = UCS_ERR_MESSAGE_TRUNCATED; /* a hostile or broken answer: nothing lands */
    else if (s == UCS_OK && o->read_into)
        memcpy(o->read_into, data, len);
    answer_part(o, s);
    return UCS_OK;
}

/* One-sided, into or out of the peer's memory at `addr` under `key` (umqu_unpack_key): with
 * `read` set, reads `len` bytes of it into `buf`; else writes `len` bytes at `buf` into it,
 * completing once they are placed there. Its completion carries `ctx`. Under a key of the
 * peer's table, a carried operation; under UCP's, UCP's RMA, each WRITE followed by a flush
 * that serves a batch (write_placed). */
int umqu_rma(struct umqu_ep *e, int how, void *buf, size_t len, uint64_t peer, uint64_t addr,
             uint64_t key, void *ctx)
{
    int read = how & UMQF_RMA_READ;
    const struct remote_key *k = (const struct remote_key *)(uintptr_t)key;
    int rc = 0;
    ucp_ep_h ep = reach(e, peer, &rc);
    if (!ep)
        return rc;
    struct op *o = op_new(e, ctx, len);
    if (!o)
        return -ENOMEM;
    if (!k->ucp)
        return carry(e, read, buf, len, ep, addr, k, o);
    if (!read)
        return write_placed(e, peer, buf, len, addr, k->ucp, o);
    ucp_request_param_t param = completing(o);
    return settle(e, U.get_nbx(ep, buf, len, addr, k->ucp, &param), o);
}

int umqu_wait_fd(const struct umqu_ep *e)
{
    return e->wait_fd;
}

/* Progresses UCP while the completions waiting stay `done_len` and a call moved something, at
 * most MAX_BITES calls. UCP's progress takes a bounded bite of each socket, and the peers' RMA
 * moves bytes but completes nothing of ours: a sleeping target the call bell woke serves a
 * stream of it in one look. */
static void progress_while(struct umqu_ep *e, size_t done_len)
{
    for (int bites = 0; e->done_len == done_len && bites < MAX_BITES; bites++)
        if (!U.worker_progress(e->worker))
            break;
}

/* The worker's event fd, watched while a ring asks for its connection (UCP's sockets are its
 * own: the event fd is what says that bytes arrived on them). */
int umqu_event_fd(const struct umqu_ep *e)
{
    return e->event_fd;
}

/* Before the progress thread sleeps on the event fd for a ring: progresses UCP until it has
 * nothing to do, then arms the fd. 0 when armed; 1 when that progress gave completions, or UCP
 * still had events after a few tries (serve the ring's queue again, sleep after); a negative
 * code. Completions already waiting (a message for a queue without a receive buffer) do not
 * count: they would keep the thread serving a queue that cannot take them. */
int umqu_arm_watch(struct umqu_ep *e)
{
    size_t had = e->done_len;
    for (int tries = 0; tries < ARM_TRIES; tries++) {
        progress_while(e, had);
        if (e->done_len != had)
            return 1;
        ucs_status_t s = U.worker_arm(e->worker);
        if (s == UCS_OK)
            return 0;
        if (s != UCS_ERR_BUSY)
            return -code_of(s);
    }
    return 1;
}

/* 0 when sleeping on the wait fd is safe; -EAGAIN when completions wait, or WRITEs wait for the
 * flush a poll starts (poll first). */
int umqu_trywait(struct umqu_ep *e)
{
    if (e->done_len || e->n_to_flush)
        return -EAGAIN;
    ucs_status_t s = U.worker_arm(e->worker);
    return s == UCS_OK ? 0 : s == UCS_ERR_BUSY ? -EAGAIN : -code_of(s);
}

/* Our address: MAGIC, a flags byte (TAKES_PUTS), the packed keys of our exposed regions (a
 * count, then each with a length byte), then the worker's address. */
int umqu_name(struct umqu_ep *e, void *addr, size_t *len)
{
    ucp_address_t *w;
    size_t w_len, need = sizeof(MAGIC) + 2;
    ucs_status_t s = U.worker_get_address(e->worker, &w, &w_len);
    if (s != UCS_OK)
        return -code_of(s);
    for (int i = 0; i < e->n_regions; i++)
        need += 1 + e->rkey_lens[i];
    need += w_len;
    if (need > *len) {
        U.worker_release_address(e->worker, w);
        *len = need;
        return -ENOSPC;
    }
    uint8_t *out = addr;
    memcpy(out, MAGIC, sizeof(MAGIC));
    out += sizeof(MAGIC);
    *out++ = e->rma_in_software ? 0 : TAKES_PUTS;
    *out++ = (uint8_t)e->n_regions;
    for (int i = 0; i < e->n_regions; i++) {
        *out++ = (uint8_t)e->rkey_lens[i];
        memcpy(out, e->rkeys[i], e->rkey_lens[i]);
        out += e->rkey_lens[i];
    }
    memcpy(out, w, w_len);
    U.worker_release_address(e->worker, w);
    *len = need;
    return 0;
}

/* The IP socket address queues asked this node on (port 0), for the death watch: 0 and *len,
 * or -ENOENT when they named none. */
int umqu_host(const struct umqu_ep *e, void *addr, size_t *len)
{
    if (!e->host_len)
        return -ENOENT;
    if (*len < e->host_len)
        return -ENOSPC;
    memcpy(addr, &e->host, e->host_len);
    *len = e->host_len;
    return 0;
}

/* Makes the peer whose address (umqu_name) is the `len` bytes at `addr` reachable as *peer.
 * The address is a peer's, so hostile: every length in it is checked against `len`. */
int umqu_connect(struct umqu_ep *e, const void *addr, size_t len, uint64_t *peer)
{
    const uint8_t *in = addr, *end = in + len;
    if (len < sizeof(MAGIC) + 2 || memcmp(in, MAGIC, sizeof(MAGIC)))
        return -EINVAL;
    in += sizeof(MAGIC);
    int flags = *in++;
    int n_rkeys = *in++;
    const uint8_t *rkey_at[MAX_REGIONS];
    if (n_rkeys > MAX_REGIONS)
        return -EINVAL;
    for (int i = 0; i < n_rkeys; i++) {
        if (in >= end || *in == 0 || (size_t)(end - in) < 1u + *in)
            return -EINVAL;
        rkey_at[i] = in + 1;
        in += 1 + *in;
    }
    if (in == end)
        return -EINVAL;
    if (e->n_peers == e->cap_peers) {
        size_t cap = e->cap_peers ? e->cap_peers * 2 : 16;
        struct peer *p = realloc(e->peers, cap * sizeof(*p));
        if (!p)
            return -ENOMEM;
        e->peers = p;
        e->cap_peers = cap;
    }
    struct peer *p = &e->peers[e->n_peers];
    *p = (struct peer){.failed = UCS_OK, .takes_puts = !!(flags & TAKES_PUTS)};
    /* UCP reads the worker address as it creates the endpoint and keeps no pointer to it. */
    ucp_ep_params_t ep = {
        .field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                      UCP_EP_PARAM_FIELD_ERR_HANDLER,
        .address = (const ucp_address_t *)in,
        .err_mode = UCP_ERR_HANDLING_MODE_PEER,
        .err_handler = {.cb = peer_failed, .arg = e}};
    ucs_status_t s = U.ep_create(e->worker, &ep, &p->ep);
    if (s != UCS_OK)
        return -code_of(s);
    for (; p->n_rkeys < n_rkeys; p->n_rkeys++) {
        s = U.ep_rkey_unpack(p->ep, rkey_at[p->n_rkeys], &p->rkeys[p->n_rkeys]);
        if (s != UCS_OK)
            break;
    }
    *peer = e->n_peers++;
    return s == UCS_OK ? 0 : -code_of(s);
}

/* Posts a receive buffer: UCP is not told, our handler fills the buffers in posting order.
 * -EAGAIN when as many are posted as the completion queue holds, as fi_recv's full queue. */
int umqu_recv(struct umqu_ep *e, void *buf, size_t len, void *desc, void *ctx)
{
    (void)desc;
    if (e->posted_len == e->posted_cap)
        return -EAGAIN;
    e->posted[(e->posted_head + e->posted_len++) % e->posted_cap] =
        (struct posted){.buf = buf, .len = len, .ctx = ctx};
    take_held(e);
    return 0;
}

/* Sends `count` pieces (`iov`) to `peer` as one message; its completion carries `ctx`. */
static int send_pieces(struct umqu_ep *e, const ucp_dt_iov_t *iov, size_t count, uint64_t peer,
                       void *ctx)
{
    int rc = 0;
    ucp_ep_h ep = reach(e, peer, &rc);
    if (!ep)
        return rc;
    size_t total = 0;
    for (size_t i = 0; i < count; i++)
        total += iov[i].length;
    struct op *o = op_new(e, ctx, total);
    if (!o)
        return -ENOMEM;
    ucp_request_param_t param = completing(o);
    const void *buf = iov[0].buffer;
    size_t n = iov[0].length;
    if (count > 1) {
        memcpy(o->iov, iov, count * sizeof(*iov));
        param.op_attr_mask |= UCP_OP_ATTR_FIELD_DATATYPE;
        param.datatype = ucp_dt_make_iov();
        buf = o->iov;
        n = count;
    }
    return settle(e, send_message(ep, buf, n, &param), o);
}

/* Sends `len` bytes at `buf` to `peer` now or not at all (-EAGAIN), with no completion, as
 * fi_inject: nothing outlives the call, so nothing is allocated for it. */
static int inject(struct umqu_ep *e, const void *buf, size_t len, uint64_t peer)
{
    int rc = 0;
    ucp_ep_h ep = reach(e, peer, &rc);
    if (!ep)
        return rc;
    ucp_request_param_t param = {.op_attr_mask = UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL};
    ucs_status_ptr_t r = send_message(ep, buf, len, &param);
    if (UCS_PTR_IS_ERR(r))
        return -code_of(UCS_PTR_STATUS(r));
    if (r != NULL)
        U.request_free(r); /* not expected under FORCE_IMM_CMPL; it completes by itself */
    return 0;
}

int umqu_send2(struct umqu_ep *e, const void *head, size_t head_len, void *desc, const void *body,
               size_t body_len, uint64_t peer, void *ctx)
{
    (void)desc;
    ucp_dt_iov_t iov[2] = {{(void *)head, head_len}, {(void *)body, body_len}};
    return send_pieces(e, iov, 2, peer, ctx);
}

int umqu_send(struct umqu_ep *e, const void *buf, size_t len, void *desc, uint64_t peer,
              void *ctx)
{
    (void)desc;
    if (!ctx)
        return inject(e, buf, len, peer);
    ucp_dt_iov_t iov[1] = {{(void *)buf, len}};
    return send_pieces(e, iov, 1, peer, ctx);
}

/* Runs UCP's progress (its callbacks append completions), then hands out up to `max`. */
int umqu_poll(struct umqu_ep *e, struct umqf_cqe *out, int max)
{
    if (e->lost)
        return -ENOSPC;
    if (e->n_to_flush)
        flush_writes(e);
    progress_while(e, 0);
    int got = 0;
    for (; got < max && e->done_len; got++, e->done_len--) {
        out[got] = e->done[e->done_head];
        e->done_head = (e->done_head + 1) % e->done_cap;
    }
    return got;
}

/* UCX's version ("1.13.1"), or a negative code and `why`. */
int umqu_probe(char *version, size_t version_len, char *why, size_t n)
{
    if (umqu_load(why, n))
        return -ENOSYS;
    unsigned major, minor, release;
    U.get_version(&major, &minor, &release);
    snprintf(version, version_len, "%u.%u.%u", major, minor, release);
    return 0;
}

/* For tests: a stranger, a process speaking UCP with RMA on (as anyone reaching a node's
 * listening port may), runs a put of `len` bytes at `buf` to `addr` in the node whose address
 * (umqu_name) is `name`, then a get of `len` bytes from `addr` into `buf`, under the first key
 * of the node's address; `serve(arg)` runs the node between its own progress calls. Each waits
 * for UCP's completion at most `spins` rounds. 0 when both completed, 1 when one did not (the
 * target ran neither), a negative code when the stranger could not start. */
int umqu_stranger_rma(const void *name, size_t name_len, uint64_t addr, void *buf, size_t len,
                      void (*serve)(void *), void *arg, int spins)
{
    char why[256];
    const uint8_t *in = name;
    if (umqu_load(why, sizeof(why)) || name_len < sizeof(MAGIC) + 4 || in[5] == 0 ||
        name_len < 7u + in[6])
        return -EINVAL;
    const uint8_t *rkey = in + 7, *worker = in + 6;
    for (int i = 0; i < in[5]; i++)
        worker += 1 + *worker;
    ucp_config_t *cfg;
    ucp_context_h ctx = NULL;
    ucp_worker_h w = NULL;
    ucp_ep_h ep = NULL;
    ucp_rkey_h k = NULL;
    ucp_params_t params = {.field_mask = UCP_PARAM_FIELD_FEATURES,
                           .features = UCP_FEATURE_AM | UCP_FEATURE_RMA};
    ucp_worker_params_t wp = {.field_mask = 0};
    ucp_ep_params_t ep_params = {.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS,
                                 .address = (const ucp_address_t *)worker};
    ucs_status_t s = U.config_read(NULL, NULL, &cfg);
    if (s == UCS_OK) {
        if (!getenv("UCX_TLS"))
            U.config_modify(cfg, "TLS", "tcp");
        s = U.init_version(UCP_API_MAJOR, UCP_API_MINOR, &params, cfg, &ctx);
        U.config_release(cfg);
    }
    if (s == UCS_OK)
        s = U.worker_create(ctx, &wp, &w);
    if (s == UCS_OK)
        s = U.ep_create(w, &ep_params, &ep);
    if (s == UCS_OK)
        s = U.ep_rkey_unpack(ep, rkey, &k);
    int rc = s == UCS_OK ? 0 : -code_of(s), stuck = 0;
    ucp_request_param_t none = {.op_attr_mask = 0};
    for (int get = 0; get < 2 && rc == 0; get++) {
        ucs_status_ptr_t r = get ? U.get_nbx(ep, buf, len, addr, k, &none)
                                 : U.put_nbx(ep, buf, len, addr, k, &none);
        if (!UCS_PTR_IS_ERR(r) && r == NULL)
            r = U.ep_flush_nbx(ep, &none);
        for (int i = 0; i < spins && r && !UCS_PTR_IS_ERR(r) &&
                        U.request_check_status(r) == UCS_INPROGRESS;
             i++) {
            U.worker_progress(w);
            serve(arg);
        }
        if (UCS_PTR_IS_ERR(r))
            rc = -code_of(UCS_PTR_STATUS(r));
        else if (r && U.request_check_status(r) == UCS_INPROGRESS)
            stuck = 1;
        if (r && !UCS_PTR_IS_ERR(r))
            U.request_free(r);
    }
    if (k)
        U.rkey_destroy(k);
    if (ep) {
        ucp_request_param_t force = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
                                     .flags = UCP_EP_CLOSE_FLAG_FORCE};
        ucs_status_ptr_t r = U.ep_close_nbx(ep, &force);
        for (int i = 0; i < 1000 && r && !UCS_PTR_IS_ERR(r) &&
                        U.request_check_status(r) == UCS_INPROGRESS;
             i++)
            U.worker_progress(w);
        if (r && !UCS_PTR_IS_ERR(r))
            U.request_free(r);
    }
    if (w)
        U.worker_destroy(w);
    if (ctx)
        U.cleanup(ctx);
    return rc ? rc : stuck;
}

#else /* built without UCX's headers: every call says so */

#define NO_UCX "libumq was built without UCX's headers (install libucx-dev and rebuild)"

int umqu_open(const char *prov, const char *node, size_t cq_size, int wakeable, size_t eager,
              struct umqu_ep **out, char *why, size_t n)
{
    (void)prov, (void)node, (void)cq_size, (void)wakeable, (void)eager, (void)out;
    snprintf(why, n, "%s", NO_UCX);
    return -ENOSYS;
}
int umqu_probe(char *version, size_t version_len, char *why, size_t n)
{
    (void)version, (void)version_len;
    snprintf(why, n, "%s", NO_UCX);
    return -ENOSYS;
}
/* Never reached without an endpoint, which umqu_open never gives here. */
void umqu_close(struct umqu_ep *e) { (void)e; }
const char *umqu_provider(const struct umqu_ep *e) { (void)e; return ""; }
size_t umqu_inject_size(const struct umqu_ep *e) { (void)e; return 0; }
int umqu_sends_in_place(const struct umqu_ep *e) { (void)e; return 0; }
int umqu_register(struct umqu_ep *e, void *b, size_t l, void **d) { (void)e, (void)b, (void)l, (void)d; return -ENOSYS; }
int umqu_expose(struct umqu_ep *e, void *b, size_t l, uint64_t *a, uint64_t *k) { (void)e, (void)b, (void)l, (void)a, (void)k; return -ENOSYS; }
int umqu_write(struct umqu_ep *e, const void *b, size_t l, void *d, uint64_t p, uint64_t a, uint64_t k, void *c) { (void)e, (void)b, (void)l, (void)d, (void)p, (void)a, (void)k, (void)c; return -ENOSYS; }
int umqu_rma_keyed(const struct umqu_ep *e) { (void)e; return 0; }
int umqu_expose_keyed(struct umqu_ep *e, void *b, size_t l, uint64_t k, void **m) { (void)e, (void)b, (void)l, (void)k, (void)m; return -ENOSYS; }
int umqu_expose_packed(struct umqu_ep *e, void *b, size_t l, void **m, void *p, size_t *pl) { (void)e, (void)b, (void)l, (void)m, (void)p, (void)pl; return -ENOSYS; }
int umqu_unexpose(void *m) { (void)m; return -ENOSYS; }
int umqu_unpack_key(struct umqu_ep *e, uint64_t p, const void *k, size_t l, uint64_t *out) { (void)e, (void)p, (void)k, (void)l, (void)out; return -ENOSYS; }
void umqu_drop_key(uint64_t k) { (void)k; }
int umqu_rma(struct umqu_ep *e, int r, void *b, size_t l, uint64_t p, uint64_t a, uint64_t k, void *c) { (void)e, (void)r, (void)b, (void)l, (void)p, (void)a, (void)k, (void)c; return -ENOSYS; }
int umqu_wait_fd(const struct umqu_ep *e) { (void)e; return -1; }
int umqu_event_fd(const struct umqu_ep *e) { (void)e; return -1; }
int umqu_arm_watch(struct umqu_ep *e) { (void)e; return -ENOSYS; }
int umqu_trywait(struct umqu_ep *e) { (void)e; return -ENOSYS; }
int umqu_name(struct umqu_ep *e, void *a, size_t *l) { (void)e, (void)a, (void)l; return -ENOSYS; }
int umqu_host(const struct umqu_ep *e, void *a, size_t *l) { (void)e, (void)a, (void)l; return -ENOSYS; }
int umqu_connect(struct umqu_ep *e, const void *a, size_t l, uint64_t *p) { (void)e, (void)a, (void)l, (void)p; return -ENOSYS; }
int umqu_recv(struct umqu_ep *e, void *b, size_t l, void *d, void *c) { (void)e, (void)b, (void)l, (void)d, (void)c; return -ENOSYS; }
int umqu_send2(struct umqu_ep *e, const void *h, size_t hl, void *d, const void *b, size_t bl, uint64_t p, void *c) { (void)e, (void)h, (void)hl, (void)d, (void)b, (void)bl, (void)p, (void)c; return -ENOSYS; }
int umqu_send(struct umqu_ep *e, const void *b, size_t l, void *d, uint64_t p, void *c) { (void)e, (void)b, (void)l, (void)d, (void)p, (void)c; return -ENOSYS; }
int umqu_poll(struct umqu_ep *e, struct umqf_cqe *o, int m) { (void)e, (void)o, (void)m; return -ENOSYS; }
int umqu_stranger_rma(const void *n, size_t nl, uint64_t a, void *b, size_t l, void (*s)(void *), void *arg, int sp) { (void)n, (void)nl, (void)a, (void)b, (void)l, (void)s, (void)arg, (void)sp; return -ENOSYS; }

#endif

/* UCP's connections are its own: how far their streams have got is not known here (a paced
 * queue's packets then go to UCP as granted, `umqf_stream_at`). */
int umqu_stream_at(struct umqu_ep *e, uint64_t peer, uint64_t *handed, uint64_t *sent)
{
    (void)e, (void)peer, (void)handed, (void)sent;
    return -ENOSYS;
}

/* UCP's sockets are its own, and its progress is not driven by their readiness here. */
int umqu_conn_sockets(struct umqu_ep *e, uint64_t peer, int *fds)
{
    (void)e, (void)peer, (void)fds;
    return 0;
}
