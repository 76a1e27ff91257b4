//! `s3-lifecycled rules check` as an operator runs it: the binary on the AWS
//! example documents (exit 0, JSON) and on one-defect documents (exit 2, every
//! error on its own line naming the rule and element).

use crate::common;

use common::{
    assert_quiet_on_closed_pipe, lifecycle_fixture_files, run_into_closed_pipe, run_raw,
    run_with_stdin,
};

#[tokio::test]
async fn aws_examples_are_accepted_with_a_compiled_view() {
    for f in lifecycle_fixture_files("aws") {
        let p = run_raw(&["rules", "check", f.to_str().unwrap()], &[]).await;
        let (code, out, err) = (p.code, p.stdout, p.stderr);
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

#[tokio::test]
async fn each_invalid_document_is_rejected_with_actionable_lines() {
    for f in lifecycle_fixture_files("invalid") {
        let p = run_raw(&["rules", "check", f.to_str().unwrap()], &[]).await;
        let (code, out) = (p.code, p.stdout);
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

#[tokio::test]
async fn stdin_is_read_with_dash() {
    let xml = b"<LifecycleConfiguration><Rule><ID>logs</ID><Status>Enabled</Status>\
                <Filter><Prefix>logs/</Prefix></Filter><Expiration><Days>30</Days></Expiration>\
                </Rule></LifecycleConfiguration>";
    let p = run_with_stdin(&["rules", "check", "-"], xml).await;
    let (code, out) = (p.code, p.stdout);
    assert_eq!(code, 0, "{out}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["rules"][0]["actions"][0]["rule_hash"], "0c8cc7219c442e3e");
    assert_eq!(v["rules"][0]["actions"][0]["path"], "replay");
}

#[tokio::test]
async fn missing_file_is_a_usage_error_naming_it() {
    let p = run_raw(&["rules", "check", "/nonexistent/lc.xml"], &[]).await;
    let (code, err) = (p.code, p.stderr);
    assert_eq!(code, 2);
    assert!(err.contains("/nonexistent/lc.xml"), "{err}");
}

#[tokio::test]
async fn rules_check_into_a_closed_pipe_panicked_with_exit_101() {
    let f = &lifecycle_fixture_files("aws")[0];
    let (status, err) = run_into_closed_pipe(&["rules", "check", f.to_str().unwrap()], &[]).await;
    assert_quiet_on_closed_pipe("rules check", status, &err);
    // The help lists the exit codes.
    let p = run_raw(&["--help"], &[]).await;
    assert!(
        p.stdout.contains("Exit codes:") && p.stdout.contains("141"),
        "{}",
        p.stdout
    );
}
