fn main() {
    // wasm-ld flags; a native build (the unit tests, `.ci/guests`) links with the host linker.
    if std::env::var("CARGO_CFG_TARGET_ARCH").as_deref() != Ok("wasm32") {
        return;
    }
    // The linker places the function table's entries from this index on, so the core module
    // declares a table of 2^24 elements (plus its functions): 128 MiB of host memory for an
    // instance, more than any real component asks for. The sandbox's table cap must refuse it
    // with or without the pooling allocator.
    println!("cargo:rustc-link-arg=--table-base=16777216");
}
