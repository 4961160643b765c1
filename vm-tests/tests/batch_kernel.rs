//! The port's XDP_GENERIC_XMIT_BATCH (option 10) path in our patched guest kernel:
//! `vm-tests batch --probe-only` boots it and checks that rr-server's port sets the option at
//! 1, 8, 32 and the TX budget, reads the value back, passes 1,000 checked requests and the byte
//! check at each size, stops with `frame audit: ok`, and that budget + 1 is refused.
//!
//! Skipped (with the reason on stderr) when not root, when the kernel has not been built
//! (`vm-tests/kernel/build.sh`) or when rr-server is not built.

use std::process::Command;

use vm_tests::{env::target_dir, kernel::built_record_path};

#[test]
fn option_10_in_the_patched_guest() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("SKIP option_10_in_the_patched_guest: needs root (namespaces, tap, QEMU)");
        return;
    }
    let target = target_dir();
    let rec = built_record_path(&target.join("vm"));
    if !rec.exists() {
        eprintln!(
            "SKIP option_10_in_the_patched_guest: the batched-xmit kernel is not built ({} is missing); \
             run vm-tests/kernel/build.sh first",
            rec.display()
        );
        return;
    }
    if !target.join("release").join("rr-server").exists() {
        eprintln!("SKIP option_10_in_the_patched_guest: target/release/rr-server is not built (cargo build --release -p apps --bins)");
        return;
    }
    let out = Command::new(env!("CARGO_BIN_EXE_vm-tests"))
        .args(["batch", "--probe-only"])
        .output()
        .expect("running vm-tests batch --probe-only");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "vm-tests batch --probe-only failed:\n{text}"
    );
    let row = |key: &str, word: &str| {
        text.lines()
            .any(|l| l.trim_start().starts_with(key) && l.contains(word))
    };
    for b in ["1", "8", "32"] {
        assert!(
            row(
                &format!("probe {b} "),
                &format!("accepted; read back Some({b})")
            ),
            "no accepted probe {b} in:\n{text}"
        );
    }
    assert!(
        row("over budget", "refused"),
        "budget + 1 was not refused:\n{text}"
    );
}
