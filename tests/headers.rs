//! The checked-in headers under `include/umq/` must equal what cbindgen generates from the Rust
//! source. Run with `UMQ_REGEN_HEADERS=1` to rewrite them (see `scripts/gen-headers.sh`).
//!
//! cbindgen cannot express C's anonymous unions, and it would show both sides of a `#[cfg]`, so a
//! small pre-pass gives it the C view of each source file: items under `#[cfg(not(cbindgen))]`
//! (rustc-only storage) are dropped, `#[cfg(cbindgen)]` items (bit fields) are kept, and the
//! anonymous unions are appended to their structs with `export.body`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

struct HeaderSpec {
    file: &'static str,
    source: &'static str,
    includes: &'static [&'static str],
    bodies: &'static [(&'static str, &'static str)],
    doc: &'static str,
}

const DEV_ASSIGN_BODY: &str = "  union {
    struct {
      char ip_addr[UMQ_IPV4_SIZE];
    } ipv4;
    struct {
      char ip_addr[UMQ_IPV6_SIZE];
    } ipv6;
    struct {
      umq_eid_t eid;
    } eid;
    struct {
      char dev_name[UMQ_DEV_NAME_SIZE];
      uint32_t eid_idx;
    } dev;
  };";

const DFX_CMD_BODY: &str = "  union {
    umq_perf_cmd_id_t perf_cmd_id;
    umq_stats_cmd_id_t stats_cmd_id;
  };
  union {
    perf_in_parm_t perf_in_parm;
  };";

const DFX_RESULT_BODY: &str = "  union {
    umq_perf_cmd_id_t perf_cmd_id;
    umq_stats_cmd_id_t stats_cmd_id;
  };
  int err_code;
  union {
    char *perf_char;
    umq_perf_infos_t *perf_out_parm;
    umq_stats_infos_t *stats_out_parm;
  };";

/// What every header includes. The original `umq_types.h` includes `<stdlib.h>` and
/// `<errno.h>` (its `umq_errno.h` defines the codes as `EAGAIN`, ...), and programs written
/// against it use `errno`, `EAGAIN` or `malloc` with only `umq_api.h` included (the reference's
/// perftest does), so ours must bring them in too.
const SYS_INCLUDES: &[&str] = &["stdbool.h", "stddef.h", "stdint.h", "stdlib.h", "errno.h"];

const HEADERS: &[HeaderSpec] = &[
    HeaderSpec {
        file: "umq_types.h",
        source: "src/abi/types.rs",
        includes: &[],
        bodies: &[
            ("umq_dev_assign_t", DEV_ASSIGN_BODY),
            ("umq_dfx_cmd_t", DFX_CMD_BODY),
            ("umq_dfx_result_t", DFX_RESULT_BODY),
        ],
        doc: "UMQ public types, enums and constants.",
    },
    HeaderSpec {
        file: "umq_errno.h",
        source: "src/abi/errno.rs",
        includes: &[],
        bodies: &[],
        doc: "UMQ return codes and completion status values.",
    },
    HeaderSpec {
        file: "umq_pro_types.h",
        source: "src/abi/pro_types.rs",
        includes: &["umq_types.h"],
        bodies: &[],
        doc: "UMQ pro API per-WR types.",
    },
    HeaderSpec {
        file: "umq_api.h",
        source: "src/ffi/api.rs",
        includes: &["umq_types.h", "umq_errno.h"],
        bodies: &[],
        doc: "UMQ API: lifecycle, buffers, base API, interrupts, events, logging, diagnostics.",
    },
    HeaderSpec {
        file: "umq_pro_api.h",
        source: "src/ffi/pro_api.rs",
        includes: &["umq_pro_types.h", "umq_errno.h"],
        bodies: &[],
        doc: "UMQ pro API: post and poll work requests.",
    },
];

/// The C view of a Rust source file: drop each item or field under `#[cfg(not(cbindgen))]`, keep
/// the ones under `#[cfg(cbindgen)]` without the attribute.
fn c_view(source: &str) -> String {
    let mut out = String::new();
    let mut lines = source.lines();
    while let Some(line) = lines.next() {
        match line.trim() {
            "#[cfg(not(cbindgen))]" => skip_item(&mut lines),
            "#[cfg(cbindgen)]" => {}
            _ => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    out
}

/// Skips attributes and one item: a line, or a braced block up to its closing brace.
fn skip_item<'a>(lines: &mut impl Iterator<Item = &'a str>) {
    let mut depth = 0i32;
    for line in lines {
        let t = line.trim();
        if t.starts_with("#[") || t.starts_with("///") {
            continue;
        }
        depth += t.matches('{').count() as i32 - t.matches('}').count() as i32;
        if depth <= 0 {
            return;
        }
    }
}

/// Names of the public structs, unions and type aliases of a source file: a types header shows
/// them all, used by a function or not.
fn public_types(source: &str) -> Vec<String> {
    source
        .lines()
        .filter_map(|l| {
            let rest = l
                .trim()
                .strip_prefix("pub struct ")
                .or_else(|| l.trim().strip_prefix("pub union "))
                .or_else(|| l.trim().strip_prefix("pub type "))?;
            Some(
                rest.split(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .next()?
                    .to_string(),
            )
        })
        .collect()
}

fn generate(root: &Path, spec: &HeaderSpec) -> String {
    let source = std::fs::read_to_string(root.join(spec.source)).unwrap();
    let tmp =
        std::env::temp_dir().join(format!("umq-cview-{}-{}.rs", std::process::id(), spec.file));
    std::fs::write(&tmp, c_view(&source)).unwrap();

    let mut config = cbindgen::Config {
        language: cbindgen::Language::C,
        cpp_compat: true,
        style: cbindgen::Style::Both,
        // The original headers' guards (`UMQ_TYPES_H`, ...): a program that also sees a copy
        // of an original header gets one definition, not two.
        include_guard: Some(spec.file.replace('.', "_").to_uppercase()),
        header: Some(format!(
            "/* {} */\n/* Generated by cbindgen from libumq's {} - do not edit. */",
            spec.doc, spec.source
        )),
        no_includes: true,
        sys_includes: SYS_INCLUDES.iter().map(|s| s.to_string()).collect(),
        includes: spec.includes.iter().map(|s| s.to_string()).collect(),
        documentation: true,
        ..Default::default()
    };
    config.function.sort_by = Some(cbindgen::SortKey::None);
    config.export.include = public_types(&c_view(&source));
    config.export.body = spec
        .bodies
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect::<HashMap<_, _>>();
    let mut out = Vec::new();
    cbindgen::Builder::new()
        .with_config(config)
        .with_src(&tmp)
        .generate()
        .unwrap_or_else(|e| panic!("cbindgen failed on {}: {e}", spec.source))
        .write(&mut out);
    let _ = std::fs::remove_file(&tmp);
    String::from_utf8(out).unwrap()
}

#[test]
fn generated_headers_match_checked_in_headers() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let regen = std::env::var_os("UMQ_REGEN_HEADERS").is_some();
    let mut stale = Vec::new();
    for spec in HEADERS {
        let text = generate(&root, spec);
        let path = root.join("include/umq").join(spec.file);
        if regen {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, &text).unwrap();
        } else if std::fs::read_to_string(&path).ok().as_deref() != Some(text.as_str()) {
            stale.push(spec.file);
        }
    }
    assert!(
        stale.is_empty(),
        "headers differ from the Rust source: {stale:?}; run scripts/gen-headers.sh and commit"
    );
}
