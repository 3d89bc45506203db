/* A program in the style of the UMQ reference examples: UB mode with IPv4 127.0.0.1 (it must work
 * on a host without RDMA hardware), a server and a client queue exchanging bind info, then a
 * request / response exchange with the pro API, each side on its own thread. It uses only the
 * public API as the original headers define it. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "umq_api.h"
#include "umq_pro_api.h"

#define ROUNDS 1000
static uint64_t server_h, client_h;
static int errors;

static umq_buf_t *wait_one(uint64_t h, umq_io_direction_t dir)
{
    umq_buf_t *b[1];
    for (;;) {
        int n = umq_poll(h, dir, b, 1);
        if (n < 0) {
            errors++;
            return NULL;
        }
        if (n == 1)
            return b[0];
    }
}

static void send_text(uint64_t h, const char *text)
{
    umq_buf_t *b = umq_buf_alloc((uint32_t)strlen(text) + 1, 1, 0, NULL);
    memcpy(b->buf_data, text, strlen(text) + 1);
    umq_buf_pro_t *pro = (umq_buf_pro_t *)b->qbuf_ext;
    pro->opcode = UMQ_OPC_SEND;
    umq_buf_t *bad = NULL;
    if (umq_post(h, b, UMQ_IO_TX, &bad) != 0) {
        errors++;
        umq_buf_free(b);
        return;
    }
    umq_buf_t *done = wait_one(h, UMQ_IO_TX);
    if (!done || done->status != UMQ_BUF_SUCCESS)
        errors++;
    umq_buf_free(done);
}

static void post_rx(uint64_t h, uint32_t n)
{
    umq_buf_t *bad = NULL;
    umq_buf_t *rx = umq_buf_alloc(256, n, 0, NULL);
    if (umq_post(h, rx, UMQ_IO_RX, &bad) != 0)
        errors++;
}

static void *server(void *arg)
{
    (void)arg;
    for (int i = 0; i < ROUNDS; i++) {
        umq_buf_t *req = wait_one(server_h, UMQ_IO_RX);
        char reply[64];
        snprintf(reply, sizeof(reply), "pong %s", req ? req->buf_data + 5 : "?");
        umq_buf_free(req);
        post_rx(server_h, 1);
        send_text(server_h, reply);
    }
    return NULL;
}

int main(void)
{
    umq_init_cfg_t *cfg = calloc(1, sizeof(umq_init_cfg_t));
    cfg->buf_mode = UMQ_BUF_SPLIT;
    cfg->feature = UMQ_FEATURE_API_PRO;
    cfg->trans_info_num = 1;
    cfg->trans_info[0].trans_mode = UMQ_TRANS_MODE_UB;
    cfg->trans_info[0].dev_info.assign_mode = UMQ_DEV_ASSIGN_MODE_IPV4;
    strcpy(cfg->trans_info[0].dev_info.ipv4.ip_addr, "127.0.0.1");
    if (umq_init(cfg) != UMQ_SUCCESS) {
        printf("umq_init failed\n");
        return 1;
    }
    umq_create_option_t opt;
    memset(&opt, 0, sizeof(opt));
    opt.trans_mode = UMQ_TRANS_MODE_UB;
    opt.dev_info = cfg->trans_info[0].dev_info;
    opt.create_flag = UMQ_CREATE_FLAG_RX_DEPTH | UMQ_CREATE_FLAG_TX_DEPTH;
    opt.rx_depth = opt.tx_depth = 128;
    strcpy(opt.name, "server");
    server_h = umq_create(&opt);
    strcpy(opt.name, "client");
    client_h = umq_create(&opt);
    uint8_t sinfo[512], cinfo[512];
    uint32_t slen = umq_bind_info_get(server_h, sinfo, sizeof(sinfo));
    uint32_t clen = umq_bind_info_get(client_h, cinfo, sizeof(cinfo));
    if (umq_bind(server_h, cinfo, clen) != 0 || umq_bind(client_h, sinfo, slen) != 0) {
        printf("bind failed\n");
        return 1;
    }
    post_rx(server_h, 16);
    post_rx(client_h, 16);
    pthread_t t;
    pthread_create(&t, NULL, server, NULL);
    for (int i = 0; i < ROUNDS; i++) {
        char req[64], want[64];
        snprintf(req, sizeof(req), "ping %d", i);
        snprintf(want, sizeof(want), "pong %d", i);
        send_text(client_h, req);
        umq_buf_t *resp = wait_one(client_h, UMQ_IO_RX);
        if (!resp || strcmp(resp->buf_data, want) != 0)
            errors++;
        umq_buf_free(resp);
        post_rx(client_h, 1);
    }
    pthread_join(t, NULL);
    umq_unbind(client_h);
    umq_unbind(server_h);
    umq_destroy(client_h);
    umq_destroy(server_h);
    umq_uninit();
    free(cfg);
    printf("reference example: %d round trips, %d passed, %d failed\n", ROUNDS, errors ? 0 : 1, errors ? 1 : 0);
    return errors ? 1 : 0;
}
