//! `s3-lifecycled rules check` as an operator runs it: the binary on the AWS
//! example documents (exit 0, JSON) and on one-defect documents (exit 2, every
//! error on its own line naming the rule and element).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn fixtures(dir: &str) -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/lifecycle")
        .join(dir);
    let mut v: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "xml"))
        .collect();
    v.sort();
    assert!(!v.is_empty(), "no fixtures in {}", root.display());
    v
}

fn run(args: &[&str], stdin: Option<&[u8]>) -> (i32, String, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_s3-lifecycled"));
    cmd.args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    if let Some(input) = stdin {
        use std::io::Write;
        child.stdin.take().unwrap().write_all(input).unwrap();
    }
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn aws_examples_are_accepted_with_a_compiled_view() {
    for f in fixtures("aws") {
        let (code, out, err) = run(&["rules", "check", f.to_str().unwrap()], None);
        assert_eq!(code, 0, "{}: {out}{err}", f.display());
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["valid"], true);
        let rules = v["rules"].as_array().unwrap();
        assert!(!rules.is_empty(), "{}", f.display());
        for r in rules {
            for a in r["actions"].as_array().unwrap() {
                let hash = a["rule_hash"].as_str().unwrap();
                assert_eq!(hash.len(), 16);
                assert!(
                    hash.chars()
                        .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
                );
                assert!(["replay", "walker", "disabled"].contains(&a["path"].as_str().unwrap()));
            }
        }
    }
}

#[test]
fn each_invalid_document_is_rejected_with_actionable_lines() {
    for f in fixtures("invalid") {
        let (code, out, _) = run(&["rules", "check", f.to_str().unwrap()], None);
        assert_eq!(code, 2, "{} should be rejected: {out}", f.display());
        let lines: Vec<&str> = out.lines().filter(|l| !l.trim().is_empty()).collect();
        assert!(!lines.is_empty(), "{}: no error printed", f.display());
        for l in lines {
            // Each line is an error saying where and what; the lifecycle
            // fixture tests pin the exact rule and element per defect.
            assert!(
                l.starts_with("error: ") && l.len() > 30,
                "{}: unhelpful line {l:?}",
                f.display()
            );
            assert!(!l.contains("panicked"), "{}", f.display());
        }
    }
}

#[test]
fn stdin_is_read_with_dash() {
    let xml = b"<LifecycleConfiguration><Rule><ID>logs</ID><Status>Enabled</Status>\
                <Filter><Prefix>logs/</Prefix></Filter><Expiration><Days>30</Days></Expiration>\
                </Rule></LifecycleConfiguration>";
    let (code, out, _) = run(&["rules", "check", "-"], Some(xml));
    assert_eq!(code, 0, "{out}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["rules"][0]["actions"][0]["rule_hash"], "0c8cc7219c442e3e");
    assert_eq!(v["rules"][0]["actions"][0]["path"], "replay");
}

#[test]
fn missing_file_is_a_usage_error_naming_it() {
    let (code, _, err) = run(&["rules", "check", "/nonexistent/lc.xml"], None);
    assert_eq!(code, 2);
    assert!(err.contains("/nonexistent/lc.xml"), "{err}");
}
