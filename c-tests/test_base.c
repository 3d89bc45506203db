/* The base API: library-managed receive buffers, enqueue / dequeue / notify, fragmentation of a
 * message larger than one receive buffer, and the refusal of pro-API calls. */
#include "util.h"

static umq_buf_t *message(const char *fill, uint32_t len)
{
    umq_buf_t *b = umq_buf_alloc(len, 1, 0, NULL);
    for (uint32_t i = 0; i < len; i++)
        b->buf_data[i] = fill[i % strlen(fill)];
    return b;
}

static umq_buf_t *dequeue_wait(uint64_t h)
{
    for (int i = 0; i < 1000000; i++) {
        umq_buf_t *m = umq_dequeue(h);
        if (m)
            return m;
    }
    return NULL;
}

/* Walks a dequeued list as programs written for the reference do: each message is its head's
 * total_data_size bytes of buffers, and the buffer after it heads the next. Copies the start of
 * message i into texts[i] (NUL-terminated, up to 31 bytes) and returns the number of messages,
 * or -1 when the list does not add up. */
static int walked_bufs; /* buffers walk_messages went through, all calls */

static int walk_messages(umq_buf_t *list, char texts[][32], int max)
{
    int n = 0;
    for (umq_buf_t *b = list; b != NULL; n++) {
        if (n == max)
            return -1;
        uint32_t left = b->total_data_size, at = 0;
        do {
            if (b->data_size > left)
                return -1;
            for (uint32_t i = 0; i < b->data_size && at < 31; i++)
                texts[n][at++] = (char)b->buf_data[i];
            left -= b->data_size;
            b = b->qbuf_next;
            walked_bufs++;
        } while (b != NULL && left > 0);
        if (left > 0)
            return -1;
        texts[n][at] = 0;
    }
    return n;
}

/* Enqueues a message of `len` bytes: `text`, then '.' up to `len` (at least the text). */
static void enqueue_text(uint64_t h, const char *text, uint32_t len)
{
    len = len > strlen(text) ? len : (uint32_t)strlen(text);
    umq_buf_t *bad = NULL, *s = umq_buf_alloc(len, 1, 0, NULL);
    memset(s->buf_data, '.', len);
    memcpy(s->buf_data, text, strlen(text));
    s->data_size = s->total_data_size = len;
    CHECK_EQ(umq_enqueue(h, s, &bad), 0);
}

/* The messages waiting come out of one umq_dequeue as one list (up to 64), as the reference's
 * UB transport returns them: in order, each bounded by its head's total_data_size (message 5
 * arrives in three 1 KiB receive buffers). A zero-length message comes alone (a walk by
 * total_data_size would not get past it). In IPC mode one message a call, as the reference's
 * IPC transport. */
static void waiting_messages_come_as_one_list(umq_trans_mode_t mode)
{
    umq_create_option_t oa = test_option("list-a", 128, UMQ_MODE_POLLING);
    umq_create_option_t ob = test_option("list-b", 128, UMQ_MODE_POLLING);
    oa.trans_mode = ob.trans_mode = mode;
    ob.create_flag |= UMQ_CREATE_FLAG_RX_BUF_SIZE;
    ob.rx_buf_size = 1024;
    uint64_t a = umq_create(&oa), b = umq_create(&ob);
    uint8_t ia[512], ib[512];
    uint32_t la = umq_bind_info_get(a, ia, sizeof(ia)), lb = umq_bind_info_get(b, ib, sizeof(ib));
    CHECK_EQ(umq_bind(a, ib, lb), 0);
    CHECK_EQ(umq_bind(b, ia, la), 0);

    for (int i = 0; i < 70; i++) {
        char text[32];
        snprintf(text, sizeof(text), "list-%02d", i);
        enqueue_text(a, text, i == 5 ? 2500 : 0);
    }
    int per_call = mode == UMQ_TRANS_MODE_IPC ? 1 : 64, got = 0;
    walked_bufs = 0;
    char texts[64][32];
    while (got < 70) {
        umq_buf_t *m = umq_dequeue(b);
        CHECK(m != NULL);
        if (m == NULL)
            break;
        int n = walk_messages(m, texts, 64);
        int want = 70 - got < per_call ? 70 - got : per_call;
        CHECK_EQ(n, want);
        for (int i = 0; i < n && n > 0; i++) {
            char expect[32];
            snprintf(expect, sizeof(expect), "list-%02d", got + i);
            CHECK(strncmp(texts[i], expect, strlen(expect)) == 0);
            CHECK_EQ(strlen(texts[i]), got + i == 5 ? 31 : strlen(expect));
        }
        got += n > 0 ? n : 70;
        umq_buf_free(m);
    }
    CHECK(umq_dequeue(b) == NULL);
    CHECK_EQ(walked_bufs, 72); /* message 5 in three buffers */

    const char *around_empty[] = {"before", "", "after"};
    for (int i = 0; i < 3; i++)
        enqueue_text(a, around_empty[i], 0);
    for (int i = 0; i < 3; i++) {
        umq_buf_t *m = umq_dequeue(b);
        CHECK(m != NULL);
        if (m == NULL)
            break;
        CHECK_EQ(walk_messages(m, texts, 64), 1);
        CHECK(strcmp(texts[0], around_empty[i]) == 0);
        umq_buf_free(m);
    }
    CHECK(umq_dequeue(b) == NULL);
    umq_notify(a);
    CHECK_EQ(umq_destroy(a), 0);
    CHECK_EQ(umq_destroy(b), 0);
}

/* A buffer the application freed is the pool's next: the receive buffer the library takes to
 * replace a dequeued one (depth 4: a dequeue replaces its buffer at once). Freeing the stale
 * pointer again must not free the library's receive buffer: it did, and a later destroy read a
 * buffer two owners had (fuzzing found it). */
static void stale_free_of_a_reused_buffer(void)
{
    uint64_t c, d;
    test_pair(4, UMQ_MODE_POLLING, &c, &d);
    umq_buf_t *bad = NULL;
    CHECK_EQ(umq_enqueue(c, message("reuse", 8), &bad), 0);
    CHECK(umq_dequeue(c) == NULL); /* c reaps the sent buffer: freed before `stale` below */
    umq_buf_t *stale = umq_buf_alloc(1024, 1, 0, NULL);
    umq_buf_free(stale);
    umq_buf_t *got = dequeue_wait(d); /* its receive buffer replaced: by `stale`'s slot */
    CHECK(got != NULL);
    umq_buf_free(stale); /* refused: the library holds it */
    umq_buf_t *next = umq_buf_alloc(1024, 1, 0, NULL);
    CHECK(next != stale);
    umq_buf_free(next);
    umq_buf_free(got);
    /* The receive buffers still work as such. */
    for (int i = 0; i < 12; i++) {
        CHECK_EQ(umq_enqueue(c, message("after", 8), &bad), 0);
        got = dequeue_wait(d);
        CHECK(got != NULL && got->total_data_size == 8 && memcmp(got->buf_data, "afterafter", 8) == 0);
        umq_buf_free(got);
    }
    CHECK_EQ(umq_destroy(c), 0);
    CHECK_EQ(umq_destroy(d), 0);
}

int main(void)
{
    setenv("UMQ_LOG_LEVEL", "crit", 1);
    umq_init_cfg_t *cfg = calloc(1, sizeof(*cfg));
    cfg->buf_mode = UMQ_BUF_SPLIT;
    cfg->feature = UMQ_FEATURE_API_BASE | UMQ_FEATURE_ENABLE_STATS;
    CHECK_EQ(umq_init(cfg), 0);
    free(cfg);

    umq_create_option_t oa = test_option("base-a", 32, UMQ_MODE_POLLING);
    umq_create_option_t ob = test_option("base-b", 32, UMQ_MODE_POLLING);
    ob.create_flag |= UMQ_CREATE_FLAG_RX_BUF_SIZE;
    ob.rx_buf_size = 1024;
    uint64_t a = umq_create(&oa), b = umq_create(&ob);
    /* Enqueued on a queue not bound yet: refused, and the message stays as the caller gave it,
     * its qbuf_ext too (an accepted message has it rewritten as a SEND). */
    umq_buf_t *early = message("early", 8), *early_bad = NULL;
    memset(early->qbuf_ext, 0x5c, sizeof(early->qbuf_ext));
    umq_buf_t given = *early;
    CHECK_EQ(umq_enqueue(a, early, &early_bad), -UMQ_ERR_EINVAL);
    CHECK(early_bad == early);
    CHECK_EQ(memcmp(early, &given, sizeof(given)), 0);
    umq_buf_free(early);

    uint8_t ia[512], ib[512];
    uint32_t la = umq_bind_info_get(a, ia, sizeof(ia)), lb = umq_bind_info_get(b, ib, sizeof(ib));
    CHECK_EQ(umq_bind(a, ib, lb), 0);
    CHECK_EQ(umq_bind(b, ia, la), 0);

    /* Nothing yet: NULL, and errno as it was (base-API loops test errno after a NULL). */
    errno = 0;
    CHECK(umq_dequeue(b) == NULL);
    CHECK_EQ(errno, 0);
    umq_buf_t *bad = NULL;
    CHECK_EQ(umq_enqueue(a, NULL, &bad), -UMQ_ERR_EINVAL);
    CHECK(umq_dequeue(0) == NULL);

    /* umq_post is refused in base mode, buffers untouched; umq_poll finds nothing, as the
     * reference's does (the library reaps base-API completions itself). */
    umq_buf_t *m = message("x", 8), *c[2];
    CHECK_EQ(umq_post(a, m, UMQ_IO_TX, &bad), -UMQ_ERR_EPERM);
    CHECK(bad == m);
    errno = 0;
    CHECK_EQ(umq_poll(a, UMQ_IO_TX, c, 2), 0);
    CHECK_EQ(umq_poll(a, UMQ_IO_ALL, c, 2), 0);
    CHECK_EQ(umq_poll(a, UMQ_IO_RX, c, 2), 0);
    CHECK_EQ(umq_poll(a, UMQ_IO_TX, NULL, 2), -UMQ_ERR_EINVAL);
    CHECK_EQ(errno, 0);
    umq_buf_free(m);

    /* 100 small messages, in order. */
    for (int i = 0; i < 100; i++) {
        char text[32];
        snprintf(text, sizeof(text), "base-%04d", i);
        umq_buf_t *s = message(text, (uint32_t)strlen(text));
        int r;
        while ((r = umq_enqueue(a, s, &bad)) == -UMQ_ERR_EAGAIN)
            umq_notify(a);
        CHECK_EQ(r, 0);
        umq_buf_t *got = dequeue_wait(b);
        CHECK(got != NULL);
        if (got) {
            CHECK_EQ(got->data_size, strlen(text));
            CHECK(memcmp(got->buf_data, text, strlen(text)) == 0);
            umq_buf_free(got);
        }
    }

    /* 5000 bytes into 1024-byte receive buffers: one message of five fragments. */
    umq_buf_t *big = message("0123456789", 5000);
    CHECK_EQ(umq_enqueue(a, big, &bad), 0);
    umq_buf_t *got = dequeue_wait(b);
    CHECK(got != NULL);
    if (got) {
        CHECK_EQ(got->total_data_size, 5000);
        CHECK_EQ(got->first_fragment, 1);
        int frags = 0;
        uint32_t off = 0, ok = 1;
        for (umq_buf_t *p = got; p; p = p->qbuf_next, frags++) {
            if (frags > 0)
                CHECK_EQ(p->first_fragment, 0);
            for (uint32_t i = 0; i < p->data_size; i++, off++)
                ok &= p->buf_data[i] == "0123456789"[off % 10];
        }
        CHECK_EQ(frags, 5);
        CHECK_EQ(off, 5000);
        CHECK(ok);
        umq_buf_free(got);
    }
    stale_free_of_a_reused_buffer();
    waiting_messages_come_as_one_list(UMQ_TRANS_MODE_UB);
    waiting_messages_come_as_one_list(UMQ_TRANS_MODE_IPC);

    umq_notify(a);
    CHECK_EQ(umq_unbind(a), 0);
    CHECK_EQ(umq_unbind(b), 0);
    CHECK_EQ(umq_destroy(a), 0);
    CHECK_EQ(umq_destroy(b), 0);
    umq_uninit();
    TEST_DONE("test_base");
}
