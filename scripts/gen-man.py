#!/usr/bin/env python3
"""Writes the man pages into OUTDIR/man3 and OUTDIR/man7.

umq_*(3): one page per exported function, from the doc comment above its declaration in
include/umq/*.h (the headers cbindgen writes from the Rust doc comments, and the hand-written
extension headers), so the pages say what the headers say. umq(7): docs/man/umq.7, the
overview, as it is.

usage: scripts/gen-man.py OUTDIR
"""
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HEADERS = ROOT / "include" / "umq"
VERSION = "0.1.0"
DATE = "2026-11"
# A declaration of an exported function: return type, name, parameters, up to the semicolon.
DECL = re.compile(r"^([A-Za-z_][\w \*]*?[\s\*])((?:umq|fi)_\w+)\(([^;]*?)\);", re.M | re.S)
COMMENT = re.compile(r"/\*\*?(.*?)\*/", re.S)


def comment_text(raw):
    lines = [re.sub(r"^\s*\* ?", "", l) for l in raw.strip("*").splitlines()]
    return " ".join(l.strip() for l in lines if l.strip())


def preceding_comment(text, start):
    """The block comment that ends on the line right above the declaration at `start`, passing
    over preprocessor lines and the declarations right above it that share the comment; None
    when a blank line comes first."""
    lines = text[:start].splitlines()
    while lines:
        line = lines.pop().strip()
        if line.endswith("*/"):
            block = "\n".join(lines + [line])
            return comment_text(block[block.rfind("/*") + 2:-2])
        if not (line.startswith("#") or line.endswith(");")):
            return None
    return None


def roff(s):
    """Text for a man page: backslashes and hyphens escaped, `code` in bold."""
    s = s.replace("\\", "\\e").replace("-", "\\-")
    s = re.sub(r"`([^`]+)`", r"\\fB\1\\fR", s)
    return s


def functions():
    for h in sorted(HEADERS.glob("*.h")):
        text = h.read_text()
        file_comment = COMMENT.search(text)
        for m in DECL.finditer(text):
            ret, name, params = m.group(1).strip(), m.group(2), " ".join(m.group(3).split())
            doc = preceding_comment(text, m.start())
            if doc is None and file_comment:
                doc = comment_text(file_comment.group(1))
            yield h.name, ret, name, params, doc or ""


def page(header, ret, name, params, doc):
    synopsis = f"{ret} {name}({params});".replace("* ", "*")
    return "\n".join([
        f'.TH {name.upper()} 3 "{DATE}" "libumq {VERSION}" "libumq Programmer\'s Manual"',
        ".SH NAME",
        f"{roff(name)} \\- {roff(first_sentence(doc))}",
        ".SH SYNOPSIS",
        ".nf",
        f".B #include <umq/{header}>",
        ".PP",
        f".B {roff(synopsis)}",
        ".fi",
        ".PP",
        "Link with \\fB\\-lumq\\fR (\\fBpkg\\-config \\-\\-libs umq\\fR).",
        ".SH DESCRIPTION",
        roff(doc),
        ".SH SEE ALSO",
        ".BR umq (7),",
        ".BR umq\\-info (1)",
        "",
    ])


def first_sentence(doc):
    """The NAME line's summary: the first clause of the description without its parenthesized
    asides, at most about 60 characters, cut at a word."""
    plain = doc
    while re.search(r" ?\([^()]*\)", plain):
        plain = re.sub(r" ?\([^()]*\)", "", plain)
    clauses = [c for c in re.split(r"\. |; |: ", plain) if c]
    s = next((c for c in clauses if len(c) >= 10), clauses[0] if clauses else "").rstrip(".")
    if len(s) > 64:
        s = s[:60].rsplit(" ", 1)[0] + " ..."
    return s[0].lower() + s[1:] if s else s


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = Path(sys.argv[1])
    (out / "man3").mkdir(parents=True, exist_ok=True)
    (out / "man7").mkdir(parents=True, exist_ok=True)
    names = []
    for f in functions():
        (out / "man3" / f"{f[2]}.3").write_text(page(*f))
        names.append(f[2])
    (out / "man7" / "umq.7").write_text((ROOT / "docs" / "man" / "umq.7").read_text())
    print(f"{len(names)} pages in {out}/man3, umq.7 in {out}/man7")


if __name__ == "__main__":
    main()
