#!/usr/bin/env bash
# Regenerates include/umq/*.h from the Rust source (cbindgen version pinned in Cargo.toml).
set -euo pipefail
cd "$(dirname "$0")/.."
UMQ_REGEN_HEADERS=1 cargo test --quiet --test headers
git diff --stat -- include/
