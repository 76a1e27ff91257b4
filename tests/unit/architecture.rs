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
const PURE: [&str; 9] = [
    "lifecycle/",
    "engine/",
    "status.rs",
    "pass/plan.rs",
    "pass/retry.rs",
    "pass/shard_run/",
    "pass/shard_plan.rs",
    "pass/migrate.rs",
    "pass/report.rs",
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
const FORBIDDEN_PATHS: [&str; 24] = [
    "crate::seaweed",
    "crate::pass::actors",
    "crate::pass::coordinator",
    "crate::pass::driver",
    "crate::pass::prepare",
    "crate::pass::records",
    "crate::pass::options",
    "crate::pass::dispatch",
    "crate::pass::ports",
    "crate::pass::cluster",
    "crate::pass::gateways",
    "crate::pass::runner",
    "crate::pass::cluster_error",
    "crate::pass::log_streams",
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

/// Every `use` statement of `code` (comments and strings blanked): its byte
/// span from `use` to the `;`, and the tree after `use`.
fn use_statements(code: &str) -> Vec<(std::ops::Range<usize>, &str)> {
    let mut out = Vec::new();
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
        out.push((start..start + end, &code[start + 4..start + end]));
    }
    out
}

/// The violations in one file: `(line, what)`.
fn violations(rel: &str, text: &str) -> Vec<(usize, String)> {
    let code = blank_comments_and_strings(text);
    let mut found = Vec::new();
    let line_of = |byte: usize| code[..byte].matches('\n').count() + 1;
    // 1. `use` trees, expanded (including grouped and relative imports).
    for (span, tree) in use_statements(&code) {
        let start = span.start;
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

// No circles: the import graph between the files of src/ is a DAG.
//
// An edge runs from a file to the file that defines what it names: every
// `use` path and every inline path (`crate::…`, `super::…`, `self::…`, or a
// child module's name), resolved module by module down the tree, and through
// `pub use` re-exports to the file that really defines the item. A file
// naming an item its own ancestor module (a `mod.rs` or `lib.rs` above it)
// defines is not an edge: a parent holds its children. Test modules
// (`#[cfg(test)] mod …`) are left out: they may reach anywhere.

use std::collections::{BTreeMap, BTreeSet};

/// The module path of a file relative to the source root: `pass/report.rs`
/// → `["pass", "report"]`, `pass/mod.rs` → `["pass"]`, `lib.rs` → `[]`.
fn module_of(rel: &str) -> Vec<String> {
    let mut m: Vec<String> = rel
        .trim_end_matches(".rs")
        .split('/')
        .map(str::to_string)
        .collect();
    if matches!(m.last().map(String::as_str), Some("mod" | "lib" | "main")) {
        m.pop();
    }
    m
}

/// The file (relative to `root`) of module `m`, if it is one.
fn file_of(root: &Path, m: &[String]) -> Option<String> {
    if m.is_empty() {
        return Some("lib.rs".into());
    }
    let base = m.join("/");
    [format!("{base}.rs"), format!("{base}/mod.rs")]
        .into_iter()
        .find(|f| root.join(f).is_file())
}

/// `text` without its `#[cfg(test)]` modules (blanked, lines kept).
fn without_test_modules(code: &str) -> String {
    let mut out = code.to_string();
    let mut from = 0;
    while let Some(pos) = out[from..].find("#[cfg(test)]") {
        let start = from + pos;
        let after = out[start + 12..].trim_start();
        // Any visibility: a test module shared with other test modules is
        // `pub(crate)`, and still test code.
        let after = match after.strip_prefix("pub") {
            Some(rest) if rest.starts_with('(') => rest.split_once(')').map_or(rest, |r| r.1),
            Some(rest) => rest,
            None => after,
        };
        let is_mod = after.trim_start().starts_with("mod ");
        let Some(open) = out[start..].find(['{', ';']).map(|o| start + o) else {
            break;
        };
        if !is_mod || out.as_bytes()[open] == b';' {
            from = open + 1;
            continue;
        }
        let mut depth = 0;
        let mut end = out.len();
        for (i, c) in out[open..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = open + i + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        let blank: String = out[start..end]
            .chars()
            .map(|c| if c == '\n' { '\n' } else { ' ' })
            .collect();
        out.replace_range(start..end, &blank);
        from = end;
    }
    out
}

/// Every path the code of a file names: `use` trees expanded, and inline
/// paths with `::`.
fn named_paths(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut use_spans = Vec::new();
    for (span, tree) in use_statements(code) {
        out.extend(expand_use(tree));
        use_spans.push(span);
    }
    let mut offset = 0;
    for line in code.split_inclusive('\n') {
        let here = offset;
        offset += line.len();
        if use_spans.iter().any(|s| s.contains(&here)) {
            continue;
        }
        for word in line.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':')) {
            let word = word.trim_matches(':');
            if word.contains("::") {
                out.push(word.to_string());
            }
        }
    }
    out
}

/// The re-exports of a module file: item name → the path it re-exports.
fn reexports(code: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut at = 0;
    while let Some(pos) = code[at..].find("pub use ") {
        let start = at + pos;
        at = start + 8;
        let Some(end) = code[start..].find(';') else {
            break;
        };
        for p in expand_use(&code[start + 8..start + end]) {
            let name = match p.split_once(" as ") {
                Some((_, alias)) => alias.trim().to_string(),
                None => p.rsplit("::").next().unwrap_or(&p).to_string(),
            };
            let path = p.split(" as ").next().unwrap_or(&p).trim().to_string();
            out.insert(name, path);
        }
    }
    out
}

/// The file that defines what `path` (as written in the file of module
/// `from`) names, if it is a file of this crate.
fn resolve(
    root: &Path,
    code_of: &BTreeMap<String, String>,
    from: &[String],
    path: &str,
) -> Option<String> {
    resolve_within(root, code_of, from, path, 0)
}

/// [`resolve`], `depth` re-exports deep (a re-export loop gives up).
fn resolve_within(
    root: &Path,
    code_of: &BTreeMap<String, String>,
    from: &[String],
    path: &str,
    depth: usize,
) -> Option<String> {
    if depth > 8 {
        return None;
    }
    let mut segs: Vec<&str> = path.split("::").map(str::trim).collect();
    let mut module: Vec<String> = match segs.first().copied() {
        Some("crate") => {
            segs.remove(0);
            Vec::new()
        }
        Some("self") => {
            segs.remove(0);
            from.to_vec()
        }
        Some("super") => {
            let mut m = from.to_vec();
            while segs.first() == Some(&"super") {
                segs.remove(0);
                m.pop()?;
            }
            m
        }
        Some(first) => {
            // A child module of `from`, named without `self::`.
            let mut m = from.to_vec();
            m.push(first.to_string());
            file_of(root, &m)?;
            segs.remove(0);
            m
        }
        None => return None,
    };
    // Descend while the next segment is a module file.
    while let Some(seg) = segs.first() {
        let mut next = module.clone();
        next.push(seg.to_string());
        if file_of(root, &next).is_none() {
            break;
        }
        module = next;
        segs.remove(0);
    }
    let file = file_of(root, &module)?;
    // An item re-exported by a module file: follow it to its definition.
    if let Some(item) = segs.first()
        && let Some(target) = code_of.get(&file).map(|c| reexports(c))
        && let Some(p) = target.get(*item)
        && !p.starts_with("std::")
    {
        return resolve_within(root, code_of, &module, p, depth + 1);
    }
    Some(file)
}

/// The import graph of the crate under `root`: file → files it takes from.
fn import_graph(root: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    rust_files(root, &mut files);
    let code_of: BTreeMap<String, String> = files
        .iter()
        .map(|f| {
            let rel = f.strip_prefix(root).unwrap().to_string_lossy().into_owned();
            let text = fs::read_to_string(f).unwrap_or_else(|e| panic!("read {rel}: {e}"));
            (
                rel,
                without_test_modules(&blank_comments_and_strings(&text)),
            )
        })
        .collect();
    let mut graph = BTreeMap::new();
    for (rel, code) in &code_of {
        let from = module_of(rel);
        let ancestors: BTreeSet<String> = (0..from.len())
            .filter_map(|n| file_of(root, &from[..n]))
            .collect();
        let mut to = BTreeSet::new();
        for p in named_paths(code) {
            if let Some(t) = resolve(root, &code_of, &from, &p)
                && &t != rel
                && !ancestors.contains(&t)
            {
                to.insert(t);
            }
        }
        graph.insert(rel.clone(), to);
    }
    graph
}

/// The circles of `graph`: its strongly connected components of more than
/// one file (Tarjan), each sorted.
fn circles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct T<'a> {
        g: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(t: &mut T<'a>, v: &'a str) {
        let i = t.index.len();
        t.index.insert(v, i);
        t.low.insert(v, i);
        t.stack.push(v);
        t.on.insert(v);
        for w in t.g.get(v).into_iter().flatten() {
            let w = w.as_str();
            if !t.index.contains_key(w) {
                visit(t, w);
                let lw = t.low[w];
                let lv = t.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if t.on.contains(w) {
                let iw = t.index[w];
                let lv = t.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if t.low[v] == t.index[v] {
            let mut comp = Vec::new();
            while let Some(w) = t.stack.pop() {
                t.on.remove(w);
                comp.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                t.out.push(comp);
            }
        }
    }
    let mut t = T {
        g: graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in graph.keys() {
        if !t.index.contains_key(v.as_str()) {
            visit(&mut t, v);
        }
    }
    t.out.sort();
    t.out
}

fn describe(graph: &BTreeMap<String, BTreeSet<String>>, circle: &[String]) -> String {
    let mut lines = vec![format!("circle of {} files:", circle.len())];
    for a in circle {
        for b in graph[a].iter().filter(|b| circle.contains(b)) {
            lines.push(format!("  src/{a} -> src/{b}"));
        }
    }
    lines.join("\n")
}

#[test]
fn no_circles_between_files() {
    let graph = import_graph(&src());
    let found = circles(&graph);
    assert!(
        found.is_empty(),
        "files that import each other, directly or around a circle (ARCHITECTURE.md, \
         \"No circles\"); move the item that ties them into the lower file, or into a new \
         one both can take from:\n{}",
        found
            .iter()
            .map(|c| describe(&graph, c))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// A small crate on disk for the checker's own tests.
fn tree(name: &str, files: &[(&str, &str)]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("arch-{name}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    for (rel, text) in files {
        let p = dir.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, text).unwrap();
    }
    dir
}

#[test]
fn circle_checker_finds_direct_grouped_relative_reexported_and_inline_circles() {
    let root = tree(
        "circles",
        &[
            ("lib.rs", "pub mod a;\npub mod b;\npub mod c;\npub mod d;\n"),
            // a -> b by a grouped use; b -> a inline.
            ("a.rs", "use crate::{b::{B, Other}};\npub struct A;\n"),
            ("b.rs", "pub struct B;\nfn f() { let _ = crate::a::A; }\n"),
            // c/x -> d; d -> c/x by `super::` through the re-export in c/mod.rs.
            ("c/mod.rs", "pub mod x;\npub use x::X;\n"),
            ("c/x.rs", "use crate::d::D;\npub struct X;\n"),
            ("d.rs", "use super::c::X;\npub struct D;\n"),
        ],
    );
    let graph = import_graph(&root);
    let found = circles(&graph);
    assert_eq!(
        found,
        vec![
            vec!["a.rs".to_string(), "b.rs".to_string()],
            vec!["c/x.rs".to_string(), "d.rs".to_string()],
        ],
        "{graph:?}"
    );
    fs::remove_dir_all(root).unwrap();
}

#[test]
fn circle_checker_ignores_parents_tests_comments_and_one_way_imports() {
    let root = tree(
        "no-circles",
        &[
            ("lib.rs", "pub mod p;\npub mod q;\n"),
            // A child naming its parent's own item is not a circle.
            (
                "p/mod.rs",
                "pub mod kid;\npub mod other;\npub mod shared;\npub const K: u8 = 1;\nfn f() { kid::g(); }\n",
            ),
            ("p/kid.rs", "use super::K;\npub fn g() {}\n"),
            // q -> p one way; p's test modules and a comment name q.
            (
                "q.rs",
                "use crate::p::kid::g;\nuse crate::p::other::z;\nuse crate::p::shared::y;\n\
                 // crate::p::K in prose\npub fn h() { g(); z(); y() }\n",
            ),
            (
                "p/other.rs",
                "pub fn z() {}\n#[cfg(test)]\nmod tests {\n    use crate::q::h;\n}\n",
            ),
            // A test module other test modules share is test code too.
            (
                "p/shared.rs",
                "pub fn y() {}\n#[cfg(test)]\npub(crate) mod tests {\n    use crate::q::h;\n}\n",
            ),
        ],
    );
    let graph = import_graph(&root);
    assert!(circles(&graph).is_empty(), "{graph:?}");
    assert!(graph["q.rs"].contains("p/kid.rs"), "{graph:?}");
    fs::remove_dir_all(root).unwrap();
}

/// `graph` with each file replaced by its top-level module (`pass/report.rs`
/// → `pass`, `config.rs` → `config`); the crate root is left out.
fn module_graph(graph: &BTreeMap<String, BTreeSet<String>>) -> BTreeMap<String, BTreeSet<String>> {
    let top = |f: &str| {
        f.split('/')
            .next()
            .unwrap_or(f)
            .trim_end_matches(".rs")
            .to_string()
    };
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (from, to) in graph.iter().filter(|(f, _)| f.as_str() != "lib.rs") {
        let entry = out.entry(top(from)).or_default();
        for t in to.iter().filter(|t| t.as_str() != "lib.rs") {
            if top(t) != top(from) {
                entry.insert(top(t));
            }
        }
    }
    out
}

#[test]
fn no_circles_between_top_level_modules() {
    let graph = module_graph(&import_graph(&src()));
    let found = circles(&graph);
    assert!(
        found.is_empty(),
        "top-level modules that import each other (ARCHITECTURE.md, \"No circles\"):\n{}",
        found
            .iter()
            .map(|c| describe(&graph, c))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

// Rooms of one concept: no file of src/ holds more than MAX_FILE_LINES lines
// before its tests. A file past it has grown a second concept; cut it where
// the concepts part (ARCHITECTURE.md, "Rooms").

const MAX_FILE_LINES: usize = 800;

/// The lines of `code` before its first `#[cfg(test)]` item.
fn non_test_lines(code: &str) -> usize {
    code.lines()
        .take_while(|l| l.trim() != "#[cfg(test)]")
        .count()
}

/// Files (relative to `root`) that a `#[cfg(test)] mod name;` declares:
/// test code kept in a file of its own, and every file below it.
fn test_only_files(root: &Path, files: &[PathBuf]) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for f in files {
        let rel = f.strip_prefix(root).unwrap().to_string_lossy().into_owned();
        let dir = {
            let m = module_of(&rel);
            if m.is_empty() {
                String::new()
            } else {
                format!("{}/", m.join("/"))
            }
        };
        let text = fs::read_to_string(f).unwrap();
        let lines: Vec<&str> = text.lines().map(str::trim).collect();
        for w in lines.windows(2) {
            if w[0] != "#[cfg(test)]" {
                continue;
            }
            let decl = w[1]
                .trim_start_matches("pub(crate) ")
                .trim_start_matches("pub ");
            if let Some(name) = decl.strip_prefix("mod ").and_then(|d| d.strip_suffix(';')) {
                out.insert(format!("{dir}{name}.rs"));
                out.insert(format!("{dir}{name}/"));
            }
        }
    }
    out
}

/// Every file of `root` over `max` lines before its tests, with its count.
fn oversized(root: &Path, max: usize) -> Vec<(String, usize)> {
    let mut files = Vec::new();
    rust_files(root, &mut files);
    let tests = test_only_files(root, &files);
    files
        .iter()
        .filter_map(|f| {
            let rel = f.strip_prefix(root).unwrap().to_string_lossy().into_owned();
            let in_tests = tests
                .iter()
                .any(|t| rel == *t || (t.ends_with('/') && rel.starts_with(t.as_str())));
            let n = non_test_lines(&fs::read_to_string(f).unwrap());
            (!in_tests && n > max).then_some((rel, n))
        })
        .collect()
}

#[test]
fn no_file_over_800_lines_before_its_tests() {
    let big = oversized(&src(), MAX_FILE_LINES);
    assert!(
        big.is_empty(),
        "files over {MAX_FILE_LINES} lines before their tests (ARCHITECTURE.md, \"Rooms\"): \
         cut each where its concepts part: {big:?}"
    );
}

#[test]
fn size_check_counts_up_to_the_tests_and_skips_test_files() {
    let big = "fn a() {}\n".repeat(5);
    let root = tree(
        "sizes",
        &[
            ("lib.rs", "mod big;\nmod small;\n"),
            ("big.rs", &format!("{big}#[cfg(test)]\nmod tests;\n")),
            ("big/tests.rs", &big),
            (
                "small.rs",
                &format!("fn a() {{}}\n#[cfg(test)]\nmod t {{\n{big}}}\n"),
            ),
        ],
    );
    assert_eq!(oversized(&root, 4), vec![("big.rs".to_string(), 5)]);
    assert!(oversized(&root, 5).is_empty());
}
