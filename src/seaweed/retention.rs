//! The meta-log retention probe: how far back the filer's persisted meta-log
//! still reaches, read from the names of its log files (docs/retention-probe.md#persisted-log).
//!
//! The filer never reports a missing start of history: a subscription from a
//! timestamp whose log file is gone silently starts at the next file. The only
//! way to see the horizon (and a gap) is to list
//! `/topics/.system/log/<YYYY-MM-DD>/<HH-MM>.<filer id>` (docs/retention-probe.md#silent-horizon).
//! The earliest file's minute start, reported without reading the file, is a
//! lower bound on the first event still available, so the retention window
//! is never understated; its one blind spot is docs/retention-probe.md#probe.

use time::{Date, Month, PrimitiveDateTime, Time};
use tonic::transport::Channel;

use crate::engine::Nanos;
use crate::pb::filer_pb::seaweed_filer_client::SeaweedFilerClient;
use crate::pb::filer_pb::{Entry, ListEntriesRequest};

/// Where the filer persists its meta-log.
pub const META_LOG_ROOT: &str = "/topics/.system/log";
/// Day directories fetched per listing page: a year of history in two pages.
const DAY_PAGE: u32 = 256;
/// Files fetched per listing page. The first parseable name is the earliest,
/// so one small page is almost always enough.
const FILE_PAGE: u32 = 64;

/// The earliest persisted meta-log file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EarliestAvailable {
    /// Start (UTC) of the minute the earliest file is named after, in ns.
    pub ts_ns: Nanos,
    /// Full filer path of that file.
    pub file: String,
}

/// Why the probe failed.
#[derive(Debug, thiserror::Error)]
pub enum RetentionError {
    /// Listing a meta-log directory failed.
    #[error("listing {directory} failed: {code:?}: {message}")]
    List {
        directory: String,
        code: tonic::Code,
        message: String,
    },
}

/// Finds the earliest persisted meta-log file. `Ok(None)` when nothing is
/// persisted yet (a fresh cluster keeps recent events in memory; nothing was
/// lost).
pub async fn earliest_available(
    client: &mut SeaweedFilerClient<Channel>,
) -> Result<Option<EarliestAvailable>, RetentionError> {
    earliest_available_under(client, META_LOG_ROOT).await
}

/// [`earliest_available`] for a log root other than [`META_LOG_ROOT`].
pub async fn earliest_available_under(
    client: &mut SeaweedFilerClient<Channel>,
    log_root: &str,
) -> Result<Option<EarliestAvailable>, RetentionError> {
    let log_root = log_root.trim_end_matches('/');
    let mut after_day = String::new();
    loop {
        let days = list_page(client, log_root, &after_day, DAY_PAGE).await?;
        let Some(last) = days.last() else {
            return Ok(None);
        };
        after_day = last.name.clone();
        let full_page = days.len() as u32 == DAY_PAGE;
        // The filer lists in name order and YYYY-MM-DD sorts chronologically.
        for day in days.iter().filter(|e| e.is_directory) {
            let Some(date) = parse_day(&day.name) else {
                tracing::warn!(name = %day.name, dir = log_root, "ignoring meta-log day directory with an unparseable name");
                continue;
            };
            let day_dir = format!("{log_root}/{}", day.name);
            if let Some((time, name)) = earliest_file_in_day(client, &day_dir).await? {
                return Ok(Some(EarliestAvailable {
                    ts_ns: minute_start_ns(date, time),
                    file: format!("{day_dir}/{name}"),
                }));
            }
        }
        if !full_page {
            return Ok(None);
        }
    }
}

/// The earliest `HH-MM.*` file of one day directory, paging until one parses.
async fn earliest_file_in_day(
    client: &mut SeaweedFilerClient<Channel>,
    day_dir: &str,
) -> Result<Option<(Time, String)>, RetentionError> {
    let mut after = String::new();
    loop {
        let files = list_page(client, day_dir, &after, FILE_PAGE).await?;
        let Some(last) = files.last() else {
            return Ok(None);
        };
        after = last.name.clone();
        let full_page = files.len() as u32 == FILE_PAGE;
        for f in files.iter().filter(|e| !e.is_directory) {
            let Some(t) = parse_file_minute(&f.name) else {
                tracing::warn!(name = %f.name, dir = day_dir, "ignoring meta-log file with an unparseable name");
                continue;
            };
            return Ok(Some((t, f.name.clone())));
        }
        if !full_page {
            return Ok(None);
        }
    }
}

/// One `ListEntries` page after `start_after` (exclusive). A missing directory
/// is an empty page.
async fn list_page(
    client: &mut SeaweedFilerClient<Channel>,
    directory: &str,
    start_after: &str,
    limit: u32,
) -> Result<Vec<Entry>, RetentionError> {
    let err = |s: tonic::Status| RetentionError::List {
        directory: directory.to_string(),
        code: s.code(),
        message: s.message().to_string(),
    };
    let request = ListEntriesRequest {
        directory: directory.to_string(),
        start_from_file_name: start_after.to_string(),
        inclusive_start_from: false,
        limit,
        ..Default::default()
    };
    let mut stream = match client.list_entries(request).await {
        Ok(r) => r.into_inner(),
        Err(s) if is_not_found(&s) => return Ok(Vec::new()),
        Err(s) => return Err(err(s)),
    };
    let mut out = Vec::new();
    loop {
        match stream.message().await {
            Ok(Some(resp)) => out.extend(resp.entry),
            Ok(None) => return Ok(out),
            Err(s) if is_not_found(&s) => return Ok(out),
            Err(s) => return Err(err(s)),
        }
    }
}

/// The filer reports "not found" only in the message text (docs/grpc.md#not-found).
fn is_not_found(s: &tonic::Status) -> bool {
    s.code() == tonic::Code::NotFound || s.message().contains("no entry is found")
}

/// `YYYY-MM-DD` → date.
fn parse_day(name: &str) -> Option<Date> {
    let b = name.as_bytes();
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return None;
    }
    let year: i32 = digits(&name[0..4])?.try_into().ok()?;
    let month = Month::try_from(u8::try_from(digits(&name[5..7])?).ok()?).ok()?;
    let day = u8::try_from(digits(&name[8..10])?).ok()?;
    Date::from_calendar_date(year, month, day).ok()
}

/// `HH-MM.<filer id>` → time of day. The filer id is `%08x` of a signed
/// 32-bit id, so it is hex digits, possibly after a `-`; anything else after
/// the dot means this is not a log file.
fn parse_file_minute(name: &str) -> Option<Time> {
    let (hm, id) = name.split_once('.')?;
    let hex = id.strip_prefix('-').unwrap_or(id);
    if hex.is_empty() || !hex.bytes().all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    let b = hm.as_bytes();
    if b.len() != 5 || b[2] != b'-' {
        return None;
    }
    let h = u8::try_from(digits(&hm[0..2])?).ok()?;
    let m = u8::try_from(digits(&hm[3..5])?).ok()?;
    Time::from_hms(h, m, 0).ok()
}

/// All-ASCII-digit string → number (no sign, no spaces).
fn digits(s: &str) -> Option<u32> {
    if s.is_empty() || !s.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

fn minute_start_ns(date: Date, time: Time) -> Nanos {
    let ns = PrimitiveDateTime::new(date, time)
        .assume_utc()
        .unix_timestamp_nanos();
    // i64 ns reach the year 2262; clamp
    // rather than wrap for the (nonsensical) later ones.
    Nanos::try_from(ns).unwrap_or(Nanos::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_day_and_minute_names() {
        let d = parse_day("2026-12-02").unwrap();
        let t = parse_file_minute("08-49.3e83bedc").unwrap();
        // 2026-12-02T08:49:00Z
        assert_eq!(minute_start_ns(d, t), 1_796_201_340_000_000_000);
        assert!(parse_file_minute("23-59.-1a2b3c4d").is_some());
        assert_eq!(
            minute_start_ns(
                parse_day("1970-01-01").unwrap(),
                parse_file_minute("00-01.00000000").unwrap()
            ),
            60_000_000_000
        );
    }

    #[test]
    fn rejects_names_that_are_not_log_files() {
        for bad in [
            "2026-13-01",
            "2026-02-30",
            "2026-1-01",
            "20261201xx",
            "x026-12-01",
            "",
        ] {
            assert!(parse_day(bad).is_none(), "{bad}");
        }
        for bad in [
            "24-00.3e83bedc",
            "08-60.3e83bedc",
            "08-49",
            "08-49.",
            "08-49.xyz",
            "8-49.3e83bedc",
            "08:49.3e83bedc",
            "+8-49.3e83bedc",
        ] {
            assert!(parse_file_minute(bad).is_none(), "{bad}");
        }
    }
}
