fn main() {
    // A 64 KiB stack instead of Rust's default 1 MiB: this component does not recurse, and its
    // initial linear memory drops from 17 pages to a few, which is what a fresh instance must map
    // and reset. Fresh instances (after any trap, and wherever stores are not kept) get cheaper.
    println!("cargo:rustc-link-arg=-zstack-size=65536");
}
