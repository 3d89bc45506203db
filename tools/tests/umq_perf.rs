//! `umq-perf` as its users run it: the `--json` rows' field names (scripts and notebooks read
//! them), the exit statuses and messages of a bad command line, and the page and completions
//! that come from its option definitions.

use serde_json::Value;
use std::process::{Command, Output};

fn umq_perf(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_umq-perf"))
        .args(args)
        .output()
        .expect("umq-perf runs")
}

/// The rows of a `--json` run, each with its keys in order.
fn rows(args: &[&str]) -> Vec<(Value, Vec<String>)> {
    let out = umq_perf(&[args, &["--json"]].concat());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "umq-perf {args:?}: {stderr}");
    String::from_utf8(out.stdout)
        .expect("UTF-8")
        .lines()
        .map(|line| {
            let row: Value = serde_json::from_str(line).expect("one JSON object a line");
            let keys = line_keys(line);
            (row, keys)
        })
        .collect()
}

/// The top-level keys of one JSON object, in the order they are written.
fn line_keys(line: &str) -> Vec<String> {
    let map: serde_json::Map<String, Value> = serde_json::from_str(line).unwrap();
    let mut keys: Vec<(usize, String)> = map
        .keys()
        .map(|k| {
            (
                line.find(&format!("\"{k}\":")).expect("key in line"),
                k.clone(),
            )
        })
        .collect();
    keys.sort();
    keys.into_iter().map(|(_, k)| k).collect()
}

const IDENTITY: [&str; 4] = ["test", "provider", "size", "flow_control"];
const FC_COUNTERS: [&str; 8] = [
    "total_local_rx_posted",
    "total_local_rx_notified",
    "total_remote_rx_received",
    "total_remote_rx_consumed",
    "total_flow_controlled_wr",
    "piggybacked",
    "standalone",
    "area_only",
];

fn expect_keys(keys: &[String], values: &[&str], sides: &[&str]) {
    let mut want: Vec<String> = IDENTITY
        .iter()
        .chain(values)
        .map(|k| k.to_string())
        .collect();
    for side in sides {
        want.push(format!("{side}_fc"));
        want.push(format!("{side}_copies"));
    }
    assert_eq!(keys, want);
}

fn expect_side(row: &Value, side: &str) {
    let fc = row[format!("{side}_fc")].as_object().expect("counters");
    let names: Vec<&str> = fc.keys().map(String::as_str).collect();
    let mut want = FC_COUNTERS.to_vec();
    want.sort();
    let mut have = names.clone();
    have.sort();
    assert_eq!(have, want);
    assert!(fc["total_local_rx_posted"].as_u64().unwrap() > 0, "{row}");
    let copies = &row[format!("{side}_copies")];
    for field in ["by_ref_wr", "placed_wr", "placed_rx"] {
        assert!(copies[field].is_u64(), "{side}_copies.{field}: {row}");
    }
}

#[test]
fn loopback_rows_keep_their_field_names() {
    let lat = rows(&["--test", "lat", "--iters", "500"]);
    assert_eq!(lat.len(), 1);
    let (row, keys) = &lat[0];
    let timings = ["api", "p50_ns", "p99_ns", "p999_ns", "mean_ns", "rx_bufs"];
    expect_keys(keys, &timings, &["a", "b"]);
    assert_eq!(row["api"], "pro");
    assert_eq!(
        (&row["test"], &row["provider"], &row["size"]),
        (&"lat".into(), &"loopback".into(), &64.into())
    );
    assert_eq!(row["rx_bufs"], 16);
    let p50 = row["p50_ns"].as_u64().expect("whole nanoseconds");
    assert!(p50 > 0 && p50 <= row["p999_ns"].as_u64().unwrap(), "{row}");
    expect_side(row, "a");
    expect_side(row, "b");

    let bw = rows(&["--test", "bw", "--iters", "2000", "--size", "256"]);
    let (row, keys) = &bw[0];
    let rates = [
        "api",
        "msgs_per_s",
        "gbytes_per_s",
        "baseline",
        "baseline_msgs_per_s",
        "ratio",
    ];
    expect_keys(keys, &[&rates[..], &["rx_bufs"]].concat(), &["a", "b"]);
    assert_eq!(row["size"], 256);
    let gbytes = row["msgs_per_s"].as_f64().unwrap() * 256.0 / 1e9;
    assert!(
        (row["gbytes_per_s"].as_f64().unwrap() - gbytes).abs() < 1e-3,
        "{row}"
    );
}

#[test]
fn every_size_and_round_is_a_row_with_its_medians() {
    let all = rows(&[
        "--test", "lat", "--size", "64,1024", "--rounds", "3", "--iters", "300",
    ]);
    let sizes: Vec<u64> = all
        .iter()
        .map(|(r, _)| r["size"].as_u64().unwrap())
        .collect();
    assert_eq!(sizes, [64, 1024]);
    assert!(all.iter().all(|(r, _)| r["rounds"] == 3));
}

/// A stream of the largest size between two processes: its sender keeps at most 256 MiB of
/// send buffers (a queue's depth of 1 MiB buffers, 1 GiB, is more than its shared pool holds,
/// and the run stopped there).
#[test]
fn a_stream_of_the_largest_messages_runs_between_two_processes() {
    let all = rows(&[
        "--provider",
        "shm",
        "--test",
        "bw",
        "--size",
        "1048576",
        "--iters",
        "300",
    ]);
    let [(row, _)] = &all[..] else {
        panic!("one row: {all:?}");
    };
    assert_eq!(row["size"], 1048576);
    assert!(row["msgs_per_s"].as_f64().unwrap() > 0.0, "{row}");
}

/// Messages shorter than the 8 bytes a stream numbers them with run between two processes:
/// the tool's send buffers carry the run's size in `data_size` as in `total_data_size` (a
/// 1-byte message had gone out as a WR umq_post refused, 8 bytes of data in 1 of total).
#[test]
fn messages_of_one_byte_run_between_two_processes() {
    for test in ["lat", "bw", "qps"] {
        let all = rows(&[
            "--provider",
            "shm",
            "--test",
            test,
            "--size",
            "1",
            "--iters",
            "300",
        ]);
        let [(row, _)] = &all[..] else {
            panic!("{test}: one row: {all:?}");
        };
        assert_eq!(row["size"], 1, "{test}");
    }
}

#[test]
fn shm_latency_rows_carry_the_floor_and_both_sides() {
    let lat = rows(&["--provider", "shm", "--test", "lat", "--iters", "500"]);
    let (row, keys) = &lat[0];
    let values = [
        "api",
        "send_buffers",
        "receive_buffers",
        "p50_ns",
        "p99_ns",
        "p999_ns",
        "mean_ns",
        "loop",
        "rx_bufs",
        "floor_half_rtt_ns",
        "over_floor_ns",
        "cma_floor_half_rtt_ns",
    ];
    expect_keys(keys, &values, &["client", "server"]);
    assert_eq!(
        (&row["loop"], &row["send_buffers"]),
        (&"bench".into(), &"queue pool".into())
    );
    expect_side(row, "client");
    expect_side(row, "server");
}

/// `--api base`: the rows say so, and their counters show the library's own receive buffers
/// (it posts rx_depth of them at bind) and every message sent arriving.
#[test]
fn base_api_rows_name_their_api() {
    for (provider, test, sides) in [
        ("loopback", "lat", ["a", "b"]),
        ("loopback", "qps", ["a", "b"]),
        ("shm", "lat", ["client", "server"]),
        ("shm", "qps", ["client", "server"]),
    ] {
        let args = [
            "--provider",
            provider,
            "--test",
            test,
            "--api",
            "base",
            "--iters",
            "3200",
        ];
        let got = rows(&args);
        assert_eq!(got.len(), 1, "{args:?}");
        let row = &got[0].0;
        assert_eq!((&row["test"], &row["api"]), (&test.into(), &"base".into()));
        for side in sides {
            expect_side(row, side);
            assert!(row[format!("{side}_fc")]["total_local_rx_posted"].as_u64() >= Some(1024));
        }
        let arrived = |side: &str| row[format!("{side}_fc")]["total_remote_rx_consumed"].as_u64();
        assert!(arrived(sides[0]) >= Some(3200), "{row}");
    }
}

#[test]
fn a_bad_command_line_says_what_is_wrong_and_exits_2() {
    for (args, said) in [
        (&["--bogus"][..], "unexpected argument '--bogus'"),
        (&["--size", "0"], "1 byte to 1 MiB"),
        (&["--test", "x"], "invalid value 'x' for '--test"),
        (&["--test", "pfc"], "--provider shm or fabric"),
        (&["--test", "beside"], "--provider shm or fabric"),
        (
            &["--test", "bw", "--stream", "write"],
            "--stream write|read is for --test beside",
        ),
        (&["--stream", "put"], "invalid value 'put' for '--stream"),
        (&["--size", "2097152"], "1 byte to 1 MiB"),
        (
            &["--test", "bw", "--ping-every", "5"],
            "--ping-every is for --test beside",
        ),
        (&["--batch", "65"], "--batch must be 1..=64"),
        (&["--compare", "mpi"], "invalid value 'mpi' for '--compare"),
        (&["--loop", "app"], "--loop app measures latency over shm"),
        (&["--api", "base"], "--api base measures lat and qps"),
        (
            &["--test", "scale", "--size", "1048576"],
            "10000 pairs of 1048576 bytes is more than",
        ),
    ] {
        let out = umq_perf(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(said), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
}

#[test]
fn a_later_option_replaces_an_earlier_one() {
    let lat = rows(&[
        "--test", "bw", "--size", "128", "--test", "lat", "--iters", "200",
    ]);
    assert_eq!(lat.len(), 1);
    assert_eq!(
        (&lat[0].0["test"], &lat[0].0["size"]),
        (&"lat".into(), &128.into())
    );
}

#[test]
fn help_page_and_completions_come_from_one_definition() {
    let help = umq_perf(&["--help"]);
    assert!(help.status.success());
    let help = String::from_utf8(help.stdout).unwrap();
    let page = String::from_utf8(umq_perf(&["--man"]).stdout).unwrap();
    assert!(page.contains("\n.TH umq-perf 1 "), "{page}");
    let bash = String::from_utf8(umq_perf(&["--completions", "bash"]).stdout).unwrap();
    for flag in [
        "--provider",
        "--test",
        "--size",
        "--compare",
        "--loop",
        "--client",
        "--storm",
    ] {
        assert!(help.contains(flag), "--help lacks {flag}");
        assert!(
            page.contains(&flag.replace('-', "\\-")),
            "the page lacks {flag}"
        );
        assert!(bash.contains(flag), "the bash completions lack {flag}");
    }
    for hidden in ["--peer", "--scale-peer", "--pfc-peer", "--man"] {
        assert!(
            !help.contains(&format!("{hidden} ")),
            "--help shows {hidden}"
        );
    }
}

/// The host rows of `--test pacing --wire`: one per rate, its packet time, and the stops of a
/// CPU counted the longer the fewer.
fn expect_host_rows(host: &[(Value, Vec<String>)], provider: &str) {
    let rates: Vec<u64> = host
        .iter()
        .map(|(r, _)| r["rate_bps"].as_u64().unwrap())
        .collect();
    assert_eq!(rates, [100_000_000, 1_000_000_000]);
    for (row, keys) in host {
        let values = [
            "rate_bps",
            "cpus",
            "probe_ms",
            "packet_time_us",
            "stops_over_packet_time",
            "stops_over_1_ms",
            "stop_max_us",
        ];
        expect_keys(keys, &values, &[]);
        assert_eq!(row["provider"], provider);
        let f = |k: &str| row[k].as_f64().unwrap_or_else(|| panic!("{k}: {row}"));
        assert!(f("cpus") >= 1.0 && f("probe_ms") == 500.0, "{row}");
        let packet_us = 8.0 * 4096.0 * 1e6 / f("rate_bps");
        assert!((f("packet_time_us") - packet_us).abs() < 1.0, "{row}");
        assert!(f("stops_over_packet_time") >= f("stops_over_1_ms"), "{row}");
        if f("stops_over_1_ms") > 0.0 {
            assert!(f("stop_max_us") > 1000.0, "{row}");
        }
    }
}

/// `--test pacing --wire`: a row per message size and rate, every packet of every message
/// counted at the receiver (whole PMTU packets), the burst a whole number of packets, and a
/// limited queue never faster than its limit (noise only slows it: no timing threshold); the
/// packets the receiver found after a stop of its own are left out of the timed burst only (a
/// receiver in this process stops for nothing: the engine times them). Before them, a row per
/// rate on how long the host's CPUs stopped.
#[test]
fn pacing_wire_rows_count_every_packet_where_it_arrives() {
    let dir = std::env::temp_dir().join(format!("umq-perf-arrivals-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for provider in ["loopback", "shm"] {
        let mut args = vec!["--provider", provider, "--test", "pacing", "--wire"];
        let dir_arg = dir.to_str().unwrap();
        if provider == "loopback" {
            args.extend(["--arrivals", dir_arg]);
        }
        let (host, got): (Vec<_>, Vec<_>) = rows(&args)
            .into_iter()
            .partition(|(r, _)| r["test"] == "pacing_wire_host");
        expect_host_rows(&host, provider);
        let shape: Vec<(u64, u64)> = got
            .iter()
            .map(|(r, _)| {
                (
                    r["message_bytes"].as_u64().unwrap(),
                    r["rate_bps"].as_u64().unwrap(),
                )
            })
            .collect();
        let (m, g) = (100_000_000, 1_000_000_000);
        assert_eq!(shape, [(65536, m), (65536, g), (1 << 20, m), (1 << 20, g)]);
        for (row, keys) in &got {
            let values = [
                "message_bytes",
                "rate_bps",
                "pmtu",
                "messages",
                "packets",
                "burst_bytes_max",
                "windows_over_2_pmtu",
                "achieved_bps",
                "rate_error",
                "receiver_stops",
                "receiver_stop_max_us",
                "found_late",
                "burst_bytes_max_timed",
                "burst_bytes_max_sent",
            ];
            expect_keys(keys, &values, &[]);
            assert_eq!(
                (&row["test"], &row["provider"]),
                (&"pacing_wire".into(), &provider.into())
            );
            let n = |k: &str| row[k].as_u64().unwrap_or_else(|| panic!("{k}: {row}"));
            assert_eq!(n("pmtu"), 4096);
            assert_eq!(
                n("packets"),
                n("messages") * n("message_bytes") / 4096,
                "{row}"
            );
            let burst = n("burst_bytes_max");
            assert!(burst >= 4096 && burst % 4096 == 0, "{row}");
            let sent = n("burst_bytes_max_sent");
            assert!(sent >= 4096 && sent % 4096 == 0, "{row}");
            let timed = n("burst_bytes_max_timed");
            assert!(timed <= burst && timed % 4096 == 0, "{row}");
            // A subset of the packets: on a host whose CPUs are taken by other work, every
            // poll of the receiver can come after a stop, and then every packet is late.
            assert!(n("found_late") <= n("packets"), "{row}");
            if provider == "loopback" {
                assert_eq!((n("found_late"), timed), (0, burst), "{row}");
            }
            // The rate is taken where the packets arrive: a receiver the host stopped as the
            // first ones came finds them late, and the stream looks shorter by up to that stop
            // (a 10 ms stop in a 0.5 s stream made it 1.02 % fast).
            let span_s = (n("packets") * 4096 * 8) as f64 / n("rate_bps") as f64;
            let stop_s = row["receiver_stop_max_us"].as_f64().unwrap() * 1e-6;
            assert!(
                row["rate_error"].as_f64().unwrap() < 0.01 + stop_s / span_s,
                "faster than the limit: {row}"
            );
            if provider == "loopback" {
                let csv = dir.join(format!(
                    "loopback-{}-{}.csv",
                    n("message_bytes"),
                    n("rate_bps")
                ));
                let text = std::fs::read_to_string(&csv).expect("the row's arrivals");
                let lines: Vec<&str> = text.lines().collect();
                assert_eq!(lines[0], "ns,bytes");
                assert_eq!(lines.len() as u64 - 1, n("packets"));
                assert!(lines[1..].iter().all(|l| l.ends_with(",4096")), "{csv:?}");
            }
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `--test beside` over shared memory: one row with the ping alone and beside the stream, and
/// every message of the stream arrived, in order (the peer checks the order). Its times are
/// the host's to decide: none is judged.
#[test]
fn beside_rows_time_a_ping_alone_and_beside_a_stream_that_loses_nothing() {
    let all = rows(&["--provider", "shm", "--test", "beside", "--size", "4096"]);
    let [(row, keys)] = &all[..] else {
        panic!("one row: {all:?}");
    };
    let timed = [
        "ping_alone_half_rtt_ns",
        "ping_alone_p99_ns",
        "ping_beside_half_rtt_ns",
        "ping_beside_p99_ns",
        "ping_beside_max_ns",
        "stream_msgs_per_s",
    ];
    for name in timed.iter().chain(&["lost", "pings_beside"]) {
        assert!(keys.iter().any(|k| k == name), "{name} missing: {keys:?}");
    }
    assert_eq!(
        (&row["test"], &row["size"]),
        (&"beside".into(), &4096.into())
    );
    assert!(
        timed.iter().all(|k| row[k].as_f64().unwrap() > 0.0),
        "{row}"
    );
    assert_eq!((&row["stream"], &row["lost"]), (&"send".into(), &0.into()));
    let (median, longest) = (&row["ping_beside_half_rtt_ns"], &row["ping_beside_max_ns"]);
    assert!(median.as_f64() <= longest.as_f64(), "{row}");
    assert!(row["pings_beside"].as_u64().unwrap() >= 1, "{row}");
}

/// `--stream write` streams WRITEs into a buffer the peer exposes, beside the same ping, here
/// of 2 MiB (past the 1 MiB other runs take) and pinged every 5 ms; every WR completes (a
/// failed one stops the run).
#[test]
fn beside_rows_take_a_stream_of_writes_too() {
    let all = rows(&[
        "--provider",
        "shm",
        "--test",
        "beside",
        "--size",
        "2097152",
        "--stream",
        "write",
        "--ping-every",
        "5",
    ]);
    let [(row, _)] = &all[..] else {
        panic!("one row: {all:?}");
    };
    assert_eq!((&row["stream"], &row["lost"]), (&"write".into(), &0.into()));
    assert_eq!(
        (&row["size"], &row["ping_every_ms"]),
        (&2097152.into(), &5.into())
    );
    assert!(row["stream_msgs_per_s"].as_f64().unwrap() > 0.0, "{row}");
    assert!(
        row["ping_beside_half_rtt_ns"].as_f64().unwrap() > 0.0,
        "{row}"
    );
}

/// `--test threads`: a row per thread count, every thread's messages back at their size (the
/// tool checks each), all threads' rate and a thread's against the first count's; over the
/// network too, each thread's pair in its own node.
#[test]
fn threads_rows_give_all_threads_rate_and_a_threads_against_one() {
    for provider in ["loopback", "fabric"] {
        let got = rows(&[
            "--provider",
            provider,
            "--test",
            "threads",
            "--threads",
            "1,2",
            "--iters",
            "2000",
        ]);
        assert_eq!(got.len(), 2, "{provider}");
        for ((row, _), threads) in got.iter().zip([1, 2]) {
            assert_eq!(
                (&row["test"], &row["provider"], &row["threads"]),
                (&"threads".into(), &provider.into(), &threads.into())
            );
            let all = row["round_trips_per_s"].as_f64().unwrap();
            let each = row["per_thread_round_trips_per_s"].as_f64().unwrap();
            assert!(
                all > 0.0 && (all / threads as f64 - each).abs() <= 1.0,
                "{row}"
            );
        }
        assert_eq!(got[0].0["per_thread_vs_first"], 1.0);
    }
}
