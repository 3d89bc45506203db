#!/usr/bin/env python3
"""Writes a C file of static assertions from the ABI tables: every struct size and alignment,
every field offset and size (layout.tsv) and every constant (constants.tsv)."""
import sys

layout_tsv, constants_tsv, out = sys.argv[1:4]
lines = ['#include <stddef.h>', '#include "umq_api.h"', '#include "umq_pro_api.h"', '']
count = 0
with open(layout_tsv) as f:
    next(f)
    for row in f:
        struct, field, ctype, offset, size = row.rstrip('\n').split('\t')
        if field == '(whole)':
            whole, align = size.split(' (align ')
            lines.append(f'_Static_assert(sizeof({struct}) == {whole}, "sizeof {struct}");')
            lines.append(f'_Static_assert(_Alignof({struct}) == {align.rstrip(")")}, "alignof {struct}");')
        else:
            lines.append(f'_Static_assert(offsetof({struct}, {field}) == {offset}, "offset {struct}.{field}");')
            if 'flexible' not in ctype:
                lines.append(f'_Static_assert(sizeof((({struct} *)0)->{field}) == {size}, "size {struct}.{field}");')
        count += 1
with open(constants_tsv) as f:
    next(f)
    for row in f:
        header, group, name, value = row.rstrip('\n').split('\t')
        lines.append(f'_Static_assert({name} == {value}, "{name}");')
        count += 1
lines.append(f'const int umq_abi_rows_checked = {count};')
open(out, 'w').write('\n'.join(lines) + '\n')
