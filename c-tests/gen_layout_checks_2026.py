#!/usr/bin/env python3
"""Writes a C file that checks our July 2026 headers against the facts of the original ones
(tests/data/abi-2026, written by scripts/abi-facts.py): a static assertion for every struct
size and alignment, field offset and size, and constant, and for every function that our
declaration has the original's type; a table of every function's address (so the program
links only if the library exports them all); and a function that checks where each bit field
lies (set to all ones in a zeroed struct, exactly its bits must be set)."""
import sys

data, out = sys.argv[1:3]


def rows(name):
    with open(f'{data}/{name}') as f:
        next(f)
        return [line.rstrip('\n').split('\t') for line in f]


lines = ['#include <stddef.h>', '#include <string.h>', '#include "umq_api.h"', '#include "umq_pro_api.h"',
         '#include "umq_dfx_api.h"', '']
count = 0
for struct, field, ctype, offset, size in rows('layout.tsv'):
    if field == '(whole)':
        whole, align = size.split(' (align ')
        lines.append(f'_Static_assert(sizeof({struct}) == {whole}, "sizeof {struct}");')
        lines.append(f'_Static_assert(_Alignof({struct}) == {align.rstrip(")")}, "alignof {struct}");')
    else:
        lines.append(f'_Static_assert(offsetof({struct}, {field}) == {offset}, "offset {struct}.{field}");')
        lines.append(f'_Static_assert(sizeof((({struct} *)0)->{field}) == {size}, "size {struct}.{field}");')
    count += 1
for kind, name, value in rows('constants.tsv'):
    lines.append(f'_Static_assert({name} == {value}, "{name}");')
    count += 1
functions = rows('functions.tsv')
for name, ret, params, header in functions:
    lines.append(f'_Static_assert(__builtin_types_compatible_p(__typeof__({name}), {ret}({params})), '
                 f'"prototype of {name} ({header})");')
    count += 1
lines += ['', '/* Every function of the revision, as the program links it. */',
          'void *const umq_abi_2026_functions[] = {']
lines += [f'    (void *){name},' for name, _, _, _ in functions]
lines += ['};', f'const int umq_abi_2026_function_count = {len(functions)};']
lines += ['', '/* The number of bit fields whose bits are not where the original puts them. */',
          'int umq_abi_2026_bitfield_failures(void)', '{', '    int failures = 0;']
for struct, field, bit, bits in rows('bitfields.tsv'):
    bit, bits = int(bit), int(bits)
    lines += [
        '    {',
        f'        {struct} s;',
        '        memset(&s, 0, sizeof(s));',
        f'        s.{field} = {(1 << bits) - 1}ull;',
        '        const unsigned char *b = (const unsigned char *)&s;',
        '        for (size_t i = 0; i < sizeof(s) * 8; i++) {',
        f'            int want = i - {bit} < {bits};  /* unsigned: below {bit} wraps high */',
        '            if (((b[i / 8] >> (i % 8)) & 1) != want) {',
        f'                failures++;',
        '                break;',
        '            }',
        '        }',
        '    }',
    ]
    count += 1
lines += ['    return failures;', '}', f'const int umq_abi_2026_rows_checked = {count};']
open(out, 'w').write('\n'.join(lines) + '\n')
