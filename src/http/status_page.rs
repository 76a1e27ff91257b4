//! The status snapshot the pass publishes (also served as `/status.json`) and
//! its server-rendered HTML page: service state, the running pass, and the
//! last pass with a shard table and a "Last run" card per bucket.
//!
//! Rendering is a pure function of the snapshot and `now` (for lags and
//! ages). Every value that reaches the page goes through [`escape`]: bucket
//! names, halt reasons and run ids are data, not markup.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::metrics::RunOutcome;

/// What the service is doing. Serialized in snake_case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum ServiceState {
    /// Loading configuration, connecting, reading cursors.
    #[default]
    Starting,
    /// Waiting for the next scheduled pass.
    Idle,
    /// A pass is running.
    Running,
    /// Draining in-flight deletes and saving cursors before exit.
    ShuttingDown,
}

impl ServiceState {
    /// Human label.
    pub fn as_str(self) -> &'static str {
        match self {
            ServiceState::Starting => "starting",
            ServiceState::Idle => "idle",
            ServiceState::Running => "running",
            ServiceState::ShuttingDown => "shutting down",
        }
    }
}

/// Deletes by outcome (the `LifecycleDelete` enum names plus `RPC_ERROR`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeleteCounts {
    /// DONE.
    pub done: u64,
    /// NOOP_RESOLVED (already gone, identity changed, …).
    pub noop_resolved: u64,
    /// SKIPPED_OBJECT_LOCK.
    pub skipped_object_lock: u64,
    /// RETRY_LATER (halts the shard).
    pub retry_later: u64,
    /// BLOCKED (halts the shard).
    pub blocked: u64,
    /// Transport failure after retries (halts the shard).
    pub rpc_error: u64,
    /// DRY_RUN: decided, not sent (`--dry-run` passes).
    #[serde(default)]
    pub dry_run: u64,
    /// Anything else (UNSPECIFIED, unknown names).
    pub other: u64,
}

impl DeleteCounts {
    /// Counts one delete by its metrics label (`DONE`, `RPC_ERROR`, …).
    pub fn record(&mut self, label: &str) {
        let slot = match label {
            "DONE" => &mut self.done,
            "NOOP_RESOLVED" => &mut self.noop_resolved,
            "SKIPPED_OBJECT_LOCK" => &mut self.skipped_object_lock,
            "RETRY_LATER" => &mut self.retry_later,
            "BLOCKED" => &mut self.blocked,
            "RPC_ERROR" => &mut self.rpc_error,
            "DRY_RUN" => &mut self.dry_run,
            _ => &mut self.other,
        };
        *slot = slot.saturating_add(1);
    }

    /// Sum of all outcomes (= deletes issued).
    pub fn total(&self) -> u64 {
        [
            self.done,
            self.noop_resolved,
            self.skipped_object_lock,
            self.retry_later,
            self.blocked,
            self.rpc_error,
            self.dry_run,
            self.other,
        ]
        .iter()
        .fold(0u64, |a, b| a.saturating_add(*b))
    }

    /// `(label, count)` for every outcome, in display order; the labels are
    /// the metrics/API names (`DONE`, …, `DRY_RUN`) and `other`.
    pub fn rows(&self) -> [(&'static str, u64); 8] {
        [
            ("DONE", self.done),
            ("NOOP_RESOLVED", self.noop_resolved),
            ("SKIPPED_OBJECT_LOCK", self.skipped_object_lock),
            ("RETRY_LATER", self.retry_later),
            ("BLOCKED", self.blocked),
            ("RPC_ERROR", self.rpc_error),
            ("DRY_RUN", self.dry_run),
            ("other", self.other),
        ]
    }
}

/// Where a shard is within a pass. Serialized in snake_case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum ShardPhase {
    /// Waiting for the walk or the stream to start.
    #[default]
    Waiting,
    /// Walking bucket listings (recovery or steady-state walk).
    Walking,
    /// Replaying the meta-log.
    Replaying,
    /// No new deletes; waiting for in-flight ones, then saving the cursor.
    Draining,
    /// Finished this pass.
    Done,
    /// Halted on an unresolved delete.
    Halted,
    /// Could not run this pass.
    Failed,
}

impl ShardPhase {
    /// Label, as serialized.
    pub fn as_str(self) -> &'static str {
        match self {
            ShardPhase::Waiting => "waiting",
            ShardPhase::Walking => "walking",
            ShardPhase::Replaying => "replaying",
            ShardPhase::Draining => "draining",
            ShardPhase::Done => "done",
            ShardPhase::Halted => "halted",
            ShardPhase::Failed => "failed",
        }
    }
}

/// One shard's row.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardSummary {
    /// Shard 0..15.
    pub shard: u8,
    /// Where the shard is in the pass (meaningful while a pass runs).
    #[serde(default)]
    pub phase: ShardPhase,
    /// When this shard's part of the pass started, ns since epoch; 0 = not yet.
    #[serde(default)]
    pub started_ns: i64,
    /// When it finished, ns since epoch; 0 = not finished.
    #[serde(default)]
    pub finished_ns: i64,
    /// How this shard's run ended; `None` while running.
    #[serde(default)]
    pub outcome: Option<RunOutcome>,
    /// Rule matches seen in this pass (due or not).
    #[serde(default)]
    pub matches: u64,
    /// Deletes sent and not yet answered.
    #[serde(default)]
    pub in_flight: u64,
    /// Saved cursor position, ns since epoch; 0 = cold (no cursor yet).
    pub cursor_ts_ns: i64,
    /// Last successful walk, ns since epoch; 0 = never.
    pub last_walked_ns: i64,
    /// Why the shard is halted, if it is.
    pub halt_reason: Option<String>,
    /// Supervisor restarts since the process started.
    pub restarts: u32,
    /// Meta-log events scanned in this pass.
    pub events_scanned: u64,
    /// Deletes in this pass by outcome.
    pub deletes: DeleteCounts,
}

/// One bucket's "Last run" card.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BucketSummary {
    /// Bucket name.
    pub bucket: String,
    /// When the pass started on this bucket, ns since epoch.
    pub started_ns: i64,
    /// When it finished, ns since epoch; 0 = not finished.
    pub finished_ns: i64,
    /// `completed`, `halted`, `truncated`, `failed`.
    pub outcome: Option<RunOutcome>,
    /// Meta-log events of this bucket scanned.
    pub events_scanned: u64,
    /// Deletes by outcome.
    pub deletes: DeleteCounts,
    /// Last successful walk of the bucket, ns since epoch; 0 = never.
    pub last_walked_ns: i64,
    /// Why the bucket's lifecycle configuration is not enforced, if so.
    pub config_error: Option<String>,
    /// Why a shard stopped enforcing this bucket in the pass, if one did.
    #[serde(default)]
    pub halt_reason: Option<String>,
    /// Oldest saved replay position of the bucket over all shards, ns since
    /// epoch; 0 = cold (no cursor yet).
    #[serde(default)]
    pub cursor_ts_ns: i64,
}

/// A pass in progress.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PassProgress {
    /// The pass id.
    pub run_id: String,
    /// Start, ns since epoch.
    pub started_ns: i64,
    /// Shards still running.
    pub shards_running: u32,
    /// Shards finished.
    pub shards_done: u32,
    /// Per-shard progress so far.
    pub shards: Vec<ShardSummary>,
}

/// A finished pass.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PassSummary {
    /// The pass id.
    pub run_id: String,
    /// Start, ns since epoch.
    pub started_ns: i64,
    /// End, ns since epoch.
    pub finished_ns: i64,
    /// How it ended.
    pub outcome: Option<RunOutcome>,
    /// One row per shard.
    pub shards: Vec<ShardSummary>,
    /// One card per bucket.
    pub buckets: Vec<BucketSummary>,
}

/// Everything the status page and `/status.json` show.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusSnapshot {
    /// What the service is doing.
    pub service_state: ServiceState,
    /// Next scheduled pass, ns since epoch, if known.
    pub next_pass_ns: Option<i64>,
    /// The running pass.
    pub current_pass: Option<PassProgress>,
    /// The last finished pass.
    pub last_pass: Option<PassSummary>,
}

/// HTML-escapes text for element content and quoted attribute values.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

/// `ns` since epoch as RFC 3339 UTC (seconds precision); `—` for 0.
pub fn format_time(ns: i64) -> String {
    if ns == 0 {
        return "—".into();
    }
    let secs = ns.div_euclid(1_000_000_000);
    match time::OffsetDateTime::from_unix_timestamp(secs)
        .ok()
        .and_then(|t| {
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()
        }) {
        Some(s) => s,
        None => format!("{ns} ns"),
    }
}

/// Age `now - then` as `1d 2h`, `3h 4m`, `5m 6s` or `7s`; `—` when `then`
/// is 0 (never) and `in the future` when the clocks disagree.
pub fn format_age(now_ns: i64, then_ns: i64) -> String {
    if then_ns == 0 {
        return "—".into();
    }
    let d = now_ns.saturating_sub(then_ns);
    if d < 0 {
        return "in the future".into();
    }
    let s = d / 1_000_000_000;
    let (days, h, m, sec) = (s / 86_400, (s / 3600) % 24, (s / 60) % 60, s % 60);
    if days > 0 {
        format!("{days}d {h}h")
    } else if h > 0 {
        format!("{h}h {m}m")
    } else if m > 0 {
        format!("{m}m {sec}s")
    } else {
        format!("{sec}s")
    }
}

fn outcome_str(o: Option<RunOutcome>) -> &'static str {
    o.map_or("running", RunOutcome::as_str)
}

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:1.5rem;color:#222;background:#fafafa}\
h1{font-size:1.4rem}h2{font-size:1.15rem;margin-top:2rem}\
table{border-collapse:collapse;background:#fff}th,td{border:1px solid #ddd;padding:.3rem .6rem;text-align:right}\
th{background:#eee}td.l,th.l{text-align:left}\
.cards{display:flex;flex-wrap:wrap;gap:1rem}\
.card{background:#fff;border:1px solid #ddd;border-radius:6px;padding:.8rem 1rem;min-width:16rem}\
.card h3{margin:.1rem 0 .5rem;font-size:1rem;word-break:break-all}\
.card dl{display:grid;grid-template-columns:auto auto;gap:.15rem .8rem;margin:0}.card dd{margin:0}\
.completed{color:#1a7f37}.halted,.failed{color:#cf222e}.truncated{color:#9a6700}\
.warn{color:#cf222e}";

/// Renders the status page. `now_ns` is used for lags and ages only.
pub fn render(s: &StatusSnapshot, now_ns: i64) -> String {
    let mut h = String::with_capacity(8 * 1024);
    // `write!` into a String cannot fail; results are ignored on purpose.
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta http-equiv=\"refresh\" content=\"10\">\
         <title>s3-lifecycled</title><style>{STYLE}</style></head><body>\n\
         <h1>s3-lifecycled</h1>\n<p>State: <strong id=\"state\">{}</strong>",
        escape(s.service_state.as_str())
    );
    if let Some(next) = s.next_pass_ns {
        let _ = write!(h, " · next pass {}", escape(&format_time(next)));
    }
    h.push_str(" · <a href=\"/status.json\">JSON</a> · <a href=\"/metrics\">metrics</a></p>\n");

    if let Some(p) = &s.current_pass {
        let _ = write!(
            h,
            "<h2>Current pass <code>{}</code></h2>\n<p>Started {} ({} ago) · shards running {} · done {}</p>\n",
            escape(&p.run_id),
            escape(&format_time(p.started_ns)),
            escape(&format_age(now_ns, p.started_ns)),
            p.shards_running,
            p.shards_done
        );
        shard_table(&mut h, &p.shards, now_ns);
    }

    match &s.last_pass {
        None => h.push_str("<h2>Last pass</h2>\n<p>No pass has finished yet.</p>\n"),
        Some(p) => {
            let outcome = outcome_str(p.outcome);
            let _ = write!(
                h,
                "<h2>Last pass <code>{}</code></h2>\n<p>Started {} · finished {} · outcome <span class=\"{o}\">{o}</span></p>\n",
                escape(&p.run_id),
                escape(&format_time(p.started_ns)),
                escape(&format_time(p.finished_ns)),
                o = escape(outcome)
            );
            h.push_str("<h3>Shards</h3>\n");
            shard_table(&mut h, &p.shards, now_ns);
            h.push_str("<h2>Last run per bucket</h2>\n<div class=\"cards\">\n");
            if p.buckets.is_empty() {
                h.push_str("<p>No buckets with lifecycle rules.</p>\n");
            }
            for b in &p.buckets {
                bucket_card(&mut h, b, now_ns);
            }
            h.push_str("</div>\n");
        }
    }
    h.push_str("</body></html>\n");
    h
}

fn shard_table(h: &mut String, shards: &[ShardSummary], now_ns: i64) {
    if shards.is_empty() {
        h.push_str("<p>No shard data yet.</p>\n");
        return;
    }
    h.push_str(
        "<table class=\"shards\"><thead><tr><th>shard</th><th>cursor lag</th><th>last walk</th>\
         <th class=\"l\">halt reason</th><th>restarts</th><th>events scanned</th>",
    );
    for (name, _) in DeleteCounts::default().rows() {
        let _ = write!(h, "<th>{}</th>", escape(name));
    }
    h.push_str("</tr></thead><tbody>\n");
    for r in shards {
        let lag = if r.cursor_ts_ns == 0 {
            "cold".to_string()
        } else {
            format_age(now_ns, r.cursor_ts_ns)
        };
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td class=\"l{}\">{}</td><td>{}</td><td>{}</td>",
            r.shard,
            escape(&lag),
            escape(&format_age(now_ns, r.last_walked_ns)),
            if r.halt_reason.is_some() { " warn" } else { "" },
            escape(r.halt_reason.as_deref().unwrap_or("—")),
            r.restarts,
            r.events_scanned
        );
        for (_, n) in r.deletes.rows() {
            let _ = write!(h, "<td>{n}</td>");
        }
        h.push_str("</tr>\n");
    }
    h.push_str("</tbody></table>\n");
}

fn bucket_card(h: &mut String, b: &BucketSummary, now_ns: i64) {
    let outcome = escape(outcome_str(b.outcome));
    let _ = write!(
        h,
        "<div class=\"card bucket\"><h3>{}</h3><dl>\
         <dt>start</dt><dd>{}</dd><dt>finish</dt><dd>{}</dd>\
         <dt>outcome</dt><dd class=\"{outcome}\">{outcome}</dd>\
         <dt>events scanned</dt><dd>{}</dd><dt>deletes issued</dt><dd>{}</dd>",
        escape(&b.bucket),
        escape(&format_time(b.started_ns)),
        escape(&format_time(b.finished_ns)),
        b.events_scanned,
        b.deletes.total()
    );
    for (name, n) in b.deletes.rows().into_iter().filter(|(_, n)| *n > 0) {
        let _ = write!(h, "<dt>&nbsp;&nbsp;{}</dt><dd>{n}</dd>", escape(name));
    }
    let _ = write!(
        h,
        "<dt>last walk</dt><dd>{} ({} ago)</dd>",
        escape(&format_time(b.last_walked_ns)),
        escape(&format_age(now_ns, b.last_walked_ns))
    );
    if let Some(e) = &b.config_error {
        let _ = write!(
            h,
            "<dt>config error</dt><dd class=\"warn\">{}</dd>",
            escape(e)
        );
    }
    h.push_str("</dl></div>\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_700_000_000_000_000_000;
    const MIN: i64 = 60_000_000_000;

    fn snapshot() -> StatusSnapshot {
        let mut deletes = DeleteCounts::default();
        deletes.record("DONE");
        deletes.record("DONE");
        deletes.record("RETRY_LATER");
        StatusSnapshot {
            service_state: ServiceState::Idle,
            next_pass_ns: Some(NOW + 60 * MIN),
            current_pass: None,
            last_pass: Some(PassSummary {
                run_id: "run-1".into(),
                started_ns: NOW - 10 * MIN,
                finished_ns: NOW - 5 * MIN,
                outcome: Some(RunOutcome::Halted),
                shards: vec![ShardSummary {
                    shard: 7,
                    cursor_ts_ns: NOW - 125 * MIN,
                    last_walked_ns: 0,
                    halt_reason: Some("RETRY_LATER <transport>".into()),
                    restarts: 2,
                    events_scanned: 1234,
                    deletes: deletes.clone(),
                    ..Default::default()
                }],
                buckets: vec![BucketSummary {
                    bucket: "<script>alert(1)</script>".into(),
                    started_ns: NOW - 10 * MIN,
                    finished_ns: NOW - 5 * MIN,
                    outcome: Some(RunOutcome::Completed),
                    events_scanned: 99,
                    deletes,
                    last_walked_ns: NOW - 3 * MIN,
                    config_error: None,
                    ..Default::default()
                }],
            }),
        }
    }

    #[test]
    fn escape_covers_markup_and_quotes() {
        assert_eq!(
            escape(r#"<a href="x">&'"#),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
    }

    #[test]
    fn page_escapes_user_data() {
        let page = render(&snapshot(), NOW);
        assert!(!page.contains("<script>"), "{page}");
        assert!(
            page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
            "{page}"
        );
        assert!(page.contains("RETRY_LATER &lt;transport&gt;"), "{page}");
    }

    #[test]
    fn page_shows_shard_row_and_bucket_card() {
        let page = render(&snapshot(), NOW);
        assert!(page.contains("<meta http-equiv=\"refresh\" content=\"10\">"));
        assert!(page.contains("<table class=\"shards\">"));
        // shard 7: lag 2h 5m, never walked, 2 restarts, 1234 events, 2 DONE, 1 RETRY_LATER.
        assert!(
            page.contains(
                "<tr><td>7</td><td>2h 5m</td><td>—</td><td class=\"l warn\">RETRY_LATER &lt;transport&gt;</td><td>2</td><td>1234</td><td>2</td><td>0</td><td>0</td><td>1</td>"
            ),
            "{page}"
        );
        assert!(page.contains("<div class=\"card bucket\">"));
        assert!(page.contains("<dt>deletes issued</dt><dd>3</dd>"), "{page}");
        assert!(
            page.contains("<dt>events scanned</dt><dd>99</dd>"),
            "{page}"
        );
        assert!(page.contains("(3m 0s ago)"), "{page}");
        assert!(page.contains("2023-11-14T22:03:20Z"), "{page}");
        assert!(
            page.contains("outcome <span class=\"halted\">halted</span>"),
            "{page}"
        );
    }

    #[test]
    fn empty_snapshot_renders() {
        let page = render(&StatusSnapshot::default(), NOW);
        assert!(page.contains("<strong id=\"state\">starting</strong>"));
        assert!(page.contains("No pass has finished yet."));
    }

    #[test]
    fn snapshot_round_trips_through_json() {
        let s = snapshot();
        let j = serde_json::to_string(&s).unwrap();
        assert!(j.contains("\"service_state\":\"idle\""), "{j}");
        assert!(j.contains("\"outcome\":\"halted\""), "{j}");
        let back: StatusSnapshot = serde_json::from_str(&j).unwrap();
        assert_eq!(back, s);
    }

    #[test]
    fn ages() {
        assert_eq!(format_age(NOW, 0), "—");
        assert_eq!(format_age(NOW, NOW + 1), "in the future");
        assert_eq!(format_age(NOW, NOW - 7_000_000_000), "7s");
        assert_eq!(format_age(NOW, NOW - 26 * 60 * MIN), "1d 2h");
        assert_eq!(format_time(0), "—");
    }

    #[test]
    fn delete_counts_map_labels() {
        let mut d = DeleteCounts::default();
        for l in [
            "DONE",
            "NOOP_RESOLVED",
            "SKIPPED_OBJECT_LOCK",
            "BLOCKED",
            "RPC_ERROR",
            "DRY_RUN",
            "UNSPECIFIED",
        ] {
            d.record(l);
        }
        assert_eq!(
            (
                d.done,
                d.noop_resolved,
                d.skipped_object_lock,
                d.blocked,
                d.rpc_error,
                d.dry_run,
                d.other,
                d.retry_later
            ),
            (1, 1, 1, 1, 1, 1, 1, 0)
        );
        assert_eq!(d.total(), 7);
    }
}
