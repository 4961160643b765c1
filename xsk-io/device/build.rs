//! Builds the XDP steering program `src/bpf/steer.bpf.c` with clang
//! (through libbpf-cargo) into `$OUT_DIR/steer.bpf.o` and, with deferred
//! ACKs (`-DDEFER_ACKS`), `$OUT_DIR/steer_acks.bpf.o`, and generates the
//! libbpf-rs skeleton `$OUT_DIR/steer.skel.rs` from it.
//!
//! `src/steer.rs` embeds the object file itself (`include_bytes!`) and
//! opens it with `libbpf_rs::ObjectBuilder`, which yields an owned
//! `Object`; the skeleton is generated alongside for tooling and for
//! anyone who wants the typed view, but the loader does not need it.
//!
//! Environment: `CLANG` overrides the clang binary (default: `clang` in
//! `$PATH`); `BPF_EXTRA_CFLAGS` adds whitespace-separated clang arguments.

use std::env;
use std::path::PathBuf;
use std::process::Command;

use libbpf_cargo::SkeletonBuilder;

const SRC: &str = "src/bpf/steer.bpf.c";

fn main() {
    println!("cargo:rerun-if-changed={SRC}");
    println!("cargo:rerun-if-env-changed=CLANG");
    println!("cargo:rerun-if-env-changed=BPF_EXTRA_CFLAGS");

    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR is set by cargo"));
    let clang = env::var_os("CLANG")
        .map(PathBuf::from)
        .unwrap_or_else(|| "clang".into());

    // Fail early and legibly if clang is not there: libbpf-cargo's own error
    // for a missing compiler is a bare "No such file or directory".
    match Command::new(&clang).arg("--version").output() {
        Ok(out) if out.status.success() => {}
        Ok(out) => panic!(
            "\n\nxsk-device: `{} --version` failed ({}): {}\n\
             xsk-device needs clang with the BPF target to build its XDP program ({SRC}).\n",
            clang.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim(),
        ),
        Err(e) => panic!(
            "\n\nxsk-device: cannot run clang ({}): {e}\n\
             xsk-device compiles its XDP steering program ({SRC}) with clang.\n\
             Install it (Debian/Ubuntu: `apt-get install clang libbpf-dev linux-libc-dev`)\n\
             or point the CLANG environment variable at a clang binary.\n",
            clang.display(),
        ),
    }

    // Only uapi headers are used (no vmlinux.h). Debian/Ubuntu keep <asm/...>
    // under the multiarch include directory, which clang does not search for
    // `-target bpf`.
    let mut args: Vec<String> = vec!["-Wall".into()];
    let arch = env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    let endian = env::var("CARGO_CFG_TARGET_ENDIAN").unwrap_or_default();
    let multiarch = match (arch.as_str(), endian.as_str()) {
        ("powerpc64", "little") => "powerpc64le".to_owned(),
        (a, _) => a.to_owned(),
    };
    let dir = format!("/usr/include/{multiarch}-linux-gnu");
    if PathBuf::from(&dir).is_dir() {
        args.push(format!("-I{dir}"));
    }
    if let Ok(extra) = env::var("BPF_EXTRA_CFLAGS") {
        args.extend(extra.split_whitespace().map(str::to_owned));
    }

    let obj = out_dir.join("steer.bpf.o");
    let skel = out_dir.join("steer.skel.rs");
    if let Err(e) = SkeletonBuilder::new()
        .source(SRC)
        .obj(&obj)
        .clang(&clang)
        .clang_args(&args)
        .build_and_generate(&skel)
    {
        panic!("\n\nxsk-device: building the XDP program {SRC} failed:\n{e:#}\n");
    }
    // The same program with deferred ACKs (see the comment at its top).
    args.push("-DDEFER_ACKS".into());
    if let Err(e) = SkeletonBuilder::new()
        .source(SRC)
        .obj(out_dir.join("steer_acks.bpf.o"))
        .clang(&clang)
        .clang_args(&args)
        .build()
    {
        panic!("\n\nxsk-device: building the XDP program {SRC} with -DDEFER_ACKS failed:\n{e:#}\n");
    }
}
