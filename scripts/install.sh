#!/usr/bin/env bash
# Installs libumq into PREFIX (default /usr/local): the library with its soname links, the
# libumq_buf name, the headers under include/umq, a pkg-config file `umq` (its `mandir` says
# where the man pages went), the tools umq-info and umq-perf, and the man pages: umq_*(3) from
# the headers' doc comments, umq(7), and umq-info(1) and umq-perf(1) from their own definitions
# (clap, the same as their --help).
#
#   scripts/install.sh [--pgo] [PREFIX]
#
# --pgo installs the build with profile-guided optimization (scripts/build-pgo.sh: a round trip
# runs fewer instructions, docs/PERFORMANCE.md), otherwise the plain release build.
set -euo pipefail
cd "$(dirname "$0")/.."
built=target/release
if [ "${1:-}" = "--pgo" ]; then
  shift
  scripts/build-pgo.sh
  built=target/pgo/release
else
  cargo build --release
fi
prefix=${1:-/usr/local}
mandir="$prefix/share/man"
install -d "$prefix/lib/pkgconfig" "$prefix/include/umq" "$prefix/bin" "$mandir/man1"
install -m 0755 "$built/libumq.so" "$prefix/lib/libumq.so.0.1.0"
ln -sf libumq.so.0.1.0 "$prefix/lib/libumq.so.0"
ln -sf libumq.so.0 "$prefix/lib/libumq.so"
ln -sf libumq.so.0 "$prefix/lib/libumq_buf.so"
install -m 0644 "$built/libumq.a" "$prefix/lib/libumq.a"
install -m 0644 include/umq/*.h "$prefix/include/umq/"
install -m 0755 "$built/umq-info" "$built/umq-perf" "$prefix/bin/"
python3 scripts/gen-man.py "$mandir" >/dev/null
for tool in umq-info umq-perf; do
  "$built/$tool" --man >"$mandir/man1/$tool.1"
done
cat > "$prefix/lib/pkgconfig/umq.pc" <<PC
prefix=$prefix
libdir=\${prefix}/lib
includedir=\${prefix}/include/umq
mandir=\${prefix}/share/man

Name: umq
Description: UMQ message queue API (libumq, Rust implementation)
Version: 0.1.0
Libs: -L\${libdir} -lumq
Libs.private: -lpthread -ldl -lm
Cflags: -I\${includedir}
PC
echo "installed into $prefix (pkg-config --cflags --libs umq; man pages in $mandir)"
