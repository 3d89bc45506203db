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
    /// The Rust files whose C view the header is; the first is named in its banner.
    sources: &'static [&'static str],
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
        sources: &["src/abi/types.rs"],
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
        sources: &["src/abi/errno.rs"],
        includes: &[],
        bodies: &[],
        doc: "UMQ return codes and completion status values.",
    },
    HeaderSpec {
        file: "umq_pro_types.h",
        sources: &["src/abi/pro_types.rs"],
        includes: &["umq_types.h"],
        bodies: &[],
        doc: "UMQ pro API per-WR types.",
    },
    HeaderSpec {
        file: "umq_api.h",
        sources: &["src/ffi/api.rs"],
        includes: &["umq_types.h", "umq_errno.h"],
        bodies: &[],
        doc: "UMQ API: lifecycle, buffers, base API, interrupts, events, logging, diagnostics.",
    },
    HeaderSpec {
        file: "umq_pro_api.h",
        sources: &["src/ffi/pro_api.rs"],
        includes: &["umq_pro_types.h", "umq_errno.h"],
        bodies: &[],
        doc: "UMQ pro API: post and poll work requests.",
    },
];

/// Which revision of the API a header set is for (`--features abi-2026` builds the second).
#[derive(Clone, Copy, Debug)]
enum Revision {
    Dec2025,
    Jul2026,
}

const DEV_INFO_BODY: &str = "  union {
    struct {
      umq_eid_info_t eid_list[UMQ_MAX_EID_CNT];
      uint32_t eid_cnt;
    } ub;
  };";

const DFX_CMD_BODY_2026: &str = "  union {
    umq_perf_cmd_id_t perf_cmd_id;
    umq_stats_cmd_id_t stats_cmd_id;
  };
  union {
    perf_in_param_t perf_in_param;
  };";

const DFX_RESULT_BODY_2026: &str = "  union {
    umq_perf_cmd_id_t perf_cmd_id;
    umq_stats_cmd_id_t stats_cmd_id;
  };
  int err_code;
  union {
    char *perf_char;
    umq_perf_infos_t *perf_out_param;
    umq_stats_infos_t *stats_out_param;
  };";

const QBUF_POOL_INFO_BODY: &str = "  union {
    struct {
      uint64_t block_num_with_data;
      uint64_t size_with_data;
      uint64_t block_num_without_data;
      uint64_t size_without_data;
    } split;
    struct {
      uint64_t block_num_with_data;
      uint64_t size_with_data;
    } combine;
  } available_mem;";

const UMQ_INFO_BODY: &str = "  union {
    struct {
      uint32_t umq_id;
      umq_eid_t eid;
      char dev_name[UMQ_DEV_NAME_SIZE];
      uint32_t local_io_jetty_id;
      uint32_t local_fc_jetty_id;
      uint32_t remote_io_jetty_id;
      uint32_t remote_fc_jetty_id;
    } ub;
  };";

const BUF_PRO_BODY_2026: &str = "  union {
    uint64_t imm_data;
    struct {
      uint64_t rsvd0 : 40;
      uint64_t user_data : 24;
    } imm;
  };
  umq_ref_sge remote_sge;
  uint64_t umq_ctx;
  uint64_t rsvd1;";

/// The July 2026 headers (include/umq-2026/): this revision's types, and the entry points of
/// both `ffi` (those the revisions share) and `ffi/v2026`.
const HEADERS_2026: &[HeaderSpec] = &[
    HeaderSpec {
        file: "umq_types.h",
        sources: &["src/abi/v2026/types.rs"],
        includes: &[],
        bodies: &[
            ("umq_dev_assign_t", DEV_ASSIGN_BODY),
            ("umq_dfx_cmd_t", DFX_CMD_BODY_2026),
            ("umq_dfx_result_t", DFX_RESULT_BODY_2026),
            ("umq_dev_info_t", DEV_INFO_BODY),
        ],
        doc: "UMQ public types, enums and constants (July 2026 revision).",
    },
    HeaderSpec {
        file: "umq_errno.h",
        sources: &["src/abi/errno.rs", "src/abi/v2026/errno.rs"],
        includes: &[],
        bodies: &[],
        doc: "UMQ return codes and completion status values (July 2026 revision).",
    },
    HeaderSpec {
        file: "umq_pro_types.h",
        sources: &["src/abi/v2026/pro_types.rs"],
        includes: &["umq_types.h"],
        bodies: &[("umq_buf_pro_t", BUF_PRO_BODY_2026)],
        doc: "UMQ pro API per-WR types (July 2026 revision).",
    },
    HeaderSpec {
        file: "umq_dfx_types.h",
        sources: &["src/abi/v2026/dfx_types.rs"],
        includes: &["umq_types.h"],
        bodies: &[
            ("umq_qbuf_pool_info_t", QBUF_POOL_INFO_BODY),
            ("umq_info_t", UMQ_INFO_BODY),
        ],
        doc: "UMQ statistics types (July 2026 revision).",
    },
    HeaderSpec {
        file: "umq_api.h",
        sources: &["src/ffi/v2026/api.rs", "src/ffi/api.rs"],
        includes: &["umq_types.h", "umq_errno.h"],
        bodies: &[],
        doc: "UMQ API (July 2026 revision): lifecycle, buffers, base API, interrupts, events, logging, devices.",
    },
    HeaderSpec {
        file: "umq_pro_api.h",
        sources: &["src/ffi/v2026/pro_api.rs", "src/ffi/pro_api.rs"],
        includes: &["umq_pro_types.h", "umq_errno.h"],
        bodies: &[],
        doc: "UMQ pro API (July 2026 revision): post and poll work requests.",
    },
    HeaderSpec {
        file: "umq_dfx_api.h",
        sources: &["src/ffi/v2026/dfx_api.rs"],
        includes: &["umq_dfx_types.h", "umq_errno.h"],
        bodies: &[],
        doc: "UMQ statistics API (July 2026 revision).",
    },
];

/// The C view of a Rust source file for one revision of the API: drop each item or field under
/// `#[cfg(not(cbindgen))]` and each export of the other revision, keep the ones under
/// `#[cfg(cbindgen)]` without the attribute.
fn c_view(source: &str, rev: Revision) -> String {
    let other = match rev {
        Revision::Dec2025 => "#[cfg(feature = \"abi-2026\")]",
        Revision::Jul2026 => "#[cfg(not(feature = \"abi-2026\"))]",
    };
    let mut out = String::new();
    let mut lines = source.lines();
    while let Some(line) = lines.next() {
        match line.trim() {
            "#[cfg(not(cbindgen))]" => skip_item(&mut lines),
            t if t == other => {
                // The other revision's export goes with its doc comment, which came first.
                while out
                    .trim_end()
                    .rsplit('\n')
                    .next()
                    .is_some_and(|l| l.trim().starts_with("///"))
                {
                    let end = out.trim_end().rfind('\n').map_or(0, |i| i + 1);
                    out.truncate(end);
                }
                skip_item(&mut lines)
            }
            "#[cfg(cbindgen)]"
            | "#[cfg(feature = \"abi-2026\")]"
            | "#[cfg(not(feature = \"abi-2026\"))]" => {}
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
    // A function's signature may span lines before its body opens.
    let mut awaiting_body = false;
    for line in lines {
        let t = line.trim();
        if t.starts_with("#[") || t.starts_with("///") {
            continue;
        }
        awaiting_body |= t.contains("fn ");
        depth += t.matches('{').count() as i32 - t.matches('}').count() as i32;
        awaiting_body &= !t.contains('{');
        if depth <= 0 && !awaiting_body {
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

fn generate(root: &Path, spec: &HeaderSpec, rev: Revision) -> String {
    let views: Vec<String> = spec
        .sources
        .iter()
        .map(|s| c_view(&std::fs::read_to_string(root.join(s)).unwrap(), rev))
        .collect();
    let tmps: Vec<PathBuf> = (0..views.len())
        .map(|i| {
            std::env::temp_dir().join(format!(
                "umq-cview-{}-{rev:?}-{}-{i}.rs",
                std::process::id(),
                spec.file
            ))
        })
        .collect();
    for (tmp, view) in tmps.iter().zip(&views) {
        std::fs::write(tmp, view).unwrap();
    }

    let mut config = cbindgen::Config {
        language: cbindgen::Language::C,
        cpp_compat: true,
        style: cbindgen::Style::Both,
        // The original headers' guards (`UMQ_TYPES_H`, ...): a program that also sees a copy
        // of an original header gets one definition, not two.
        include_guard: Some(spec.file.replace('.', "_").to_uppercase()),
        header: Some(format!(
            "/* {} */\n/* Generated by cbindgen from libumq's {} - do not edit. */",
            spec.doc, spec.sources[0]
        )),
        no_includes: true,
        sys_includes: SYS_INCLUDES.iter().map(|s| s.to_string()).collect(),
        includes: spec.includes.iter().map(|s| s.to_string()).collect(),
        documentation: true,
        ..Default::default()
    };
    config.function.sort_by = Some(cbindgen::SortKey::None);
    config.export.include = views.iter().flat_map(|v| public_types(v)).collect();
    config.export.body = spec
        .bodies
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect::<HashMap<_, _>>();
    let mut out = Vec::new();
    let mut builder = cbindgen::Builder::new().with_config(config);
    for tmp in &tmps {
        builder = builder.with_src(tmp);
    }
    builder
        .generate()
        .unwrap_or_else(|e| panic!("cbindgen failed on {}: {e}", spec.sources[0]))
        .write(&mut out);
    for tmp in &tmps {
        let _ = std::fs::remove_file(tmp);
    }
    String::from_utf8(out).unwrap()
}

#[test]
fn generated_headers_match_checked_in_headers() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let regen = std::env::var_os("UMQ_REGEN_HEADERS").is_some();
    let mut stale = Vec::new();
    let revisions = [
        (Revision::Dec2025, "include/umq", HEADERS),
        (Revision::Jul2026, "include/umq-2026", HEADERS_2026),
    ];
    for (rev, dir, spec) in revisions
        .iter()
        .flat_map(|(r, d, s)| s.iter().map(move |s| (*r, *d, s)))
    {
        let text = generate(&root, spec, rev);
        let path = root.join(dir).join(spec.file);
        if regen {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, &text).unwrap();
        } else if std::fs::read_to_string(&path).ok().as_deref() != Some(text.as_str()) {
            stale.push(path.display().to_string());
        }
    }
    assert!(
        stale.is_empty(),
        "headers differ from the Rust source: {stale:?}; run scripts/gen-headers.sh and commit"
    );
}
