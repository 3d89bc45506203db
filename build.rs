// Gives the shared library its soname, so programs link against the ABI-stable libumq.so.0.
fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libumq.so.0");
}
