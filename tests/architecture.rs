//! The house rules, checked: the pure core (the modules ARCHITECTURE.md calls
//! pure) imports nothing from actors, adapters, metrics, the HTTP or admin
//! front ends, or the async runtimes. A file that breaks the rule fails this
//! test with the file, the line and the offending path.
//!
//! The check reads the source as text: comments and string literals are
//! blanked first, `use` trees are expanded (`crate::pass::{plan, actors}`
//! names `crate::pass::actors`), and `super::` paths inside `src/pass/` are
//! resolved, so a forbidden module cannot hide behind a grouped or relative
//! import.

use std::fs;
use std::path::{Path, PathBuf};

/// The pure modules: directories (every file below them) and single files,
/// relative to `src/`.
const PURE: [&str; 7] = [
    "lifecycle/",
    "engine/",
    "status.rs",
    "pass/plan.rs",
    "pass/retry.rs",
    "pass/shard_run.rs",
    "pass/migrate.rs",
];

/// Crates a pure module must not use: the actor system, gRPC, the async
/// runtime, and the observability and HTTP stacks.
const FORBIDDEN_CRATES: [&str; 8] = [
    "actix",
    "tonic",
    "tokio",
    "axum",
    "prometheus_client",
    "opentelemetry",
    "tracing_opentelemetry",
    "futures",
];

/// Module paths a pure module must not reach (prefixes of full paths).
const FORBIDDEN_PATHS: [&str; 15] = [
    "crate::seaweed",
    "crate::pass::actors",
    "crate::pass::coordinator",
    "crate::pass::dispatch",
    "crate::pass::ports",
    "crate::pass::observe",
    "crate::metrics",
    "crate::http",
    "crate::admin",
    "crate::service",
    "crate::cli",
    "crate::telemetry",
    "crate::clock",
    // Generated gRPC services and the wire types of other APIs. The filer's
    // plain messages (`filer_pb::Entry`, the meta-log events) are the core's
    // input and stay allowed: see ARCHITECTURE.md, "The pure core".
    "crate::pb::s3_lifecycle_pb",
    "crate::pb::admin",
];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The pure files, as `(path relative to src/, contents)`.
fn pure_files() -> Vec<(String, String)> {
    let root = src();
    let mut out = Vec::new();
    for m in PURE {
        let mut files = Vec::new();
        if let Some(dir) = m.strip_suffix('/') {
            rust_files(&root.join(dir), &mut files);
        } else {
            files.push(root.join(m));
        }
        assert!(!files.is_empty(), "pure module {m} has no files");
        for f in files {
            let rel = f
                .strip_prefix(&root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            let text = fs::read_to_string(&f).unwrap_or_else(|e| panic!("read {rel}: {e}"));
            out.push((rel, text));
        }
    }
    out
}

/// `text` with comments, string and char literals replaced by spaces (line
/// breaks kept, so line numbers stay right).
fn blank_comments_and_strings(text: &str) -> String {
    let b: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let keep = |c: char| if c == '\n' { '\n' } else { ' ' };
    while i < b.len() {
        let c = b[i];
        let next = b.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < b.len() && b[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == '/' && b.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if b[i] == '*' && b.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(keep(b[i]));
                    i += 1;
                }
            }
        } else if c == 'r' && (next == Some('"') || next == Some('#')) && is_raw_start(&b, i) {
            // r"…", r#"…"#
            let mut j = i + 1;
            let mut hashes = 0;
            while b[j] == '#' {
                hashes += 1;
                j += 1;
            }
            j += 1; // opening quote
            for &ch in &b[i..j] {
                out.push(keep(ch));
            }
            i = j;
            while i < b.len() {
                if b[i] == '"' && (0..hashes).all(|h| b.get(i + 1 + h) == Some(&'#')) {
                    for _ in 0..=hashes {
                        out.push(' ');
                    }
                    i += 1 + hashes;
                    break;
                }
                out.push(keep(b[i]));
                i += 1;
            }
        } else if c == '"' {
            out.push(' ');
            i += 1;
            while i < b.len() && b[i] != '"' {
                if b[i] == '\\' {
                    out.push(' ');
                    i += 1;
                }
                if i < b.len() {
                    out.push(keep(b[i]));
                    i += 1;
                }
            }
            out.push(' ');
            i += 1;
        } else if c == '\'' && is_char_literal(&b, i) {
            // 'x' or an escape such as '\n', '\'', '\u{1F600}'.
            let len = if b[i + 1] == '\\' {
                let mut j = i + 3;
                while j < b.len() && b[j] != '\'' {
                    j += 1;
                }
                j + 1 - i
            } else {
                3
            };
            for _ in 0..len.min(b.len() - i) {
                out.push(' ');
            }
            i += len;
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

fn is_raw_start(b: &[char], i: usize) -> bool {
    let prev_ident = i > 0 && (b[i - 1].is_alphanumeric() || b[i - 1] == '_');
    if prev_ident {
        return false;
    }
    let mut j = i + 1;
    while j < b.len() && b[j] == '#' {
        j += 1;
    }
    j < b.len() && b[j] == '"'
}

/// A `'` starting a char literal (`'a'`, `'\n'`, `'\''`), not a lifetime.
fn is_char_literal(b: &[char], i: usize) -> bool {
    matches!(
        (b.get(i + 1), b.get(i + 2)),
        (Some('\\'), _) | (Some(_), Some('\''))
    )
}

/// Every path a `use` tree names, fully expanded: `a::{b, c::{d, e}}` gives
/// `a::b`, `a::c::d`, `a::c::e`.
fn expand_use(tree: &str) -> Vec<String> {
    fn go(prefix: &str, s: &str, out: &mut Vec<String>) {
        let s = s.trim();
        if let Some(open) = s.find('{') {
            let head = s[..open].trim().trim_end_matches("::");
            let inner = &s[open + 1..s.rfind('}').unwrap_or(s.len())];
            let base = join(prefix, head);
            for part in split_top(inner) {
                go(&base, part, out);
            }
        } else {
            let path = s.split(" as ").next().unwrap_or(s).trim();
            if !path.is_empty() {
                out.push(join(prefix, path));
            }
        }
    }
    fn join(a: &str, b: &str) -> String {
        match (a.is_empty(), b.is_empty()) {
            (true, _) => b.to_string(),
            (_, true) => a.to_string(),
            _ => format!("{a}::{b}"),
        }
    }
    fn split_top(s: &str) -> Vec<&str> {
        let (mut depth, mut start, mut parts) = (0, 0, Vec::new());
        for (i, c) in s.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    parts.push(&s[start..i]);
                    start = i + 1;
                }
                _ => {}
            }
        }
        parts.push(&s[start..]);
        parts
    }
    let mut out = Vec::new();
    go("", tree, &mut out);
    out
}

/// Resolves `super::` and `self::` for a file at `rel` (relative to src/).
fn absolute(rel: &str, path: &str) -> String {
    let mut module: Vec<&str> = rel.trim_end_matches(".rs").split('/').collect();
    if module.last() == Some(&"mod") {
        module.pop();
    }
    let mut parts: Vec<&str> = path.split("::").map(str::trim).collect();
    if parts.first() == Some(&"self") {
        parts.remove(0);
        return std::iter::once("crate")
            .chain(module.iter().copied())
            .chain(parts)
            .collect::<Vec<_>>()
            .join("::");
    }
    if parts.first() != Some(&"super") {
        return parts.join("::");
    }
    while parts.first() == Some(&"super") {
        parts.remove(0);
        module.pop();
    }
    std::iter::once("crate")
        .chain(module.iter().copied())
        .chain(parts)
        .collect::<Vec<_>>()
        .join("::")
}

/// The violations in one file: `(line, what)`.
fn violations(rel: &str, text: &str) -> Vec<(usize, String)> {
    let code = blank_comments_and_strings(text);
    let mut found = Vec::new();
    let line_of = |byte: usize| code[..byte].matches('\n').count() + 1;
    // 1. `use` trees, expanded (including grouped and relative imports).
    let mut at = 0;
    while let Some(pos) = code[at..].find("use ") {
        let start = at + pos;
        at = start + 4;
        let before = code[..start].chars().last();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let Some(end) = code[start..].find(';') else {
            break;
        };
        let tree = &code[start + 4..start + end];
        for p in expand_use(tree) {
            let abs = absolute(rel, &p);
            if let Some(why) = forbidden(&abs) {
                found.push((line_of(start), format!("use {abs} ({why})")));
            }
        }
    }
    // 2. Inline paths anywhere in the code (`crate::metrics::X`, `tokio::spawn`).
    for (i, line) in code.lines().enumerate() {
        for word in line.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':')) {
            if word.is_empty() || !word.contains("::") {
                continue;
            }
            let abs = absolute(rel, word.trim_start_matches("::"));
            if let Some(why) = forbidden(&abs) {
                let item = (i + 1, format!("{abs} ({why})"));
                if !found.iter().any(|(l, w)| *l == item.0 && w.contains(&abs)) {
                    found.push(item);
                }
            }
        }
    }
    found
}

fn forbidden(path: &str) -> Option<&'static str> {
    let root = path.split("::").next().unwrap_or("");
    if FORBIDDEN_CRATES.contains(&root) {
        return Some("runtime, actor, gRPC or observability crate");
    }
    for f in FORBIDDEN_PATHS {
        if path == f || path.starts_with(&format!("{f}::")) {
            return Some("actor, adapter, front end or generated service module");
        }
    }
    let generated_service = path.starts_with("crate::pb::")
        && path
            .split("::")
            .any(|seg| seg.ends_with("_client") || seg.ends_with("_server"));
    generated_service.then_some("generated gRPC client or server")
}

#[test]
fn pure_modules_import_no_actor_adapter_or_front_end() {
    let mut report = Vec::new();
    for (rel, text) in pure_files() {
        for (line, what) in violations(&rel, &text) {
            report.push(format!("src/{rel}:{line}: {what}"));
        }
    }
    assert!(
        report.is_empty(),
        "the pure core must stay pure (ARCHITECTURE.md, \"The pure core\"); move the type it \
         needs into a pure module, or convert at the adapter:\n{}",
        report.join("\n")
    );
}

#[test]
fn architecture_md_names_every_pure_module() {
    let doc = fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("ARCHITECTURE.md"))
        .expect("ARCHITECTURE.md");
    let section = doc
        .split("## The pure core")
        .nth(1)
        .expect("ARCHITECTURE.md has a \"## The pure core\" section");
    let section = section.split("\n## ").next().unwrap_or(section);
    for m in PURE {
        let name = format!(
            "`{}`",
            m.trim_end_matches('/')
                .trim_end_matches(".rs")
                .replace('/', "::")
        );
        assert!(
            section.contains(&name),
            "ARCHITECTURE.md's pure-core section does not name {name}"
        );
    }
}

// The checker itself: each way of smuggling in a forbidden module is caught,
// and comments, strings and allowed imports are not.

#[test]
fn checker_catches_plain_grouped_relative_and_inline_imports() {
    let cases = [
        ("use actix::prelude::*;", "actix::prelude::*"),
        ("use tokio::sync::oneshot;", "tokio::sync::oneshot"),
        (
            "use crate::pass::{plan, dispatch::CallResult};",
            "crate::pass::dispatch::CallResult",
        ),
        (
            "use super::ports::ClusterPort;",
            "crate::pass::ports::ClusterPort",
        ),
        (
            "use crate::seaweed::cursor::ShardCursor;",
            "crate::seaweed::cursor::ShardCursor",
        ),
        (
            "fn f() { let _ = crate::metrics::Metrics::new(); }",
            "crate::metrics::Metrics::new",
        ),
        (
            "use crate::pb::filer_pb::seaweed_filer_client::SeaweedFilerClient;",
            "generated gRPC client",
        ),
        (
            "use crate::pb::s3_lifecycle_pb;",
            "crate::pb::s3_lifecycle_pb",
        ),
        (
            "use crate::{engine::Nanos, http::escape};",
            "crate::http::escape",
        ),
    ];
    for (src, expect) in cases {
        let v = violations("pass/shard_run.rs", src);
        assert!(
            v.iter().any(|(_, w)| w.contains(expect)),
            "{src:?} should be flagged with {expect:?}, got {v:?}"
        );
    }
}

#[test]
fn checker_ignores_comments_strings_and_allowed_imports() {
    let src = r##"
//! Talks about actix and tokio::spawn in prose only.
use crate::engine::{Match, Nanos};
use crate::pb::filer_pb::Entry;
use super::plan::PassPlan;
/* crate::metrics::Metrics in a block comment */
fn f() -> &'static str {
    let _c = '"';
    let _s = "crate::seaweed::filer";
    let _r = r#"use tokio::time;"#;
    "done"
}
"##;
    let v = violations("pass/shard_run.rs", src);
    assert!(v.is_empty(), "{v:?}");
}

#[test]
fn relative_paths_resolve_against_the_file() {
    assert_eq!(
        absolute("pass/shard_run.rs", "super::plan::PassPlan"),
        "crate::pass::plan::PassPlan"
    );
    assert_eq!(
        absolute("engine/mod.rs", "self::route::Match"),
        "crate::engine::route::Match"
    );
    assert_eq!(
        absolute("engine/route.rs", "super::super::metrics"),
        "crate::metrics"
    );
}
