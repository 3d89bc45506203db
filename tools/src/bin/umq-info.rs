//! `umq-info`: what this libumq and this machine offer, as `fi_info` and `ucx_info -d` report
//! theirs. The library gathers it (`umq::info`); this program prints it as text or JSON.

use clap::{CommandFactory, Parser};
use serde_json::{Value, json};
use umq::info::{self, Info};

/// Show what this libumq and this machine offer
///
/// Shows libumq's version and ABI, every transport provider and whether it can be used on this
/// machine (and why not: the kernel facilities shared memory relies on, the libfabric version
/// and the libfabric providers fi_getinfo finds), the limits, the environment variables the
/// library reads with their values, and the flow-control defaults.
#[derive(Parser)]
#[command(name = "umq-info", version)]
struct Args {
    /// One JSON object instead of text.
    #[arg(long)]
    json: bool,
    /// Only this provider (loopback, shm or fabric).
    #[arg(short, long, value_parser = ["loopback", "shm", "fabric"])]
    provider: Option<String>,
    /// Print this program's man page (roff) and exit: what scripts/install.sh installs as
    /// umq-info(1).
    #[arg(long, hide = true)]
    man: bool,
    /// Print a completion script for this shell and exit.
    #[arg(long, value_name = "SHELL")]
    completions: Option<clap_complete::Shell>,
}

/// The report as one JSON object (field names are part of the tool's interface).
fn to_json(info: &Info) -> Value {
    let items = |list: &[info::Item]| -> Vec<Value> {
        list.iter()
            .map(|i| json!({"name": i.name, "value": i.value, "meaning": i.meaning}))
            .collect()
    };
    json!({
        "version": info.version,
        "build": info.build,
        "abi_revision": info.abi_revision,
        "functions": info::UMQ_FUNCTIONS.as_slice(),
        "extensions": info::EXTENSION_FUNCTIONS.as_slice(),
        "providers": info.providers.iter().map(|p| {
            let mut v = json!({
                "name": p.name,
                "description": p.what,
                "usable": p.usable,
                "why_not": p.why_not,
                "checks": p.checks.iter()
                    .map(|c| json!({"name": c.name, "ok": c.ok, "detail": c.detail}))
                    .collect::<Vec<_>>(),
            });
            if let Some(o) = &p.libfabric {
                v["libfabric"] = json!({"version": o.version, "providers": o.providers});
            }
            v
        }).collect::<Vec<_>>(),
        "limits": items(&info.limits),
        "environment": info.environment.iter()
            .map(|v| json!({"name": v.name, "value": v.value, "default": v.default, "meaning": v.meaning}))
            .collect::<Vec<_>>(),
        "flow_control": items(&info.flow_control),
    })
}

fn print_text(r: &Info) {
    println!("# libumq {} ({} build)", r.version, r.build);
    println!(
        "# ABI: {} ({} functions; extensions: {})",
        r.abi_revision,
        info::UMQ_FUNCTIONS.len(),
        info::EXTENSION_FUNCTIONS.join(", ")
    );
    println!("\n# providers");
    for p in &r.providers {
        let state = if p.usable { "usable" } else { "not usable" };
        println!("  {:<9} {:<11} {}", p.name, state, p.what);
        if let Some(why) = &p.why_not {
            println!("  {:<9} {:<11} why: {why}", "", "");
        }
        for c in &p.checks {
            let ok = if c.ok { "yes" } else { "no" };
            println!("  {:<9}   {:<12} {:<3} {}", "", c.name, ok, c.detail);
        }
        if let Some(f) = &p.libfabric {
            let version = f.version.as_deref().unwrap_or("unknown");
            println!("  {:<9}   {:<12} {version}", "", "libfabric");
            println!("  {:<9}   {:<12} {}", "", "offers", f.providers.join(", "));
        }
    }
    println!("\n# limits");
    for i in &r.limits {
        println!("  {:<16} {:<24} {}", i.name, i.value, i.meaning);
    }
    println!("\n# environment (read at umq_init)");
    for v in &r.environment {
        let now = match &v.value {
            Some(value) => format!("={value}"),
            None => format!("unset, default {}", v.default),
        };
        println!("  {:<23} {:<20} {}", v.name, now, v.meaning);
    }
    println!("\n# flow control defaults");
    for i in &r.flow_control {
        println!("  {:<16} {:<24} {}", i.name, i.value, i.meaning);
    }
}

fn main() {
    let args = Args::parse();
    if umq_tools::print_man_or_completions(Args::command(), args.man, args.completions) {
        return;
    }
    let mut info = info::gather();
    if let Some(only) = args.provider.as_deref() {
        info.providers.retain(|p| p.name == only);
    }
    if args.json {
        println!("{}", to_json(&info));
    } else {
        print_text(&info);
    }
}
