//! `umq-info` on this machine, checked field by field: against the library's own constants,
//! against the environment the test gives it, and against libfabric's `fi_info` where that is
//! installed.

use serde_json::Value;
use std::process::{Command, Output};

fn umq_info(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_umq-info"));
    cmd.args(args);
    for var in umq::info::variables() {
        cmd.env_remove(var.name);
    }
    cmd.envs(env.iter().copied());
    cmd.output().expect("umq-info runs")
}

fn json(env: &[(&str, &str)]) -> Value {
    let out = umq_info(&["--json"], env);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("one JSON object")
}

fn provider<'a>(v: &'a Value, name: &str) -> &'a Value {
    v["providers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == name)
        .unwrap_or_else(|| panic!("no provider {name}"))
}

fn named<'a>(list: &'a Value, name: &str) -> &'a Value {
    list.as_array()
        .unwrap()
        .iter()
        .find(|i| i["name"] == name)
        .unwrap_or_else(|| panic!("no entry {name}"))
}

/// The version the root package declares.
fn package_version() -> String {
    let manifest = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../Cargo.toml"))
        .expect("the workspace manifest");
    let after = &manifest[manifest.find("[package]").unwrap()..];
    let line = after.lines().find(|l| l.starts_with("version")).unwrap();
    line.split('"').nth(1).unwrap().to_string()
}

#[test]
fn version_abi_and_limits_are_the_library_s() {
    let v = json(&[]);
    assert_eq!(v["version"], package_version());
    // This test's build, as cargo makes it (scripts/build-pgo.sh's says "release, profile-guided").
    let build = if cfg!(debug_assertions) {
        "with debug assertions"
    } else {
        "release"
    };
    assert_eq!(v["build"], build);
    assert_eq!(v["abi_revision"], umq::info::ABI_REVISION);
    assert_eq!(v["functions"].as_array().unwrap().len(), 34);
    assert!(
        v["functions"]
            .as_array()
            .unwrap()
            .contains(&"umq_post".into())
    );
    assert_eq!(v["extensions"].as_array().unwrap().len(), 5);
    let limits = &v["limits"];
    let want = [
        ("max_depth", umq::limits::MAX_DEPTH.to_string()),
        ("batch", umq::abi::types::UMQ_BATCH_SIZE.to_string()),
        ("max_sge", umq::limits::MAX_SGE.to_string()),
        ("max_message", u32::MAX.to_string()),
        ("max_queues", (1u32 << 20).to_string()),
        ("max_buf_request", (10u32 << 20).to_string()),
        ("shm_ring_bytes", (16u32 << 20).to_string()),
    ];
    for (name, value) in want {
        assert_eq!(named(limits, name)["value"], value, "{name}");
    }
    // umq-info inherits this process's limits.
    let (soft, hard) = umq::os::fd_limits().unwrap();
    assert_eq!(
        named(limits, "open_files")["value"],
        format!("{soft}/{hard}")
    );
    let fc = &v["flow_control"];
    assert_eq!(named(fc, "enabled")["value"], "no");
    assert_eq!(named(fc, "at_rx_depth_1024")["value"], "512/64/4");
    assert_eq!(named(fc, "stall_report_ms")["value"], "1000");
}

#[test]
fn loopback_and_shared_memory_are_usable_with_every_check_passed() {
    let v = json(&[]);
    let names: Vec<&str> = v["providers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["loopback", "shm", "fabric"]);
    assert_eq!(provider(&v, "loopback")["usable"], true);
    let shm = provider(&v, "shm");
    assert_eq!(shm["usable"], true);
    assert_eq!(shm["why_not"], Value::Null);
    for check in ["memfd", "proc_fd", "pidfd_getfd"] {
        assert_eq!(named(&shm["checks"], check)["ok"], true, "{check}");
    }
    // Yama's rule as this host has it: passed without Yama or with scope 0.
    let scope = std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope");
    let open = scope.as_deref().map_or(true, |s| s.trim() == "0");
    let yama = named(&shm["checks"], "ptrace_scope");
    assert_eq!(yama["ok"], open, "{yama}");
    let detail = yama["detail"].as_str().unwrap();
    match scope {
        Err(_) => assert!(detail.starts_with("no Yama"), "{detail}"),
        Ok(s) => assert!(
            detail.starts_with(&format!("Yama ptrace_scope {}", s.trim())),
            "{detail}"
        ),
    }
}

/// The environment the library would read, as this process gave it.
#[test]
fn the_environment_is_reported_as_set_or_as_its_default() {
    let v = json(&[("UMQ_PROVIDER", "shm"), ("UMQ_RNR_TIMEOUT_MS", "250")]);
    let env = &v["environment"];
    assert_eq!(env.as_array().unwrap().len(), 12);
    assert_eq!(named(env, "UMQ_PROVIDER")["value"], "shm");
    assert_eq!(named(env, "UMQ_RNR_TIMEOUT_MS")["value"], "250");
    assert_eq!(named(env, "UMQ_RNR_TIMEOUT_MS")["default"], "1000");
    assert_eq!(named(env, "UMQ_FABRIC_RMA")["default"], "on");
    assert_eq!(named(env, "UMQ_FABRIC_MR")["default"], "auto");
    assert_eq!(named(env, "UMQ_UCX_RMA")["default"], "auto");
    assert_eq!(named(env, "UMQ_FABRIC_NOTSENT_LOWAT")["default"], "65536");
    let cpus = std::thread::available_parallelism().unwrap().get();
    assert_eq!(
        named(env, "UMQ_FABRIC_NODES")["default"],
        cpus.min(4).to_string()
    );
    let unset = named(env, "UMQ_FABRIC_LIVENESS_MS");
    assert_eq!(unset["value"], Value::Null);
    assert_eq!(unset["default"], "5000");
    assert_eq!(named(env, "UMQ_FABRIC_PROVIDER")["default"], "tcp");
    assert_eq!(named(env, "UMQ_PROGRESS_SWEEP_MS")["default"], "20");
}

/// What libfabric offers, as libfabric's own `fi_info` sees it.
#[test]
fn the_network_provider_matches_fi_info() {
    let v = json(&[]);
    let fabric = provider(&v, "fabric");
    let Ok(version) = Command::new("fi_info").arg("--version").output() else {
        eprintln!("SKIPPED: fi_info is not installed");
        return;
    };
    let version = String::from_utf8_lossy(&version.stdout).to_string();
    let libfabric = version
        .lines()
        .find_map(|l| l.strip_prefix("libfabric: "))
        .expect("fi_info --version names libfabric's");
    let major_minor: Vec<&str> = libfabric.trim().split('.').take(2).collect();
    assert_eq!(fabric["libfabric"]["version"], major_minor.join("."));
    let rdm = Command::new("fi_info")
        .args(["-t", "FI_EP_RDM"])
        .output()
        .unwrap();
    let rdm = String::from_utf8_lossy(&rdm.stdout).to_string();
    let offered: Vec<&str> = rdm
        .lines()
        .filter_map(|l| l.trim().strip_prefix("provider: "))
        .collect();
    let ours = fabric["libfabric"]["providers"].as_array().unwrap();
    for p in ours {
        assert!(
            offered.contains(&p.as_str().unwrap()),
            "{p} not in fi_info's list"
        );
    }
    if offered.contains(&"tcp;ofi_rxm") {
        assert!(ours.contains(&"tcp;ofi_rxm".into()), "{ours:?}");
        assert_eq!(fabric["usable"], true, "{fabric}");
    }
    let other = json(&[("UMQ_FABRIC_PROVIDER", "no-such-provider")]);
    let fabric = provider(&other, "fabric");
    assert_eq!(fabric["usable"], false);
    let why = fabric["why_not"].as_str().unwrap();
    assert!(why.contains("'no-such-provider'"), "{why}");
}

/// How WRITE and READ go over the network provider, asked of an endpoint: by RMA under our
/// keys over tcp; under the provider's keys and local registrations when registering as verbs
/// asks; as messages when `UMQ_FABRIC_RMA=off`.
#[test]
fn the_network_provider_says_how_write_and_read_go() {
    let one_sided = |env: &[(&str, &str)]| {
        let v = json(env);
        let fabric = provider(&v, "fabric").clone();
        (fabric["usable"] == true).then(|| named(&fabric["checks"], "one_sided").clone())
    };
    let Some(tcp) = one_sided(&[]) else {
        eprintln!("SKIPPED: the network provider is not usable here");
        return;
    };
    let detail = |c: &Value| c["detail"].as_str().unwrap().to_string();
    assert_eq!(tcp["ok"], true);
    let words = detail(&tcp);
    assert!(words.starts_with("WRITE and READ by RMA"), "{words}");
    assert!(
        words.contains("keys ours") && words.contains("in software"),
        "{words}"
    );
    assert!(!words.contains("registration"), "{words}");

    let verbs = one_sided(&[("UMQ_FABRIC_MR", "verbs")]).expect("usable");
    let words = detail(&verbs);
    assert_eq!(verbs["ok"], true);
    assert!(words.contains("keys the provider picks"), "{words}");
    assert!(
        words.contains("registration of its own buffer's chunk"),
        "{words}"
    );
    assert!(
        words.ends_with("sends read in place from their registered chunks"),
        "{words}"
    );

    let off = one_sided(&[("UMQ_FABRIC_RMA", "off")]).expect("usable");
    assert_eq!(off["ok"], false);
    assert!(detail(&off).contains("as messages"), "{off}");
}

#[test]
fn one_provider_text_output_and_usage_errors() {
    let out = umq_info(&["--json", "--provider", "shm"], &[]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["providers"].as_array().unwrap().len(), 1);
    assert_eq!(v["providers"][0]["name"], "shm");

    let text = umq_info(&[], &[]);
    assert!(text.status.success());
    let text = String::from_utf8(text.stdout).unwrap();
    for heading in [
        "# providers",
        "# limits",
        "# environment",
        "# flow control defaults",
    ] {
        assert!(text.contains(heading), "{heading} missing:\n{text}");
    }
    let build = if cfg!(debug_assertions) {
        "with debug assertions"
    } else {
        "release"
    };
    assert!(text.starts_with(&format!("# libumq {} ({build} build)\n", package_version())));
    assert!(
        text.lines()
            .any(|l| l.trim_start().starts_with("shm") && l.contains(" usable "))
    );

    let bad = umq_info(&["--provider", "carrier-pigeon"], &[]);
    assert_eq!(bad.status.code(), Some(2), "clap's usage error");
    assert!(String::from_utf8_lossy(&bad.stderr).contains("carrier-pigeon"));
}
