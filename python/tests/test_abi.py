"""The ctypes mirrors and constants against the ABI table the C tests use (tests/data/*.tsv at
the repository root), and the function table against the headers."""

import ctypes as C
import re
from pathlib import Path

import pytest

import umq
from umq import types as T

DATA = Path(__file__).resolve().parents[2] / "tests" / "data"


def rows(name):
    lines = (DATA / name).read_text().splitlines()[1:]
    return [line.split("\t") for line in lines]


def field(cls, name):
    """(type, offset) of a field of `cls`, looking through anonymous members."""
    for f in cls._fields_:
        if f[0] == name:
            return f[1], getattr(cls, name).offset
    for anon in getattr(cls, "_anonymous_", ()):
        inner = dict((f[0], f[1]) for f in cls._fields_)[anon]
        try:
            ftype, off = field(inner, name)
            return ftype, getattr(cls, anon).offset + off
        except KeyError:
            pass
    raise KeyError(f"{cls.__name__}.{name}")


def resolve(struct, path):
    cls, offset = getattr(T, struct), 0
    for part in path.split("."):
        cls, off = field(cls, part)
        offset += off
    return cls, offset


LAYOUT = [r for r in rows("layout.tsv") if r[1] != "(whole)"]
WHOLE = [r for r in rows("layout.tsv") if r[1] == "(whole)"]


@pytest.mark.parametrize("struct,_f,_t,_o,size", WHOLE, ids=[r[0] for r in WHOLE])
def test_struct_size_and_alignment(struct, _f, _t, _o, size):
    whole, align = size.rstrip(")").split(" (align ")
    cls = getattr(T, struct)
    assert (C.sizeof(cls), C.alignment(cls)) == (int(whole), int(align))


@pytest.mark.parametrize("struct,path,ctype,offset,size", LAYOUT, ids=[f"{r[0]}.{r[1]}" for r in LAYOUT])
def test_field_offset_and_size(struct, path, ctype, offset, size):
    if struct == "umq_buf_t" and path == "data":
        assert C.sizeof(T.umq_buf_t) == int(offset)  # the flexible array starts at the end
        return
    ftype, off = resolve(struct, path)
    assert off == int(offset)
    assert C.sizeof(ftype) == int(size)


def test_buf_bitfields_sit_where_c_puts_them():
    b = T.umq_buf_t()
    raw = (C.c_uint8 * C.sizeof(b)).from_buffer(b)
    b.first_fragment = 1
    assert int.from_bytes(bytes(raw[30:32]), "little") == 1
    b.token_id, b.mempool_id = 0xABCDE, 0x5A
    assert int.from_bytes(bytes(raw[32:36]), "little") == 0xABCDE | 0x5A << 24
    b.status, b.io_direction = 0x80, 2
    assert int.from_bytes(bytes(raw[40:48]), "little") == 0x80 | 2 << 32


def test_opcode_flag_bits():
    f = T.umq_opcode_flag_t()
    f.bs.place_order, f.bs.fence, f.bs.inline_flag = 3, 1, 1
    assert f.value == 3 | 1 << 3 | 1 << 6


CONSTANTS = rows("constants.tsv")


@pytest.mark.parametrize("header,group,name,value", CONSTANTS, ids=[r[2] for r in CONSTANTS])
def test_constant(header, group, name, value):
    assert getattr(umq, name) == int(value)


HEADERS = Path(__file__).resolve().parents[2] / "include" / "umq"


def declared_functions(*headers):
    """The function names the generated C headers declare (`type name(` at the start of a
    declaration, outside comments)."""
    names = set()
    for h in headers:
        text = re.sub(r"/\*.*?\*/|//[^\n]*", "", (HEADERS / h).read_text(), flags=re.S)
        names |= set(re.findall(r"^[A-Za-z_][\w \t*]*?\b(umq_\w+)\s*\(", text, flags=re.M))
    return names


def test_function_table_is_the_34_of_the_headers():
    declared = declared_functions("umq_api.h", "umq_pro_api.h")
    assert len(declared) == 34
    assert set(umq.API) == declared  # both ways: nothing missing, nothing extra
    lib = umq.lib()
    if lib.abi == 2026:
        # The July revision dropped or changed these: they are not declared on its library.
        declared -= umq._lib.NOT_IN_2026
        assert all(getattr(lib, name) is None for name in umq._lib.NOT_IN_2026)
    for name in declared:
        assert hasattr(lib.cdll, name), f"{umq.library_path()} does not export {name}"


def test_library_path_follows_UMQ_LIB(monkeypatch):
    path = umq.library_path()
    assert Path(path).exists() or "/" not in path
    other = umq.Library(path)
    assert other.path == path
    monkeypatch.setenv("UMQ_LIB", "/nonexistent/libumq.so")
    with pytest.raises(OSError, match="nonexistent"):
        umq.Library()


ABI_2026 = Path(__file__).resolve().parents[2] / "target" / "abi-2026" / "release" / "libumq.so"


@pytest.mark.skipif(not ABI_2026.exists(), reason="the abi-2026 build is not there (scripts/test-all.sh makes it)")
def test_a_july_2026_library_is_declared_with_its_own_signatures():
    from umq import types2026 as T26
    from umq._lib import Library

    july = Library(str(ABI_2026))
    assert july.abi == 2026
    assert july.umq_post.argtypes[2] == C.POINTER(T26.umq_io_option_t)
    assert july.umq_create.argtypes[0] == C.POINTER(T26.umq_create_option_t)
    assert july.umq_dfx_cmd_process is None


def july_rows():
    from umq import types2026 as T26

    return [r for r in rows("abi-2026/layout.tsv") if hasattr(T26, r[0]) and "." not in r[1]]


LAYOUT_2026 = july_rows()


@pytest.mark.parametrize("struct,path,ctype,offset,size", LAYOUT_2026, ids=[f"{r[0]}.{r[1]}" for r in LAYOUT_2026])
def test_july_2026_structure_layout(struct, path, ctype, offset, size):
    """Each structure of `types2026` against the July 2026 ABI table: size and alignment, and
    each field's offset and size (bit fields are the C tests' to check)."""
    from umq import types2026 as T26

    cls = getattr(T26, struct)
    if path == "(whole)":
        whole, align = size.rstrip(")").split(" (align ")
        assert (C.sizeof(cls), C.alignment(cls)) == (int(whole), int(align))
        return
    ftype, off = field(cls, path)
    assert off == int(offset)
    assert C.sizeof(ftype) == int(size)
