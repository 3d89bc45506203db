//! Gives the shared library its soname, and compiles the network provider's two C engines:
//! each against its library's headers when they are installed (libfabric's, UCX's; the engine
//! then works wherever its library can be loaded at run time), else as a stub whose calls say
//! what to install.
use std::path::Path;

const SHIM: &str = "src/transport/fabric/shim.c";
const SHIM_H: &str = "src/transport/fabric/shim.h";
const UCX: &str = "src/transport/fabric/ucx.c";

fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libumq.so.0");
    println!("cargo:rerun-if-changed={SHIM}");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rustc-check-cfg=cfg(umq_fabric_headers)");
    let headers = ["/usr/include", "/usr/local/include"]
        .into_iter()
        .find(|dir| Path::new(dir).join("rdma/fabric.h").exists());
    // Installing libfabric-dev adds files under rdma/ (or creates it): rebuild then.
    for dir in ["/usr/include/rdma", "/usr/local/include/rdma"] {
        let watched = if Path::new(dir).exists() {
            dir
        } else {
            "/usr/include"
        };
        println!("cargo:rerun-if-changed={watched}");
    }
    let mut build = cc::Build::new();
    build
        .file(SHIM)
        .warnings(true)
        .flag_if_supported("-Wno-unused-parameter");
    if let Some(dir) = headers {
        build.define("UMQ_HAVE_LIBFABRIC", None).include(dir);
        println!("cargo:rustc-cfg=umq_fabric_headers");
    }
    build.compile("umq_fabric_shim");
    compile_ucx_engine();
}

/// The network provider's UCX engine (`UMQ_FABRIC_PROVIDER=ucx`): against UCX's headers when
/// they are installed (it then works wherever libucp.so.0 can be loaded), else as a stub.
fn compile_ucx_engine() {
    println!("cargo:rerun-if-changed={UCX}");
    println!("cargo:rerun-if-changed={SHIM_H}");
    let headers = ["/usr/include", "/usr/local/include"]
        .into_iter()
        .find(|dir| Path::new(dir).join("ucp/api/ucp.h").exists());
    for dir in ["/usr/include/ucp", "/usr/local/include/ucp"] {
        let watched = if Path::new(dir).exists() {
            dir
        } else {
            "/usr/include"
        };
        println!("cargo:rerun-if-changed={watched}");
    }
    let mut build = cc::Build::new();
    build
        .file(UCX)
        .warnings(true)
        .flag_if_supported("-Wno-unused-parameter");
    if let Some(dir) = headers {
        build.define("UMQ_HAVE_UCX", None).include(dir);
    }
    build.compile("umq_ucx_engine");
}
