/* Every row of the ABI tables is a static assertion (abi_checks.c, generated at build time); this
 * program adds what static assertions cannot see: where gcc puts each bit field. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "umq_api.h"
#include "umq_pro_api.h"

extern const int umq_abi_rows_checked;
static int failures;

#define EXPECT(cond) do { if (!(cond)) { fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond); failures++; } } while (0)

static uint64_t word_at(const void *p, size_t off, size_t size)
{
    uint64_t v = 0;
    memcpy(&v, (const char *)p + off, size);
    return v;
}

int main(void)
{
    umq_buf_t b;
    memset(&b, 0, sizeof(b));
    b.first_fragment = 1;
    EXPECT(word_at(&b, 30, 2) == 0x1);
    b.rsvd1 = 0x7fff;
    EXPECT(word_at(&b, 30, 2) == 0xffff);
    b.token_id = 0xfffff;
    EXPECT(word_at(&b, 32, 4) == 0xfffff);
    b.mempool_id = 0xab;
    EXPECT(word_at(&b, 32, 4) == 0xab0fffff);
    b.status = UMQ_BUF_FLOW_CONTROL_UPDATE;
    EXPECT(word_at(&b, 40, 8) == 128);
    b.io_direction = UMQ_IO_RX;
    EXPECT(word_at(&b, 40, 8) == (128ull | (2ull << 32)));
    b.rsvd3 = 1;
    EXPECT(word_at(&b, 40, 8) == (128ull | (2ull << 32) | (1ull << 34)));
    EXPECT((char *)b.data - (char *)&b == 128);

    umq_opcode_flag_t f = {.value = 0};
    f.bs.place_order = 3;
    EXPECT(f.value == 0x3);
    f.bs.comp_order = 1;
    f.bs.fence = 1;
    f.bs.solicited_enable = 1;
    f.bs.complete_enable = 1;
    f.bs.inline_flag = 1;
    EXPECT(f.value == 0x7f);
    f.bs.reserved = 1;
    EXPECT(f.value == 0xff);

    umq_route_flag_t r = {.value = 0};
    r.bs.rtp = 1;
    EXPECT(r.value == 1);
    r.bs.ctp = 1;
    EXPECT(r.value == 3);
    r.bs.utp = 1;
    r.bs.reserved = 1;
    EXPECT(r.value == 0xf);

    EXPECT(umq_abi_rows_checked == 153 + 179);
    printf("layout: %d table rows asserted at compile time, bit fields checked: %s\n", umq_abi_rows_checked,
        failures ? "FAILED" : "ok");
    return failures ? 1 : 0;
}
