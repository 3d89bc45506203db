// The generated headers compile as C++17 with -Wall -Wextra -Werror and link from C++.
#include "umq_api.h"
#include "umq_pro_api.h"
#include <cstdio>

int main()
{
    static_assert(sizeof(umq_buf_t) == 128, "umq_buf_t");
    static_assert(sizeof(umq_init_cfg_t) == 12320, "umq_init_cfg_t");
    umq_io_direction_t d = UMQ_IO_TX;
    umq_create_option_t opt{};
    opt.dev_info.assign_mode = UMQ_DEV_ASSIGN_MODE_IPV4;
    // No init: create must fail cleanly with errno set, from C++ too.
    uint64_t h = umq_create(&opt);
    std::printf("c++17 headers: ok (direction %u, create without init -> %llu)\n", d, (unsigned long long)h);
    return h == UMQ_INVALID_HANDLE ? 0 : 1;
}
