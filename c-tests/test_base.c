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
    umq_notify(a);
    CHECK_EQ(umq_unbind(a), 0);
    CHECK_EQ(umq_unbind(b), 0);
    CHECK_EQ(umq_destroy(a), 0);
    CHECK_EQ(umq_destroy(b), 0);
    umq_uninit();
    TEST_DONE("test_base");
}
