//! `umq-info`: what this libumq and this machine offer, as `fi_info` and `ucx_info -d` report
//! theirs. The library gathers it (`umq::info`); this program prints it as text or JSON.

use clap::Parser;
use serde::Serialize;
use umq::info::{self, Info};

/// Show libumq's version and ABI, every transport provider and whether it can be used on this
/// machine (and why not), the limits, the environment variables the library reads and the
/// flow-control defaults.
#[derive(Parser)]
#[command(name = "umq-info", version)]
struct Args {
    /// One JSON object instead of text.
    #[arg(long)]
    json: bool,
    /// Only this provider (loopback, shm or fabric).
    #[arg(short, long, value_parser = ["loopback", "shm", "fabric"])]
    provider: Option<String>,
}

#[derive(Serialize)]
struct Report {
    version: &'static str,
    abi_revision: &'static str,
    functions: Vec<&'static str>,
    extensions: Vec<&'static str>,
    providers: Vec<Provider>,
    limits: Vec<Item>,
    environment: Vec<Variable>,
    flow_control: Vec<Item>,
}

#[derive(Serialize)]
struct Provider {
    name: &'static str,
    description: &'static str,
    usable: bool,
    why_not: Option<String>,
    checks: Vec<Check>,
    #[serde(skip_serializing_if = "Option::is_none")]
    libfabric: Option<Libfabric>,
}

#[derive(Serialize)]
struct Check {
    name: &'static str,
    ok: bool,
    detail: String,
}

#[derive(Serialize)]
struct Libfabric {
    version: Option<String>,
    providers: Vec<String>,
}

#[derive(Serialize)]
struct Item {
    name: &'static str,
    value: String,
    meaning: &'static str,
}

#[derive(Serialize)]
struct Variable {
    name: &'static str,
    value: Option<String>,
    default: String,
    meaning: &'static str,
}

fn report(info: Info, only: Option<&str>) -> Report {
    let item = |i: info::Item| Item {
        name: i.name,
        value: i.value,
        meaning: i.meaning,
    };
    Report {
        version: info.version,
        abi_revision: info.abi_revision,
        functions: info::UMQ_FUNCTIONS.to_vec(),
        extensions: info::EXTENSION_FUNCTIONS.to_vec(),
        providers: info
            .providers
            .into_iter()
            .filter(|p| only.is_none_or(|o| o == p.name))
            .map(|p| Provider {
                name: p.name,
                description: p.what,
                usable: p.usable,
                why_not: p.why_not,
                checks: p
                    .checks
                    .into_iter()
                    .map(|c| Check {
                        name: c.name,
                        ok: c.ok,
                        detail: c.detail,
                    })
                    .collect(),
                libfabric: p.libfabric.map(|o| Libfabric {
                    version: o.version,
                    providers: o.providers,
                }),
            })
            .collect(),
        limits: info.limits.into_iter().map(item).collect(),
        environment: info
            .environment
            .into_iter()
            .map(|v| Variable {
                name: v.name,
                value: v.value,
                default: v.default,
                meaning: v.meaning,
            })
            .collect(),
        flow_control: info.flow_control.into_iter().map(item).collect(),
    }
}

fn print_text(r: &Report) {
    println!("# libumq {}", r.version);
    println!(
        "# ABI: {} ({} functions; extensions: {})",
        r.abi_revision,
        r.functions.len(),
        r.extensions.join(", ")
    );
    println!("\n# providers");
    for p in &r.providers {
        let state = if p.usable { "usable" } else { "not usable" };
        println!("  {:<9} {:<11} {}", p.name, state, p.description);
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
    let r = report(info::gather(), args.provider.as_deref());
    if args.json {
        println!(
            "{}",
            serde_json::to_string(&r).expect("a report serialises")
        );
    } else {
        print_text(&r);
    }
}
