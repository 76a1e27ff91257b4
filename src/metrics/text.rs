//! The exposition format: prometheus-client writes OpenMetrics, scrapers of
//! the Go worker's dashboards expect Prometheus text 0.0.4.

/// Rewrites prometheus-client's OpenMetrics text as Prometheus text 0.0.4:
/// a counter family `x` (samples `x_total`) gets `# HELP x_total` and
/// `# TYPE x_total counter`, and `# EOF` goes. Everything else is the same in
/// both formats for the metric types used here (no units, exemplars or
/// `_created` samples are emitted).
pub(super) fn openmetrics_to_prometheus_text(om: &str) -> String {
    let mut out = String::with_capacity(om.len() + 256);
    // The HELP line comes before the TYPE line that tells whether the family
    // is a counter, so hold it back one line.
    let mut pending_help: Option<&str> = None;
    for line in om.lines().filter(|l| *l != "# EOF") {
        let held = pending_help.take();
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or((rest, ""));
            let renamed = if kind == "counter" {
                format!("{name}_total")
            } else {
                name.to_string()
            };
            if let Some(h) = held {
                let text = h
                    .strip_prefix("# HELP ")
                    .and_then(|r| r.strip_prefix(name))
                    .unwrap_or("");
                out.push_str(&format!("# HELP {renamed}{text}\n"));
            }
            out.push_str(&format!("# TYPE {renamed} {kind}\n"));
            continue;
        }
        if line.starts_with("# HELP ") {
            pending_help = Some(line);
        }
        for l in held
            .into_iter()
            .chain(pending_help.is_none().then_some(line))
        {
            out.push_str(l);
            out.push('\n');
        }
    }
    if let Some(h) = pending_help {
        out.push_str(h);
        out.push('\n');
    }
    out
}
