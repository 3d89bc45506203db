/* Every row of the July 2026 ABI facts is a static assertion (abi_checks_2026.c, generated at
 * build time from tests/data/abi-2026); this program runs what static assertions cannot see:
 * where each bit field lies, and that every function of the revision resolved. */
#include <stdio.h>

extern const int umq_abi_2026_rows_checked;
extern void *const umq_abi_2026_functions[];
extern const int umq_abi_2026_function_count;
int umq_abi_2026_bitfield_failures(void);

int main(void)
{
    int failures = umq_abi_2026_bitfield_failures();
    int linked = 0;
    for (int i = 0; i < umq_abi_2026_function_count; i++) {
        linked += umq_abi_2026_functions[i] != NULL;
    }
    failures += umq_abi_2026_function_count - linked;
    printf("layout_2026: %d rows checked, %d bit fields misplaced, %d of %d functions linked\n",
           umq_abi_2026_rows_checked, failures, linked, umq_abi_2026_function_count);
    return failures != 0;
}
