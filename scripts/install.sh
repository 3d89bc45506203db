#!/usr/bin/env bash
# Installs libumq into PREFIX (default /usr/local): the library with its soname links, the
# libumq_buf name, the headers under include/umq, and a pkg-config file `umq`.
set -euo pipefail
cd "$(dirname "$0")/.."
prefix=${1:-/usr/local}
cargo build --release
install -d "$prefix/lib/pkgconfig" "$prefix/include/umq"
install -m 0755 target/release/libumq.so "$prefix/lib/libumq.so.0.1.0"
ln -sf libumq.so.0.1.0 "$prefix/lib/libumq.so.0"
ln -sf libumq.so.0 "$prefix/lib/libumq.so"
ln -sf libumq.so.0 "$prefix/lib/libumq_buf.so"
install -m 0644 target/release/libumq.a "$prefix/lib/libumq.a"
install -m 0644 include/umq/*.h "$prefix/include/umq/"
cat > "$prefix/lib/pkgconfig/umq.pc" <<PC
prefix=$prefix
libdir=\${prefix}/lib
includedir=\${prefix}/include/umq

Name: umq
Description: UMQ message queue API (libumq, Rust implementation)
Version: 0.1.0
Libs: -L\${libdir} -lumq
Libs.private: -lpthread -ldl -lm
Cflags: -I\${includedir}
PC
echo "installed into $prefix (pkg-config --cflags --libs umq)"
