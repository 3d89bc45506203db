/* Every row of the July 2026 ABI facts is a static assertion (abi_checks_2026.c, generated at
 * build time from tests/data/abi-2026); this program runs what static assertions cannot see:
 * where each bit field lies. */
#include <stdio.h>

extern const int umq_abi_2026_rows_checked;
int umq_abi_2026_bitfield_failures(void);

int main(void)
{
    int failures = umq_abi_2026_bitfield_failures();
    printf("layout_2026: %d rows checked, %d bit fields misplaced\n", umq_abi_2026_rows_checked, failures);
    return failures != 0;
}
