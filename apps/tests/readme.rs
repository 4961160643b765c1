//! The README's headline table is what `rr-demo --from-json FILE --markdown` prints for the
//! results.json its marker names (`scripts/headline` writes it), not figures typed by hand.

use std::path::Path;
use std::process::Command;

#[test]
fn readme_headline_is_generated_from_its_results() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let (head, rest) = readme.split_once("<!-- headline:begin (generated: rr-demo --from-json ").expect("headline marker");
    assert!(!head.is_empty());
    let (file, rest) = rest.split_once(" --markdown) -->").expect("marker names its file");
    let (block, _) = rest.split_once("<!-- headline:end -->").expect("headline:end marker");
    assert!(root.join(file).is_file(), "{file}: the headline's results.json is not in the tree");
    let out = Command::new(env!("CARGO_BIN_EXE_rr-demo"))
        .current_dir(&root)
        .args(["--from-json", file, "--markdown"])
        .output()
        .expect("run rr-demo");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let generated = String::from_utf8(out.stdout).unwrap();
    assert!(generated.contains("| case |"), "{generated}");
    assert_eq!(
        block.trim(),
        generated.trim(),
        "README.md's headline differs from its results.json: run scripts/headline"
    );
}
