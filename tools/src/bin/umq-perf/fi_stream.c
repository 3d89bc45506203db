/* The streaming baseline for umq-perf: libfabric's shm provider moving N messages one way,
 * the way a tuned libfabric application would (fabtests' fi_rdm_bw is not packaged by Debian).
 *
 *   fi_stream -n MESSAGES -S SIZE [-w WINDOW] [-p PROVIDER]
 *
 * It forks: the child receives (WINDOW receives always posted, reposted as they complete), the
 * parent sends (fi_inject when the size allows, else fi_send with up to WINDOW in flight).
 * Endpoint names go over a pipe. Prints one line:
 *   fi_stream provider=shm size=S messages=N elapsed_ns=T msgs_per_s=R
 * umq-perf compiles this file with the system compiler and -lfabric (libfabric-dev). */
#define _GNU_SOURCE 1
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_WINDOW 1024

struct side {
    struct fi_info *info;
    struct fid_fabric *fabric;
    struct fid_domain *domain;
    struct fid_av *av;
    struct fid_cq *cq;
    struct fid_ep *ep;
    struct fid_mr *mr;
    void *desc;
    fi_addr_t peer;
    char *buf;
};

static void check(int rc, const char *what)
{
    if (rc) {
        fprintf(stderr, "fi_stream: %s: %s\n", what, fi_strerror(-rc));
        exit(1);
    }
}

static void full_io(int fd, void *p, size_t n, int writing)
{
    for (size_t done = 0; done < n;) {
        ssize_t r = writing ? write(fd, (char *)p + done, n - done) : read(fd, (char *)p + done, n - done);
        if (r <= 0) {
            fprintf(stderr, "fi_stream: pipe closed\n");
            exit(1);
        }
        done += (size_t)r;
    }
}

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void open_side(struct side *s, const char *prov, size_t bytes)
{
    struct fi_info *hints = fi_allocinfo();
    hints->ep_attr->type = FI_EP_RDM;
    hints->caps = FI_MSG;
    hints->mode = FI_CONTEXT | FI_CONTEXT2;
    hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
    hints->fabric_attr->prov_name = strdup(prov);
    check(fi_getinfo(FI_VERSION(1, 9), NULL, NULL, 0, hints, &s->info), "fi_getinfo");
    fi_freeinfo(hints);
    check(fi_fabric(s->info->fabric_attr, &s->fabric, NULL), "fi_fabric");
    check(fi_domain(s->fabric, s->info, &s->domain, NULL), "fi_domain");
    struct fi_cq_attr cq = {.format = FI_CQ_FORMAT_CONTEXT, .size = 2 * MAX_WINDOW, .wait_obj = FI_WAIT_NONE};
    check(fi_cq_open(s->domain, &cq, &s->cq, NULL), "fi_cq_open");
    struct fi_av_attr av = {.type = FI_AV_UNSPEC};
    check(fi_av_open(s->domain, &av, &s->av, NULL), "fi_av_open");
    check(fi_endpoint(s->domain, s->info, &s->ep, NULL), "fi_endpoint");
    check(fi_ep_bind(s->ep, &s->av->fid, 0), "bind av");
    check(fi_ep_bind(s->ep, &s->cq->fid, FI_TRANSMIT | FI_RECV), "bind cq");
    check(fi_enable(s->ep), "fi_enable");
    if (posix_memalign((void **)&s->buf, 4096, bytes))
        exit(1);
    memset(s->buf, 0x5a, bytes);
    s->desc = NULL;
    if (s->info->domain_attr->mr_mode & FI_MR_LOCAL) {
        check(fi_mr_reg(s->domain, s->buf, bytes, FI_SEND | FI_RECV, 0, 0, 0, &s->mr, NULL), "fi_mr_reg");
        s->desc = fi_mr_desc(s->mr);
    }
}

/* Closes what open_side opened, endpoint first: the shm provider removes its region from
 * /dev/shm when the endpoint closes, and a process that exits without closing leaves it there. */
static void close_side(struct side *s)
{
    fi_close(&s->ep->fid);
    fi_close(&s->av->fid);
    fi_close(&s->cq->fid);
    if (s->mr)
        fi_close(&s->mr->fid);
    fi_close(&s->domain->fid);
    fi_close(&s->fabric->fid);
    fi_freeinfo(s->info);
    free(s->buf);
}

/* Sends our endpoint name on `out`, reads the peer's from `in`, inserts it. */
static void exchange_names(struct side *s, int out, int in)
{
    char name[256], theirs[256];
    size_t len = sizeof(name), their_len = 0;
    check(fi_getname(&s->ep->fid, name, &len), "fi_getname");
    full_io(out, &len, sizeof(len), 1);
    full_io(out, name, len, 1);
    full_io(in, &their_len, sizeof(their_len), 0);
    if (their_len > sizeof(theirs))
        exit(1);
    full_io(in, theirs, their_len, 0);
    if (fi_av_insert(s->av, theirs, 1, &s->peer, 0, NULL) != 1)
        check(-FI_EINVAL, "fi_av_insert");
}

/* Reaps completions; returns how many, exits on a completion error. */
static int reap(struct side *s)
{
    struct fi_cq_entry done[64];
    ssize_t n = fi_cq_read(s->cq, done, 64);
    if (n == -FI_EAGAIN)
        return 0;
    if (n < 0) {
        struct fi_cq_err_entry err = {0};
        fi_cq_readerr(s->cq, &err, 0);
        fprintf(stderr, "fi_stream: completion error %s\n", fi_strerror(err.err));
        exit(1);
    }
    return (int)n;
}

static void receive(struct side *s, long messages, size_t size, int window)
{
    static struct fi_context2 ctx[MAX_WINDOW];
    for (int i = 0; i < window; i++)
        check((int)fi_recv(s->ep, s->buf + (size_t)i * size, size, s->desc, FI_ADDR_UNSPEC, &ctx[i]), "fi_recv");
    long got = 0;
    while (got < messages) {
        struct fi_cq_entry done[64];
        ssize_t n = fi_cq_read(s->cq, done, 64);
        if (n == -FI_EAGAIN)
            continue;
        if (n < 0)
            reap(s); /* reports the error */
        for (ssize_t k = 0; k < n; k++) {
            struct fi_context2 *c = done[k].op_context;
            long slot = c - ctx;
            ssize_t rc;
            while ((rc = fi_recv(s->ep, s->buf + (size_t)slot * size, size, s->desc, FI_ADDR_UNSPEC, c)) == -FI_EAGAIN)
                ;
            check((int)rc, "fi_recv");
        }
        got += n;
    }
}

static void send_all(struct side *s, long messages, size_t size, int window)
{
    static struct fi_context2 ctx[MAX_WINDOW];
    int inject = size <= s->info->tx_attr->inject_size;
    long sent = 0, done = 0;
    int next_ctx = 0;
    while (sent < messages) {
        ssize_t rc;
        if (inject) {
            rc = fi_inject(s->ep, s->buf, size, s->peer);
        } else if (sent - done < window) {
            rc = fi_send(s->ep, s->buf, size, s->desc, s->peer, &ctx[next_ctx]);
        } else {
            rc = -FI_EAGAIN;
        }
        if (rc == 0) {
            sent++;
            next_ctx = (next_ctx + 1) % window;
        } else if (rc != -FI_EAGAIN) {
            check((int)rc, "send");
        }
        done += reap(s); /* also drives the provider's progress */
    }
    while (!inject && done < sent)
        done += reap(s);
}

int main(int argc, char **argv)
{
    long messages = 1000000;
    size_t size = 64;
    int window = 64, o;
    const char *prov = "shm";
    while ((o = getopt(argc, argv, "n:S:w:p:")) != -1) {
        switch (o) {
        case 'n': messages = atol(optarg); break;
        case 'S': size = (size_t)atol(optarg); break;
        case 'w': window = atoi(optarg); break;
        case 'p': prov = optarg; break;
        default: fprintf(stderr, "usage: fi_stream -n MESSAGES -S SIZE [-w WINDOW] [-p PROVIDER]\n"); return 2;
        }
    }
    if (window < 1 || window > MAX_WINDOW || messages < 1 || size < 1) {
        fprintf(stderr, "fi_stream: bad arguments\n");
        return 2;
    }
    int to_child[2], to_parent[2];
    if (pipe(to_child) || pipe(to_parent))
        return 1;
    pid_t pid = fork();
    struct side s;
    memset(&s, 0, sizeof(s));
    open_side(&s, prov, size * (size_t)window);
    char token = 'r';
    if (pid == 0) {
        exchange_names(&s, to_parent[1], to_child[0]);
        full_io(to_parent[1], &token, 1, 1); /* receives are about to be posted */
        receive(&s, messages, size, window);
        full_io(to_parent[1], &token, 1, 1); /* all received */
        close_side(&s);
        _exit(0);
    }
    exchange_names(&s, to_child[1], to_parent[0]);
    full_io(to_parent[0], &token, 1, 0);
    usleep(10000);
    uint64_t t0 = now_ns();
    send_all(&s, messages, size, window);
    full_io(to_parent[0], &token, 1, 0);
    uint64_t elapsed = now_ns() - t0;
    close_side(&s);
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return 1;
    printf("fi_stream provider=%s size=%zu messages=%ld elapsed_ns=%llu msgs_per_s=%.0f\n", prov, size, messages,
           (unsigned long long)elapsed, messages * 1e9 / (double)elapsed);
    return 0;
}
