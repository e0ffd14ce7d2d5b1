fn main() {
    // wasm-ld flags; a native build (the unit tests, `.ci/guests`) links with the host linker.
    if std::env::var("CARGO_CFG_TARGET_ARCH").as_deref() != Ok("wasm32") {
        return;
    }
    // A 64 KiB stack instead of Rust's default 1 MiB: this component does not recurse, and its
    // initial linear memory drops from 17 pages to a few, which is what a fresh instance must map
    // and reset. Fresh instances (after any trap, and wherever stores are not kept) get cheaper.
    println!("cargo:rustc-link-arg=-zstack-size=65536");
}
