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

struct umqf_ep {
    struct fi_info *info;
    struct fid_fabric *fabric;
    struct fid_domain *domain;
    struct fid_av *av;
    struct fid_cq *cq;
    struct fid_ep *ep;
    size_t inject_size;
    int wait_fd; /* the completion queue's wait fd (FI_WAIT_FD), or -1 */
    struct fid_mr *mrs[8]; /* registered memory, closed with the endpoint */
    int n_mrs;
};

static void fail(char *why, size_t n, const char *what, int rc)
{
    snprintf(why, n, "%s: %s (%d)", what, F.strerror(rc < 0 ? -rc : rc), rc);
}

void umqf_close(struct umqf_ep *e)
{
    if (!e)
        return;
    /* The endpoint first: it holds the CQ and AV bound; then the memory it exposed. */
    if (e->ep)
        fi_close(&e->ep->fid);
    for (int i = 0; i < e->n_mrs; i++)
        fi_close(&e->mrs[i]->fid);
    if (e->cq)
        fi_close(&e->cq->fid);
    if (e->av)
        fi_close(&e->av->fid);
    if (e->domain)
        fi_close(&e->domain->fid);
    if (e->fabric)
        fi_close(&e->fabric->fid);
    if (e->info)
        F.freeinfo(e->info);
    free(e);
}

/* What the provider asks of libfabric, for provider `prov` (NULL: any); NULL when out of memory. */
static struct fi_info *our_hints(const char *prov)
{
    struct fi_info *hints = F.dupinfo(NULL);
    if (!hints)
        return NULL;
    /* Messages, and RMA writes into memory the peer registered (its flow-control area). */
    hints->caps = FI_MSG | FI_RMA;
    hints->mode = 0;
    hints->ep_attr->type = FI_EP_RDM;
    hints->tx_attr->msg_order = FI_ORDER_SAS;
    hints->rx_attr->msg_order = FI_ORDER_SAS;
    /* Small messages go out copied with no completion to reap (fi_inject): ask for room for a
     * header and a small payload; a provider that offers less says so in the answer. */
    hints->tx_attr->inject_size = 512;
    hints->domain_attr->threading = FI_THREAD_DOMAIN;
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
    struct fi_info *hints = our_hints(NULL), *info = NULL;
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

/* A reliable-datagram endpoint of provider `prov` ("tcp", "verbs") listening on `node` (an
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
    struct fi_info *hints = our_hints(prov);
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
    return e->inject_size;
}

/* Whether a message may be sent from memory we did not register (a WR's buffer, in place):
 * the provider needs no local registration and takes two pieces in one send. */
int umqf_sends_in_place(const struct umqf_ep *e)
{
    return !(e->info->domain_attr->mr_mode & FI_MR_LOCAL) && e->info->tx_attr->iov_limit >= 2;
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

/* Registers `len` bytes at `buf` for the peer to write (FI_REMOTE_WRITE); *addr is the address
 * the peer names in its writes (the virtual address, or 0 where the provider counts from the
 * region's start) and *key the region's key. 0, or a negative FI_E* code. */
int umqf_expose(struct umqf_ep *e, void *buf, size_t len, uint64_t *addr, uint64_t *key)
{
    if (e->n_mrs == (int)(sizeof(e->mrs) / sizeof(e->mrs[0])))
        return -FI_ENOSPC;
    struct fid_mr *mr;
    int rc = fi_mr_reg(e->domain, buf, len, FI_REMOTE_WRITE, 0, next_key(e), 0, &mr, NULL);
    if (rc)
        return rc;
    e->mrs[e->n_mrs++] = mr;
    *addr = (e->info->domain_attr->mr_mode & FI_MR_VIRT_ADDR) ? (uint64_t)(uintptr_t)buf : 0;
    *key = fi_mr_key(mr);
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
    return (int)fi_write(e->ep, buf, len, desc, peer, addr, key, ctx);
}

/* Whether one-sided WRITE and READ can go by RMA into chunks registered under keys of our
 * choosing (derived from their tokens): the provider takes the caller's keys (no
 * FI_MR_PROV_KEY), of 8 bytes, and needs no descriptor for our own buffers (no FI_MR_LOCAL).
 * Bit 1 of the answer: peers name registered memory by its virtual address (FI_MR_VIRT_ADDR),
 * else by the offset into the region; bit 3: the provider carries RMA in software, as messages
 * its peer's progress runs (tcp). */
int umqf_rma_keyed(const struct umqf_ep *e)
{
    const struct fi_domain_attr *d = e->info->domain_attr;
    if ((d->mr_mode & (FI_MR_PROV_KEY | FI_MR_LOCAL)) || d->mr_key_size < 8)
        return 0;
    int in_software = !strncmp(e->info->fabric_attr->prov_name, "tcp", 3);
    return 1 | ((d->mr_mode & FI_MR_VIRT_ADDR) ? 2 : 0) | (in_software ? 8 : 0);
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

/* Keys libfabric packs for the peer to unpack: none, we choose them (umqf_expose_keyed). */
int umqf_expose_packed(struct umqf_ep *e, void *buf, size_t len, void **mr, void *packed,
                       size_t *packed_len)
{
    (void)e, (void)buf, (void)len, (void)mr, (void)packed, (void)packed_len;
    return -FI_ENOSYS;
}

int umqf_unpack_key(struct umqf_ep *e, uint64_t peer, const void *packed, size_t len,
                    uint64_t *key)
{
    (void)e, (void)peer, (void)packed, (void)len, (void)key;
    return -FI_ENOSYS;
}

void umqf_drop_key(uint64_t key)
{
    (void)key;
}

/* Ends a registration of umqf_expose_keyed: a peer's operation under its key fails from now. */
int umqf_unexpose(void *mr)
{
    return fi_close(&((struct fid_mr *)mr)->fid);
}

/* One-sided, into or out of the peer's memory at `addr` under `key`: with `read` set, reads
 * `len` bytes of it into `buf`; else writes `len` bytes at `buf` into it, completing once they
 * are placed there (FI_DELIVERY_COMPLETE). Its completion carries `ctx`. 0, -FI_EAGAIN or
 * another negative code. */
int umqf_rma(struct umqf_ep *e, int read, void *buf, size_t len, uint64_t peer, uint64_t addr,
             uint64_t key, void *ctx)
{
    if (read)
        return (int)fi_read(e->ep, buf, len, NULL, peer, addr, key, ctx);
    struct iovec iov = {.iov_base = buf, .iov_len = len};
    struct fi_rma_iov rma = {.addr = addr, .len = len, .key = key};
    struct fi_msg_rma msg = {.msg_iov = &iov, .iov_count = 1, .addr = peer, .rma_iov = &rma,
                             .rma_iov_count = 1, .context = ctx};
    return (int)fi_writemsg(e->ep, &msg, FI_COMPLETION | FI_DELIVERY_COMPLETE);
}

/* The completion queue's wait fd, or -1 (opened without one). */
int umqf_wait_fd(const struct umqf_ep *e)
{
    return e->wait_fd;
}

/* Before sleeping on the wait fd: 0 when it is safe (the fd will turn readable on the next
 * completion), -FI_EAGAIN when completions or progress are pending (read the queue, then try
 * again), or another negative code. */
int umqf_trywait(struct umqf_ep *e)
{
    struct fid *fids[1] = {&e->cq->fid};
    return fi_trywait(e->fabric, fids, 1);
}

/* Our endpoint's address, for the peer's fi_av_insert: 0 and *len, or a negative FI_E* code. */
int umqf_name(struct umqf_ep *e, void *addr, size_t *len)
{
    return fi_getname(&e->ep->fid, addr, len);
}

/* Makes the peer at `addr` reachable as *peer. 0, or a negative FI_E* code. */
int umqf_connect(struct umqf_ep *e, const void *addr, size_t len, uint64_t *peer)
{
    (void)len; /* the provider knows its address format's length */
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
    return (int)fi_recv(e->ep, buf, len, desc, FI_ADDR_UNSPEC, ctx);
}

/* Sends `len` bytes at `buf` (`desc` from umqf_register) to `peer`; its completion carries
 * `ctx`. With `ctx` NULL and `len` at most the inject size, the bytes are copied out now and no
 * completion comes. */
/* Sends `head_len` bytes at `head` (registered: `desc`) followed by `body_len` bytes at
 * `body`, as one message; both stay put until the completion that carries `ctx`. Two pieces:
 * rxm then sends them straight from here (with its own header, three, within tcp's four), and
 * does not copy them into a buffer of its own, which holds only its 16 KiB. */
int umqf_send2(struct umqf_ep *e, const void *head, size_t head_len, void *desc, const void *body,
               size_t body_len, uint64_t peer, void *ctx)
{
    struct iovec iov[2] = {{(void *)head, head_len}, {(void *)body, body_len}};
    void *descs[2] = {desc, NULL};
    return (int)fi_sendv(e->ep, iov, descs, 2, peer, ctx);
}

int umqf_send(struct umqf_ep *e, const void *buf, size_t len, void *desc, uint64_t peer,
              void *ctx)
{
    if (!ctx)
        return (int)fi_inject(e->ep, buf, len, peer);
    return (int)fi_send(e->ep, buf, len, desc, peer, ctx);
}

/* Up to `max` completions into `out`: their count, 0 when none, or a negative FI_E* code. An
 * error completion comes back as an entry with `err` set. */
int umqf_poll(struct umqf_ep *e, struct umqf_cqe *out, int max)
{
    struct fi_cq_data_entry c[16];
    if (max > 16)
        max = 16;
    ssize_t got = fi_cq_read(e->cq, c, (size_t)max);
    if (got == -FI_EAGAIN)
        return 0;
    if (got == -FI_EAVAIL) {
        struct fi_cq_err_entry err = {0};
        if (fi_cq_readerr(e->cq, &err, 0) != 1)
            return -FI_EOTHER;
        out[0] = (struct umqf_cqe){.ctx = err.op_context, .len = err.len,
                                   .err = err.err ? err.err : FI_EOTHER,
                                   .prov_errno = err.prov_errno};
        return 1;
    }
    if (got < 0)
        return (int)got;
    for (ssize_t i = 0; i < got; i++)
        out[i] = (struct umqf_cqe){.ctx = c[i].op_context, .len = c[i].len};
    return (int)got;
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
int umqf_send2(struct umqf_ep *e, const void *h, size_t hl, void *d, const void *b, size_t bl, uint64_t p, void *c) { (void)e, (void)h, (void)hl, (void)d, (void)b, (void)bl, (void)p, (void)c; return -38; }
int umqf_wait_fd(const struct umqf_ep *e) { (void)e; return -1; }
int umqf_expose(struct umqf_ep *e, void *b, size_t l, uint64_t *a, uint64_t *k) { (void)e, (void)b, (void)l, (void)a, (void)k; return -38; }
int umqf_write(struct umqf_ep *e, const void *b, size_t l, void *d, uint64_t p, uint64_t a, uint64_t k, void *c) { (void)e, (void)b, (void)l, (void)d, (void)p, (void)a, (void)k, (void)c; return -38; }
int umqf_trywait(struct umqf_ep *e) { (void)e; return -38; }
int umqf_rma_keyed(const struct umqf_ep *e) { (void)e; return 0; }
int umqf_expose_keyed(struct umqf_ep *e, void *b, size_t l, uint64_t k, void **m) { (void)e, (void)b, (void)l, (void)k, (void)m; return -38; }
int umqf_unexpose(void *m) { (void)m; return -38; }
int umqf_expose_packed(struct umqf_ep *e, void *b, size_t l, void **m, void *p, size_t *pl) { (void)e, (void)b, (void)l, (void)m, (void)p, (void)pl; return -38; }
int umqf_unpack_key(struct umqf_ep *e, uint64_t p, const void *k, size_t l, uint64_t *out) { (void)e, (void)p, (void)k, (void)l, (void)out; return -38; }
void umqf_drop_key(uint64_t k) { (void)k; }
int umqf_rma(struct umqf_ep *e, int r, void *b, size_t l, uint64_t p, uint64_t a, uint64_t k, void *c) { (void)e, (void)r, (void)b, (void)l, (void)p, (void)a, (void)k, (void)c; return -38; }
int umqf_name(struct umqf_ep *e, void *a, size_t *l) { (void)e, (void)a, (void)l; return -38; }
int umqf_connect(struct umqf_ep *e, const void *a, size_t l, uint64_t *p) { (void)e, (void)a, (void)l, (void)p; return -38; }
int umqf_register(struct umqf_ep *e, void *b, size_t l, void **d) { (void)e, (void)b, (void)l, (void)d; return -38; }
int umqf_recv(struct umqf_ep *e, void *b, size_t l, void *d, void *c) { (void)e, (void)b, (void)l, (void)d, (void)c; return -38; }
int umqf_send(struct umqf_ep *e, const void *b, size_t l, void *d, uint64_t p, void *c) { (void)e, (void)b, (void)l, (void)d, (void)p, (void)c; return -38; }
int umqf_poll(struct umqf_ep *e, struct umqf_cqe *o, int m) { (void)e, (void)o, (void)m; return -38; }
const char *umqf_strerror(int code) { (void)code; return "libfabric not available"; }

#endif
