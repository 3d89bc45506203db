/* fork() after umq_init, as a server that forks its workers does it. The child has none of the
 * parent's library state: the parent's handles are refused there (and the parent's peer sees
 * nothing), umq_uninit there leaves the parent's queues alone, and a umq_init there makes a
 * runtime of the child's own whose queues work. With UMQ_PROVIDER=shm or fabric the pairs bind
 * over that provider. */
#include "util.h"
#include <sys/wait.h>
#include <unistd.h>

static umq_init_cfg_t *pro_cfg(void)
{
    umq_init_cfg_t *cfg = calloc(1, sizeof(*cfg));
    cfg->feature = UMQ_FEATURE_API_PRO;
    cfg->buf_mode = UMQ_BUF_SPLIT;
    return cfg;
}

static umq_buf_t *message(const char *text)
{
    umq_buf_t *b = umq_buf_alloc((uint32_t)strlen(text), 1, 0, NULL);
    if (!b)
        return NULL;
    memcpy(b->buf_data, text, strlen(text));
    ((umq_buf_pro_t *)b->qbuf_ext)->opcode = UMQ_OPC_SEND;
    return b;
}

/* `n` messages from `a` to `b`, each checked as it arrives and its buffer posted again. */
static void ping(uint64_t a, uint64_t b, int n, const char *tag)
{
    char text[64];
    umq_buf_t *bad = NULL, *c[1];
    for (int i = 0; i < n; i++) {
        snprintf(text, sizeof(text), "%s-%d", tag, i);
        umq_buf_t *m = message(text);
        CHECK(m != NULL);
        CHECK_EQ(umq_post(a, m, UMQ_IO_TX, &bad), 0);
        CHECK_EQ(test_poll_one(b, UMQ_IO_RX, c), 1);
        CHECK_EQ(c[0]->data_size, strlen(text));
        CHECK(memcmp(c[0]->buf_data, text, strlen(text)) == 0);
        CHECK_EQ(umq_post(b, c[0], UMQ_IO_RX, &bad), 0);
        CHECK_EQ(test_poll_one(a, UMQ_IO_TX, c), 1);
        umq_buf_free(c[0]);
    }
}

static void post_receives(uint64_t h, uint32_t n)
{
    umq_buf_t *bad = NULL;
    CHECK_EQ(umq_post(h, umq_buf_alloc(256, n, 0, NULL), UMQ_IO_RX, &bad), 0);
}

/* A pair bound to each other, each with 8 receive buffers posted. */
static void receiving_pair(uint64_t *a, uint64_t *b)
{
    test_pair(16, UMQ_MODE_POLLING, a, b);
    post_receives(*a, 8);
    post_receives(*b, 8);
}

/* The parent ran the network provider over its UCX engine, which cannot be used again in a
 * process forked from it. */
static bool ucx_in_parent(void)
{
    const char *provider = getenv("UMQ_PROVIDER"), *engine = getenv("UMQ_FABRIC_PROVIDER");
    return provider && engine && !strcmp(provider, "fabric") && !strcmp(engine, "ucx");
}

/* In such a child a queue is made but cannot bind: the bind is refused, not left hanging. */
static void ucx_refused(void)
{
    umq_create_option_t oa = test_option("a", 16, UMQ_MODE_POLLING);
    umq_create_option_t ob = test_option("b", 16, UMQ_MODE_POLLING);
    uint64_t x = umq_create(&oa), y = umq_create(&ob);
    CHECK(x != 0 && y != 0);
    uint8_t info[512];
    uint32_t len = umq_bind_info_get(y, info, sizeof(info));
    CHECK(len > 0);
    CHECK_EQ(umq_bind(x, info, len), -UMQ_ERR_EINVAL);
    CHECK_EQ(umq_destroy(x), 0);
    CHECK_EQ(umq_destroy(y), 0);
}

/* The child's side; its return is its exit code. */
static int child(uint64_t a, uint64_t b, umq_buf_t *forged)
{
    umq_buf_t *bad = NULL;
    CHECK_EQ(umq_post(a, forged, UMQ_IO_TX, &bad), -UMQ_ERR_EINVAL);
    CHECK(bad == forged);
    errno = 0;
    CHECK(umq_buf_alloc(64, 1, a, NULL) == NULL);
    CHECK_EQ(errno, UMQ_ERR_EINVAL);
    CHECK_EQ(umq_destroy(b), -UMQ_ERR_EINVAL);
    umq_uninit(); /* the child has no runtime: nothing of the parent's is touched */
    umq_init_cfg_t *cfg = pro_cfg();
    CHECK_EQ(umq_init(cfg), 0);
    if (ucx_in_parent()) {
        ucx_refused();
        umq_uninit();
        setenv("UMQ_FABRIC_PROVIDER", "tcp", 1); /* what the refusal advises */
        CHECK_EQ(umq_init(cfg), 0);
    }
    uint64_t x, y;
    receiving_pair(&x, &y);
    ping(x, y, 100, "child");
    ping(y, x, 100, "child back");
    CHECK_EQ(umq_destroy(x), 0);
    CHECK_EQ(umq_destroy(y), 0);
    umq_uninit();
    free(cfg);
    return test_failures ? 1 : 0;
}

int main(void)
{
    umq_log_config_t quiet = {.log_flag = UMQ_LOG_FLAG_LEVEL, .level = UMQ_LOG_LEVEL_CRIT};
    umq_log_config_set(&quiet);
    umq_init_cfg_t *cfg = pro_cfg();
    CHECK_EQ(umq_init(cfg), 0);
    uint64_t a, b;
    receiving_pair(&a, &b);
    ping(a, b, 3, "before");
    umq_buf_t *forged = message("from the child");
    fflush(NULL);
    pid_t pid = fork();
    /* The child ends in _exit: a leak checker at its exit would report what only the parent's
     * threads (the progress thread), which the child does not have, pointed to. */
    if (pid == 0)
        _exit(child(a, b, forged));
    int status = -1;
    CHECK_EQ(waitpid(pid, &status, 0), pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    /* Nothing of the child's reached b: the next message it takes is the parent's. */
    ping(a, b, 3, "after");
    ping(b, a, 3, "back");
    CHECK_EQ(umq_state_get(a), QUEUE_STATE_READY);
    CHECK_EQ(umq_state_get(b), QUEUE_STATE_READY);
    umq_buf_free(forged);
    CHECK_EQ(umq_destroy(a), 0);
    CHECK_EQ(umq_destroy(b), 0);
    umq_uninit();
    free(cfg);
    TEST_DONE("fork");
}
