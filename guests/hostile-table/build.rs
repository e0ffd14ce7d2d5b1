fn main() {
    // The linker places the function table's entries from this index on, so the core module
    // declares a table of 2^24 elements (plus its functions): 128 MiB of host memory for an
    // instance, more than any real component asks for. The sandbox's table cap must refuse it
    // with or without the pooling allocator.
    println!("cargo:rustc-link-arg=--table-base=16777216");
}
