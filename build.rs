//! Gives the shared library its soname, and compiles the network provider's two C engines:
//! each against its library's headers when they are installed (libfabric's, UCX's; the engine
//! then works wherever its library can be loaded at run time), else as a stub whose calls say
//! what to install.
use std::path::Path;

/// One engine: its C files, the header that says its library's headers are installed, and
/// what it is compiled with when they are.
struct Engine {
    files: &'static [&'static str],
    /// Its own headers, which its files include.
    own_headers: &'static [&'static str],
    /// A header under one of the include directories: "rdma/fabric.h".
    header: &'static str,
    define: &'static str,
    lib: &'static str,
}

const LIBFABRIC: Engine = Engine {
    files: &["src/transport/fabric/shim.c"],
    own_headers: &["src/transport/fabric/shim.h"],
    header: "rdma/fabric.h",
    define: "UMQ_HAVE_LIBFABRIC",
    lib: "umq_fabric_shim",
};

/// `UMQ_FABRIC_PROVIDER=ucx`.
const UCX: Engine = Engine {
    files: &[
        "src/transport/fabric/ucx.c",
        "src/transport/fabric/ucx_rma.c",
    ],
    own_headers: &["src/transport/fabric/shim.h", "src/transport/fabric/ucx.h"],
    header: "ucp/api/ucp.h",
    define: "UMQ_HAVE_UCX",
    lib: "umq_ucx_engine",
};

fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libumq.so.0");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rustc-check-cfg=cfg(umq_fabric_headers)");
    if compile(&LIBFABRIC) {
        println!("cargo:rustc-cfg=umq_fabric_headers");
    }
    compile(&UCX);
}

/// Compiles `e`; true when against its library's headers.
fn compile(e: &Engine) -> bool {
    for file in e.files.iter().chain(e.own_headers) {
        println!("cargo:rerun-if-changed={file}");
    }
    let headers = ["/usr/include", "/usr/local/include"]
        .into_iter()
        .find(|dir| Path::new(dir).join(e.header).exists());
    // Installing the headers adds files under their folder (or creates it): rebuild then.
    let folder = e.header.split('/').next().unwrap_or(e.header);
    for dir in ["/usr/include", "/usr/local/include"] {
        let inside = format!("{dir}/{folder}");
        let watched = if Path::new(&inside).exists() {
            inside
        } else {
            "/usr/include".to_string()
        };
        println!("cargo:rerun-if-changed={watched}");
    }
    let mut build = cc::Build::new();
    build
        .files(e.files)
        .warnings(true)
        .flag_if_supported("-Wno-unused-parameter")
        // The engines' functions are ours alone, linked into this library and never exported
        // from it: no other object may interpose them, so the compiler may inline its small
        // ones into their callers (a peer's lookup and a status's code, on every message).
        .flag_if_supported("-fno-semantic-interposition");
    if let Some(dir) = headers {
        build.define(e.define, None).include(dir);
    }
    build.compile(e.lib);
    headers.is_some()
}
