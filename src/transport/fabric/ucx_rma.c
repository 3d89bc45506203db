/* The UCX engine's one-sided side: memory our peers' WRITEs and READs reach, and ours to
 * theirs. On an RDMA NIC these are UCP's RMA under UCP's keys, each WRITE followed by a flush
 * that learns it was placed; elsewhere UCP's RMA would be software that checks no key, so the
 * context runs none (ucx.c, `ucp_rma`: unless UMQ_UCX_RMA=ucp) and a WRITE or READ is a carried
 * operation: an active message of ours that the target checks against its table, carries out
 * or refuses, and answers. */
#ifdef UMQ_HAVE_UCX
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "ucx.h"

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

/* Peers' RMA into the process pool (rma.rs): bit 4, keys are packed by the target
 * (umqu_expose_packed: UCP's where the context runs UCP's RMA, else entries of our table) and
 * sent to the initiator, which unpacks them (umqu_unpack_key); bit 2, a peer names our memory
 * by its virtual address; bit 8, RMA runs in software, in the target's progress (tcp has no RMA
 * lanes: `ucx_info -e -u ra`; ours are carried operations, `carry`). */
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
    if (!e->ucp_rma) {
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
        return -ucx_code_of(s);
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
        return s == UCS_ERR_EXCEEDS_LIMIT ? -ENOSPC : -ucx_code_of(s);
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
    return -ucx_code_of(s);
}

/* A key the peer packed, unpacked for our operations to it: *key, until umqu_drop_key. The
 * bytes are the peer's, so hostile. A key of the peer's table is taken as it is (the peer
 * checks it); one of UCP's only where our UCP context does RMA (on a NIC). */
int umqu_unpack_key(struct umqu_ep *e, uint64_t peer, const void *packed, size_t len,
                    uint64_t *key)
{
    int rc = 0;
    ucp_ep_h ep = ucx_reach(e, peer, &rc);
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
    if (!e->ucp_rma) {
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
        return -ucx_code_of(s);
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

/* A WRITE completes once its bytes are placed at the peer, as libfabric's FI_DELIVERY_COMPLETE:
 * a put's own completion means only that our buffer is free again, so a flush of the endpoint
 * follows, and the later of the two completes the WRITE (`ucx_await_flush`). */
static int write_placed(struct umqu_ep *e, uint64_t peer, const void *buf, size_t len,
                        uint64_t addr, ucp_rkey_h k, struct op *o)
{
    struct peer *p = ucx_peer_of(e, peer);
    if (ucx_flush_room(e, p)) {
        free(o);
        return -ENOMEM;
    }
    ucp_request_param_t param = ucx_in_parts(o);
    ucs_status_ptr_t put = U.put_nbx(p->ep, buf, len, addr, k, &param);
    if (UCS_PTR_IS_ERR(put)) {
        free(o);
        return -ucx_code_of(UCS_PTR_STATUS(put));
    }
    o->parts = 1 + (put != NULL);
    ucx_await_flush(e, peer, o);
    return 0;
}

/* Carried operations. Without a NIC UCP's own RMA is software too: a message the target's UCP
 * runs, writing or reading wherever it names without checking a key, and aborting the target's
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
    o->carried.op = (uint64_t)++e->op_generation << 32 | o->slot;
    return 0;
}

/* `o` waits no longer: answered, or no answer can come. */
static void stop_waiting(struct umqu_ep *e, struct op *o)
{
    slots_give_back(&e->awaiting, o->slot);
}

/* Whether `o` still waits for its answer: its slot still holds it (a slot given back may
 * already hold another operation). */
static int waits(const struct op *o)
{
    return slots_at(&o->e->awaiting, o->slot) == o;
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
    ucx_part_done(o, status);
}

static void carried_sent(void *request, ucs_status_t status, void *user_data)
{
    struct op *o = user_data;
    U.request_free(request);
    if (status != UCS_OK && waits(o)) {
        stop_waiting(o->e, o); /* it never reached the target: no answer comes */
        o->parts--;            /* the send's part, done below, is the last */
    }
    ucx_part_done(o, status);
}

/* The operations waiting for `ep`'s answers fail with `status`: its connection failed. */
void ucx_fail_awaiting(struct umqu_ep *e, ucp_ep_h ep, ucs_status_t status)
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
        return -ucx_code_of(UCS_PTR_STATUS(r));
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
ucs_status_t ucx_carried_write_arrived(void *arg, const void *header, size_t header_len,
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
ucs_status_t ucx_carried_read_arrived(void *arg, const void *header, size_t header_len,
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
ucs_status_t ucx_carried_answered(void *arg, const void *header, size_t header_len,
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
int umqu_rma(struct umqu_ep *e, int how, void *buf, size_t len, void *desc, uint64_t peer,
             uint64_t addr, uint64_t key, void *ctx)
{
    (void)desc; /* UCP registers our own memory itself */
    int read = how & UMQF_RMA_READ;
    const struct remote_key *k = (const struct remote_key *)(uintptr_t)key;
    int rc = 0;
    ucp_ep_h ep = ucx_reach(e, peer, &rc);
    if (!ep)
        return rc;
    struct op *o = ucx_op_new(e, ctx, len);
    if (!o)
        return -ENOMEM;
    if (!k->ucp)
        return carry(e, read, buf, len, ep, addr, k, o);
    if (!read)
        return write_placed(e, peer, buf, len, addr, k->ucp, o);
    ucp_request_param_t param = ucx_completing(o);
    return ucx_settle(e, U.get_nbx(ep, buf, len, addr, k->ucp, &param), o);
}

/* UCP registers our own memory itself (umqu_rma_keyed never asks for it). */
void umqu_emulate_mr(struct umqu_ep *e, int verbs_mr)
{
    (void)e, (void)verbs_mr;
}

int umqu_register_local(struct umqu_ep *e, void *buf, size_t len, void **mr, void **desc)
{
    (void)e, (void)buf, (void)len, (void)mr, (void)desc;
    return -ENOSYS;
}

void umqu_unregister_local(void *mr)
{
    (void)mr;
}

/* Frees what the carried operations kept, as the endpoint closes: operations still waiting
 * (their peers are gone, no answer comes) and the tables. */
void ucx_rma_close(struct umqu_ep *e)
{
    for (size_t i = 0; i < e->awaiting.len; i++)
        free(e->awaiting.at[i]);
    slots_free(&e->awaiting);
    slots_free(&e->table);
}

#endif
