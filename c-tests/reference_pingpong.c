/* A UMQ application as the reference examples write one: two processes, a server and a client,
 * exchange bind info over a TCP socket, bind, and ping-pong messages. It uses only the public
 * UMQ headers (umq_api.h, umq_pro_api.h), nothing of libumq's own, and links with
 * -lumq -lumq_buf, so it builds unchanged against any implementation of this revision.
 *
 *   reference_pingpong -s [-p PORT] [options]          server (PORT 0: pick one, print "port N")
 *   reference_pingpong -c HOST -p PORT [options]       client
 *   options: -m ub|ipc   transport mode (ub uses IPv4 127.0.0.1 as the reference examples do)
 *            -i ADDR     the IPv4 address ub mode names in dev_info (this host's, default 127.0.0.1)
 *            -e poll|irq polling or interrupt mode
 *            -a pro|base the pro API (post/poll) or the base API (enqueue/dequeue)
 *            -n ROUNDS   round trips (default 200)
 *
 * The client checks every reply byte for byte; either side exits non-zero on any failure. */
#define _DEFAULT_SOURCE 1
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include "umq_api.h"
#include "umq_pro_api.h"

#define MAX_PAYLOAD 3000
#define WAIT_MS 10000

static struct {
    int server;
    const char *host;
    int port;
    umq_trans_mode_t trans_mode;
    umq_queue_mode_t event_mode;
    int pro;
    int rounds;
    const char *local_ip;
} cfg = {0, NULL, 0, UMQ_TRANS_MODE_UB, UMQ_MODE_POLLING, 1, 200, "127.0.0.1"};

static void die(const char *what)
{
    fprintf(stderr, "%s: %s failed\n", cfg.server ? "server" : "client", what);
    exit(1);
}

/* ---- the out-of-band channel: a TCP socket carrying length-prefixed frames ---- */

static int tcp_server(int *port)
{
    int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)*port)};
    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (l < 0 || inet_pton(AF_INET, cfg.local_ip, &a.sin_addr) != 1 || bind(l, (struct sockaddr *)&a, sizeof(a)) ||
        listen(l, 1))
        die("listen");
    socklen_t len = sizeof(a);
    getsockname(l, (struct sockaddr *)&a, &len);
    *port = ntohs(a.sin_port);
    printf("port %d\n", *port);
    fflush(stdout);
    int s = accept(l, NULL, NULL);
    close(l);
    if (s < 0)
        die("accept");
    return s;
}

static int tcp_client(const char *host, int port)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (s < 0 || inet_pton(AF_INET, host, &a.sin_addr) != 1 || connect(s, (struct sockaddr *)&a, sizeof(a)))
        die("connect");
    return s;
}

static int full_io(int s, void *p, uint32_t n, int writing)
{
    for (uint32_t done = 0; done < n;) {
        ssize_t r = writing ? write(s, (char *)p + done, n - done) : read(s, (char *)p + done, n - done);
        if (r <= 0)
            return -1;
        done += (uint32_t)r;
    }
    return 0;
}

static void frame_send(int s, const void *p, uint32_t n)
{
    if (full_io(s, &n, 4, 1) || full_io(s, (void *)p, n, 1))
        die("socket write");
}

static uint32_t frame_recv(int s, void *p, uint32_t cap)
{
    uint32_t n = 0;
    if (full_io(s, &n, 4, 0) || n > cap || full_io(s, p, n, 0))
        die("socket read");
    return n;
}

/* ---- UMQ setup ---- */

static void fill_dev(umq_dev_assign_t *dev)
{
    memset(dev, 0, sizeof(*dev));
    dev->assign_mode = UMQ_DEV_ASSIGN_MODE_IPV4;
    snprintf(dev->ipv4.ip_addr, sizeof(dev->ipv4.ip_addr), "%s", cfg.local_ip);
}

static uint64_t setup(int sock)
{
    umq_init_cfg_t *init = calloc(1, sizeof(*init));
    init->buf_mode = UMQ_BUF_SPLIT;
    init->feature = cfg.pro ? UMQ_FEATURE_API_PRO : UMQ_FEATURE_API_BASE;
    init->trans_info_num = 1;
    init->trans_info[0].trans_mode = cfg.trans_mode;
    fill_dev(&init->trans_info[0].dev_info);
    if (umq_init(init) != UMQ_SUCCESS)
        die("umq_init");
    free(init);

    umq_create_option_t opt;
    memset(&opt, 0, sizeof(opt));
    opt.trans_mode = cfg.trans_mode;
    fill_dev(&opt.dev_info);
    opt.create_flag = UMQ_CREATE_FLAG_RX_DEPTH | UMQ_CREATE_FLAG_TX_DEPTH | UMQ_CREATE_FLAG_QUEUE_MODE;
    opt.rx_depth = opt.tx_depth = 64;
    opt.mode = cfg.event_mode;
    snprintf(opt.name, sizeof(opt.name), "%s", cfg.server ? "server" : "client");
    uint64_t q = umq_create(&opt);
    if (q == 0)
        die("umq_create");

    uint8_t mine[512], theirs[512];
    uint32_t n = umq_bind_info_get(q, mine, sizeof(mine));
    if (n == 0)
        die("umq_bind_info_get");
    frame_send(sock, mine, n);
    uint32_t m = frame_recv(sock, theirs, sizeof(theirs));
    if (umq_bind(q, theirs, m) != UMQ_SUCCESS)
        die("umq_bind");
    return q;
}

/* ---- waiting for one completion or message, by polling or by interrupt ---- */

static umq_interrupt_option_t direction(umq_io_direction_t dir)
{
    umq_interrupt_option_t o;
    memset(&o, 0, sizeof(o));
    o.flag = UMQ_INTERRUPT_FLAG_IO_DIRECTION;
    o.direction = dir;
    return o;
}

static umq_buf_t *try_take(uint64_t q, umq_io_direction_t dir)
{
    if (!cfg.pro)
        return umq_dequeue(q);
    umq_buf_t *b[1];
    int n = umq_poll(q, dir, b, 1);
    if (n < 0)
        die("umq_poll");
    return n ? b[0] : NULL;
}

/* The usual event loop: take what is there; otherwise arm, look again (a completion may have
 * arrived before arming), and sleep until the interrupt fires. */
static umq_buf_t *take(uint64_t q, umq_io_direction_t dir)
{
    for (long spins = 0;; spins++) {
        umq_buf_t *b = try_take(q, dir);
        if (b)
            return b;
        if (cfg.event_mode == UMQ_MODE_POLLING) {
            if (spins > 200000000L)
                die("waiting for a completion");
            continue;
        }
        umq_interrupt_option_t o = direction(dir);
        if (umq_rearm_interrupt(q, false, &o) != UMQ_SUCCESS)
            die("umq_rearm_interrupt");
        if ((b = try_take(q, dir)))
            return b;
        int events = umq_wait_interrupt(q, WAIT_MS, &o);
        if (events <= 0)
            die("umq_wait_interrupt");
        umq_ack_interrupt(q, (uint32_t)events, &o);
    }
}

static void post_rx(uint64_t q, uint32_t count)
{
    umq_buf_t *rx = umq_buf_alloc(MAX_PAYLOAD + 64, count, 0, NULL), *bad = NULL;
    if (!rx || umq_post(q, rx, UMQ_IO_RX, &bad) != UMQ_SUCCESS)
        die("umq_post rx");
}

static void send_message(uint64_t q, const char *data, uint32_t len)
{
    umq_buf_t *b = umq_buf_alloc(len, 1, 0, NULL), *bad = NULL;
    if (!b)
        die("umq_buf_alloc");
    memcpy(b->buf_data, data, len);
    if (!cfg.pro) {
        if (umq_enqueue(q, b, &bad) != UMQ_SUCCESS)
            die("umq_enqueue");
        return; /* the library frees a sent buffer once its send completes */
    }
    umq_buf_pro_t *pro = (umq_buf_pro_t *)b->qbuf_ext;
    pro->opcode = UMQ_OPC_SEND;
    pro->user_ctx = 0x5eed;
    if (umq_post(q, b, UMQ_IO_TX, &bad) != UMQ_SUCCESS)
        die("umq_post tx");
    umq_buf_t *done = take(q, UMQ_IO_TX);
    if (done != b || done->status != UMQ_BUF_SUCCESS || ((umq_buf_pro_t *)done->qbuf_ext)->user_ctx != 0x5eed)
        die("send completion");
    umq_buf_free(done);
}

/* Receives one message into `out`; returns its length. Reposts a receive buffer (pro API). */
static uint32_t receive_message(uint64_t q, char *out)
{
    umq_buf_t *m = take(q, UMQ_IO_RX);
    if (m->status != UMQ_BUF_SUCCESS || m->data_size > MAX_PAYLOAD + 64)
        die("receive status");
    uint32_t len = m->data_size;
    memcpy(out, m->buf_data, len);
    umq_buf_free(m);
    if (cfg.pro)
        post_rx(q, 1);
    return len;
}

/* ---- the exchange ---- */

static uint32_t request(int round, char *out)
{
    uint32_t len = (uint32_t)snprintf(out, 32, "ping %d ", round);
    uint32_t extra = (uint32_t)(round * 37) % (MAX_PAYLOAD - 32);
    for (uint32_t i = 0; i < extra; i++)
        out[len + i] = (char)('a' + (round + i) % 26);
    return len + extra;
}

static void serve(uint64_t q)
{
    char msg[MAX_PAYLOAD + 64];
    for (int i = 0; i < cfg.rounds; i++) {
        uint32_t len = receive_message(q, msg);
        if (len < 5 || memcmp(msg, "ping ", 5) != 0)
            die("request content");
        memcpy(msg, "pong ", 5);
        send_message(q, msg, len);
    }
}

static void ask(uint64_t q)
{
    char req[MAX_PAYLOAD + 64], resp[MAX_PAYLOAD + 64];
    for (int i = 0; i < cfg.rounds; i++) {
        uint32_t len = request(i, req);
        send_message(q, req, len);
        uint32_t got = receive_message(q, resp);
        memcpy(req, "pong ", 5);
        if (got != len || memcmp(req, resp, len) != 0) {
            fprintf(stderr, "client: round %d: reply of %u bytes differs (expected %u)\n", i, got, len);
            exit(1);
        }
    }
}

static void parse(int argc, char **argv)
{
    int o;
    while ((o = getopt(argc, argv, "sc:p:m:e:a:n:i:")) != -1) {
        switch (o) {
        case 's': cfg.server = 1; break;
        case 'c': cfg.host = optarg; break;
        case 'p': cfg.port = atoi(optarg); break;
        case 'm': cfg.trans_mode = strcmp(optarg, "ipc") == 0 ? UMQ_TRANS_MODE_IPC : UMQ_TRANS_MODE_UB; break;
        case 'e': cfg.event_mode = strcmp(optarg, "irq") == 0 ? UMQ_MODE_INTERRUPT : UMQ_MODE_POLLING; break;
        case 'a': cfg.pro = strcmp(optarg, "base") != 0; break;
        case 'n': cfg.rounds = atoi(optarg); break;
        case 'i': cfg.local_ip = optarg; break;
        default: fprintf(stderr, "usage: see the comment at the top of reference_pingpong.c\n"); exit(2);
        }
    }
    if (cfg.server == (cfg.host != NULL)) {
        fprintf(stderr, "give exactly one of -s and -c HOST\n");
        exit(2);
    }
}

int main(int argc, char **argv)
{
    parse(argc, argv);
    int sock = cfg.server ? tcp_server(&cfg.port) : tcp_client(cfg.host, cfg.port);
    uint64_t q = setup(sock);
    if (cfg.pro)
        post_rx(q, 16);
    /* Both sides are bound and have receive buffers before the first message. */
    char token = 'r';
    frame_send(sock, &token, 1);
    frame_recv(sock, &token, 1);

    if (cfg.server)
        serve(q);
    else
        ask(q);

    if (umq_state_get(q) != QUEUE_STATE_READY)
        die("queue state after the exchange");
    /* Neither side unbinds while the other may still be completing (a peer that unbinds or
     * exits puts our queue in the error state). */
    frame_send(sock, &token, 1);
    frame_recv(sock, &token, 1);
    if (umq_unbind(q) != UMQ_SUCCESS || umq_destroy(q) != UMQ_SUCCESS)
        die("teardown");
    umq_uninit();
    close(sock);
    printf("%s: %d round trips ok\n", cfg.server ? "server" : "client", cfg.rounds);
    return 0;
}
