/* recv_to_send.so: how long a process takes from a message's arrival to its reply, and how long
 * the kernel takes to send and receive it.
 *
 * Loaded with LD_PRELOAD into both sides of a network ping-pong (umq-perf's, or ucx_perftest's
 * tag_lat), it notes the TSC when a receive from a socket returns bytes and, at the next send
 * on a socket from the same thread, keeps the cycles in between: the responder's own work on
 * the critical path (the engine's handling of the arrival, the library, the application's
 * reply), with neither the kernel's TCP nor the other process in it. A ping-pong's half round
 * trip is that interval, the kernel's path and the wait for the poll loop to notice the arrival.
 *
 * It also times the system calls themselves, the kernel's share of a half round trip: every
 * send on a socket (over 127.0.0.1 the sender's call runs the receiving side's TCP too) and
 * every receive that returned bytes (docs/TRANSPORTS.md, "Latency").
 *
 * At exit it prints one line to stderr:
 *     recv_to_send pid P samples N p25_ns A p50_ns B p75_ns C sends M send_median_ns S
 *         receives R receive_median_ns T
 * Nanoseconds come from the TSC, calibrated against CLOCK_MONOTONIC over the process's life.
 * scripts/critical-path.sh runs both programs with it. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

#define MAX_SAMPLES (1u << 22)
#define MAX_FD 4096

/* Intervals in TSC cycles, kept by any thread. */
struct series {
    uint64_t *v;
    uint32_t n;
};
/* Receive to reply; send system calls; receives that returned bytes. */
static struct series replies, sends, receives;
static uint64_t tsc_start, ns_start;
/* Per fd: 0 unknown, 1 a socket, 2 something else (pipes and eventfds are not messages). */
static unsigned char fd_kind[MAX_FD];
static __thread uint64_t arrived_at;

static uint64_t mono_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static int by_value(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void keep(struct series *s, uint64_t cycles)
{
    uint32_t i = __atomic_fetch_add(&s->n, 1, __ATOMIC_RELAXED);
    if (s->v && i < MAX_SAMPLES)
        s->v[i] = cycles;
}

/* Sorts what `s` kept; how many that is. */
static uint32_t sorted(struct series *s)
{
    uint32_t n = s->n < MAX_SAMPLES ? s->n : MAX_SAMPLES;
    if (!s->v)
        return 0;
    qsort(s->v, n, sizeof(*s->v), by_value);
    return n;
}

static int is_socket(int fd)
{
    if (fd < 0 || fd >= MAX_FD)
        return 0;
    if (!fd_kind[fd]) {
        struct stat st;
        fd_kind[fd] = (fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode)) ? 1 : 2;
    }
    return fd_kind[fd] == 1;
}

/* A receive that began at `began` returned `got` bytes from `fd`: the clock is read first, so
 * that the look at the fd (a system call the first time) falls outside the interval. */
static void received(int fd, ssize_t got, uint64_t now, uint64_t began)
{
    if (got > 0 && is_socket(fd)) {
        arrived_at = now;
        keep(&receives, now - began);
    }
}

static void sending(int fd)
{
    uint64_t now = __rdtsc();
    if (!arrived_at || !is_socket(fd))
        return;
    keep(&replies, now - arrived_at);
    arrived_at = 0;
}

/* Keeps the cycles a send system call on a socket took (`began` read before it). */
static void sent(int fd, uint64_t began)
{
    uint64_t now = __rdtsc();
    if (is_socket(fd))
        keep(&sends, now - began);
}

/* The C library's `name`, looked up once. */
#define REAL(name) \
    static __typeof__(&name) real_##name; \
    if (!real_##name) \
        real_##name = (__typeof__(&name))dlsym(RTLD_NEXT, #name);

ssize_t recv(int fd, void *b, size_t n, int f)
{
    REAL(recv);
    uint64_t began = __rdtsc();
    ssize_t r = real_recv(fd, b, n, f);
    received(fd, r, __rdtsc(), began);
    return r;
}

ssize_t recvfrom(int fd, void *b, size_t n, int f, struct sockaddr *a, socklen_t *l)
{
    REAL(recvfrom);
    uint64_t began = __rdtsc();
    ssize_t r = real_recvfrom(fd, b, n, f, a, l);
    received(fd, r, __rdtsc(), began);
    return r;
}

ssize_t recvmsg(int fd, struct msghdr *m, int f)
{
    REAL(recvmsg);
    uint64_t began = __rdtsc();
    ssize_t r = real_recvmsg(fd, m, f);
    received(fd, r, __rdtsc(), began);
    return r;
}

ssize_t readv(int fd, const struct iovec *v, int c)
{
    REAL(readv);
    uint64_t began = __rdtsc();
    ssize_t r = real_readv(fd, v, c);
    received(fd, r, __rdtsc(), began);
    return r;
}

ssize_t send(int fd, const void *b, size_t n, int f)
{
    REAL(send);
    sending(fd);
    uint64_t began = __rdtsc();
    ssize_t r = real_send(fd, b, n, f);
    sent(fd, began);
    return r;
}

ssize_t sendto(int fd, const void *b, size_t n, int f, const struct sockaddr *a, socklen_t l)
{
    REAL(sendto);
    sending(fd);
    uint64_t began = __rdtsc();
    ssize_t r = real_sendto(fd, b, n, f, a, l);
    sent(fd, began);
    return r;
}

ssize_t sendmsg(int fd, const struct msghdr *m, int f)
{
    REAL(sendmsg);
    sending(fd);
    uint64_t began = __rdtsc();
    ssize_t r = real_sendmsg(fd, m, f);
    sent(fd, began);
    return r;
}

ssize_t writev(int fd, const struct iovec *v, int c)
{
    REAL(writev);
    sending(fd);
    uint64_t began = __rdtsc();
    ssize_t r = real_writev(fd, v, c);
    sent(fd, began);
    return r;
}

__attribute__((constructor)) static void start(void)
{
    replies.v = malloc(MAX_SAMPLES * sizeof(uint64_t));
    sends.v = malloc(MAX_SAMPLES * sizeof(uint64_t));
    receives.v = malloc(MAX_SAMPLES * sizeof(uint64_t));
    ns_start = mono_ns();
    tsc_start = __rdtsc();
}

__attribute__((destructor)) static void report(void)
{
    uint64_t ns = mono_ns() - ns_start, cycles = __rdtsc() - tsc_start;
    uint32_t n = sorted(&replies), n_sends = sorted(&sends), n_receives = sorted(&receives);
    if (n < 100 || !cycles)
        return;
    double per = (double)ns / (double)cycles;
    const uint64_t *r = replies.v;
    fprintf(stderr,
            "recv_to_send pid %d samples %u p25_ns %.0f p50_ns %.0f p75_ns %.0f sends %u "
            "send_median_ns %.0f receives %u receive_median_ns %.0f\n",
            (int)getpid(), n, r[n / 4] * per, r[n / 2] * per, r[3 * (uint64_t)n / 4] * per,
            n_sends, n_sends ? sends.v[n_sends / 2] * per : 0.0, n_receives,
            n_receives ? receives.v[n_receives / 2] * per : 0.0);
}
