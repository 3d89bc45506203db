/* The libfabric calls the fabric provider makes, behind a narrow C interface.
 *
 * libfabric's data-path calls (fi_send, fi_cq_read, fi_endpoint, ...) are static inline
 * functions in its headers that call through the objects' operation tables, so Rust cannot call
 * them directly; this file is compiled against the headers by build.rs. It never references a
 * libfabric symbol by name: the five exported functions it needs (fi_getinfo, fi_freeinfo,
 * fi_dupinfo, fi_fabric, fi_strerror) are looked up with dlopen("libfabric.so.1") the first time
 * a queue needs the network, so libumq.so has no DT_NEEDED on libfabric and loads on hosts
 * without it. Built without libfabric's headers, every call reports that instead.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "shim.h"

#ifdef UMQ_HAVE_LIBFABRIC
#include <dlfcn.h>
#include <pthread.h>
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <dirent.h>
#include <netinet/in.h>
/* The kernel's tcp.h, not the C library's: its struct tcp_info has the stream counters
 * (`umqf_stream_at`). */
#include <linux/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* The first bytes of an endpoint of connections' address (`struct conns`): an rxm endpoint's
 * listener speaks rxm's protocol, and the two must not take each other's address. */
#define CONNS_MAGIC "OFM1"
#define CONNS_MAGIC_LEN 4
/* The longest address: the magic and a sockaddr_in6 (28 bytes), with room to spare. */
#define NAME_MAX_LEN 64
/* The most data a connection request carries (tcp's limit). */
#define CM_DATA_MAX 256
/* How long a process that polls may leave a connection request unread: reading the event
 * queue is a system call (tcp polls its listener), too dear for every completion-queue read.
 * Counted on the coarse clock (`coarse_ns`): at most a read a kernel tick. */
#define EVENTS_EVERY_NS 200000
/* A send of up to this many bytes completes as it is posted, as rxm's inject over tcp does:
 * tcp's own endpoints copy out at most 128 bytes, so above that the shim copies the message
 * into one of its `INJECT_SLOTS` buffers and reaps the completion itself. */
#define INJECT_BYTES 512
#define INJECT_SLOTS 256
/* The unsent bytes past which a connection's socket takes no more (TCP_NOTSENT_LOWAT), unless
 * `UMQ_FABRIC_NOTSENT_LOWAT` says otherwise (0 keeps the kernel's). Without it the kernel lets
 * a socket hold megabytes nobody has sent yet; under bbr, which paces a connection by the rate
 * it measured, that backlog halved libfabric tcp's 64 KiB stream on one host (`conn_tune`). */
#define NOTSENT_LOWAT 65536
/* How long the process whose address sorts last waits for the other's connection before it
 * connects itself (`conns_connect`): the peer may not be binding to us at all. */
#define AWAIT_PEER_NS 2000000

static struct {
    void *lib;
    int (*getinfo)(uint32_t, const char *, const char *, uint64_t, const struct fi_info *,
                   struct fi_info **);
    void (*freeinfo)(struct fi_info *);
    struct fi_info *(*dupinfo)(const struct fi_info *);
    int (*fabric)(struct fi_fabric_attr *, struct fid_fabric **, void *);
    const char *(*strerror)(int);
    uint32_t (*version)(void); /* optional: only umqf_probe reports it */
    char why[256];
} F;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;

static void load(void)
{
    F.lib = dlopen("libfabric.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!F.lib) {
        snprintf(F.why, sizeof(F.why),
                 "libfabric.so.1 cannot be loaded (%s): install libfabric1 (Debian: apt-get install libfabric1)",
                 dlerror());
        return;
    }
    *(void **)&F.getinfo = dlsym(F.lib, "fi_getinfo");
    *(void **)&F.freeinfo = dlsym(F.lib, "fi_freeinfo");
    *(void **)&F.dupinfo = dlsym(F.lib, "fi_dupinfo");
    *(void **)&F.fabric = dlsym(F.lib, "fi_fabric");
    *(void **)&F.strerror = dlsym(F.lib, "fi_strerror");
    *(void **)&F.version = dlsym(F.lib, "fi_version");
    if (!F.getinfo || !F.freeinfo || !F.dupinfo || !F.fabric || !F.strerror) {
        snprintf(F.why, sizeof(F.why), "libfabric.so.1 lacks fi_getinfo or its kin: too old?");
        dlclose(F.lib);
        F.lib = NULL;
    }
}

/* 0 once libfabric is loaded; else -1 and `why` says what to install. */
static int umqf_load(char *why, size_t n)
{
    pthread_once(&load_once, load);
    if (!F.lib) {
        snprintf(why, n, "%s", F.why);
        return -1;
    }
    return 0;
}

/* A peer of an endpoint of connections (`struct conns`): one connection to its process. */
/* AWAITING: the peer, whose address sorts first, is to connect to us (`conns_connect`). */
enum conn_state { CONN_AWAITING, CONN_OPENING, CONN_UP, CONN_DOWN };

struct conn {
    struct fid_ep *ep;
    enum conn_state state;
    uint8_t name[NAME_MAX_LEN]; /* its listening address, as connect named it or it told us */
    size_t name_len;
    uint64_t awaiting_since_ns;
    int fd; /* its socket once up (`socket_of`), or -1 */
    /* The slot of the connection the peer opened to us while ours to it was open or opening
     * (both sides connected, `conns_accept`): what it sends us arrives there. -1: none. */
    long receiver;
};

/* Over a provider whose reliable transport is connections (tcp), the endpoint is made of
 * them, as ofi_rxm would make it but without its layer: a listener, a connection to each peer
 * process, one completion queue and one shared receive context for all of them. */
struct conns {
    struct fid_eq *eq;   /* the connections' events: requests, established, shut down */
    struct fid_pep *pep; /* the listener */
    struct fid_ep *srx;  /* the receive buffers every connection fills */
    struct conn *all;    /* indexed by the peer handle */
    size_t n, cap;
    unsigned opening;      /* connections awaited or not yet established */
    uint64_t events_at_ns; /* when the event queue was last read (`coarse_ns`) */
    int epfd;              /* the completion queue's and the event queue's wait fds, or -1 */
    int notsent_lowat;     /* set on each connection's socket as it comes up; 0: not set */
    uint8_t me[NAME_MAX_LEN]; /* our address, which our connection requests carry */
    size_t me_len;
    uint8_t (*injects)[INJECT_BYTES]; /* INJECT_SLOTS buffers of sends copied out */
    uint16_t free_injects[INJECT_SLOTS];
    unsigned n_free_injects;
};

struct umqf_ep {
    struct fi_info *info;
    struct fid_fabric *fabric;
    struct fid_domain *domain;
    struct fid_av *av;
    struct fid_cq *cq;
    struct fid_ep *ep;
    struct conns *conns; /* set for an endpoint of connections: `ep` and `av` are then unused */
    size_t inject_size;
    int wait_fd; /* the completion queue's wait fd (FI_WAIT_FD), or -1 */
    struct fid_mr *mrs[8]; /* registered memory, closed with the endpoint */
    int n_mrs;
    /* How the provider wants memory registered: its mr_mode, or verbs' where umqf_emulate_mr
     * asked for it (`emulated`: our own buffers' descriptors are then checked in umqf_rma). */
    uint64_t mr_mode;
    int emulated;
    /* Keys of our choosing for registrations that need one unique in the domain (no
     * FI_MR_PROV_KEY): above the small ones next_key hands out and below the chunk keys. */
    uint64_t keys;
    /* What every message of ours carries beside its bytes, as remote CQ data: our node's
     * secret (umqf_sign), by which a receiver tells its peer's messages from a stranger's. */
    uint64_t word;
};

static void fail(char *why, size_t n, const char *what, int rc)
{
    snprintf(why, n, "%s: %s (%d)", what, F.strerror(rc < 0 ? -rc : rc), rc);
}

/* Closes a libfabric object, if there is one. */
#define CLOSE(obj)                    \
    do {                              \
        if (obj)                      \
            fi_close(&(obj)->fid);    \
    } while (0)

static void conns_close(struct conns *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->n; i++)
        CLOSE(c->all[i].ep);
    CLOSE(c->srx);
    CLOSE(c->pep);
    CLOSE(c->eq);
    if (c->epfd >= 0)
        close(c->epfd);
    free(c->all);
    free(c->injects);
    free(c);
}

void umqf_close(struct umqf_ep *e)
{
    if (!e)
        return;
    /* The endpoint first: it holds the CQ and AV bound; then the memory it exposed. */
    CLOSE(e->ep);
    conns_close(e->conns);
    for (int i = 0; i < e->n_mrs; i++)
        CLOSE(e->mrs[i]);
    CLOSE(e->cq);
    CLOSE(e->av);
    CLOSE(e->domain);
    CLOSE(e->fabric);
    if (e->info)
        F.freeinfo(e->info);
    free(e);
}

/* Whether provider `prov` is served as an endpoint of connections (`struct conns`) rather
 * than a reliable-datagram endpoint: tcp, whose connections are the kernel's. Over rxm a 64 B
 * ping-pong took 4.45 us a half round trip where tcp's own endpoints took 3.1-3.3 (fi_pingpong,
 * this host); "tcp;ofi_rxm" still names rxm. */
static int served_by_conns(const char *prov)
{
    return prov && !strcmp(prov, "tcp");
}

/* What the provider asks of libfabric, for provider `prov` (NULL: any), as an endpoint of
 * connections when `conns`; NULL when out of memory. */
static struct fi_info *our_hints(const char *prov, int conns)
{
    struct fi_info *hints = F.dupinfo(NULL);
    if (!hints)
        return NULL;
    /* Messages, and RMA writes into memory the peer registered (its flow-control area). */
    hints->caps = FI_MSG | FI_RMA;
    hints->mode = 0;
    hints->ep_attr->type = conns ? FI_EP_MSG : FI_EP_RDM;
    if (conns)
        hints->ep_attr->rx_ctx_cnt = FI_SHARED_CONTEXT;
    hints->tx_attr->msg_order = FI_ORDER_SAS;
    hints->rx_attr->msg_order = FI_ORDER_SAS;
    /* Small messages go out copied with no completion to reap (fi_inject): ask for room for a
     * header and a small payload; a provider that offers less says so in the answer (tcp's
     * own endpoints offer 128 bytes, and refuse to be asked for more). */
    hints->tx_attr->inject_size = conns ? 0 : 512;
    hints->domain_attr->threading = FI_THREAD_DOMAIN;
    /* Every message carries our node's secret as its remote CQ data (umqf_sign): 8 bytes. */
    hints->domain_attr->cq_data_size = sizeof(uint64_t);
    hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
    if (prov)
        hints->fabric_attr->prov_name = strdup(prov);
    return hints;
}

/* What umq-info reports: libfabric's version (FI_VERSION encoding, 0 when unknown) and, comma
 * separated in `names`, the providers fi_getinfo offers for what we ask. The number of offers, or
 * a negative code and `why`. */
int umqf_probe(uint32_t *version, char *names, size_t names_len, char *why, size_t n)
{
    *version = 0;
    if (names_len)
        names[0] = 0;
    if (umqf_load(why, n))
        return -FI_ENOSYS;
    if (F.version)
        *version = F.version();
    struct fi_info *hints = our_hints(NULL, 0), *info = NULL;
    if (!hints)
        return -FI_ENOMEM;
    int rc = F.getinfo(FI_VERSION(1, 9), NULL, NULL, 0, hints, &info);
    F.freeinfo(hints);
    if (rc == -FI_ENODATA)
        return 0;
    if (rc) {
        fail(why, n, "fi_getinfo", rc);
        return rc;
    }
    int offers = 0;
    size_t used = 0;
    for (struct fi_info *i = info; i; i = i->next, offers++) {
        const char *name = i->fabric_attr->prov_name;
        size_t len = strlen(name);
        int seen = 0;
        for (const char *p = names; !seen && (p = strstr(p, name)); p += len)
            seen = (p == names || p[-1] == ',') && (p[len] == ',' || p[len] == 0);
        if (seen || used + len + 2 > names_len)
            continue;
        used += snprintf(names + used, names_len - used, "%s%s", used ? "," : "", name);
    }
    F.freeinfo(info);
    return offers;
}

#define EAGER_LIMIT_VAR "FI_OFI_RXM_EAGER_LIMIT"

/* Opens e's endpoint; over tcp, rxm then sends a message of up to `eager` bytes eagerly: from
 * our buffer straight into the buffer the peer posted (its "direct send" and "dynamic receive
 * buffers", on by default in 1.17). rxm's own limit is 16 KiB; above it a message goes by
 * rendezvous, a round trip and an RMA read more, which halved the 64 KiB stream. The limit is
 * a parameter rxm reads from the environment as the endpoint opens and nowhere else, so it is
 * set for that call only (unless the user set it), not for endpoints the application opens
 * itself: rxm refuses a connection between endpoints whose limits differ. Every process of
 * this library opens its endpoints with the same limit, one at a time (two threads of ours
 * opening endpoints at once could otherwise see each other's setting come and go). verbs
 * ignores it (no dynamic receive buffers). */
static int open_endpoint(struct umqf_ep *e, size_t eager)
{
    static pthread_mutex_t opening = PTHREAD_MUTEX_INITIALIZER;
    char limit[32];
    pthread_mutex_lock(&opening);
    int ours = eager && !getenv(EAGER_LIMIT_VAR);
    if (ours) {
        snprintf(limit, sizeof(limit), "%zu", eager);
        ours = setenv(EAGER_LIMIT_VAR, limit, 0) == 0;
    }
    int rc = fi_endpoint(e->domain, e->info, &e->ep, NULL);
    if (ours)
        unsetenv(EAGER_LIMIT_VAR);
    pthread_mutex_unlock(&opening);
    return rc;
}

static uint64_t ns_of(clockid_t clock)
{
    struct timespec t;
    clock_gettime(clock, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static uint64_t monotonic_ns(void)
{
    return ns_of(CLOCK_MONOTONIC);
}

/* The clock a poll reads: to the kernel's tick (1-4 ms), 4 ns a read here against 16 for
 * CLOCK_MONOTONIC, on every completion-queue read. */
static uint64_t coarse_ns(void)
{
    return ns_of(CLOCK_MONOTONIC_COARSE);
}

/* A new peer slot; its index, or -1 when out of memory. */
static long conn_add(struct conns *c)
{
    if (c->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 16;
        struct conn *all = realloc(c->all, cap * sizeof(*all));
        if (!all)
            return -1;
        c->all = all;
        c->cap = cap;
    }
    c->all[c->n] = (struct conn){.state = CONN_DOWN, .fd = -1, .receiver = -1};
    return (long)c->n++;
}

/* The peer named `name` whose connection is opening or up; its index, or -1. */
static long conn_find(const struct conns *c, const void *name, size_t len)
{
    for (size_t i = 0; i < c->n; i++) {
        const struct conn *k = &c->all[i];
        if (k->state != CONN_DOWN && k->name_len == len && !memcmp(k->name, name, len))
            return (long)i;
    }
    return -1;
}

/* Opens the endpoint of connection `idx` from `info` (ours with a destination, or a request's),
 * on our completion queue, event queue and receive buffers. */
static int conn_ep_open(struct umqf_ep *e, struct fi_info *info, long idx)
{
    struct conns *c = e->conns;
    struct fid_ep *ep;
    info->ep_attr->rx_ctx_cnt = FI_SHARED_CONTEXT;
    int rc = fi_endpoint(e->domain, info, &ep, (void *)(uintptr_t)idx);
    if (rc)
        return rc;
    rc = fi_ep_bind(ep, &c->eq->fid, 0);
    if (!rc)
        rc = fi_ep_bind(ep, &e->cq->fid, FI_TRANSMIT | FI_RECV);
    if (!rc)
        rc = fi_ep_bind(ep, &c->srx->fid, 0);
    if (!rc)
        rc = fi_enable(ep);
    if (rc) {
        fi_close(&ep->fid);
        return rc;
    }
    c->all[idx].ep = ep;
    return 0;
}

/* Moves connection `k` to `state`, counting the pending ones (awaited or opening): while any
 * is, every completion-queue read reads the event queue too. */
static void conn_move(struct conns *c, struct conn *k, enum conn_state state)
{
    int was = k->state == CONN_AWAITING || k->state == CONN_OPENING;
    int is = state == CONN_AWAITING || state == CONN_OPENING;
    if (is && !was)
        c->opening++;
    if (was && !is)
        c->opening--;
    if (state != CONN_UP)
        k->fd = -1; /* the socket goes with the endpoint */
    k->state = state;
}

/* Whether socket addresses `a` (the address a request claims to come from) and `b` (where it
 * came from) name one host: same family and IP address, ports aside. A request's address is
 * the peer's word; taken for another process's without this, it would let a process of
 * another host receive what we send to that one. */
static int same_host(const void *a, size_t a_len, const void *b, size_t b_len)
{
    const struct sockaddr *x = a, *y = b;
    if (!b || a_len < sizeof(sa_family_t) || b_len < sizeof(sa_family_t) ||
        x->sa_family != y->sa_family)
        return 0;
    if (x->sa_family == AF_INET && a_len >= sizeof(struct sockaddr_in) &&
        b_len >= sizeof(struct sockaddr_in))
        return ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
               ((const struct sockaddr_in *)b)->sin_addr.s_addr;
    if (x->sa_family == AF_INET6 && a_len >= sizeof(struct sockaddr_in6) &&
        b_len >= sizeof(struct sockaddr_in6))
        return !memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
                       &((const struct sockaddr_in6 *)b)->sin6_addr, sizeof(struct in6_addr));
    return 0;
}

/* A peer asks to connect. Its request carries its address: when we have no connection to it
 * yet, this one becomes it, so that two processes share one connection whichever binds first
 * (two when both ask at once: each then sends on its own, and both receive on both). */
static void conns_accept(struct umqf_ep *e, struct fi_eq_cm_entry *cm, size_t data_len)
{
    struct conns *c = e->conns;
    int named = data_len > CONNS_MAGIC_LEN && data_len <= NAME_MAX_LEN &&
                !memcmp(cm->data, CONNS_MAGIC, CONNS_MAGIC_LEN) &&
                same_host(cm->data + CONNS_MAGIC_LEN, data_len - CONNS_MAGIC_LEN,
                          cm->info->dest_addr, cm->info->dest_addrlen);
    long idx = named ? conn_find(c, cm->data, data_len) : -1, ours = -1;
    if (idx >= 0 && c->all[idx].state != CONN_AWAITING) {
        ours = idx; /* ours to it is open or opening: this one only receives */
        idx = -1;
        named = 0;
    }
    if (idx < 0)
        idx = conn_add(c);
    if (ours >= 0 && idx >= 0)
        c->all[ours].receiver = idx;
    if (idx < 0 || conn_ep_open(e, cm->info, idx)) {
        fi_reject(c->pep, cm->info->handle, NULL, 0);
        if (idx >= 0)
            conn_move(c, &c->all[idx], CONN_DOWN);
        return;
    }
    struct conn *k = &c->all[idx];
    conn_move(c, k, fi_accept(k->ep, NULL, 0) ? CONN_DOWN : CONN_OPENING);
    if (k->state == CONN_DOWN)
        return; /* closed with the endpoint */
    if (named && !k->name_len) {
        memcpy(k->name, cm->data, data_len);
        k->name_len = data_len;
    }
}

static void conn_set(struct conns *c, fid_t fid, enum conn_state state)
{
    size_t idx = (uintptr_t)fid->context;
    if (idx < c->n)
        conn_move(c, &c->all[idx], state);
}

/* Whether `fd` is a socket that connects `me` to `peer` (as getsockname and getpeername give
 * them); getsockname refuses any other fd. */
static int socket_joins(int fd, const struct sockaddr_storage *me, socklen_t me_len,
                        const struct sockaddr_storage *peer, socklen_t peer_len)
{
    struct sockaddr_storage a, b;
    socklen_t a_len = sizeof(a), b_len = sizeof(b);
    return !getsockname(fd, (struct sockaddr *)&a, &a_len) && a_len == me_len &&
           !memcmp(&a, me, me_len) && !getpeername(fd, (struct sockaddr *)&b, &b_len) &&
           b_len == peer_len && !memcmp(&b, peer, peer_len);
}

/* The process's open fds (but the listing's own), in ascending order; NULL when out of memory
 * or /proc cannot be read. */
static int *open_fds(size_t *n)
{
    DIR *dir = opendir("/proc/self/fd");
    if (!dir)
        return NULL;
    int own = dirfd(dir), *fds = NULL;
    size_t cap = 0;
    *n = 0;
    for (struct dirent *d; (d = readdir(dir));) {
        int fd = atoi(d->d_name);
        if (d->d_name[0] == '.' || fd == own)
            continue;
        if (*n == cap) {
            cap = cap ? 2 * cap : 256;
            int *more = realloc(fds, cap * sizeof(*fds));
            if (!more)
                break;
            fds = more;
        }
        fds[(*n)++] = fd;
    }
    closedir(dir);
    return fds;
}

/* The socket under a connected endpoint, or -1. libfabric does not hand it out, so it is
 * found among the process's fds by its two addresses, which name one TCP connection. The
 * newest fds are looked at first, since a socket just made usually has the highest number:
 * with 19,000 other sockets open, a process's first bind (two connections, two scans) takes
 * 37 ms longer, most of it listing /proc/self/fd. */
static int socket_of(struct fid_ep *ep)
{
    struct sockaddr_storage me, peer;
    size_t me_len = sizeof(me), peer_len = sizeof(peer), n;
    if (fi_getname(&ep->fid, &me, &me_len) || fi_getpeer(ep, &peer, &peer_len))
        return -1;
    int *fds = open_fds(&n), found = -1;
    while (fds && found < 0 && n > 0) {
        int fd = fds[--n];
        if (socket_joins(fd, &me, (socklen_t)me_len, &peer, (socklen_t)peer_len))
            found = fd;
    }
    free(fds);
    return found;
}

/* A connection that came up: its socket is found, and gets our options (`NOTSENT_LOWAT`). Best
 * effort: a socket not found, or an option refused, leaves the connection as the kernel made
 * it (and its stream's counters unknown, `umqf_stream_at`). */
static void conn_tune(struct conns *c, fid_t fid)
{
    size_t idx = (uintptr_t)fid->context;
    if (idx >= c->n || !c->all[idx].ep || c->all[idx].state != CONN_UP)
        return;
    struct conn *k = &c->all[idx];
    k->fd = socket_of(k->ep);
    if (k->fd >= 0 && c->notsent_lowat)
        (void)setsockopt(k->fd, IPPROTO_TCP, TCP_NOTSENT_LOWAT, &c->notsent_lowat,
                         sizeof(c->notsent_lowat));
}

/* `UMQ_FABRIC_NOTSENT_LOWAT`: bytes (0: leave the kernel's), or `NOTSENT_LOWAT`. */
static int notsent_lowat_wanted(void)
{
    const char *v = getenv("UMQ_FABRIC_NOTSENT_LOWAT");
    char *end;
    long n = v ? strtol(v, &end, 10) : -1;
    return v && end != v && *end == '\0' && n >= 0 && n <= (1L << 30) ? (int)n : NOTSENT_LOWAT;
}

static int conn_start(struct umqf_ep *e, long idx);

/* Connects to the peers awaited for longer than `AWAIT_PEER_NS`: they may not bind to us. */
static void connect_late(struct umqf_ep *e, uint64_t now)
{
    struct conns *c = e->conns;
    for (size_t i = 0; i < c->n; i++) {
        struct conn *k = &c->all[i];
        if (k->state == CONN_AWAITING && now - k->awaiting_since_ns >= AWAIT_PEER_NS &&
            conn_start(e, (long)i))
            conn_move(c, k, CONN_DOWN);
    }
}

/* Reads the event queue: requests are accepted, connections come up or go down. */
static void conns_events(struct umqf_ep *e)
{
    struct conns *c = e->conns;
    c->events_at_ns = coarse_ns();
    if (c->opening)
        connect_late(e, monotonic_ns());
    for (;;) {
        struct {
            struct fi_eq_cm_entry cm;
            uint8_t data[CM_DATA_MAX]; /* room for any request's, which tcp caps at 256 */
        } entry;
        uint32_t event;
        ssize_t got = fi_eq_read(c->eq, &event, &entry, sizeof(entry), 0);
        if (got == -FI_EAVAIL) {
            struct fi_eq_err_entry err = {0};
            if (fi_eq_readerr(c->eq, &err, 0) != sizeof(err))
                return;
            if (err.fid && err.fid != &c->pep->fid)
                conn_set(c, err.fid, CONN_DOWN);
            continue;
        }
        if (got < (ssize_t)sizeof(entry.cm))
            return;
        if (event == FI_CONNREQ) {
            conns_accept(e, &entry.cm, (size_t)got - sizeof(entry.cm));
            F.freeinfo(entry.cm.info);
        } else if (event == FI_CONNECTED) {
            conn_set(c, entry.cm.fid, CONN_UP);
            conn_tune(c, entry.cm.fid);
        } else if (event == FI_SHUTDOWN) {
            conn_set(c, entry.cm.fid, CONN_DOWN);
        }
    }
}

/* A peer's link-local IPv6 address (fe80::/10) as its name carries it names the link by the
 * index of the peer's own interface, which means nothing here: the peer is on the link of our
 * listener's address, so `to` takes that one's. */
static void on_our_link(void *to, size_t to_len, const void *ours, size_t ours_len)
{
    struct sockaddr_in6 *t = to;
    const struct sockaddr_in6 *o = ours;
    if (to_len < sizeof(*t) || !o || ours_len < sizeof(*o) || t->sin6_family != AF_INET6 ||
        o->sin6_family != AF_INET6 || !IN6_IS_ADDR_LINKLOCAL(&t->sin6_addr))
        return;
    t->sin6_scope_id = o->sin6_scope_id;
}

/* Opens connection `idx` to the peer it names. */
static int conn_start(struct umqf_ep *e, long idx)
{
    struct conns *c = e->conns;
    struct conn *k = &c->all[idx];
    struct fi_info *info = F.dupinfo(e->info);
    int rc = -FI_ENOMEM;
    if (!info)
        return rc;
    free(info->dest_addr);
    info->dest_addrlen = k->name_len - CONNS_MAGIC_LEN;
    info->dest_addr = malloc(info->dest_addrlen);
    if (!info->dest_addr)
        goto out;
    memcpy(info->dest_addr, k->name + CONNS_MAGIC_LEN, info->dest_addrlen);
    on_our_link(info->dest_addr, info->dest_addrlen, info->src_addr, info->src_addrlen);
    /* From our listener's address, on a port of the kernel's choice. */
    if (info->src_addr && info->src_addrlen >= 4)
        memset((uint8_t *)info->src_addr + 2, 0, 2);
    rc = conn_ep_open(e, info, idx);
    if (!rc)
        rc = fi_connect(k->ep, info->dest_addr, c->me, c->me_len);
    if (!rc)
        conn_move(c, k, CONN_OPENING);
out:
    F.freeinfo(info);
    return rc;
}

/* Makes the peer listening at `addr` (its name: the magic, then its address) reachable as
 * *peer. Two processes share one connection: the one whose name sorts first connects, and the
 * other awaits its request (a connection that carries two ways' messages carries each way's
 * acknowledgments with them: with one each way, the kernel sent each its own, and a 64 B
 * ping-pong took 4.2 us a half round trip instead of 3.5), unless it does not come
 * within `AWAIT_PEER_NS`. */
static int conns_connect(struct umqf_ep *e, const void *addr, size_t len, uint64_t *peer)
{
    struct conns *c = e->conns;
    if (len <= CONNS_MAGIC_LEN || len > NAME_MAX_LEN || memcmp(addr, CONNS_MAGIC, CONNS_MAGIC_LEN))
        return -FI_EINVAL;
    conns_events(e); /* its request may be waiting */
    long idx = conn_find(c, addr, len);
    if (idx >= 0) {
        *peer = (uint64_t)idx;
        return 0;
    }
    idx = conn_add(c);
    if (idx < 0)
        return -FI_ENOMEM;
    struct conn *k = &c->all[idx];
    memcpy(k->name, addr, len);
    k->name_len = len;
    size_t shorter = len < c->me_len ? len : c->me_len;
    int cmp = memcmp(c->me, addr, shorter);
    /* Equal: our own address, as two queues of this process bind over the network. */
    int we_connect = cmp < 0 || (cmp == 0 && c->me_len <= len);
    if (we_connect) {
        int rc = conn_start(e, idx);
        if (rc)
            return rc; /* the slot stays down */
    } else {
        conn_move(c, k, CONN_AWAITING);
        k->awaiting_since_ns = monotonic_ns();
    }
    *peer = (uint64_t)idx;
    return 0;
}

/* The endpoint to send to `peer` on; NULL with *rc -FI_EAGAIN while its connection opens or
 * is awaited (`connect_late`), -FI_ENOTCONN once down. */
static struct fid_ep *conn_ep(struct umqf_ep *e, uint64_t peer, int *rc)
{
    struct conns *c = e->conns;
    if (peer >= c->n) {
        *rc = -FI_EINVAL;
        return NULL;
    }
    struct conn *k = &c->all[peer];
    if (k->state == CONN_UP)
        return k->ep;
    *rc = k->state == CONN_DOWN ? -FI_ENOTCONN : -FI_EAGAIN;
    return NULL;
}

/* The endpoint an operation to `peer` goes on, and in *peer the address it names there (none
 * on a connection); NULL with *rc as `conn_ep` says. */
static struct fid_ep *route(struct umqf_ep *e, uint64_t *peer, int *rc)
{
    if (!e->conns)
        return e->ep;
    struct fid_ep *ep = conn_ep(e, *peer, rc);
    *peer = 0;
    return ep;
}

/* Adds fd to the epoll set `epfd`. */
static int watch_fd(int epfd, int fd)
{
    struct epoll_event ev = {.events = EPOLLIN};
    return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) ? -FI_EOTHER : 0;
}

/* Makes e an endpoint of connections: its event queue, its shared receive context, and its
 * listener on e's source address; a wakeable one sleeps on both queues' fds at once. */
static int conns_open(struct umqf_ep *e, int wakeable, char *why, size_t n)
{
    struct conns *c = calloc(1, sizeof(*c));
    if (!c)
        return -FI_ENOMEM;
    c->epfd = -1;
    c->notsent_lowat = notsent_lowat_wanted();
    e->conns = c;
    c->injects = malloc(sizeof(*c->injects) * INJECT_SLOTS);
    if (!c->injects)
        return -FI_ENOMEM;
    for (unsigned i = 0; i < INJECT_SLOTS; i++)
        c->free_injects[c->n_free_injects++] = (uint16_t)i;
    struct fi_eq_attr eq_attr = {.wait_obj = wakeable ? FI_WAIT_FD : FI_WAIT_NONE};
    int rc = fi_eq_open(e->fabric, &eq_attr, &c->eq, NULL);
    if (rc) {
        fail(why, n, "fi_eq_open", rc);
        return rc;
    }
    rc = fi_srx_context(e->domain, e->info->rx_attr, &c->srx, NULL);
    if (!rc)
        rc = fi_ep_bind(c->srx, &e->cq->fid, FI_RECV);
    if (rc) {
        fail(why, n, "fi_srx_context", rc);
        return rc;
    }
    rc = fi_passive_ep(e->fabric, e->info, &c->pep, NULL);
    if (!rc)
        rc = fi_pep_bind(c->pep, &c->eq->fid, 0);
    if (!rc)
        rc = fi_listen(c->pep);
    if (rc) {
        fail(why, n, "listening", rc);
        return rc;
    }
    size_t len = sizeof(c->me) - CONNS_MAGIC_LEN;
    rc = fi_getname(&c->pep->fid, c->me + CONNS_MAGIC_LEN, &len);
    if (rc) {
        fail(why, n, "fi_getname", rc);
        return rc;
    }
    memcpy(c->me, CONNS_MAGIC, CONNS_MAGIC_LEN);
    c->me_len = CONNS_MAGIC_LEN + len;
    if (!wakeable)
        return 0;
    int eq_fd = -1;
    rc = fi_control(&c->eq->fid, FI_GETWAIT, &eq_fd);
    if (rc) {
        fail(why, n, "fi_control(FI_GETWAIT) on the event queue", rc);
        return rc;
    }
    c->epfd = epoll_create1(EPOLL_CLOEXEC);
    rc = c->epfd < 0 ? -FI_EOTHER : watch_fd(c->epfd, e->wait_fd);
    if (!rc)
        rc = watch_fd(c->epfd, eq_fd);
    if (rc)
        fail(why, n, "epoll", rc);
    return rc;
}

/* An endpoint of provider `prov` ("tcp", "verbs"; one of connections for tcp, a
 * reliable-datagram one for the others) listening on `node` (an
 * address of this host; NULL for the provider's choice), its completion queue of `cq_size`
 * entries, with a wait fd when `wakeable` (for interrupt mode: a provider signals the fd as it
 * completes, a cost a polled queue does not pay), sending messages of up to `eager` bytes
 * eagerly where the provider lets us choose (`open_endpoint`). 0 and *out, or a negative FI_E*
 * code and `why`. */
int umqf_open(const char *prov, const char *node, size_t cq_size, int wakeable, size_t eager,
              struct umqf_ep **out, char *why, size_t n)
{
    if (umqf_load(why, n))
        return -FI_ENOSYS;
    int conns = served_by_conns(prov);
    struct fi_info *hints = our_hints(prov, conns);
    struct umqf_ep *e = calloc(1, sizeof(*e));
    int rc = -FI_ENOMEM;
    if (!hints || !e)
        goto out;
    e->wait_fd = -1;
    rc = F.getinfo(FI_VERSION(1, 9), node, NULL, node ? FI_SOURCE : 0, hints, &e->info);
    if (rc) {
        fail(why, n, "fi_getinfo", rc);
        goto out;
    }
    e->inject_size = e->info->tx_attr->inject_size;
    e->mr_mode = e->info->domain_attr->mr_mode;
    e->keys = 1u << 20;
    rc = F.fabric(e->info->fabric_attr, &e->fabric, NULL);
    if (rc) {
        fail(why, n, "fi_fabric", rc);
        goto out;
    }
    rc = fi_domain(e->fabric, e->info, &e->domain, NULL);
    if (rc) {
        fail(why, n, "fi_domain", rc);
        goto out;
    }
    struct fi_cq_attr cq_attr = {.size = cq_size, .format = FI_CQ_FORMAT_DATA,
                                 .wait_obj = wakeable ? FI_WAIT_FD : FI_WAIT_NONE};
    rc = fi_cq_open(e->domain, &cq_attr, &e->cq, NULL);
    if (rc) {
        fail(why, n, "fi_cq_open", rc);
        goto out;
    }
    if (wakeable) {
        rc = fi_control(&e->cq->fid, FI_GETWAIT, &e->wait_fd);
        if (rc) {
            fail(why, n, "fi_control(FI_GETWAIT)", rc);
            goto out;
        }
    }
    if (conns) {
        rc = conns_open(e, wakeable, why, n);
        if (rc)
            goto out;
        *out = e;
        e = NULL;
        goto out;
    }
    /* One entry per peer process (queues to one process share its entry): a hint, the table grows. */
    struct fi_av_attr av_attr = {.type = FI_AV_TABLE, .count = 64};
    rc = fi_av_open(e->domain, &av_attr, &e->av, NULL);
    if (rc) {
        fail(why, n, "fi_av_open", rc);
        goto out;
    }
    rc = open_endpoint(e, eager);
    if (rc) {
        fail(why, n, "fi_endpoint", rc);
        goto out;
    }
    rc = fi_ep_bind(e->ep, &e->av->fid, 0);
    if (!rc)
        rc = fi_ep_bind(e->ep, &e->cq->fid, FI_TRANSMIT | FI_RECV);
    if (!rc)
        rc = fi_enable(e->ep);
    if (rc) {
        fail(why, n, "binding the endpoint", rc);
        goto out;
    }
    *out = e;
    e = NULL;
out:
    if (hints)
        F.freeinfo(hints);
    umqf_close(e);
    return rc;
}

/* The provider actually chosen ("tcp;ofi_rxm", ...), for logs. */
const char *umqf_provider(const struct umqf_ep *e)
{
    return e->info->fabric_attr->prov_name;
}

size_t umqf_inject_size(const struct umqf_ep *e)
{
    return e->conns && e->inject_size < INJECT_BYTES ? INJECT_BYTES : e->inject_size;
}

/* Whether `ctx` is one of the shim's own copied-out sends (`INJECT_BYTES`). */
static int injected_copy(const struct umqf_ep *e, const void *ctx)
{
    const struct conns *c = e->conns;
    if (!c)
        return 0;
    const uint8_t *p = ctx, *first = (const uint8_t *)c->injects;
    return p >= first && p < first + sizeof(*c->injects) * INJECT_SLOTS;
}

/* A copied-out send's completion: its buffer is free again. */
static void injected_done(struct umqf_ep *e, const void *ctx)
{
    struct conns *c = e->conns;
    size_t slot = (size_t)((const uint8_t *)ctx - (const uint8_t *)c->injects) / INJECT_BYTES;
    c->free_injects[c->n_free_injects++] = (uint16_t)slot;
}

/* Sends `len` bytes (at most INJECT_BYTES) copied into a buffer of the shim's: -FI_EAGAIN
 * while all are in flight. */
static int inject_copied(struct umqf_ep *e, struct fid_ep *ep, const void *buf, size_t len)
{
    struct conns *c = e->conns;
    if (len > INJECT_BYTES)
        return -FI_EMSGSIZE;
    if (!c->n_free_injects)
        return -FI_EAGAIN;
    uint16_t slot = c->free_injects[--c->n_free_injects];
    memcpy(c->injects[slot], buf, len);
    int rc = (int)fi_senddata(ep, c->injects[slot], len, NULL, e->word, 0, c->injects[slot]);
    if (rc)
        c->free_injects[c->n_free_injects++] = slot;
    return rc;
}

/* Whether a message may be sent from a WR's buffer in place, the header from our send buffer
 * beside it: 0 no (one piece a send); 1 yes; 3 yes, the buffer's own registration named
 * (FI_MR_LOCAL: umqf_register_local). */
int umqf_sends_in_place(const struct umqf_ep *e)
{
    if (e->info->tx_attr->iov_limit < 2)
        return 0;
    return (e->mr_mode & FI_MR_LOCAL) ? 3 : 1;
}

/* A key for the next registration: unique in the domain (one per endpoint), for providers that
 * take the caller's key (no FI_MR_PROV_KEY); the others choose their own. */
static uint64_t next_key(const struct umqf_ep *e)
{
    return (uint64_t)e->n_mrs + 1;
}

/* Registers `len` bytes at `buf` as our own send and receive buffers: *desc is what a provider
 * that needs local registration (FI_MR_LOCAL: verbs) takes with each operation on them. 0, or
 * a negative FI_E* code. */
int umqf_register(struct umqf_ep *e, void *buf, size_t len, void **desc)
{
    if (e->n_mrs == (int)(sizeof(e->mrs) / sizeof(e->mrs[0])))
        return -FI_ENOSPC;
    struct fid_mr *mr;
    int rc = fi_mr_reg(e->domain, buf, len, FI_SEND | FI_RECV | FI_WRITE, 0, next_key(e), 0, &mr,
                       NULL);
    if (rc)
        return rc;
    e->mrs[e->n_mrs++] = mr;
    *desc = fi_mr_desc(mr);
    return 0;
}

/* Makes `len` bytes at `buf`, slots of `slot` bytes, the peers' landing words. Registered
 * here as nothing: each channel's slot is registered on its own (umqf_expose_one), under a key
 * only its peer learns, so that a peer bound to one channel cannot write another's. *addr and
 * *key are 0. */
int umqf_expose(struct umqf_ep *e, void *buf, size_t len, size_t slot, uint64_t *addr,
                uint64_t *key)
{
    (void)e, (void)buf, (void)len, (void)slot;
    *addr = 0;
    *key = 0;
    return 0;
}

/* Registers `len` bytes at `buf` for a peer's writes (FI_REMOTE_WRITE) under a key of their
 * own: `want` where the provider takes ours (-FI_ENOKEY when the domain has it already), else
 * the provider's (FI_MR_PROV_KEY). *addr is what the peer names in its writes (the virtual
 * address, or 0 where the provider counts from the registration's start), *key the key, *mr
 * the registration (umqf_unexpose ends it). 0, or a negative FI_E* code. */
int umqf_expose_one(struct umqf_ep *e, void *buf, size_t len, uint64_t want, uint64_t *addr,
                    uint64_t *key, void **mr)
{
    struct fid_mr *m;
    int rc = fi_mr_reg(e->domain, buf, len, FI_REMOTE_WRITE, 0, want, 0, &m, NULL);
    if (rc)
        return rc;
    uint64_t k = fi_mr_key(m);
    if (k == FI_KEY_NOTAVAIL) {
        fi_close(&m->fid);
        return -FI_ENOSYS;
    }
    *addr = (e->mr_mode & FI_MR_VIRT_ADDR) ? (uint64_t)(uintptr_t)buf : 0;
    *key = k;
    *mr = m;
    return 0;
}

/* Writes `len` bytes of our registered buffer `buf` (`desc` from umqf_register) into the
 * peer's memory at `addr` under `key`; its completion carries `ctx`. Not fi_inject_write: when a
 * connection closes with an injected operation still queued, libfabric 1.17's rxm takes the
 * NULL context of its cancellation for one of its own buffers and crashes in fi_cq_read (a
 * survivor whose peer was killed). 0, -FI_EAGAIN (progress and retry) or another negative
 * code. */
int umqf_write(struct umqf_ep *e, const void *buf, size_t len, void *desc, uint64_t peer,
               uint64_t addr, uint64_t key, void *ctx)
{
    int rc = 0;
    struct fid_ep *ep = route(e, &peer, &rc);
    if (!ep)
        return rc;
    return (int)fi_write(ep, buf, len, desc, peer, addr, key, ctx);
}

/* Registers memory as verbs does where `verbs_mr` is set, whatever the provider: keys are the
 * provider's (FI_MR_PROV_KEY, packed for the peers) and our own buffers need registering and
 * their descriptors with every operation (FI_MR_LOCAL), which umqf_rma then checks. Over tcp
 * this runs the path a verbs device takes, on hosts without one (UMQ_FABRIC_MR=verbs). Call
 * before anything is registered. */
void umqf_emulate_mr(struct umqf_ep *e, int verbs_mr)
{
    if (!verbs_mr)
        return;
    e->mr_mode |= FI_MR_LOCAL | FI_MR_PROV_KEY;
    e->emulated = 1;
}

/* How one-sided WRITE and READ go by RMA into chunks registered for the peers, or 0 when they
 * cannot. Bit 0: they can. Bit 1: peers name registered memory by its virtual address
 * (FI_MR_VIRT_ADDR), else by the offset into the region. Bit 2: the keys are the provider's
 * (FI_MR_PROV_KEY: verbs), packed for the peer (umqf_expose_packed), else keys of our choosing
 * derived from the tokens (umqf_expose_keyed), which need 8 bytes. Bit 3: the provider carries
 * RMA in software, as messages its peer's progress runs (tcp). Bit 4: our own buffers need a
 * registration, whose descriptor goes with each operation (FI_MR_LOCAL: verbs). Keys that do
 * not fit 8 bytes (FI_MR_RAW) are not taken. */
int umqf_rma_keyed(const struct umqf_ep *e)
{
    const struct fi_domain_attr *d = e->info->domain_attr;
    uint64_t m = e->mr_mode;
    if ((m & FI_MR_RAW) || d->mr_key_size > 8 || (!(m & FI_MR_PROV_KEY) && d->mr_key_size < 8))
        return 0;
    int in_software = !strncmp(e->info->fabric_attr->prov_name, "tcp", 3);
    return 1 | ((m & FI_MR_VIRT_ADDR) ? 2 : 0) | ((m & FI_MR_PROV_KEY) ? 4 : 0) |
           (in_software ? 8 : 0) | ((m & FI_MR_LOCAL) ? 16 : 0);
}

/* Registers `len` bytes at `buf` for the peers' RMA reads and writes under `key`; *mr is the
 * registration, for umqf_unexpose. 0, or a negative FI_E* code (-FI_ENOKEY: the key is taken). */
int umqf_expose_keyed(struct umqf_ep *e, void *buf, size_t len, uint64_t key, void **mr)
{
    struct fid_mr *m;
    int rc = fi_mr_reg(e->domain, buf, len, FI_REMOTE_READ | FI_REMOTE_WRITE, 0, key, 0, &m, NULL);
    if (rc)
        return rc;
    *mr = m;
    return 0;
}

/* Ends a registration of umqf_expose_keyed or umqf_expose_packed: a peer's operation under its
 * key fails from now. */
int umqf_unexpose(void *mr)
{
    return fi_close(&((struct fid_mr *)mr)->fid);
}

/* A key for a registration the provider would key itself (FI_MR_PROV_KEY, which ignores it),
 * or, emulating that, unique in the domain. */
static uint64_t own_key(struct umqf_ep *e)
{
    return e->keys++;
}

/* Registers `len` bytes at `buf` for the peers' RMA reads and writes under the provider's key,
 * packed into `packed` (8 bytes, little-endian; *packed_len says so). 0, or a negative FI_E*
 * code. */
int umqf_expose_packed(struct umqf_ep *e, void *buf, size_t len, void **mr, void *packed,
                       size_t *packed_len)
{
    if (*packed_len < sizeof(uint64_t))
        return -FI_ETOOSMALL;
    struct fid_mr *m;
    int rc = fi_mr_reg(e->domain, buf, len, FI_REMOTE_READ | FI_REMOTE_WRITE, 0, own_key(e), 0,
                       &m, NULL);
    if (rc)
        return rc;
    uint64_t key = fi_mr_key(m);
    if (key == FI_KEY_NOTAVAIL) {
        fi_close(&m->fid);
        return -FI_ENOSYS;
    }
    memcpy(packed, &key, sizeof(key));
    *packed_len = sizeof(key);
    *mr = m;
    return 0;
}

/* The key a peer packed (umqf_expose_packed): 8 bytes, else -FI_EINVAL. */
int umqf_unpack_key(struct umqf_ep *e, uint64_t peer, const void *packed, size_t len,
                    uint64_t *key)
{
    (void)e, (void)peer;
    if (len != sizeof(*key))
        return -FI_EINVAL;
    memcpy(key, packed, sizeof(*key));
    return 0;
}

/* A key of 8 bytes holds nothing to free. */
void umqf_drop_key(uint64_t key)
{
    (void)key;
}

/* A registration of our own memory for our RMA from and into it (FI_MR_LOCAL): the region, for
 * umqf_rma's check when emulating, and its descriptor. */
struct local_mr {
    struct fid_mr *mr;
    const char *base;
    size_t len;
    void *desc;
};

/* Registers `len` bytes at `buf` for our own sends and RMA from and into them: *mr for
 * umqf_unregister_local, *desc for umqf_rma and umqf_send2. 0, or a negative FI_E* code. */
int umqf_register_local(struct umqf_ep *e, void *buf, size_t len, void **mr, void **desc)
{
    struct local_mr *l = calloc(1, sizeof(*l));
    if (!l)
        return -FI_ENOMEM;
    int rc = fi_mr_reg(e->domain, buf, len, FI_SEND | FI_READ | FI_WRITE, 0, own_key(e), 0,
                       &l->mr, NULL);
    if (rc) {
        free(l);
        return rc;
    }
    l->base = buf;
    l->len = len;
    l->desc = fi_mr_desc(l->mr);
    *mr = l;
    *desc = e->emulated ? (void *)l : l->desc;
    return 0;
}

void umqf_unregister_local(void *mr)
{
    struct local_mr *l = mr;
    if (!l)
        return;
    fi_close(&l->mr->fid);
    free(l);
}

/* The descriptor libfabric takes for `len` bytes at `buf`. Emulating verbs' registration, `desc`
 * is the registration itself, checked to cover the bytes: a caller that forgot to register,
 * which a verbs device would refuse, fails here too (-FI_EINVAL). */
static int local_desc(const struct umqf_ep *e, const void *buf, size_t len, void **desc)
{
    if (!e->emulated || !(e->mr_mode & FI_MR_LOCAL))
        return 0;
    const struct local_mr *l = *desc;
    const char *at = buf;
    if (!l || at < l->base || len > l->len || (size_t)(at - l->base) > l->len - len)
        return -FI_EINVAL;
    *desc = l->desc;
    return 0;
}

int umqf_rma(struct umqf_ep *e, int how, void *buf, size_t len, void *desc, uint64_t peer,
             uint64_t addr, uint64_t key, void *ctx)
{
    int rc = local_desc(e, buf, len, &desc);
    if (rc)
        return rc;
    struct fid_ep *ep = route(e, &peer, &rc);
    if (!ep)
        return rc;
    if (how & UMQF_RMA_READ)
        return (int)fi_read(ep, buf, len, desc, peer, addr, key, ctx);
    struct iovec iov = {.iov_base = buf, .iov_len = len};
    struct fi_rma_iov rma = {.addr = addr, .len = len, .key = key};
    struct fi_msg_rma msg = {.msg_iov = &iov, .desc = &desc, .iov_count = 1, .addr = peer,
                             .rma_iov = &rma, .rma_iov_count = 1, .context = ctx};
    /* A piece that a later one of the same WRITE follows completes once sent: the connection
     * is in order, so the last piece's delivery says the earlier ones were placed too. */
    uint64_t done = (how & UMQF_RMA_SENT) ? FI_TRANSMIT_COMPLETE : FI_DELIVERY_COMPLETE;
    return (int)fi_writemsg(ep, &msg, FI_COMPLETION | done);
}

/* The completion queue's wait fd, or -1 (opened without one). */
int umqf_wait_fd(const struct umqf_ep *e)
{
    return e->conns ? e->conns->epfd : e->wait_fd;
}

/* Our connections' sockets are watched themselves (`umqf_conn_sockets`): no event fd. */
int umqf_event_fd(const struct umqf_ep *e)
{
    (void)e;
    return -1;
}

int umqf_arm_watch(struct umqf_ep *e)
{
    (void)e;
    return -FI_ENOSYS;
}

/* Before sleeping on the wait fd: 0 when it is safe (the fd will turn readable on the next
 * completion), -FI_EAGAIN when completions or progress are pending (read the queue, then try
 * again), or another negative code. */
int umqf_trywait(struct umqf_ep *e)
{
    if (e->conns) {
        conns_events(e);
        struct fid *fids[2] = {&e->cq->fid, &e->conns->eq->fid};
        return fi_trywait(e->fabric, fids, 2);
    }
    struct fid *fids[1] = {&e->cq->fid};
    return fi_trywait(e->fabric, fids, 1);
}

/* Our endpoint's address, for the peer's fi_av_insert: 0 and *len, or a negative FI_E* code. */
int umqf_name(struct umqf_ep *e, void *addr, size_t *len)
{
    if (e->conns) {
        if (*len < e->conns->me_len) {
            *len = e->conns->me_len; /* the room it takes, as fi_getname says it */
            return -FI_ETOOSMALL;
        }
        memcpy(addr, e->conns->me, e->conns->me_len);
        *len = e->conns->me_len;
        return 0;
    }
    return fi_getname(&e->ep->fid, addr, len);
}

/* Makes the peer at `addr` reachable as *peer. 0, or a negative FI_E* code. */
int umqf_connect(struct umqf_ep *e, const void *addr, size_t len, uint64_t *peer)
{
    if (e->conns)
        return conns_connect(e, addr, len, peer);
    /* A socket address (tcp's, under rxm) fits; the provider knows its format's length. */
    uint8_t to[NAME_MAX_LEN] = {0}, ours[NAME_MAX_LEN];
    size_t ours_len = sizeof(ours);
    if (len <= sizeof(to)) {
        memcpy(to, addr, len);
        if (!fi_getname(&e->ep->fid, ours, &ours_len))
            on_our_link(to, len, ours, ours_len);
        addr = to;
    }
    fi_addr_t a = FI_ADDR_NOTAVAIL;
    int rc = fi_av_insert(e->av, addr, 1, &a, 0, NULL);
    if (rc != 1)
        return rc < 0 ? rc : -FI_EINVAL;
    *peer = a;
    return 0;
}

/* Posts a receive buffer (`desc` from umqf_register); 0, -FI_EAGAIN (progress and retry) or
 * another negative code. */
int umqf_recv(struct umqf_ep *e, void *buf, size_t len, void *desc, void *ctx)
{
    return (int)fi_recv(e->conns ? e->conns->srx : e->ep, buf, len, desc, FI_ADDR_UNSPEC, ctx);
}

/* Sends `len` bytes at `buf` (`desc` from umqf_register) to `peer`; its completion carries
 * `ctx`. With `ctx` NULL and `len` at most the inject size, the bytes are copied out now and no
 * completion comes. */
/* Sends `head_len` bytes at `head` (registered: `desc`) followed by `body_len` bytes at
 * `body`, as one message; both stay put until the completion that carries `ctx`. Two pieces:
 * rxm then sends them straight from here (with its own header, three, within tcp's four), and
 * does not copy them into a buffer of its own, which holds only its 16 KiB. */
int umqf_send2(struct umqf_ep *e, const void *head, size_t head_len, void *desc, const void *body,
               size_t body_len, void *body_desc, uint64_t peer, void *ctx)
{
    int rc = local_desc(e, body, body_len, &body_desc);
    if (rc)
        return rc;
    struct iovec iov[2] = {{(void *)head, head_len}, {(void *)body, body_len}};
    void *descs[2] = {desc, body_desc};
    struct fid_ep *ep = route(e, &peer, &rc);
    if (!ep)
        return rc;
    struct fi_msg msg = {.msg_iov = iov, .desc = descs, .iov_count = 2, .addr = peer,
                         .context = ctx, .data = e->word};
    return (int)fi_sendmsg(ep, &msg, FI_COMPLETION | FI_REMOTE_CQ_DATA);
}

int umqf_send(struct umqf_ep *e, const void *buf, size_t len, void *desc, uint64_t peer,
              void *ctx)
{
    int rc = 0;
    struct fid_ep *ep = route(e, &peer, &rc);
    if (!ep)
        return rc;
    if (!ctx && len > e->inject_size)
        return inject_copied(e, ep, buf, len);
    if (!ctx)
        return (int)fi_injectdata(ep, buf, len, e->word, peer);
    return (int)fi_senddata(ep, buf, len, desc, e->word, peer, ctx);
}

/* Sets the word every message we send from now carries beside its bytes (remote CQ data): the
 * node's secret, which its peers learned from its bind info. */
void umqf_sign(struct umqf_ep *e, uint64_t word)
{
    e->word = word;
}

/* How far the stream of the connection to `peer` has got, as its socket counts it: in *handed
 * the bytes given to the kernel, in *sent those it has put on the wire (retransmissions
 * aside). 0, or -FI_ENOSYS where that is not known: no connections (rxm), the connection not
 * up, or its socket not found. */
int umqf_stream_at(struct umqf_ep *e, uint64_t peer, uint64_t *handed, uint64_t *sent)
{
    if (!e->conns || peer >= e->conns->n)
        return -FI_ENOSYS;
    const struct conn *k = &e->conns->all[peer];
    struct tcp_info info;
    socklen_t len = sizeof(info);
    if (k->state != CONN_UP || k->fd < 0 ||
        getsockopt(k->fd, IPPROTO_TCP, TCP_INFO, &info, &len) ||
        len < offsetof(struct tcp_info, tcpi_bytes_retrans) + sizeof(info.tcpi_bytes_retrans))
        return -FI_ENOSYS; /* a kernel older than 4.19 has no byte counters */
    *sent = info.tcpi_bytes_sent - info.tcpi_bytes_retrans;
    *handed = *sent + info.tcpi_notsent_bytes;
    return 0;
}

/* The sockets what `peer` sends us arrives on: our connection to it and, where both sides
 * connected, the one it opened to us (`receiver`). Their count, at most 2, into `fds`; 0 on an
 * endpoint not of connections. Only to be looked at: the sockets are libfabric's, read and
 * written by its provider alone. */
int umqf_conn_sockets(struct umqf_ep *e, uint64_t peer, int *fds)
{
    if (!e->conns || peer >= e->conns->n)
        return 0;
    const struct conn *k = &e->conns->all[peer];
    int n = 0;
    if (k->state == CONN_UP && k->fd >= 0)
        fds[n++] = k->fd;
    if (k->receiver >= 0 && (size_t)k->receiver < e->conns->n) {
        const struct conn *r = &e->conns->all[k->receiver];
        if (r->state == CONN_UP && r->fd >= 0)
            fds[n++] = r->fd;
    }
    return n;
}

/* Up to `max` completions into `out`: their count, 0 when none, or a negative FI_E* code. An
 * error completion comes back as an entry with `err` set. */
int umqf_poll(struct umqf_ep *e, struct umqf_cqe *out, int max)
{
    struct fi_cq_data_entry c[16];
    if (max > 16)
        max = 16;
    if (e->conns && (e->conns->opening || coarse_ns() - e->conns->events_at_ns >= EVENTS_EVERY_NS))
        conns_events(e);
    ssize_t got = fi_cq_read(e->cq, c, (size_t)max);
    if (got == -FI_EAGAIN)
        return 0;
    if (got == -FI_EAVAIL) {
        struct fi_cq_err_entry err = {0};
        if (fi_cq_readerr(e->cq, &err, 0) != 1)
            return -FI_EOTHER;
        if (injected_copy(e, err.op_context)) {
            /* Lost with its connection, which the event queue reports. */
            injected_done(e, err.op_context);
            return 0;
        }
        out[0] = (struct umqf_cqe){.ctx = err.op_context, .len = err.len,
                                   .err = err.err ? err.err : FI_EOTHER,
                                   .prov_errno = err.prov_errno};
        return 1;
    }
    if (got < 0)
        return (int)got;
    int n = 0;
    for (ssize_t i = 0; i < got; i++) {
        if (injected_copy(e, c[i].op_context))
            injected_done(e, c[i].op_context);
        else
            out[n++] = (struct umqf_cqe){
                .ctx = c[i].op_context, .len = c[i].len,
                .from = (c[i].flags & FI_REMOTE_CQ_DATA) ? c[i].data : 0};
    }
    return n;
}

const char *umqf_strerror(int code)
{
    return F.strerror ? F.strerror(code < 0 ? -code : code) : "libfabric not loaded";
}

#else /* built without libfabric's headers */

struct umqf_ep;

static int umqf_load(char *why, size_t n)
{
    snprintf(why, n, "this libumq was built without libfabric's headers: install libfabric-dev "
                     "and rebuild it to use the fabric provider");
    return -1;
}

int umqf_open(const char *prov, const char *node, size_t cq_size, int wakeable, size_t eager,
              struct umqf_ep **out, char *why, size_t n)
{
    (void)prov, (void)node, (void)cq_size, (void)wakeable, (void)eager, (void)out;
    umqf_load(why, n);
    return -38; /* ENOSYS */
}

int umqf_probe(uint32_t *version, char *names, size_t names_len, char *why, size_t n)
{
    *version = 0;
    if (names_len)
        names[0] = 0;
    umqf_load(why, n);
    return -38; /* ENOSYS */
}

void umqf_close(struct umqf_ep *e) { (void)e; }
const char *umqf_provider(const struct umqf_ep *e) { (void)e; return ""; }
size_t umqf_inject_size(const struct umqf_ep *e) { (void)e; return 0; }
int umqf_sends_in_place(const struct umqf_ep *e) { (void)e; return 0; }
int umqf_send2(struct umqf_ep *e, const void *h, size_t hl, void *d, const void *b, size_t bl, void *bd, uint64_t p, void *c) { (void)e, (void)h, (void)hl, (void)d, (void)b, (void)bl, (void)bd, (void)p, (void)c; return -38; }
int umqf_wait_fd(const struct umqf_ep *e) { (void)e; return -1; }
int umqf_expose(struct umqf_ep *e, void *b, size_t l, size_t sl, uint64_t *a, uint64_t *k) { (void)e, (void)b, (void)l, (void)sl, (void)a, (void)k; return -38; }
int umqf_expose_one(struct umqf_ep *e, void *b, size_t l, uint64_t w, uint64_t *a, uint64_t *k, void **m) { (void)e, (void)b, (void)l, (void)w, (void)a, (void)k, (void)m; return -38; }
int umqf_write(struct umqf_ep *e, const void *b, size_t l, void *d, uint64_t p, uint64_t a, uint64_t k, void *c) { (void)e, (void)b, (void)l, (void)d, (void)p, (void)a, (void)k, (void)c; return -38; }
int umqf_trywait(struct umqf_ep *e) { (void)e; return -38; }
int umqf_event_fd(const struct umqf_ep *e) { (void)e; return -1; }
int umqf_arm_watch(struct umqf_ep *e) { (void)e; return -38; }
int umqf_rma_keyed(const struct umqf_ep *e) { (void)e; return 0; }
int umqf_expose_keyed(struct umqf_ep *e, void *b, size_t l, uint64_t k, void **m) { (void)e, (void)b, (void)l, (void)k, (void)m; return -38; }
int umqf_unexpose(void *m) { (void)m; return -38; }
int umqf_expose_packed(struct umqf_ep *e, void *b, size_t l, void **m, void *p, size_t *pl) { (void)e, (void)b, (void)l, (void)m, (void)p, (void)pl; return -38; }
int umqf_unpack_key(struct umqf_ep *e, uint64_t p, const void *k, size_t l, uint64_t *out) { (void)e, (void)p, (void)k, (void)l, (void)out; return -38; }
void umqf_drop_key(uint64_t k) { (void)k; }
int umqf_rma(struct umqf_ep *e, int r, void *b, size_t l, void *d, uint64_t p, uint64_t a, uint64_t k, void *c) { (void)e, (void)r, (void)b, (void)l, (void)d, (void)p, (void)a, (void)k, (void)c; return -38; }
void umqf_emulate_mr(struct umqf_ep *e, int v) { (void)e, (void)v; }
int umqf_register_local(struct umqf_ep *e, void *b, size_t l, void **m, void **d) { (void)e, (void)b, (void)l, (void)m, (void)d; return -38; }
void umqf_unregister_local(void *m) { (void)m; }
int umqf_name(struct umqf_ep *e, void *a, size_t *l) { (void)e, (void)a, (void)l; return -38; }
int umqf_connect(struct umqf_ep *e, const void *a, size_t l, uint64_t *p) { (void)e, (void)a, (void)l, (void)p; return -38; }
int umqf_register(struct umqf_ep *e, void *b, size_t l, void **d) { (void)e, (void)b, (void)l, (void)d; return -38; }
int umqf_recv(struct umqf_ep *e, void *b, size_t l, void *d, void *c) { (void)e, (void)b, (void)l, (void)d, (void)c; return -38; }
int umqf_send(struct umqf_ep *e, const void *b, size_t l, void *d, uint64_t p, void *c) { (void)e, (void)b, (void)l, (void)d, (void)p, (void)c; return -38; }
void umqf_sign(struct umqf_ep *e, uint64_t w) { (void)e, (void)w; }
int umqf_poll(struct umqf_ep *e, struct umqf_cqe *o, int m) { (void)e, (void)o, (void)m; return -38; }
int umqf_stream_at(struct umqf_ep *e, uint64_t p, uint64_t *h, uint64_t *s) { (void)e, (void)p, (void)h, (void)s; return -38; }
int umqf_conn_sockets(struct umqf_ep *e, uint64_t p, int *f) { (void)e, (void)p, (void)f; return 0; }
const char *umqf_strerror(int code) { (void)code; return "libfabric not available"; }

#endif

/* libfabric completes a send once its bytes are the kernel's (or copied out, injected): it
 * holds none of a completed send's (`umqu_settled`, ucx.c). */
size_t umqf_settled(const struct umqf_ep *e, uint64_t peer)
{
    (void)e, (void)peer;
    return 0;
}
