/* The network provider's second engine: UCX's UCP, behind the same narrow interface as
 * libfabric's (shim.c), so the node above runs unchanged on either (UMQ_FABRIC_PROVIDER=ucx).
 *
 * What libfabric gives as objects, UCP gives as a worker: one worker is the node's endpoint,
 * its completion queue and its address vector. Messages are UCP tagged messages, sent eagerly,
 * and each receive buffer the node posts is a UCP receive of any tag: UCP fills them in posting
 * order, as fi_recv fills buffers, and a message that finds none posted waits in UCP's
 * unexpected queue until the next is (taken by probe then: UCP before 1.16 does not say the
 * length of a receive that completes at once). Tagged rather than active messages because of
 * how each leaves over tcp: a short tagged send is copied behind its header and goes in one
 * send(), an active message in a sendmsg() of three pieces (UCP's header, ours, the payload),
 * whose system call took 450-700 TSC cycles longer a message on 127.0.0.1 (a 64 B ping-pong's
 * send, timed). UCP completes sends and receives by callback, from inside ucp_worker_progress;
 * the callbacks append to a completion list that umqu_poll hands out as libfabric's completion
 * queue would. Flow-control areas and carried one-sided operations stay active messages: their
 * handlers act as they arrive, whether or not a buffer is posted.
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

#include "ucx.h"

struct ucp_calls U;

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
                FIND(tag_send_nbx, "ucp_tag_send_nbx") &&
                FIND(tag_recv_nbx, "ucp_tag_recv_nbx") &&
                FIND(tag_probe_nb, "ucp_tag_probe_nb") &&
                FIND(tag_msg_recv_nbx, "ucp_tag_msg_recv_nbx") &&
                FIND(request_cancel, "ucp_request_cancel") &&
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
int ucx_code_of(ucs_status_t s)
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
/* In our address's flags byte: our UCP context runs UCP's RMA (`ucp_rma`). */
#define TAKES_PUTS 1
/* UCP progress calls one poll makes at most while they move data but complete nothing. */
#define MAX_BITES 64
/* Arms of the event fd a watch tries while UCP reports events, progressing between them. */
#define ARM_TRIES 4
/* Slot `i` places after `head` of a ring of `cap` (i <= cap, head < cap). A subtraction, not
 * `%`: the capacities are not powers of two, and a division on every completion and receive
 * buffer stood on a message's path (tens of cycles each). */
static inline size_t ring_at(size_t head, size_t i, size_t cap)
{
    size_t at = head + i;
    return at >= cap ? at - cap : at;
}

/* Room for `cap` completions, those waiting kept in order; 0, or -1 out of memory. */
static int make_room(struct umqu_ep *e, size_t cap)
{
    struct umqf_cqe *q = malloc(cap * sizeof(*q));
    if (!q)
        return -1;
    for (size_t i = 0; i < e->done_len; i++)
        q[i] = e->done[ring_at(e->done_head, i, e->done_cap)];
    free(e->done);
    e->done = q;
    e->done_head = 0;
    e->done_cap = cap;
    return 0;
}

/* Appends a receive's completion, whose message carried the word `from` as its tag. The ring
 * holds the node's completion queue size from the start, which bounds what can be in flight;
 * past it the ring grows, and a completion that still finds no room fails the queue (umqu_poll),
 * as an overrun libfabric queue does, rather than vanish. */
static inline void ucx_complete_from(struct umqu_ep *e, void *ctx, uint64_t len, ucs_status_t s,
                              uint64_t from)
{
    if (e->done_len == e->done_cap && make_room(e, e->done_cap * 2)) {
        e->lost = 1;
        return;
    }
    e->done[ring_at(e->done_head, e->done_len++, e->done_cap)] = (struct umqf_cqe){
        .ctx = ctx, .len = len, .err = ucx_code_of(s), .prov_errno = (int32_t)s, .from = from};
}

/* Appends a completion (`ucx_complete_from` of one that carries no word). */
void ucx_complete(struct umqu_ep *e, void *ctx, uint64_t len, ucs_status_t s)
{
    ucx_complete_from(e, ctx, len, s, 0);
}

static void sent(void *request, ucs_status_t status, void *user_data)
{
    struct op *o = user_data;
    ucx_complete(o->e, o->ctx, o->len, status);
    free(o);
    U.request_free(request);
}

/* UCP's callback for a receive it completed: the buffer's completion. */
static void received(void *request, ucs_status_t status, const ucp_tag_recv_info_t *info,
                     void *user_data)
{
    (void)user_data;
    struct rx_req *q = request;
    struct umqu_ep *e = q->e;
    if (q->prev)
        q->prev->next = q->next;
    else
        e->posted = q->next;
    if (q->next)
        q->next->prev = q->prev;
    e->posted_len--;
    if (status == UCS_OK)
        ucx_complete_from(e, q->ctx, info->length, status, info->sender_tag);
    else
        ucx_complete(e, q->ctx, 0, status);
    U.request_free(request);
}

/* UCP's handler for a peer's write of its flow-control area into our landing words (umqu_write):
 * copied where it names, if that is one whole slot of the region its key names and the write
 * begins with the slot's own first word (its channel's generation, which only the channel's
 * peer was given); else dropped, as a stranger's, a stale peer's, or a peer's write into a
 * channel not its own, whose words it would spoil until their peer wrote them again. */
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
    size_t slot = e->region_slot[h.key];
    if (h.addr < base || len > size || h.addr - base > size - len)
        return UCS_OK;
    if (slot && ((h.addr - base) % slot || len != slot || len < sizeof(uint64_t) ||
                 memcmp(data, (const void *)(uintptr_t)h.addr, sizeof(uint64_t))))
        return UCS_OK;
    memcpy((void *)(uintptr_t)h.addr, data, len);
    return UCS_OK;
}

static void peer_failed(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    struct peer *p = NULL;
    struct umqu_ep *e = arg;
    for (size_t i = 0; i < e->n_peers && !p; i++)
        if (e->peers[i].ep == ep)
            p = &e->peers[i];
    if (p)
        p->failed = status;
    ucx_fail_awaiting(e, ep, status);
}

/* Where an operation stands as it returns: done now (its completion appended), handed to UCP
 * (its callback appends it and frees `o`), or failed (a negative code). */
int ucx_settle(struct umqu_ep *e, ucs_status_ptr_t r, struct op *o)
{
    if (r == NULL) {
        ucx_complete(e, o->ctx, o->len, UCS_OK);
        free(o);
        return 0;
    }
    if (UCS_PTR_IS_ERR(r)) {
        free(o);
        return -ucx_code_of(UCS_PTR_STATUS(r));
    }
    return 0;
}

struct op *ucx_op_new(struct umqu_ep *e, void *ctx, uint64_t len)
{
    struct op *o = malloc(sizeof(*o));
    if (o)
        *o = (struct op){.e = e, .ctx = ctx, .len = len};
    return o;
}

/* Operations that end only once a flush of their peer has followed them: a WRITE put by UCP's
 * RMA (placed at the peer, ucx_rma.c) and a message (its bytes handed to the kernel). `parts`
 * counts the operation's request and that flush; the last to end completes it. */

/* Operations to a peer one flush serves at most: the first of a long stream does not wait for
 * the last to be handed over before it completes. */
#define FLUSH_BATCH 16

void ucx_part_done(struct op *o, ucs_status_t status)
{
    if (status != UCS_OK && o->status == UCS_OK)
        o->status = status;
    if (--o->parts == 0) {
        if (o->settled)
            ucx_peer_of(o->e, o->peer)->settled -= o->len;
        ucx_complete(o->e, o->ctx, o->len, o->status);
        free(o);
    }
}

/* A message's send is over at UCP: its bytes are UCT's or the kernel's, and count no more in
 * what we hold for the peer (`umqu_settled`), though the message completes only at its flush. */
static void message_settled(struct op *o, ucs_status_t status)
{
    if (status == UCS_OK && o->parts > 1) {
        o->settled = 1;
        ucx_peer_of(o->e, o->peer)->settled += o->len;
    }
    ucx_part_done(o, status);
}

static void message_sent(void *request, ucs_status_t status, void *user_data)
{
    U.request_free(request);
    message_settled(user_data, status);
}

static void part_done(void *request, ucs_status_t status, void *user_data)
{
    U.request_free(request);
    ucx_part_done(user_data, status);
}

/* The parameters of an operation in parts: its request's end is one part of `o`. */
ucp_request_param_t ucx_in_parts(struct op *o)
{
    return (ucp_request_param_t){
        .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
        .cb.send = part_done,
        .user_data = o};
}

/* A flush is over: each operation that waited for it has its flush part done. */
static void flushed(struct op *batch, ucs_status_t status)
{
    while (batch) {
        struct op *next = batch->next;
        ucx_part_done(batch, status);
        batch = next;
    }
}

static void flush_done(void *request, ucs_status_t status, void *user_data)
{
    U.request_free(request);
    struct op *batch = user_data;
    batch->e->flushing--;
    flushed(batch, status);
}

/* Flushes `p` for the operations issued to it since its last flush. */
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
    else
        batch->e->flushing++;
}

/* Room to file an operation for `p`'s next flush (`ucx_await_flush`); -ENOMEM without. Asked
 * before the operation is issued, so that filing it cannot fail. */
int ucx_flush_room(struct umqu_ep *e, const struct peer *p)
{
    if (p->unflushed || e->n_to_flush < e->cap_to_flush)
        return 0;
    size_t cap = e->cap_to_flush ? e->cap_to_flush * 2 : 16;
    uint64_t *q = realloc(e->to_flush, cap * sizeof(*q));
    if (!q)
        return -ENOMEM;
    e->to_flush = q;
    e->cap_to_flush = cap;
    return 0;
}

/* Files `o`, issued to `peer`, for the peer's next flush: the next poll's (ucx_flush_all), or
 * now when FLUSH_BATCH wait for it. */
void ucx_await_flush(struct umqu_ep *e, uint64_t peer, struct op *o)
{
    struct peer *p = ucx_peer_of(e, peer);
    if (!p->unflushed)
        e->to_flush[e->n_to_flush++] = peer;
    o->next = p->unflushed;
    p->unflushed = o;
    if (++p->n_unflushed >= FLUSH_BATCH)
        flush_peer(p);
}

/* Flushes each peer that operations were issued to since its last flush. */
static void ucx_flush_all(struct umqu_ep *e)
{
    for (size_t i = 0; i < e->n_to_flush; i++)
        flush_peer(&e->peers[e->to_flush[i]]);
    e->n_to_flush = 0;
}

/* A send's or write's parameters: its completion, by callback, carries `o`. */
ucp_request_param_t ucx_completing(struct op *o)
{
    return (ucp_request_param_t){
        .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
        .cb.send = sent,
        .user_data = o};
}

/* A message's send, tagged with our word (`umqu_sign`): eager, as every message fits a buffer
 * the peer keeps posted and our context's rendezvous threshold is infinite (`configure`). */
static ucs_status_ptr_t send_message(struct umqu_ep *e, ucp_ep_h ep, const void *buf,
                                     size_t count, ucp_request_param_t *param)
{
    return U.tag_send_nbx(ep, buf, count, e->word, param);
}

/* Sets the tag every message we send from now carries: the node's secret, which its peers
 * learned from its bind info (UCP's tag is the one word a receiver learns of a message besides
 * its bytes, and tells it apart from a stranger's). */
void umqu_sign(struct umqu_ep *e, uint64_t word)
{
    e->word = word;
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

/* The transports and device UCX may use, and how it sends: UCX_TLS and UCX_NET_DEVICES when
 * the user set them, else tcp on the interface that carries the node's address
 * (`choose_host`); always eagerly, whatever UCX_RNDV_THRESH says. */
static ucs_status_t configure(struct umqu_ep *e, ucp_config_t *cfg)
{
    ucs_status_t s = UCS_OK;
    char dev[IF_NAMESIZE + 1];
    if (!getenv("UCX_TLS"))
        s = U.config_modify(cfg, "TLS", "tcp");
    /* Every message fits a receive buffer the node keeps posted (at most a bounce buffer):
     * eagerly is one trip, where a rendezvous (UCX's choice from a few KiB) is three, which
     * halved a stream of 64 KiB messages. And the handlers of areas and carried operations
     * take eager messages only (a rendezvous would leave UCP's data to be fetched later): with
     * the user's UCX_RNDV_THRESH=0 a queue's pings and areas never landed, and its peer was
     * taken for dead. */
    if (s == UCS_OK)
        s = U.config_modify(cfg, "RNDV_THRESH", "inf");
    if (s == UCS_OK && !getenv("UCX_NET_DEVICES") && e->host_len &&
        device_of((struct sockaddr *)&e->host, dev, sizeof(dev)))
        s = U.config_modify(cfg, "NET_DEVICES", dev);
    /* UCP's tcp takes a device's IPv4 address before its IPv6 one (UCX_TCP_AF_PRIO): a queue
     * whose bind info names an IPv6 address had its connection made over the device's IPv4 one,
     * around what it named (a network or firewall of that family alone). The family named goes
     * first. (A UCT setting goes by its name in its own table: AF_PRIO, of tcp's memory
     * domain.) */
    if (s == UCS_OK && !getenv("UCX_TCP_AF_PRIO") && e->host_len)
        s = U.config_modify(cfg, "AF_PRIO",
                            e->host.ss_family == AF_INET6 ? "inet6,inet" : "inet,inet6");
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
 * host too): handlers that write and read where a peer names, and abort the process when their
 * answer cannot go. */
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

static int fail(struct umqu_ep *e, char *why, size_t n, const char *what, ucs_status_t s)
{
    snprintf(why, n, "%s: %s (%d)", what, U.status_string(s), (int)s);
    umqu_close(e);
    return -ucx_code_of(s);
}

/* Whether `node` names a link-local IPv6 address (with or without its zone, `fe80::1%eth0`). */
static int link_local(const char *node)
{
    char text[INET6_ADDRSTRLEN];
    struct in6_addr a;
    if (!node)
        return 0;
    snprintf(text, sizeof(text), "%.*s", (int)strcspn(node, "%"), node);
    return inet_pton(AF_INET6, text, &a) == 1 && IN6_IS_ADDR_LINKLOCAL(&a);
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
    if (link_local(node)) {
        snprintf(why, n, "%s is a link-local IPv6 address, which UCX's tcp transport does not "
                 "use (it skips fe80::/10): libfabric's tcp, the default engine, serves it",
                 node);
        free(e);
        return -EINVAL;
    }
    /* Every posted receive ends in a completion, so the completion queue's size bounds them
     * too: the completion ring is made at that size here. */
    e->posted_cap = cq_size ? cq_size : 1;
    if (make_room(e, e->posted_cap)) {
        free(e);
        return -ENOMEM;
    }
    choose_host(e, node);
    char dev[IF_NAMESIZE + 1];
    if (e->host_len && !device_of((struct sockaddr *)&e->host, dev, sizeof(dev))) {
        /* UCP would serve on the host's other addresses, around the one the queue named (a
         * libfabric endpoint fails to listen there). */
        snprintf(why, n, "no interface of this host has address %s", node);
        umqu_close(e);
        return -EADDRNOTAVAIL;
    }
    ucp_config_t *cfg;
    ucs_status_t s = U.config_read(NULL, NULL, &cfg);
    if (s != UCS_OK)
        return fail(e, why, n, "ucp_config_read", s);
    s = configure(e, cfg);
    const char *tls = getenv("UCX_TLS");
    /* The context runs UCP's RMA on a NIC, or where UMQ_UCX_RMA=ucp asks for it anyway (to
     * test and compare UCP's RMA on a host without one: between hosts that trust each other);
     * else none, and ours are carried (ucx_rma.c). */
    const char *asked = getenv("UMQ_UCX_RMA");
    int on_nic = rma_on_nic(tls);
    e->ucp_rma = asked && !strcmp(asked, "ucp")       ? 1
                 : asked && !strcmp(asked, "carried") ? 0
                                                      : on_nic;
    e->rma_in_software = !(on_nic && e->ucp_rma);
    /* Every worker has its event fd, wakeable or not: the progress thread watches it while a
     * peer's long WRs arrive for a process that is not calling in (`umqu_arm_watch`). Where
     * UCP's RMA would be software (rma_on_nic) the context does none: UCP's handlers, which
     * write and read wherever a peer names, are then not installed, and a peer's put or get is
     * dropped (our own WRITEs and READs are carried as messages we check: `carry`). */
    ucp_params_t params = {
        .field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_REQUEST_SIZE,
        .features = UCP_FEATURE_TAG | UCP_FEATURE_AM | UCP_FEATURE_WAKEUP |
                    (e->ucp_rma ? UCP_FEATURE_RMA : 0),
        .request_size = sizeof(struct rx_req)};
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
        .flags = UCP_AM_FLAG_WHOLE_MSG,
        .arg = e};
    static const struct {
        unsigned id;
        ucp_am_recv_callback_t cb;
    } ours[] = {{AREA_ID, area_arrived},
                {CARRIED_WRITE_ID, ucx_carried_write_arrived},
                {CARRIED_READ_ID, ucx_carried_read_arrived},
                {CARRIED_ANSWER_ID, ucx_carried_answered}};
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
    ucx_flush_all(e); /* the closes below end these flushes too, and free their operations */
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
    /* The receives UCP still holds end canceled (their callback frees each) before the worker
     * goes. */
    for (int spins = 0; e->posted && spins < 1000; spins++) {
        for (struct rx_req *q = e->posted, *next; q; q = next) {
            next = q->next;
            U.request_cancel(e->worker, q);
        }
        if (e->posted)
            U.worker_progress(e->worker);
    }
    if (e->worker)
        U.worker_destroy(e->worker);
    if (e->ctx)
        U.cleanup(e->ctx);
    ucx_rma_close(e);
    free(e->to_flush);
    free(e->peers);
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

/* Maps `len` bytes at `buf` for the peers' writes, which `area_arrived` takes `slot` bytes at a
 * time (0: any); *key is its index in our address, which grows by its packed key (read the
 * address again after this). */
int umqu_expose(struct umqu_ep *e, void *buf, size_t len, size_t slot, uint64_t *addr,
                uint64_t *key)
{
    if (e->n_regions == MAX_REGIONS)
        return -ENOSPC;
    /* Peers write here, never read: a peer that could read the landing words could learn the
     * generations of channels not its own, and seal writes into them (node.rs, `seal`). */
    ucp_mem_map_params_t mp = {
        .field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH |
                      UCP_MEM_MAP_PARAM_FIELD_PROT,
        .address = buf,
        .length = len,
        .prot = UCP_MEM_MAP_PROT_LOCAL_READ | UCP_MEM_MAP_PROT_LOCAL_WRITE |
                UCP_MEM_MAP_PROT_REMOTE_WRITE};
    ucp_mem_h m;
    ucs_status_t s = U.mem_map(e->ctx, &mp, &m);
    if (s != UCS_OK)
        return -ucx_code_of(s);
    void *packed;
    size_t packed_len;
    s = U.rkey_pack(e->ctx, m, &packed, &packed_len);
    if (s == UCS_OK && packed_len > MAX_RKEY) {
        U.rkey_buffer_release(packed);
        s = UCS_ERR_EXCEEDS_LIMIT;
    }
    if (s != UCS_OK) {
        U.mem_unmap(e->ctx, m);
        return -ucx_code_of(s);
    }
    e->regions[e->n_regions] = m;
    e->region_base[e->n_regions] = (uint64_t)(uintptr_t)buf;
    e->region_len[e->n_regions] = len;
    e->rkeys[e->n_regions] = packed;
    e->rkey_lens[e->n_regions] = packed_len;
    e->region_slot[e->n_regions] = slot;
    *addr = (uint64_t)(uintptr_t)buf;
    *key = (uint64_t)e->n_regions++;
    return 0;
}

/* UCP names our memory by the regions in our address (umqu_expose), not by a registration a
 * slot: a peer's area writes are our own messages, which `area_arrived` checks slot by slot. */
int umqu_expose_one(struct umqu_ep *e, void *buf, size_t len, uint64_t want, uint64_t *addr,
                    uint64_t *key, void **mr)
{
    (void)e, (void)buf, (void)len, (void)want, (void)addr, (void)key, (void)mr;
    return -ENOSYS;
}

struct peer *ucx_peer_of(struct umqu_ep *e, uint64_t peer)
{
    return peer < e->n_peers ? &e->peers[peer] : NULL;
}

/* The peer's usable endpoint, or NULL (and *rc) when it is unknown or its connection failed. */
ucp_ep_h ucx_reach(struct umqu_ep *e, uint64_t peer, int *rc)
{
    struct peer *p = ucx_peer_of(e, peer);
    if (!p) {
        *rc = -EINVAL;
        return NULL;
    }
    if (p->failed != UCS_OK) {
        *rc = -ucx_code_of(p->failed);
        return NULL;
    }
    return p->ep;
}

int umqu_write(struct umqu_ep *e, const void *buf, size_t len, void *desc, uint64_t peer,
               uint64_t addr, uint64_t key, void *ctx)
{
    (void)desc;
    int rc = 0;
    ucp_ep_h ep = ucx_reach(e, peer, &rc);
    if (!ep)
        return rc;
    struct peer *p = ucx_peer_of(e, peer);
    if (key >= (uint64_t)p->n_rkeys)
        return -EINVAL;
    struct op *o = ucx_op_new(e, ctx, len);
    if (!o)
        return -ENOMEM;
    ucp_request_param_t param = ucx_completing(o);
    if (e->ucp_rma && p->takes_puts)
        return ucx_settle(e, U.put_nbx(ep, buf, len, addr, p->rkeys[key], &param), o);
    /* Over tcp UCP's put is a message the target answers, and UCX 1.13 aborts the target's
     * process when that answer cannot go (the initiator closed or died with the put on its way:
     * "unexpected error: Endpoint timeout" in ucp_put_handler); and a target whose context runs
     * no UCP RMA (`ucp_rma`) runs no put at all. Our own message needs no answer. */
    o->hdr = (struct area_hdr){.addr = addr, .key = key};
    param.op_attr_mask |= UCP_OP_ATTR_FIELD_FLAGS;
    param.flags = UCP_AM_SEND_FLAG_EAGER;
    return ucx_settle(e, U.am_send_nbx(ep, AREA_ID, &o->hdr, sizeof(o->hdr), buf, len, &param), o);
}

int umqu_wait_fd(const struct umqu_ep *e)
{
    return e->wait_fd;
}

/* UCP's progress, once: how much it did. A message that arrives while no receive of ours is
 * posted waits in UCP's unexpected queue, so one that did something with none left posted may
 * have left one there (`starved`). */
static unsigned progress_once(struct umqu_ep *e)
{
    unsigned did = U.worker_progress(e->worker);
    if (did && !e->posted_len)
        e->starved = 1;
    return did;
}

/* Progresses UCP while the completions waiting stay `done_len` and a call moved something, at
 * most MAX_BITES calls. UCP's progress takes a bounded bite of each socket, and the peers' RMA
 * moves bytes but completes nothing of ours: a sleeping target the call bell woke serves a
 * stream of it in one look. */
static void progress_while(struct umqu_ep *e, size_t done_len)
{
    for (int bites = 0; e->done_len == done_len && bites < MAX_BITES; bites++)
        if (!progress_once(e))
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
            return -ucx_code_of(s);
    }
    return 1;
}

/* 0 when sleeping on the wait fd is safe; -EAGAIN when completions wait, or operations wait for
 * the flush a poll starts (poll first). */
int umqu_trywait(struct umqu_ep *e)
{
    if (e->done_len || e->n_to_flush)
        return -EAGAIN;
    ucs_status_t s = U.worker_arm(e->worker);
    return s == UCS_OK ? 0 : s == UCS_ERR_BUSY ? -EAGAIN : -ucx_code_of(s);
}

/* Our address: MAGIC, a flags byte (TAKES_PUTS), the packed keys of our exposed regions (a
 * count, then each with a length byte), then the worker's address. */
int umqu_name(struct umqu_ep *e, void *addr, size_t *len)
{
    ucp_address_t *w;
    size_t w_len, need = sizeof(MAGIC) + 2;
    ucs_status_t s = U.worker_get_address(e->worker, &w, &w_len);
    if (s != UCS_OK)
        return -ucx_code_of(s);
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
    *out++ = e->ucp_rma ? TAKES_PUTS : 0;
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
        return -ucx_code_of(s);
    for (; p->n_rkeys < n_rkeys; p->n_rkeys++) {
        s = U.ep_rkey_unpack(p->ep, rkey_at[p->n_rkeys], &p->rkeys[p->n_rkeys]);
        if (s != UCS_OK)
            break;
    }
    *peer = e->n_peers++;
    return s == UCS_OK ? 0 : -ucx_code_of(s);
}

/* A receive's parameters: UCP completes it by `received`. */
static const ucp_request_param_t RECEIVING = {.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK,
                                              .cb.recv = received};

/* Where a receive stands as UCP returns it: done now (its completion appended, `len` bytes when
 * UCP's status is UCS_OK), held by UCP (filed among the posted, its callback completes it), or
 * failed (a negative code; a message longer than the buffer completes it truncated, as fi_recv's
 * would: the node posts buffers as long as any message it is sent). */
static int receive_settle(struct umqu_ep *e, ucs_status_ptr_t r, void *ctx, size_t len,
                          uint64_t from)
{
    if (r == NULL) {
        ucx_complete_from(e, ctx, len, UCS_OK, from);
        return 0;
    }
    if (UCS_PTR_IS_ERR(r)) {
        if (UCS_PTR_STATUS(r) != UCS_ERR_MESSAGE_TRUNCATED)
            return -ucx_code_of(UCS_PTR_STATUS(r));
        ucx_complete(e, ctx, 0, UCS_ERR_MESSAGE_TRUNCATED);
        return 0;
    }
    /* UCP calls `received` only from its progress, so the request is filled in before. */
    struct rx_req *q = r;
    *q = (struct rx_req){.e = e, .ctx = ctx, .next = e->posted};
    if (e->posted)
        e->posted->prev = q;
    e->posted = q;
    e->posted_len++;
    return 0;
}

/* The receive of a message UCP kept while no receive of ours was posted (its unexpected queue,
 * oldest first) into `buf`; -ENOENT when none waits. Taken by probe: a receive posted on such a
 * message completes at once, and UCP before 1.16 does not say its length then. */
static int take_waiting(struct umqu_ep *e, void *buf, size_t len, void *ctx)
{
    ucp_tag_recv_info_t info;
    ucp_tag_message_h m = U.tag_probe_nb(e->worker, 0, 0, 1, &info);
    if (!m) {
        e->starved = 0;
        return -ENOENT;
    }
    return receive_settle(e, U.tag_msg_recv_nbx(e->worker, buf, len, m, &RECEIVING), ctx,
                          info.length, info.sender_tag);
}

/* Posts a receive buffer as UCP's receive of any tag (ours carry our node's word; a stranger's
 * message lands as any bytes do, its tag beside it, for the node to check): UCP fills the
 * receives in posting order, as fi_recv fills buffers. -EAGAIN when as many are posted as the
 * completion queue holds, as fi_recv's full queue. */
int umqu_recv(struct umqu_ep *e, void *buf, size_t len, void *desc, void *ctx)
{
    (void)desc;
    if (e->posted_len == e->posted_cap)
        return -EAGAIN;
    if (e->starved) {
        int rc = take_waiting(e, buf, len, ctx);
        if (rc != -ENOENT)
            return rc;
    }
    /* No message waits (not starved), so the receive cannot complete at once. */
    return receive_settle(e, U.tag_recv_nbx(e->worker, buf, len, 0, 0, &RECEIVING), ctx, 0, 0);
}

/* Sends `count` pieces (`iov`) to `peer` as one message; its completion carries `ctx`, once
 * UCP has completed the send and a flush of the peer has followed it. UCP completes a send once
 * UCT has its bytes, and over tcp UCT keeps in its own buffer what the socket does not take at
 * once (the tail of a message sent while the socket is full, `uct_tcp_ep_am_bcopy`): a sender
 * killed then lost messages it had seen complete (tests/fault_kill.rs over this engine: 3428
 * completed at the killed sender, 3425 received). The flush ends once UCT's buffer is empty, so
 * a completed message is the kernel's, as libfabric's tcp completes a send. */
static int send_pieces(struct umqu_ep *e, const ucp_dt_iov_t *iov, size_t count, uint64_t peer,
                       void *ctx)
{
    int rc = 0;
    ucp_ep_h ep = ucx_reach(e, peer, &rc);
    if (!ep)
        return rc;
    size_t total = 0;
    for (size_t i = 0; i < count; i++)
        total += iov[i].length;
    struct op *o = ucx_op_new(e, ctx, total);
    if (!o)
        return -ENOMEM;
    if (ucx_flush_room(e, ucx_peer_of(e, peer))) {
        free(o);
        return -ENOMEM;
    }
    o->peer = peer;
    o->parts = 2; /* its send, its flush */
    ucp_request_param_t param = {.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK |
                                                 UCP_OP_ATTR_FIELD_USER_DATA,
                                 .cb.send = message_sent,
                                 .user_data = o};
    const void *buf = iov[0].buffer;
    size_t n = iov[0].length;
    if (count > 1) {
        memcpy(o->iov, iov, count * sizeof(*iov));
        param.op_attr_mask |= UCP_OP_ATTR_FIELD_DATATYPE;
        param.datatype = ucp_dt_make_iov();
        buf = o->iov;
        n = count;
    }
    ucs_status_ptr_t r = send_message(e, ep, buf, n, &param);
    if (UCS_PTR_IS_ERR(r)) {
        free(o);
        return -ucx_code_of(UCS_PTR_STATUS(r));
    }
    if (r == NULL)
        message_settled(o, UCS_OK);
    ucx_await_flush(e, peer, o);
    return 0;
}

/* Bytes of messages to `peer` whose sends UCP completed and whose flush is still out: the node
 * counts what the engine holds for a peer until a completion, and these are UCT's or the
 * kernel's already, as a libfabric send's bytes are once it completes. */
size_t umqu_settled(const struct umqu_ep *e, uint64_t peer)
{
    return peer < e->n_peers ? e->peers[peer].settled : 0;
}

/* Sends `len` bytes at `buf` to `peer` now or not at all (-EAGAIN), with no completion, as
 * fi_inject: nothing outlives the call, so nothing is allocated for it. Not while messages sent
 * with a completion wait for their flush (`send_pieces`), -EBUSY then: those are what fills a
 * connection's socket, and into a full one UCT takes a message whole into its own buffer and
 * says it went, where an injected one is done as its call returns. The node then sends it with
 * a completion, as a larger message (sys.rs, `INJECT_LATER`). A flush after each injected
 * message would close the rest of that gap (a socket filled by messages that completed, then
 * an injected one) at 3,000 instructions a ping-pong's round trip, where the whole is 6,700:
 * UCP's flush of an endpoint runs its progress. */
static int inject(struct umqu_ep *e, const void *buf, size_t len, uint64_t peer)
{
    int rc = 0;
    ucp_ep_h ep = ucx_reach(e, peer, &rc);
    if (!ep)
        return rc;
    if (e->n_to_flush || e->flushing)
        return -EBUSY;
    ucp_request_param_t param = {.op_attr_mask = UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL};
    ucs_status_ptr_t r = send_message(e, ep, buf, len, &param);
    if (UCS_PTR_IS_ERR(r))
        return -ucx_code_of(UCS_PTR_STATUS(r));
    if (r != NULL)
        U.request_free(r); /* not expected under FORCE_IMM_CMPL; it completes by itself */
    return 0;
}

int umqu_send2(struct umqu_ep *e, const void *head, size_t head_len, void *desc, const void *body,
               size_t body_len, void *body_desc, uint64_t peer, void *ctx)
{
    (void)desc, (void)body_desc;
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
        ucx_flush_all(e);
    progress_while(e, 0);
    int got = 0;
    for (; got < max && e->done_len; got++, e->done_len--) {
        out[got] = e->done[e->done_head];
        e->done_head = ring_at(e->done_head, 1, e->done_cap);
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
    int rc = s == UCS_OK ? 0 : -ucx_code_of(s), stuck = 0;
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
            rc = -ucx_code_of(UCS_PTR_STATUS(r));
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
int umqu_expose(struct umqu_ep *e, void *b, size_t l, size_t sl, uint64_t *a, uint64_t *k) { (void)e, (void)b, (void)l, (void)sl, (void)a, (void)k; return -ENOSYS; }
int umqu_expose_one(struct umqu_ep *e, void *b, size_t l, uint64_t w, uint64_t *a, uint64_t *k, void **m) { (void)e, (void)b, (void)l, (void)w, (void)a, (void)k, (void)m; return -ENOSYS; }
int umqu_write(struct umqu_ep *e, const void *b, size_t l, void *d, uint64_t p, uint64_t a, uint64_t k, void *c) { (void)e, (void)b, (void)l, (void)d, (void)p, (void)a, (void)k, (void)c; return -ENOSYS; }
int umqu_rma_keyed(const struct umqu_ep *e) { (void)e; return 0; }
int umqu_expose_keyed(struct umqu_ep *e, void *b, size_t l, uint64_t k, void **m) { (void)e, (void)b, (void)l, (void)k, (void)m; return -ENOSYS; }
int umqu_expose_packed(struct umqu_ep *e, void *b, size_t l, void **m, void *p, size_t *pl) { (void)e, (void)b, (void)l, (void)m, (void)p, (void)pl; return -ENOSYS; }
int umqu_unexpose(void *m) { (void)m; return -ENOSYS; }
int umqu_unpack_key(struct umqu_ep *e, uint64_t p, const void *k, size_t l, uint64_t *out) { (void)e, (void)p, (void)k, (void)l, (void)out; return -ENOSYS; }
void umqu_drop_key(uint64_t k) { (void)k; }
int umqu_rma(struct umqu_ep *e, int r, void *b, size_t l, void *d, uint64_t p, uint64_t a, uint64_t k, void *c) { (void)e, (void)r, (void)b, (void)l, (void)d, (void)p, (void)a, (void)k, (void)c; return -ENOSYS; }
void umqu_emulate_mr(struct umqu_ep *e, int v) { (void)e, (void)v; }
int umqu_register_local(struct umqu_ep *e, void *b, size_t l, void **m, void **d) { (void)e, (void)b, (void)l, (void)m, (void)d; return -ENOSYS; }
void umqu_unregister_local(void *m) { (void)m; }
int umqu_wait_fd(const struct umqu_ep *e) { (void)e; return -1; }
int umqu_event_fd(const struct umqu_ep *e) { (void)e; return -1; }
int umqu_arm_watch(struct umqu_ep *e) { (void)e; return -ENOSYS; }
int umqu_trywait(struct umqu_ep *e) { (void)e; return -ENOSYS; }
int umqu_name(struct umqu_ep *e, void *a, size_t *l) { (void)e, (void)a, (void)l; return -ENOSYS; }
int umqu_host(const struct umqu_ep *e, void *a, size_t *l) { (void)e, (void)a, (void)l; return -ENOSYS; }
int umqu_connect(struct umqu_ep *e, const void *a, size_t l, uint64_t *p) { (void)e, (void)a, (void)l, (void)p; return -ENOSYS; }
int umqu_recv(struct umqu_ep *e, void *b, size_t l, void *d, void *c) { (void)e, (void)b, (void)l, (void)d, (void)c; return -ENOSYS; }
int umqu_send2(struct umqu_ep *e, const void *h, size_t hl, void *d, const void *b, size_t bl, void *bd, uint64_t p, void *c) { (void)e, (void)h, (void)hl, (void)d, (void)b, (void)bl, (void)bd, (void)p, (void)c; return -ENOSYS; }
int umqu_send(struct umqu_ep *e, const void *b, size_t l, void *d, uint64_t p, void *c) { (void)e, (void)b, (void)l, (void)d, (void)p, (void)c; return -ENOSYS; }
int umqu_poll(struct umqu_ep *e, struct umqf_cqe *o, int m) { (void)e, (void)o, (void)m; return -ENOSYS; }
void umqu_sign(struct umqu_ep *e, uint64_t w) { (void)e, (void)w; }
size_t umqu_settled(const struct umqu_ep *e, uint64_t p) { (void)e, (void)p; return 0; }
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
