/* Shared receive queues of the July 2026 API (the abi-2026 build): a main queue
 * (UMQ_CREATE_FLAG_MAIN_UMQ) and sub-queues (SHARE_RQ | SUB_UMQ with share_rq_umqh) receive into
 * one line of buffers, which only the main queue polls.
 *   flags     - the reference's refusals: SHARE_RQ without SUB_UMQ and the reverse, MAIN with SUB,
 *               a share_rq_umqh that is no main queue, a different rx_buf_size, transport pools
 *   loopback  - two sub-queues bound to peers in this process: posts to the main queue and to
 *               either sub-queue fill one line as deep as the main queue; every message comes
 *               out of the main queue's poll, in order, tagged with its sub-queue's umq_ctx;
 *               the sub-queues' receive polls return nothing, their sends complete on their own
 *   starved   - a message that finds the line empty waits, and a post to another member lands it
 *   irq       - the main queue's receive interrupt wakes for a sub-queue's message; a
 *               sub-queue's receive interrupt is refused
 *   destroy   - the main queue cannot go while a sub-queue lives
 *   shm       - a sub-queue bound to another process: the main queue's polls land what reached
 *               it, byte-exact and in order, with nothing ever polled on the sub-queue. */
#define _DEFAULT_SOURCE 1
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include "umq_api.h"
#include "umq_pro_api.h"
#include "util_2026.h"


static void init(void)
{
    umq_init_cfg_t *cfg = init_cfg_lo(UMQ_FEATURE_API_PRO);
    if (umq_init(cfg) != 0) {
        fprintf(stderr, "umq_init failed\n");
        exit(2);
    }
    free(cfg);
}

static umq_create_option_t option(const char *name, umq_queue_mode_t mode)
{
    umq_create_option_t o =
        option_lo(name, UMQ_CREATE_FLAG_RX_DEPTH | UMQ_CREATE_FLAG_QUEUE_MODE | UMQ_CREATE_FLAG_RX_BUF_SIZE);
    o.rx_depth = 8;
    o.rx_buf_size = 4096;
    o.mode = mode;
    return o;
}

static uint64_t create_main(umq_queue_mode_t mode)
{
    umq_create_option_t o = option("main", mode);
    o.create_flag |= UMQ_CREATE_FLAG_MAIN_UMQ;
    return umq_create(&o);
}

static uint64_t create_sub(uint64_t main, uint64_t ctx, umq_queue_mode_t mode)
{
    umq_create_option_t o = option("sub", mode);
    o.create_flag = UMQ_CREATE_FLAG_QUEUE_MODE | UMQ_CREATE_FLAG_SHARE_RQ | UMQ_CREATE_FLAG_SUB_UMQ |
        UMQ_CREATE_FLAG_UMQ_CTX;
    o.share_rq_umqh = main;
    o.umq_ctx = ctx;
    return umq_create(&o);
}

static uint64_t create_plain(const char *name)
{
    umq_create_option_t o = option(name, UMQ_MODE_POLLING);
    o.rx_depth = 64;
    return umq_create(&o);
}

static int post_rx(uint64_t q, uint32_t n)
{
    umq_buf_t *bufs = umq_buf_alloc(4096, n, q, NULL), *bad = NULL;
    CHECK(bufs != NULL);
    int r = umq_post(q, bufs, &rx, &bad);
    if (r != 0 && bad != NULL) {
        umq_buf_free(bad);
    }
    return r;
}

/* Sends "<tag>-<seq>" from q; the send completes on q's own poll (when the peer has a buffer). */
static void send_text(uint64_t q, const char *tag, int seq)
{
    umq_buf_t *m = umq_buf_alloc(64, 1, q, NULL), *bad = NULL;
    CHECK(m != NULL);
    int len = snprintf(m->buf_data, 64, "%s-%d", tag, seq) + 1;
    m->data_size = (uint32_t)len;
    m->total_data_size = (uint32_t)len;
    umq_buf_pro_t *pro = (umq_buf_pro_t *)m->qbuf_ext;
    memset(pro, 0, sizeof(*pro));
    pro->opcode = UMQ_OPC_SEND;
    CHECK_EQ(umq_post(q, m, &tx, &bad), 0);
}

static int poll_some(uint64_t q, umq_io_option_t *dir, umq_buf_t **out, uint32_t max, int want)
{
    int got = 0;
    for (int i = 0; i < 2000000 && got < want; i++) {
        int n = umq_poll(q, dir, out + got, max - (uint32_t)got);
        if (n < 0) {
            CHECK_EQ(n, 0);
            break;
        }
        got += n;
    }
    return got;
}

static uint64_t ctx_of(umq_buf_t *b)
{
    return ((umq_buf_pro_t *)b->qbuf_ext)->umq_ctx;
}

static void flags(uint64_t main, uint64_t plain)
{
    umq_create_option_t o = option("bad", UMQ_MODE_POLLING);
    uint32_t bad_flags[] = {UMQ_CREATE_FLAG_SHARE_RQ, UMQ_CREATE_FLAG_SUB_UMQ,
        UMQ_CREATE_FLAG_MAIN_UMQ | UMQ_CREATE_FLAG_SUB_UMQ | UMQ_CREATE_FLAG_SHARE_RQ,
        UMQ_CREATE_FLAG_SHARE_TRANSPORT | UMQ_CREATE_FLAG_SHARE_RQ | UMQ_CREATE_FLAG_SUB_UMQ};
    for (size_t i = 0; i < sizeof(bad_flags) / sizeof(bad_flags[0]); i++) {
        o.create_flag = bad_flags[i];
        o.share_rq_umqh = main;
        errno = 0;
        CHECK(umq_create(&o) == UMQ_INVALID_HANDLE);
        CHECK_EQ(errno, UMQ_ERR_EINVAL);
    }
    o.create_flag = UMQ_CREATE_FLAG_SHARE_RQ | UMQ_CREATE_FLAG_SUB_UMQ;
    uint64_t not_main[] = {0, plain, 12345};
    for (size_t i = 0; i < 3; i++) {
        o.share_rq_umqh = not_main[i];
        CHECK(umq_create(&o) == UMQ_INVALID_HANDLE);
    }
    o.create_flag |= UMQ_CREATE_FLAG_RX_BUF_SIZE;
    o.share_rq_umqh = main;
    o.rx_buf_size = 8192;
    CHECK(umq_create(&o) == UMQ_INVALID_HANDLE);
    /* A sub-queue of a sub-queue is refused too. */
    uint64_t s = create_sub(main, 9, UMQ_MODE_POLLING);
    CHECK(s != UMQ_INVALID_HANDLE);
    o.create_flag = UMQ_CREATE_FLAG_SHARE_RQ | UMQ_CREATE_FLAG_SUB_UMQ;
    o.share_rq_umqh = s;
    CHECK(umq_create(&o) == UMQ_INVALID_HANDLE);
    umq_cfg_get_t c;
    CHECK_EQ(umq_cfg_get(s, &c), 0);
    CHECK_EQ(c.share_rq_umqh, main);
    CHECK_EQ(c.rx_buf_size, 4096); /* inherited */
    CHECK_EQ(c.rx_depth, 8);       /* the line's */
    CHECK_EQ(c.umq_ctx, 9);
    CHECK_EQ(umq_destroy(s), 0);
}

/* Two sub-queues bound to peers in this process, one line of eight buffers. */
static void loopback(void)
{
    uint64_t main = create_main(UMQ_MODE_INTERRUPT), p1 = create_plain("p1"), p2 = create_plain("p2");
    CHECK(main != UMQ_INVALID_HANDLE && p1 != UMQ_INVALID_HANDLE && p2 != UMQ_INVALID_HANDLE);
    flags(main, p1);
    uint64_t s1 = create_sub(main, 101, UMQ_MODE_POLLING), s2 = create_sub(main, 102, UMQ_MODE_INTERRUPT);
    CHECK(s1 != UMQ_INVALID_HANDLE && s2 != UMQ_INVALID_HANDLE);
    bind_pair(s1, p1);
    bind_pair(s2, p2);

    /* The line is as deep as the main queue, whichever member posts. */
    CHECK_EQ(post_rx(main, 3), 0);
    CHECK_EQ(post_rx(s1, 3), 0);
    CHECK_EQ(post_rx(s2, 2), 0);
    CHECK_EQ(post_rx(s2, 1), -UMQ_ERR_EAGAIN);
    CHECK_EQ(post_rx(main, 1), -UMQ_ERR_EAGAIN);

    /* Interrupts: the main queue's wakes for a sub-queue's message; the sub-queue's is refused. */
    umq_interrupt_option_t irx = {.flag = UMQ_INTERRUPT_FLAG_IO_DIRECTION, .direction = UMQ_IO_RX};
    umq_interrupt_option_t itx = {.flag = UMQ_INTERRUPT_FLAG_IO_DIRECTION, .direction = UMQ_IO_TX};
    CHECK(umq_interrupt_fd_get(s2, &irx) < 0); /* -1, as the reference answers */
    CHECK_EQ(umq_rearm_interrupt(s2, false, &irx), 0); /* a no-op, as in the reference */
    CHECK_EQ(umq_wait_interrupt(s2, 0, &irx), -UMQ_ERR_EINVAL);
    CHECK_EQ(umq_rearm_interrupt(s1, false, &irx), -UMQ_ERR_EINVAL); /* s1 polls */
    CHECK(umq_interrupt_fd_get(s2, &itx) >= 0);
    CHECK(umq_interrupt_fd_get(main, &irx) >= 0);
    CHECK_EQ(umq_rearm_interrupt(main, false, &irx), 0);
    CHECK_EQ(umq_wait_interrupt(main, 0, &irx), 0);

    for (int i = 0; i < 3; i++) {
        send_text(p1, "p1", i);
        send_text(p2, "p2", i);
    }
    CHECK_EQ(umq_wait_interrupt(main, 1000, &irx), 1);
    umq_buf_t *out[16];
    CHECK_EQ(umq_poll(s1, &rx, out, 16), 0);
    CHECK_EQ(umq_poll(s2, &rx, out, 16), 0);
    CHECK_EQ(poll_some(main, &rx, out, 16, 6), 6);
    int next[2] = {0, 0};
    for (int i = 0; i < 6; i++) {
        int who = ctx_of(out[i]) == 102;
        CHECK(ctx_of(out[i]) == 101 || ctx_of(out[i]) == 102);
        char want[16];
        snprintf(want, sizeof(want), "p%d-%d", who + 1, next[who]++);
        CHECK_EQ(out[i]->status, UMQ_BUF_SUCCESS);
        CHECK(strcmp(out[i]->buf_data, want) == 0);
        CHECK_EQ(out[i]->total_data_size, strlen(want) + 1);
        CHECK_EQ(out[i]->umqh, who ? s2 : s1);
        umq_buf_free(out[i]);
    }
    CHECK_EQ(umq_poll(main, &rx, out, 16), 0);
    umq_buf_t *done[8];
    CHECK_EQ(poll_some(p1, &tx, done, 8, 3), 3);
    CHECK_EQ(poll_some(p2, &tx, done + 3, 5, 3), 3);
    for (int i = 0; i < 6; i++) {
        CHECK_EQ(done[i]->status, UMQ_BUF_SUCCESS);
        umq_buf_free(done[i]);
    }

    /* Starved: two buffers left; p1's third message waits (on loopback its send waits too)
     * until s2, another member, posts. */
    for (int i = 0; i < 3; i++) {
        send_text(p1, "p1", 3 + i);
    }
    CHECK_EQ(poll_some(main, &rx, out, 16, 2), 2);
    int idle = 0;
    for (int i = 0; i < 10000; i++) {
        idle += umq_poll(main, &rx, out + 2, 14) == 0;
    }
    CHECK_EQ(idle, 10000);
    CHECK_EQ(post_rx(s2, 1), 0);
    CHECK_EQ(poll_some(main, &rx, out + 2, 14, 1), 1);
    CHECK_EQ(poll_some(p1, &tx, done, 8, 3), 3);
    for (int i = 0; i < 3; i++) {
        char want[16];
        snprintf(want, sizeof(want), "p1-%d", 3 + i);
        CHECK(strcmp(out[i]->buf_data, want) == 0);
        CHECK_EQ(ctx_of(out[i]), 101);
        CHECK_EQ(done[i]->status, UMQ_BUF_SUCCESS);
        umq_buf_free(out[i]);
        umq_buf_free(done[i]);
    }

    /* Sends of a sub-queue complete on its own polls; the main queue's sees none of them. */
    CHECK_EQ(post_rx(p2, 1), 0);
    send_text(s2, "s2", 0);
    CHECK_EQ(poll_some(s2, &tx, done, 1, 1), 1);
    umq_buf_free(done[0]);
    CHECK_EQ(poll_some(p2, &rx, out, 1, 1), 1);
    CHECK(strcmp(out[0]->buf_data, "s2-0") == 0);
    CHECK_EQ(ctx_of(out[0]), 0); /* p2 was made without a context */
    umq_buf_free(out[0]);

    /* The main queue stays while sub-queues live; buffers still posted go back at the end. */
    CHECK_EQ(umq_destroy(main), -UMQ_ERR_EBUSY);
    CHECK_EQ(umq_destroy(s1), 0);
    CHECK_EQ(umq_destroy(main), -UMQ_ERR_EBUSY);
    CHECK_EQ(umq_destroy(s2), 0);
    CHECK_EQ(umq_destroy(main), 0);
    CHECK_EQ(umq_destroy(p1), 0);
    CHECK_EQ(umq_destroy(p2), 0);
}

static int sock_send(int s, const void *p, uint32_t n)
{
    return write(s, &n, 4) == 4 && write(s, p, n) == (ssize_t)n ? 0 : -1;
}

static uint32_t sock_recv(int s, void *p, uint32_t cap)
{
    uint32_t n = 0;
    if (read(s, &n, 4) != 4 || n > cap) {
        return 0;
    }
    uint32_t got = 0;
    while (got < n) {
        ssize_t r = read(s, (char *)p + got, n - got);
        if (r <= 0) {
            return 0;
        }
        got += (uint32_t)r;
    }
    return n;
}

static void bind_to_peer(int s, uint64_t q)
{
    uint8_t mine[512], theirs[512];
    uint32_t n = umq_bind_info_get(q, mine, sizeof(mine));
    CHECK(n > 0 && sock_send(s, mine, n) == 0);
    uint32_t m = sock_recv(s, theirs, sizeof(theirs));
    CHECK(m > 0);
    CHECK_EQ(umq_bind(q, theirs, m), 0);
}

#define SHM_MSGS 2000

/* The child sends SHM_MSGS numbered messages; the parent reposts what the main queue returns
 * and never polls the sub-queue the child is bound to. Forked before either side calls
 * umq_init. */
static pid_t shm_child(int sv[2])
{
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    pid_t pid = fork();
    if (pid == 0) {
        close(sv[0]);
        init();
        uint64_t q = create_plain("child");
        bind_to_peer(sv[1], q);
        umq_buf_t *done[64];
        int sent = 0, completed = 0;
        while (completed < SHM_MSGS) {
            if (sent < SHM_MSGS && sent - completed < 32) {
                send_text(q, "c", sent++);
            }
            int n = umq_poll(q, &tx, done, 64);
            for (int i = 0; i < n; i++) {
                CHECK_EQ(done[i]->status, UMQ_BUF_SUCCESS);
                umq_buf_free(done[i]);
            }
            completed += n > 0 ? n : 0;
        }
        char ok = 1;
        CHECK(read(sv[1], &ok, 1) == 1); /* the parent has everything: now leave */
        umq_destroy(q);
        umq_uninit();
        _exit(failures ? 1 : 0);
    }
    close(sv[1]);
    return pid;
}

static void shm(int sv[2], pid_t pid)
{
    uint64_t main = create_main(UMQ_MODE_POLLING), sub = create_sub(main, 7, UMQ_MODE_POLLING);
    CHECK(main != UMQ_INVALID_HANDLE && sub != UMQ_INVALID_HANDLE);
    bind_to_peer(sv[0], sub);
    CHECK_EQ(post_rx(main, 8), 0);
    int received = 0;
    for (long spins = 0; received < SHM_MSGS && spins < 50000000; spins++) {
        umq_buf_t *out[8];
        int n = umq_poll(main, &rx, out, 8);
        if (n < 0) {
            CHECK_EQ(n, 0);
            break;
        }
        for (int i = 0; i < n; i++) {
            char want[16];
            snprintf(want, sizeof(want), "c-%d", received++);
            if (strcmp(out[i]->buf_data, want) != 0 || ctx_of(out[i]) != 7) {
                CHECK(strcmp(out[i]->buf_data, want) == 0);
                CHECK_EQ(ctx_of(out[i]), 7);
            }
            umq_buf_free(out[i]);
        }
        if (n > 0) {
            CHECK_EQ(post_rx(sub, (uint32_t)n), 0);
        }
    }
    CHECK_EQ(received, SHM_MSGS);
    char ok = 1;
    CHECK(write(sv[0], &ok, 1) == 1);
    int status = 0;
    CHECK_EQ(waitpid(pid, &status, 0), pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK_EQ(umq_destroy(sub), 0);
    CHECK_EQ(umq_destroy(main), 0);
}

int main(void)
{
    int sv[2];
    pid_t child = shm_child(sv);
    init();
    loopback();
    shm(sv, child);
    umq_uninit();
    printf("srq_2026: %d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
