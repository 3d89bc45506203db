/* A program that includes one UMQ header and nothing else, as programs written against the
 * original headers do (the reference's perftest uses errno and EAGAIN that way): errno, the
 * errno codes, bool and malloc/free must come with the header. Built once per public API
 * header (meson passes -DPRO_API for umq_pro_api.h). It has no stdio, so it reports through
 * its exit status: the number of failed checks. */
#ifdef PRO_API
#include "umq_pro_api.h"
#else
#include "umq_api.h"
#endif

/* Our codes are the errno values the original defines them as. */
static int codes_are_errno_values(void)
{
    return UMQ_ERR_EPERM == EPERM && UMQ_ERR_EAGAIN == EAGAIN && UMQ_ERR_ENOMEM == ENOMEM &&
           UMQ_ERR_EBUSY == EBUSY && UMQ_ERR_EEXIST == EEXIST && UMQ_ERR_EINVAL == EINVAL &&
           UMQ_ERR_ENODEV == ENODEV;
}

#ifdef PRO_API
/* A poll of a handle that was never created fails with -EINVAL and writes nothing. */
static int bad_handle_is_refused(void)
{
    umq_buf_t **out = malloc(sizeof(*out));
    if (out == NULL)
        return 0;
    *out = (umq_buf_t *)out;
    int r = umq_poll(UMQ_INVALID_HANDLE, UMQ_IO_RX, out, 1);
    bool ok = r == -EINVAL && *out == (umq_buf_t *)out;
    free(out);
    return ok;
}
#else
/* Creating a queue before umq_init returns no handle and says why through errno. */
static int bad_handle_is_refused(void)
{
    umq_create_option_t *opt = calloc(1, sizeof(*opt));
    if (opt == NULL)
        return 0;
    errno = 0;
    uint64_t h = umq_create(opt);
    bool ok = h == UMQ_INVALID_HANDLE && errno != 0;
    free(opt);
    return ok;
}
#endif

int main(void)
{
    int failed = 0;
    failed += !codes_are_errno_values();
    failed += !bad_handle_is_refused();
    return failed == 0 ? EXIT_SUCCESS : failed;
}
