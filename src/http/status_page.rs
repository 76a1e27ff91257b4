//! The status snapshot the pass publishes (also served as `/status.json`) and
//! its server-rendered HTML page: service state, the running pass, and the
//! last pass with a shard table and a "Last run" card per bucket, each next
//! to its forecast chart, for the buckets that most need a look
//! (docs/forecast.md#status-page).
//!
//! Rendering is a pure function of the snapshot and `now` (for lags and
//! ages). Every value that reaches the page goes through [`escape`]: bucket
//! names, halt reasons and run ids are data, not markup.

use std::fmt::Write as _;

use crate::engine::DeleteOutcome;
use crate::engine::forecast::{Count, Forecast, RuleForecast};
use crate::status::{
    BucketSummary, ShardSummary, StatusSnapshot, format_age, format_time, outcome_label,
};

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

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:1.5rem;color:#222;background:#fafafa}\
h1{font-size:1.4rem}h2{font-size:1.15rem;margin-top:2rem}\
table{border-collapse:collapse;background:#fff}th,td{border:1px solid #ddd;padding:.3rem .6rem;text-align:right}\
th{background:#eee}td.l,th.l{text-align:left}\
.cards{display:flex;flex-wrap:wrap;gap:1rem}\
.card{background:#fff;border:1px solid #ddd;border-radius:6px;padding:.8rem 1rem;min-width:16rem}\
.card h3{margin:.1rem 0 .5rem;font-size:1rem;word-break:break-all}\
.card dl{display:grid;grid-template-columns:auto auto;gap:.15rem .8rem;margin:0}.card dd{margin:0}\
.completed{color:#1a7f37}.halted,.failed{color:#cf222e}.truncated{color:#9a6700}\
.warn{color:#cf222e}\
.forecast-chart .bar.day{fill:#0969da}.forecast-chart .bar.overdue{fill:#cf222e}";

/// At most this many buckets get cards; the rest are counted. At about 6 KB
/// of cards a bucket, a page of every bucket was 21 MB with 3,334 buckets
/// (docs/forecast.md#status-page).
pub const BUCKET_CARDS: usize = 100;

/// Renders the status page: with `bucket`, that bucket's cards in place of
/// the [`BUCKET_CARDS`] that most need a look. `now_ns` is used for lags and
/// ages only.
pub fn render(s: &StatusSnapshot, now_ns: i64, bucket: Option<&str>) -> String {
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
    if let Some(why) = &s.standby_reason {
        let _ = write!(h, " ({})", escape(why));
    }
    if let Some(next) = s.next_pass_ns {
        let _ = write!(h, " · next pass {}", escape(&format_time(next)));
    }
    h.push_str(" · <a href=\"/status.json\">JSON</a> · <a href=\"/metrics\">metrics</a></p>\n");

    if !s.paused.is_empty() {
        h.push_str(
            "<h2>Paused buckets</h2>\n<p>Passes leave these alone; their matches stay pending \
             until <code>s3-lifecycled resume BUCKET</code>.</p>\n<table id=\"paused\"><tr>\
             <th class=\"l\">bucket</th><th class=\"l\">paused since</th><th class=\"l\">reason</th></tr>\n",
        );
        for p in &s.paused {
            let _ = writeln!(
                h,
                "<tr class=\"paused\"><td class=\"l\">{}</td><td class=\"l\">{} ({} ago)</td><td class=\"l\">{}</td></tr>",
                escape(&p.bucket),
                escape(&format_time(p.paused_ns)),
                escape(&format_age(now_ns, p.paused_ns)),
                escape(&p.reason)
            );
        }
        h.push_str("</table>\n");
    }

    if !s.stale_buckets.is_empty() {
        // Rules accepted but not enforced: the most common lifecycle complaint.
        let _ = write!(
            h,
            "<h2 id=\"stale\">Buckets without a completed pass in {}</h2>\n\
             <p>These buckets have lifecycle rules, but no pass finished them on every shard lately: \
             their rules are not being enforced.</p>\n<table><tr><th>bucket</th><th>last completed pass</th></tr>\n",
            escape(
                &humantime::format_duration(std::time::Duration::from_secs(
                    u64::try_from(s.stale_after_ns / 1_000_000_000).unwrap_or(0)
                ))
                .to_string()
            )
        );
        for b in s.stale_buckets.iter().take(100) {
            let when = if b.last_completed_ns == 0 {
                "never".to_string()
            } else {
                format!(
                    "{} ({} ago)",
                    format_time(b.last_completed_ns),
                    format_age(now_ns, b.last_completed_ns)
                )
            };
            let _ = writeln!(
                h,
                "<tr><td>{}</td><td class=\"failed\">{}</td></tr>",
                escape(&b.bucket),
                escape(&when)
            );
        }
        if s.stale_buckets.len() > 100 {
            let _ = writeln!(
                h,
                "<tr><td colspan=\"2\">… and {} more (see /status.json)</td></tr>",
                s.stale_buckets.len() - 100
            );
        }
        h.push_str("</table>\n");
    }

    if let Some(g) = &s.go_worker {
        let _ = writeln!(
            h,
            "<h2 id=\"go-worker\">Another lifecycle worker</h2>\n<p class=\"failed\">The Go \
             s3_lifecycle worker ran on shards {} since this service's last pass over them (its \
             cursor files were last written {} ago). Two enforcers keep different cursors and \
             delete by different rules: disable job type s3_lifecycle in <code>weed admin</code> \
             (and on <code>weed mini</code>), take it off <code>weed worker -jobType=</code>, stop \
             any cron'd <code>s3.lifecycle.run-shard</code>.</p>",
            escape(&crate::engine::shard::shards_label(&g.shards)),
            escape(&format_age(now_ns, g.last_write_ns))
        );
    }

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
            let outcome = outcome_label(p.outcome);
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
            if let Some(space) = &p.space {
                space_table(&mut h, space);
            }
            bucket_cards(&mut h, p, s.forecast.as_ref(), now_ns, bucket);
        }
    }
    if let Some(r) = &s.ttl_audit {
        ttl_audit_section(&mut h, r);
    }
    h.push_str("</body></html>\n");
    h
}

/// One bucket of the last pass or the forecast.
#[derive(Default)]
struct BucketRow<'a> {
    name: &'a str,
    summary: Option<&'a BucketSummary>,
    rules: Vec<&'a RuleForecast>,
}

impl BucketRow<'_> {
    /// How much it needs a look, larger first: stopped (halted, failed,
    /// held, a bad document), then overdue, deletes, pending.
    fn rank(&self) -> (bool, u64, u64, u64) {
        let stopped = self.summary.is_some_and(|b| {
            b.outcome
                .is_some_and(|o| o != crate::status::RunOutcome::Completed)
                || b.config_error.is_some()
                || b.held_reason.is_some()
                || b.halt_reason.is_some()
        });
        let deletes = self.summary.map_or(0, |b| b.deletes.total());
        let overdue = self.rules.iter().map(|x| x.overdue.objects).sum();
        let pending = self.rules.iter().map(|x| x.pending()).sum();
        (stopped, overdue, deletes, pending)
    }
}

/// The "Last run per bucket" section: the buckets that most need a look
/// first, [`BUCKET_CARDS`] of them (or only `only`), and a count of the rest.
fn bucket_cards(
    h: &mut String,
    p: &crate::status::PassSummary,
    f: Option<&Forecast>,
    now_ns: i64,
    only: Option<&str>,
) {
    let mut rows: std::collections::BTreeMap<&str, BucketRow<'_>> = p
        .buckets
        .iter()
        .map(|b| {
            let row = BucketRow {
                name: &b.bucket,
                summary: Some(b),
                rules: Vec::new(),
            };
            (row.name, row)
        })
        .collect();
    // Buckets the pass left alone (paused) still have a forecast.
    for r in f.iter().flat_map(|f| &f.rules) {
        let name = r.bucket.as_str();
        let row = rows.entry(name).or_insert_with(|| BucketRow {
            name,
            ..Default::default()
        });
        row.rules.push(r);
    }
    let mut rows: Vec<BucketRow<'_>> = rows.into_values().collect();
    // Stable: equal ranks stay in name order.
    rows.sort_by_cached_key(|r| std::cmp::Reverse(r.rank()));
    h.push_str("<h2>Last run per bucket</h2>\n<div class=\"cards\">\n");
    if rows.is_empty() {
        h.push_str("<p>No buckets with lifecycle rules.</p>\n");
    }
    let total = rows.len();
    let shown: Vec<&BucketRow<'_>> = match only {
        Some(name) => rows.iter().filter(|r| r.name == name).collect(),
        None => rows.iter().take(BUCKET_CARDS).collect(),
    };
    for r in &shown {
        if let Some(b) = r.summary {
            bucket_card(h, b, now_ns);
        }
        if let Some(f) = f {
            forecast_card(h, f, r.name, &r.rules);
        }
    }
    h.push_str("</div>\n");
    match only {
        Some(name) if shown.is_empty() => {
            let _ = writeln!(
                h,
                "<p class=\"more\">No bucket {} in the last pass or the forecast.</p>",
                escape(name)
            );
        }
        Some(_) => {}
        None if total > shown.len() => {
            let _ = writeln!(
                h,
                "<p class=\"more\">{} more buckets: these {} need a look most (stopped, then \
                 overdue, deleting, due soon). Add <code>?bucket=NAME</code> to the address for \
                 any one; <code>/status.json</code> has them all.</p>",
                total - shown.len(),
                shown.len()
            );
        }
        None => {}
    }
}

/// The last legacy-TTL audit: each TTL outside the lifecycle documents, its
/// conflicts and its fix (docs/ttl-audit.md).
fn ttl_audit_section(h: &mut String, r: &crate::engine::audit::AuditReport) {
    let _ = writeln!(
        h,
        "<h2>TTL audit</h2>\n<p>{} buckets audited at {} · {} findings, {} contradict a rule</p>",
        r.buckets,
        escape(&format_time(r.at_ns)),
        r.findings.len(),
        r.conflicting().count()
    );
    if !r.findings.is_empty() {
        h.push_str(
            "<table id=\"ttl-audit\"><tr><th class=\"l\">bucket</th><th class=\"l\">source</th>\
             <th>ttl</th><th class=\"l\">what</th><th class=\"l\">conflicts</th><th class=\"l\">fix</th></tr>\n",
        );
    }
    for f in &r.findings {
        let conflicts: Vec<String> = f.conflicts.iter().map(|c| escape(&c.to_string())).collect();
        let _ = writeln!(
            h,
            "<tr data-bucket=\"{b}\"><td class=\"l\">{b}</td><td class=\"l\">{}</td><td>{}</td>\
             <td class=\"l\">{}</td><td class=\"l{}\">{}</td><td class=\"l\"><code>{}</code></td></tr>",
            f.source.as_str(),
            escape(&f.ttl),
            escape(&f.detail),
            if conflicts.is_empty() { "" } else { " warn" },
            if conflicts.is_empty() {
                "none today".to_string()
            } else {
                conflicts.join("<br>")
            },
            escape(&f.fix),
            b = escape(&f.bucket)
        );
    }
    if !r.findings.is_empty() {
        h.push_str("</table>\n");
    }
    for e in &r.errors {
        let _ = writeln!(h, "<p class=\"warn\">{}</p>", escape(e));
    }
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
    for o in DeleteOutcome::ALL {
        let _ = write!(h, "<th>{}</th>", escape(o.label()));
    }
    // Matches left for the next pass without a halt: worth an operator's eye
    // when they stay non-zero pass after pass (docs/lifecycle-delete.md#server-lookup-failures).
    h.push_str("<th>unconfirmed</th><th>locked</th><th>completed upload leftovers</th>");
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
        for n in [r.unconfirmed, r.locked, r.completed_upload_leftovers] {
            let warn = if n > 0 { " class=\"warn\"" } else { "" };
            let _ = write!(h, "<td{warn}>{n}</td>");
        }
        h.push_str("</tr>\n");
    }
    h.push_str("</tbody></table>\n");
}

/// The touched collections' disk use and garbage after the last pass, and
/// its vacuum (docs/reclaimed-space.md).
fn space_table(h: &mut String, r: &crate::engine::reclaim::ReclaimReport) {
    h.push_str(
        "<h3>Space</h3>\n<p>A delete only marks data deleted: the disk space returns when \
         the volume is vacuumed (an erasure-coded one: when it is decoded).</p>\n<table id=\"space\"><tr><th class=\"l\">collection</th>\
         <th>volumes</th><th>size bytes</th><th>garbage bytes</th><th>garbage ratio</th></tr>\n",
    );
    for c in &r.collections {
        let _ = writeln!(
            h,
            "<tr data-collection=\"{c}\"><td class=\"l\">{c}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.3}</td></tr>",
            c.volumes,
            c.size_bytes,
            c.garbage_bytes,
            c.ratio(),
            c = escape(&c.collection)
        );
    }
    h.push_str("</table>\n");
    let lines = crate::engine::reclaim::lines(&[], Some(r));
    for l in lines.iter().filter(|l| !l.starts_with("collection=")) {
        let _ = writeln!(h, "<p class=\"space-note\">{}</p>", escape(l));
    }
}

fn bucket_card(h: &mut String, b: &BucketSummary, now_ns: i64) {
    let outcome = escape(outcome_label(b.outcome));
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
        let _ = write!(
            h,
            "<dt>&nbsp;&nbsp;{}</dt><dd>{n}</dd>",
            escape(name.label())
        );
    }
    let _ = write!(
        h,
        "<dt>last walk</dt><dd>{} ({} ago)</dd>",
        escape(&format_time(b.last_walked_ns)),
        escape(&format_age(now_ns, b.last_walked_ns))
    );
    for d in &b.deleted {
        let _ = write!(
            h,
            "<dt>deleted by {}</dt><dd class=\"deleted\">{} objects, {} bytes</dd>",
            escape(&d.rule),
            d.objects,
            d.bytes
        );
    }
    if let Some(r) = &b.held_reason {
        let _ = write!(h, "<dt>held</dt><dd class=\"warn held\">{}</dd>", escape(r));
    }
    if let Some(e) = &b.config_error {
        let _ = write!(
            h,
            "<dt>config error</dt><dd class=\"warn\">{}</dd>",
            escape(e)
        );
    }
    h.push_str("</dl></div>\n");
}

/// Bar chart geometry (px).
const BAR_W: u32 = 8;
const BAR_GAP: u32 = 2;
const CHART_H: u32 = 60;

/// A bucket's forecast as an inline SVG bar chart (docs/forecast.md#status-page):
/// the first bar (red) is what is overdue now, then one bar per day. Each
/// bar carries its figures in `data-*` attributes and a `<title>` (the
/// browser's tooltip), so the page needs no JavaScript.
fn forecast_card(h: &mut String, f: &Forecast, bucket: &str, rules: &[&RuleForecast]) {
    if rules.is_empty() {
        return;
    }
    let mut overdue = Count::default();
    let mut days = vec![Count::default(); f.days as usize];
    let mut known = true;
    for r in rules {
        overdue.objects += r.overdue.objects;
        overdue.bytes += r.overdue.bytes;
        known &= r.known;
        for (slot, d) in days.iter_mut().zip(&r.days) {
            slot.objects += d.count.objects;
            slot.bytes += d.count.bytes;
        }
    }
    let max = days
        .iter()
        .map(|c| c.objects)
        .chain([overdue.objects])
        .max()
        .unwrap_or(0)
        .max(1);
    let bars = 1 + days.len() as u32;
    let width = bars * (BAR_W + BAR_GAP);
    let _ = write!(
        h,
        "<div class=\"card forecast\" data-bucket=\"{b}\"><h3>Forecast: {b}</h3>\
         <svg class=\"forecast-chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{CHART_H}\" \
         viewBox=\"0 0 {width} {CHART_H}\" role=\"img\" aria-label=\"deletes due per day\">",
        b = escape(bucket)
    );
    let bar = |h: &mut String, i: u32, class: &str, day: &str, label: &str, c: &Count| {
        // At least 1 px for a non-empty day, so a small count stays visible.
        let height = if c.objects == 0 {
            0
        } else {
            ((c.objects * u64::from(CHART_H)) / max).max(1) as u32
        };
        let _ = write!(
            h,
            "<rect class=\"bar {class}\" data-day=\"{day}\" data-count=\"{}\" data-bytes=\"{}\" \
             x=\"{}\" y=\"{}\" width=\"{BAR_W}\" height=\"{height}\"><title>{}: {} objects, {} bytes</title></rect>",
            c.objects,
            c.bytes,
            i * (BAR_W + BAR_GAP),
            CHART_H - height,
            escape(label),
            c.objects,
            c.bytes
        );
    };
    bar(h, 0, "overdue", "overdue", "overdue now", &overdue);
    for (i, c) in days.iter().enumerate() {
        let due_by = f.now_ns + (i as i64 + 1) * (f.day_seconds * 1e9) as i64;
        let label = format!("day {} (due by {})", i + 1, format_time(due_by));
        bar(h, i as u32 + 1, "day", &(i + 1).to_string(), &label, c);
    }
    h.push_str("</svg><dl>");
    let _ = write!(
        h,
        "<dt>overdue</dt><dd class=\"{}\">{} objects</dd><dt>next {} days</dt><dd>{} objects</dd>",
        if overdue.objects > 0 { "warn" } else { "" },
        overdue.objects,
        f.days,
        days.iter().map(|c| c.objects).sum::<u64>()
    );
    for r in rules {
        let name = crate::status::rule_name(&r.rule_id, &r.rule_hash);
        let _ = write!(
            h,
            "<dt>&nbsp;&nbsp;{} ({})</dt><dd>{} pending, {} overdue</dd>",
            escape(name),
            escape(&r.kind),
            r.pending(),
            r.overdue.objects
        );
    }
    if !known {
        h.push_str("<dt>note</dt><dd class=\"warn\">partly unknown until the next passes</dd>");
    }
    h.push_str("</dl></div>\n");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::forecast::DayCount;
    use crate::status::{DeleteCounts, PassSummary, RunOutcome, ServiceState};

    const NOW: i64 = 1_700_000_000_000_000_000;
    const MIN: i64 = 60_000_000_000;

    fn snapshot() -> StatusSnapshot {
        let mut deletes = DeleteCounts::default();
        deletes.record(DeleteOutcome::Done);
        deletes.record(DeleteOutcome::Done);
        deletes.record(DeleteOutcome::RetryLater);
        StatusSnapshot {
            service_state: ServiceState::Idle,
            standby_reason: None,
            next_pass_ns: Some(NOW + 60 * MIN),
            current_pass: None,
            stale_buckets: vec![crate::status::StaleBucket {
                bucket: "<script>alert(2)</script>".into(),
                last_completed_ns: 0,
            }],
            stale_after_ns: 2 * 86_400 * 1_000_000_000,
            forecast: None,
            ttl_audit: None,
            go_worker: None,
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
                    unconfirmed: 3,
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
                space: None,
            }),
            paused: Vec::new(),
        }
    }

    #[test]
    fn paused_buckets_are_listed_with_their_reason() {
        let mut s = snapshot();
        assert!(!render(&s, NOW, None).contains("Paused buckets"));
        s.paused = vec![crate::status::PausedBucket {
            bucket: "logs".into(),
            paused_ns: NOW - 90 * MIN,
            reason: "<typo> in rule".into(),
        }];
        let page = render(&s, NOW, None);
        assert!(page.contains("<h2>Paused buckets</h2>"), "{page}");
        assert!(
            page.contains("<td class=\"l\">logs</td>") && page.contains("(1h 30m ago)"),
            "{page}"
        );
        assert!(page.contains("&lt;typo&gt; in rule"), "{page}");
    }

    #[test]
    fn a_go_worker_still_running_showed_nowhere_on_the_page() {
        let mut s = snapshot();
        assert!(!render(&s, NOW, None).contains("go-worker"));
        s.go_worker = Some(crate::status::GoWorkerSeen {
            shards: vec![0, 1, 2, 3, 9],
            last_write_ns: NOW - 90 * MIN,
        });
        let page = render(&s, NOW, None);
        assert!(page.contains("Another lifecycle worker"), "{page}");
        assert!(
            page.contains("shards 0-3,9") && page.contains("1h 30m ago"),
            "{page}"
        );
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
        let page = render(&snapshot(), NOW, None);
        assert!(!page.contains("<script>"), "{page}");
        assert!(
            page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
            "{page}"
        );
        assert!(page.contains("RETRY_LATER &lt;transport&gt;"), "{page}");
        // The stale-bucket table: escaped, with its heading and "never".
        assert!(
            page.contains("&lt;script&gt;alert(2)&lt;/script&gt;"),
            "{page}"
        );
        assert!(
            page.contains("Buckets without a completed pass in 2days"),
            "{page}"
        );
        assert!(page.contains(">never<"), "{page}");
    }

    #[test]
    fn page_shows_shard_row_and_bucket_card() {
        let page = render(&snapshot(), NOW, None);
        assert!(page.contains("<meta http-equiv=\"refresh\" content=\"10\">"));
        assert!(page.contains("<table class=\"shards\">"));
        // shard 7: lag 2h 5m, never walked, 2 restarts, 1234 events, 2 DONE, 1 RETRY_LATER.
        assert!(
            page.contains(
                "<tr><td>7</td><td>2h 5m</td><td>—</td><td class=\"l warn\">RETRY_LATER &lt;transport&gt;</td><td>2</td><td>1234</td><td>2</td><td>0</td><td>0</td><td>1</td>"
            ),
            "{page}"
        );
        // Then unconfirmed (3, highlighted), locked, completed upload leftovers.
        assert!(
            page.contains("<td class=\"warn\">3</td><td>0</td><td>0</td></tr>"),
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
    fn forecast_chart_has_an_overdue_bar_and_one_bar_per_day() {
        let mut s = snapshot();
        let day = |i: u32, n: u64| DayCount {
            day: i,
            due_by_ns: NOW + i64::from(i) * 86_400_000_000_000,
            count: Count {
                objects: n,
                bytes: n * 10,
            },
        };
        s.forecast = Some(Forecast {
            now_ns: NOW,
            day_seconds: 86_400.0,
            days: 3,
            rules: vec![RuleForecast {
                bucket: "<script>alert(1)</script>".into(),
                rule_id: "r<1>".into(),
                rule_hash: "ab".into(),
                kind: "expiration".into(),
                known: true,
                overdue: Count {
                    objects: 4,
                    bytes: 40,
                },
                oldest_overdue_ns: Some(NOW - MIN),
                days: vec![day(1, 2), day(2, 0), day(3, 8)],
                later: Count::default(),
            }],
            ..Default::default()
        });
        let page = render(&s, NOW, None);
        assert!(page.contains("<svg class=\"forecast-chart\""), "{page}");
        assert!(!page.contains("<script>"), "{page}");
        assert!(page.contains("r&lt;1&gt;"), "{page}");
        for (d, n) in [("overdue", 4), ("1", 2), ("2", 0), ("3", 8)] {
            assert!(
                page.contains(&format!("data-day=\"{d}\" data-count=\"{n}\"")),
                "{d}: {page}"
            );
        }
        // The tallest bar fills the chart; the overdue bar is distinct.
        assert!(page.contains("class=\"bar overdue\""));
        assert!(
            page.contains(&format!("height=\"{CHART_H}\"><title>day 3")),
            "{page}"
        );
    }

    /// Every bucket got a card and a 31-bar chart: 21 MB of page with 3,334
    /// buckets. The page shows the [`BUCKET_CARDS`] that most need a look,
    /// stopped first, then overdue, then deleting, counts the rest, and
    /// shows any one bucket with `?bucket=`.
    #[test]
    fn a_page_of_every_bucket_was_21_mb_with_3334_buckets() {
        let mut s = snapshot();
        let p = s.last_pass.as_mut().unwrap();
        let template = p.buckets[0].clone();
        let name = |i: usize| format!("b{i:05}");
        p.buckets = (0..3334)
            .map(|i| {
                let mut b = template.clone();
                b.bucket = name(i);
                b.deletes = DeleteCounts::default();
                b
            })
            .collect();
        p.buckets[3000].outcome = Some(RunOutcome::Halted);
        p.buckets[20].deletes.record(DeleteOutcome::Done);
        let rule = |i: usize, overdue: u64| RuleForecast {
            bucket: name(i),
            rule_id: "r".into(),
            rule_hash: "ab".into(),
            kind: "expiration".into(),
            known: true,
            overdue: Count {
                objects: overdue,
                bytes: overdue,
            },
            oldest_overdue_ns: None,
            days: (1..=30)
                .map(|day| DayCount {
                    day,
                    due_by_ns: NOW,
                    count: Count::default(),
                })
                .collect(),
            later: Count::default(),
        };
        s.forecast = Some(Forecast {
            now_ns: NOW,
            day_seconds: 86_400.0,
            days: 30,
            // A paused bucket has a forecast and no card of the last run.
            rules: (0..3335)
                .map(|i| rule(i, if i == 2500 { 7 } else { 0 }))
                .collect(),
            ..Default::default()
        });
        let page = render(&s, NOW, None);
        assert!(page.len() < 1_000_000, "{} bytes", page.len());
        assert_eq!(
            page.matches("<div class=\"card bucket\">").count(),
            BUCKET_CARDS
        );
        let at = |b: &str| page.find(&format!("<h3>{b}</h3>")).unwrap_or(usize::MAX);
        assert!(at("b03000") < at("b02500"), "stopped first");
        assert!(at("b02500") < at("b00020"), "then overdue");
        assert!(at("b00020") < at("b00000"), "then deleting");
        assert_eq!(
            at("b03333"),
            usize::MAX,
            "quiet buckets past the cap are counted"
        );
        assert!(
            page.contains("3235 more buckets"),
            "{}",
            &page[page.len() - 600..]
        );
        let one = render(&s, NOW, Some("b03334"));
        assert_eq!(one.matches("<div class=\"card bucket\">").count(), 0);
        assert_eq!(
            one.matches("data-bucket=\"b03334\"").count(),
            1,
            "the paused one"
        );
        let one = render(&s, NOW, Some("b01234"));
        assert_eq!(one.matches("<h3>b01234</h3>").count(), 1);
        assert_eq!(one.matches("<div class=\"card bucket\">").count(), 1);
        assert!(!one.contains("more buckets"));
        let none = render(&s, NOW, Some("<nope>"));
        assert!(none.contains("No bucket &lt;nope&gt; in the last pass or the forecast."));
    }

    #[test]
    fn empty_snapshot_renders() {
        let page = render(&StatusSnapshot::default(), NOW, None);
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
}
