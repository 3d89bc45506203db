#!/usr/bin/env python3
"""Writes the ABI facts of a revision's original UMQ headers as test data: every typedef'd
struct and union (size, alignment, each field's offset and size, nested anonymous members
flattened as `outer.inner`), every bit field (bit offset and width inside its struct), and
every constant (enumerators and integer #defines); and every function's prototype as the
header declares it (functions.tsv).

    scripts/abi-facts.py HEADER_DIR OUT_DIR     (needs gcc and pyelftools)

HEADER_DIR holds the original umq_*.h of one revision. The facts come from the compiler (DWARF
of a translation unit that includes every header), not from reading the C text, so they are
what a program built against those headers sees. The tests compare our headers and Rust
mirrors against OUT_DIR/{layout,bitfields,constants,functions}.tsv; they never read HEADER_DIR.
"""
import os
import re
import subprocess
import sys
import tempfile

from elftools.elf.elffile import ELFFile

header_dir, out_dir = sys.argv[1:3]
headers = sorted(h for h in os.listdir(header_dir) if h.startswith("umq_") and h.endswith(".h"))
typedef_names = set()
for h in headers:
    text = open(os.path.join(header_dir, h)).read()
    typedef_names |= set(re.findall(r"\}\s*(\w+_t)\s*;", text))
    typedef_names |= set(re.findall(r"typedef\s+(?:struct|union)\s+\w+\s+(\w+_t)\s*;", text))

with tempfile.TemporaryDirectory() as tmp:
    src = os.path.join(tmp, "facts.c")
    with open(src, "w") as f:
        for h in headers:
            f.write(f'#include "{h}"\n')
        for t in sorted(typedef_names):
            f.write(f"{t} *facts_{t};\n")
    obj = os.path.join(tmp, "facts.o")
    subprocess.run(["gcc", "-g", "-c", "-I", header_dir, src, "-o", obj], check=True)
    defines = subprocess.run(["gcc", "-dM", "-E", "-I", header_dir, src],
                             check=True, capture_output=True, text=True).stdout
    elf = ELFFile(open(obj, "rb"))
    dwarf = elf.get_dwarf_info()
    dies = {}
    for cu in dwarf.iter_CUs():
        for die in cu.iter_DIEs():
            dies[die.offset] = die


def attr(die, name, default=None):
    a = die.attributes.get(name)
    return a.value if a is not None else default


def target(die):
    return dies[attr(die, "DW_AT_type") + die.cu.cu_offset] if "DW_AT_type" in die.attributes else None


def strip(die):
    while die is not None and die.tag in ("DW_TAG_typedef", "DW_TAG_const_type", "DW_TAG_volatile_type"):
        die = target(die)
    return die


def size_align(die):
    die = strip(die)
    if die is None:
        return 0, 1
    if die.tag == "DW_TAG_array_type":
        n = 1
        for sub in die.iter_children():
            if "DW_AT_upper_bound" in sub.attributes:
                n *= attr(sub, "DW_AT_upper_bound") + 1
            elif "DW_AT_count" in sub.attributes:
                n *= attr(sub, "DW_AT_count")
            else:
                n = 0
        s, a = size_align(target(die))
        return s * n, a
    if die.tag in ("DW_TAG_structure_type", "DW_TAG_union_type"):
        a = 1
        for m in die.iter_children():
            if m.tag == "DW_TAG_member":
                a = max(a, size_align(target(m))[1])
        return attr(die, "DW_AT_byte_size", 0), a
    s = attr(die, "DW_AT_byte_size", 8)
    return s, s


def type_name(die):
    if die is None:
        return "void"
    if die.tag == "DW_TAG_pointer_type":
        return type_name(target(die)) + " *"
    if die.tag == "DW_TAG_array_type":
        dims = "".join(f"[{attr(s, 'DW_AT_upper_bound', -1) + 1}]" for s in die.iter_children())
        return type_name(target(die)) + dims
    name = attr(die, "DW_AT_name")
    if name:
        return name.decode()
    return {"DW_TAG_structure_type": "struct (anonymous)", "DW_TAG_union_type": "union (anonymous)"}.get(die.tag, "?")


layout, bits = [], []


def members(struct_name, die, prefix, base):
    for m in die.iter_children():
        if m.tag != "DW_TAG_member":
            continue
        name = attr(m, "DW_AT_name")
        field = prefix + (name.decode() if name else "")
        off = base + attr(m, "DW_AT_data_member_location", 0)
        t = target(m)
        if "DW_AT_bit_size" in m.attributes:
            bit = attr(m, "DW_AT_data_bit_offset")
            bits.append((struct_name, field, base * 8 + bit, attr(m, "DW_AT_bit_size")))
            continue
        # A struct or union declared in place (anonymous, or a tag without a typedef, as
        # umq_buf_pro_t's remote_sge) has its members listed too.
        in_place = t.tag in ("DW_TAG_structure_type", "DW_TAG_union_type")
        if name:
            layout.append((struct_name, field, type_name(t), off, size_align(t)[0]))
        if in_place:
            members(struct_name, t, field + "." if name else prefix, off)


for d in dies.values():
    if d.tag != "DW_TAG_typedef":
        continue
    name = attr(d, "DW_AT_name").decode()
    inner = strip(d)
    if name not in typedef_names or inner is None or inner.tag not in ("DW_TAG_structure_type", "DW_TAG_union_type"):
        continue
    if any(r[0] == name for r in layout if r[1] == "(whole)"):
        continue
    s, a = size_align(inner)
    layout.append((name, "(whole)", "-", "-", f"{s} (align {a})"))
    members(name, inner, "", 0)

constants = []
seen = set()
for d in dies.values():
    if d.tag == "DW_TAG_enumerator":
        n = attr(d, "DW_AT_name").decode()
        if n not in seen:
            seen.add(n)
            constants.append(("enum", n, attr(d, "DW_AT_const_value")))
macros = dict(re.findall(r"^#define (\w+) (.+)$", defines, re.M))


def evaluate(text, depth=0):
    """An integer #define's value, its names (EAGAIN, ...) replaced by their definitions."""
    text = re.sub(r"\b(\d+)[uU]\b", r"\1", text)
    if depth > 8:
        raise ValueError(text)
    names = set(re.findall(r"\b[A-Za-z_]\w*\b", text))
    for n in names:
        text = re.sub(rf"\b{n}\b", f"({evaluate(macros[n], depth + 1)})", text)
    v = eval(text, {}, {})
    if not isinstance(v, int):
        raise ValueError(text)
    return v


for name, value in sorted(macros.items()):
    if not re.match(r"(UMQ|MAX_UMQ|BLOCK|TINY)_", name) or name.endswith("_H") or name in seen:
        continue
    try:
        v = evaluate(value)
    except Exception:
        continue
    seen.add(name)
    constants.append(("define", name, v))

os.makedirs(out_dir, exist_ok=True)
with open(os.path.join(out_dir, "layout.tsv"), "w") as f:
    f.write("struct\tfield\tc_type\toffset\tsize\n")
    for r in layout:
        f.write("\t".join(map(str, r)) + "\n")
with open(os.path.join(out_dir, "bitfields.tsv"), "w") as f:
    f.write("struct\tfield\tbit_offset\tbits\n")
    for r in bits:
        f.write("\t".join(map(str, r)) + "\n")
with open(os.path.join(out_dir, "constants.tsv"), "w") as f:
    f.write("kind\tname\tvalue\n")
    for r in constants:
        f.write("\t".join(map(str, r)) + "\n")


def prototypes(header):
    """The functions a header declares: name, return type and parameters as written (comments,
    preprocessor lines and brace blocks taken out first)."""
    text = open(os.path.join(header_dir, header)).read()
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r"^\s*#.*$", "", text, flags=re.M)
    text = text.replace('extern "C" {', "")
    while True:
        flat = re.sub(r"\{[^{}]*\}", "", text)
        if flat == text:
            break
        text = flat
    for stmt in text.split(";"):
        stmt = " ".join(stmt.split())
        m = re.match(r"^(.*?)\b(umq_\w+)\s*\((.*)\)$", stmt)
        if m and not stmt.startswith("typedef"):
            yield m.group(2), m.group(1).strip(), m.group(3).strip(), header


functions = [p for h in headers if h.endswith("_api.h") for p in prototypes(h)]
with open(os.path.join(out_dir, "functions.tsv"), "w") as f:
    f.write("function\treturn\tparameters\theader\n")
    for r in functions:
        f.write("\t".join(r) + "\n")
print(f"{len(functions)} functions")
print(f"{len(layout)} layout rows, {len(bits)} bit fields, {len(constants)} constants")
