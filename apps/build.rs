//! Builds the benchmarks' BPF accountant `src/bpf/netrx.bpf.c` into
//! `$OUT_DIR/netrx.bpf.o` (embedded by `src/netrx.rs`). clang and the include
//! directories are found as in xsk-io's build script, which has already
//! checked for clang and explains a missing one.

use std::env;
use std::path::PathBuf;

use libbpf_cargo::SkeletonBuilder;

const SRC: &str = "src/bpf/netrx.bpf.c";

fn main() {
    println!("cargo:rerun-if-changed={SRC}");
    println!("cargo:rerun-if-env-changed=CLANG");
    println!("cargo:rerun-if-env-changed=BPF_EXTRA_CFLAGS");
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR is set by cargo"));
    let clang = env::var_os("CLANG").map(PathBuf::from).unwrap_or_else(|| "clang".into());

    let mut args: Vec<String> = vec!["-Wall".into()];
    // <asm/...> lives under the multiarch include directory on Debian, which
    // clang does not search for `-target bpf`.
    let arch = env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    let dir = format!("/usr/include/{arch}-linux-gnu");
    if PathBuf::from(&dir).is_dir() {
        args.push(format!("-I{dir}"));
    }
    if let Ok(extra) = env::var("BPF_EXTRA_CFLAGS") {
        args.extend(extra.split_whitespace().map(str::to_owned));
    }
    if let Err(e) = SkeletonBuilder::new()
        .source(SRC)
        .obj(out_dir.join("netrx.bpf.o"))
        .clang(&clang)
        .clang_args(&args)
        .build()
    {
        panic!("\n\napps: building the BPF accountant {SRC} failed:\n{e:#}\n");
    }
}
