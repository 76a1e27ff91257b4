//! `FilerClient`: a thin, typed wrapper over the SeaweedFS filer gRPC service
//! (lookup, paged listing, create/update/delete, filer configuration) with
//! errors that name the filer path and keep transport failures apart from
//! answers the filer gave.

use std::collections::HashMap;
use std::future::Future;
use std::time::Duration;

use futures::Stream;
use tonic::transport::Channel;
use tonic::{Code, Status, Streaming};

use crate::pb::filer_pb::seaweed_filer_client::SeaweedFilerClient;
use crate::pb::filer_pb::{
    CreateEntryRequest, DeleteEntryRequest, Entry, FilerError as PbFilerError, FuseAttributes,
    GetFilerConfigurationRequest, ListEntriesRequest, ListEntriesResponse,
    LookupDirectoryEntryRequest, PingRequest, UpdateEntryRequest,
};
use crate::seaweed::endpoint::{EndpointOptions, GrpcEndpoint, MAX_MESSAGE_BYTES};

/// Page size for [`FilerClient::list_all`] users that have no better idea:
/// 10,000-entry pages list ~2.5× faster than Go's 1,024 (docs/baselines.md#filer-listing).
pub const DEFAULT_PAGE: u32 = 10_000;

/// The substring of the gRPC error message by which the filer says "not found"
/// (docs/grpc.md#not-found): there is no dedicated status code.
const NOT_FOUND_TEXT: &str = "no entry is found in filer store";

/// The bucket root when the filer does not report one (docs/filer-layout.md#buckets-root).
pub const DEFAULT_BUCKETS_ROOT: &str = "/buckets";

/// Errors from the filer client. Every variant names the address or filer
/// path involved, so a log line is enough to find the culprit.
#[derive(Debug, thiserror::Error)]
pub enum FilerError {
    /// The address cannot be turned into a gRPC endpoint.
    #[error(
        "invalid filer gRPC address {addr:?}: {reason} (expected host:port or http://host:port, \
         port being the filer gRPC port, usually the HTTP port + 10000)"
    )]
    BadAddress { addr: String, reason: String },
    /// The TCP/HTTP2 connection to the filer could not be opened.
    #[error(
        "cannot connect to filer gRPC at {addr}: {source} (is the filer running and is this its \
         gRPC port?)"
    )]
    Connect {
        addr: String,
        #[source]
        source: tonic::transport::Error,
    },
    /// The call did not reach the filer or its answer was lost (connection
    /// refused/reset, cancelled, deadline). Safe to retry later; says nothing
    /// about the entry itself.
    #[error("filer {op} {path}: transport error: {status}")]
    Transport {
        /// RPC name.
        op: &'static str,
        /// Filer path the call was about.
        path: String,
        /// The gRPC status; its source keeps the transport's error, a TLS
        /// cause among it.
        #[source]
        status: Status,
    },
    /// The filer answered with an error for this entry.
    #[error("filer {op} {path} failed: {message}")]
    Server {
        /// As in [`FilerError::Transport`].
        op: &'static str,
        path: String,
        /// The filer's message (gRPC status message or response `error`).
        message: String,
        /// The filer's `error_code` number when the response carried one
        /// (a newer filer may send numbers this client does not know).
        code: Option<i32>,
    },
    /// CreateEntry with `o_excl` found the entry already there.
    #[error("filer CreateEntry {path}: the entry already exists")]
    AlreadyExists { path: String },
    /// UpdateEntry's `expected_extended` did not match the stored entry: someone
    /// else changed the entry since we read it.
    #[error("filer UpdateEntry {path}: precondition failed (entry changed since read): {message}")]
    PreconditionFailed { path: String, message: String },
}

/// The first call to a filer failing because the address is not a filer's
/// gRPC port: what gRPC says ("unknown service filer_pb.SeaweedFiler", "h2
/// protocol error") names no fix, so the error says which port is wanted.
fn configuration_error(addr: &str, status: Status) -> FilerError {
    const WANTED: &str = "the filer address must be a filer's gRPC port (by default its HTTP \
                          port + 10000, `weed filer -port.grpc`)";
    let hint =
        if status.code() == Code::Unimplemented && status.message().contains("unknown service") {
            Some("answers gRPC but is not a filer (a master, volume server or S3 gateway?)")
        } else if status.message().contains("h2 protocol error") {
            Some("does not speak gRPC (an HTTP port?)")
        } else {
            None
        };
    match hint {
        Some(hint) => FilerError::Server {
            op: "GetFilerConfiguration",
            path: addr.to_string(),
            message: format!("{}: {addr} {hint}; {WANTED}", status.message()),
            code: None,
        },
        None => FilerError::from_status("GetFilerConfiguration", addr.to_string(), status),
    }
}

/// What a CreateEntry answer means. Any non-zero `error_code` is a failure,
/// also one this client has no name for: read as OK, a refused create of a
/// cursor or control file would pass for a saved one.
fn create_answer(path: String, code: i32, error: String) -> Result<()> {
    let known = PbFilerError::try_from(code).ok();
    if known == Some(PbFilerError::EntryAlreadyExists) || error.contains("already exists") {
        return Err(FilerError::AlreadyExists { path });
    }
    if code == 0 && error.is_empty() {
        return Ok(());
    }
    let name = known.map_or_else(|| format!("error code {code}"), |k| k.as_str_name().into());
    let message = match (code, error.is_empty()) {
        (0, _) => error,
        (_, true) => name,
        _ => format!("{name}: {error}"),
    };
    Err(FilerError::Server {
        op: "CreateEntry",
        path,
        message,
        code: (code != 0).then_some(code),
    })
}

impl FilerError {
    fn from_status(op: &'static str, path: String, status: Status) -> FilerError {
        match status.code() {
            // What tonic/hyper report when the call never completed; Go's filer
            // itself answers errors with Unknown, so these are never its words.
            Code::Unavailable | Code::Cancelled | Code::DeadlineExceeded => {
                FilerError::Transport { op, path, status }
            }
            Code::FailedPrecondition => FilerError::PreconditionFailed {
                path,
                message: status.message().to_string(),
            },
            _ => FilerError::Server {
                op,
                path,
                message: status.message().to_string(),
                code: None,
            },
        }
    }
}

pub type Result<T, E = FilerError> = std::result::Result<T, E>;

/// A small inline JSON file (mode 0644) named `name`, stamped `now_ns` as
/// its mtime and crtime: how the service writes its cursor and control files.
pub fn json_file_entry(name: &str, content: Vec<u8>, now_ns: i64) -> Entry {
    let secs = now_ns.div_euclid(1_000_000_000);
    let nanos = now_ns.rem_euclid(1_000_000_000) as i32;
    Entry {
        name: name.to_string(),
        is_directory: false,
        attributes: Some(FuseAttributes {
            file_size: content.len() as u64,
            mtime: secs,
            mtime_ns: nanos,
            crtime: secs,
            crtime_ns: nanos,
            file_mode: 0o644,
            mime: "application/json".into(),
            ..Default::default()
        }),
        content,
        ..Default::default()
    }
}

/// `dir` + `/` + `name`, without doubling the slash at the root.
pub fn join_path(dir: &str, name: &str) -> String {
    format!("{}/{name}", dir.trim_end_matches('/'))
}

/// Splits a full filer path into `(directory, name)`; a trailing `/` is
/// ignored (docs/filer-layout.md#null-version). The root's parent is `/`.
pub fn split_path(path: &str) -> (String, String) {
    let p = path.trim_end_matches('/');
    match p.rfind('/') {
        Some(0) => ("/".to_string(), p[1..].to_string()),
        Some(i) => (p[..i].to_string(), p[i + 1..].to_string()),
        None => ("/".to_string(), p.to_string()),
    }
}

/// A connection to one filer's gRPC service. Cheap to clone (the channel is
/// shared); every clone multiplexes over the same HTTP/2 connection.
#[derive(Clone, Debug)]
pub struct FilerClient {
    inner: SeaweedFilerClient<Channel>,
    addr: String,
    call_timeout: Option<Duration>,
}

impl FilerClient {
    /// Connects to `addr` (`host:port` or `http://host:port`; the port is the
    /// filer's gRPC port). Fails at once, naming the address, when nothing
    /// answers. No per-RPC deadline unless [`FilerClient::with_call_timeout`]
    /// sets one (the pass does: `cluster.filer_call_timeout`,
    /// docs/grpc.md#deadlines).
    pub async fn connect(addr: &str) -> Result<FilerClient> {
        FilerClient::connect_with(addr, &EndpointOptions::seaweed()).await
    }

    /// [`FilerClient::connect`] with explicit endpoint options (client TLS).
    pub async fn connect_with(addr: &str, options: &EndpointOptions) -> Result<FilerClient> {
        let endpoint = GrpcEndpoint::new(addr, options).map_err(|e| FilerError::BadAddress {
            addr: addr.to_string(),
            reason: e.reason().to_string(),
        })?;
        let channel = endpoint
            .connect()
            .await
            .map_err(|source| FilerError::Connect {
                addr: addr.to_string(),
                source,
            })?;
        Ok(FilerClient::from_channel(channel, addr))
    }

    /// Wraps an existing channel (shared with other gRPC clients). `addr` is
    /// only used in messages.
    pub fn from_channel(channel: Channel, addr: &str) -> FilerClient {
        let inner = SeaweedFilerClient::new(channel)
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES);
        FilerClient {
            inner,
            addr: addr.to_string(),
            call_timeout: None,
        }
    }

    /// The same client with a deadline on every unary call and on each
    /// listing page read (`cluster.filer_call_timeout`,
    /// docs/grpc.md#deadlines): a filer that accepts the call and never
    /// answers becomes a transport error instead of a hung pass. The
    /// meta-log subscription (`raw`) is not bounded by it.
    pub fn with_call_timeout(mut self, timeout: Duration) -> FilerClient {
        self.call_timeout = (!timeout.is_zero()).then_some(timeout);
        self
    }

    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// The raw generated client, for RPCs this wrapper does not cover
    /// (e.g. `SubscribeMetadata`).
    pub fn raw(&self) -> SeaweedFilerClient<Channel> {
        self.inner.clone()
    }

    /// `GetFilerConfiguration`, whole: among it the masters the filer
    /// reports (each `host:port` or `host:port.grpcPort`) and its store
    /// `signature`, equal on filers that share one store, which is how
    /// SeaweedFS's own peers tell (docs/meta-log.md#several-filers).
    pub async fn configuration(
        &self,
    ) -> Result<crate::pb::filer_pb::GetFilerConfigurationResponse> {
        let mut inner = self.inner.clone();
        Ok(timed(
            self.call_timeout,
            inner.get_filer_configuration(GetFilerConfigurationRequest {}),
        )
        .await
        .map_err(|s| configuration_error(&self.addr, s))?
        .into_inner())
    }

    /// The bucket root directory (`dir_buckets`; `/buckets` when empty), with
    /// any trailing `/` removed.
    pub async fn buckets_root(&self) -> Result<String> {
        let resp = self.configuration().await?;
        Ok(match resp.dir_buckets.trim_end_matches('/') {
            "" => DEFAULT_BUCKETS_ROOT,
            root => root,
        }
        .to_string())
    }

    /// The filer's store signature, the masters it reports and its filer
    /// group, in one `GetFilerConfiguration` call.
    pub async fn store_and_masters(&self) -> Result<(i32, Vec<String>, String)> {
        let r = self.configuration().await?;
        Ok((r.signature, r.masters, r.filer_group))
    }

    /// The filer's clock (`Ping.start_time_ns`, ns since the epoch): what the
    /// filer stamps the events it logs with (docs/due-index.md#filer-clock).
    pub async fn clock(&self) -> Result<i64> {
        let mut inner = self.inner.clone();
        Ok(timed(self.call_timeout, inner.ping(PingRequest::default()))
            .await
            .map_err(|s| FilerError::from_status("Ping", self.addr.clone(), s))?
            .into_inner()
            .start_time_ns)
    }

    /// Looks up `dir/name`. Not found is `Ok(None)`.
    pub async fn lookup(&self, dir: &str, name: &str) -> Result<Option<Entry>> {
        let req = LookupDirectoryEntryRequest {
            directory: dir.to_string(),
            name: name.to_string(),
        };
        let mut inner = self.inner.clone();
        match timed(self.call_timeout, inner.lookup_directory_entry(req)).await {
            Ok(resp) => Ok(resp.into_inner().entry),
            Err(s) if s.message().contains(NOT_FOUND_TEXT) => Ok(None),
            Err(s) => Err(FilerError::from_status(
                "LookupDirectoryEntry",
                join_path(dir, name),
                s,
            )),
        }
    }

    /// One page of `dir`: up to `limit` entries with names strictly after
    /// `start_after` ("" = from the start), sorted by name. A missing
    /// directory lists as empty.
    pub async fn list_page(&self, dir: &str, start_after: &str, limit: u32) -> Result<Vec<Entry>> {
        self.list_page_from(dir, start_after, false, limit).await
    }

    /// [`FilerClient::list_page`] starting at `start` itself when
    /// `inclusive` (a resumed walk lists the directory named by its resume
    /// point from that name on).
    pub async fn list_page_from(
        &self,
        dir: &str,
        start: &str,
        inclusive: bool,
        limit: u32,
    ) -> Result<Vec<Entry>> {
        let mut stream = self.open_page_from(dir, start, inclusive, limit).await?;
        let mut out = Vec::new();
        while let Some(e) = next_entry(&mut stream, dir, self.call_timeout).await? {
            out.push(e);
        }
        Ok(out)
    }

    async fn open_page_from(
        &self,
        dir: &str,
        start: &str,
        inclusive: bool,
        limit: u32,
    ) -> Result<Streaming<ListEntriesResponse>> {
        let req = ListEntriesRequest {
            directory: dir.to_string(),
            start_from_file_name: start.to_string(),
            inclusive_start_from: inclusive,
            limit,
            ..Default::default()
        };
        let mut inner = self.inner.clone();
        timed(self.call_timeout, inner.list_entries(req))
            .await
            .map(tonic::Response::into_inner)
            .map_err(|s| FilerError::from_status("ListEntries", dir.to_string(), s))
    }

    /// Every entry of a small directory `dir`, at once ([`Self::list_all`]
    /// collected); a missing directory has none.
    pub async fn list_dir(&self, dir: &str) -> Result<Vec<Entry>> {
        use futures::TryStreamExt as _;
        self.list_all(dir, DEFAULT_PAGE).try_collect().await
    }

    /// Every entry of `dir`, streamed in name order, paging by
    /// `startFromFileName` with pages of `page` entries (use
    /// [`DEFAULT_PAGE`]). Entries are yielded as they arrive, so at most one
    /// gRPC message is held at a time regardless of directory size. A missing
    /// directory yields nothing.
    pub fn list_all(
        &self,
        dir: &str,
        page: u32,
    ) -> impl Stream<Item = Result<Entry>> + Send + 'static {
        let state = PageState {
            client: self.clone(),
            dir: dir.to_string(),
            page: page.max(1),
            last: String::new(),
            in_page: 0,
            stream: None,
        };
        // An error ends the stream after it is yielded.
        futures::stream::try_unfold(state, |mut st| async move {
            loop {
                let next = match st.stream.as_mut() {
                    Some(stream) => next_entry(stream, &st.dir, st.client.call_timeout).await?,
                    None => {
                        let (dir, last) = (&st.dir, &st.last);
                        st.stream =
                            Some(st.client.open_page_from(dir, last, false, st.page).await?);
                        st.in_page = 0;
                        continue;
                    }
                };
                match next {
                    Some(e) => {
                        st.in_page += 1;
                        st.last.clone_from(&e.name);
                        return Ok(Some((e, st)));
                    }
                    // A short page is the last one.
                    None if st.in_page < st.page => return Ok(None),
                    None => st.stream = None,
                }
            }
        })
    }

    /// Creates `dir/entry.name` (parents are created by the filer). With
    /// `exclusive`, an existing entry is an [`FilerError::AlreadyExists`].
    pub async fn create_entry(&self, dir: &str, entry: Entry, exclusive: bool) -> Result<()> {
        let path = join_path(dir, &entry.name);
        let req = CreateEntryRequest {
            directory: dir.to_string(),
            entry: Some(entry),
            o_excl: exclusive,
            ..Default::default()
        };
        let mut inner = self.inner.clone();
        let resp = timed(self.call_timeout, inner.create_entry(req))
            .await
            .map_err(|s| classify_create(path.clone(), s))?
            .into_inner();
        create_answer(path, resp.error_code, resp.error)
    }

    /// Replaces `dir/entry.name` with `entry`. With a non-empty
    /// `expected_extended`, the filer refuses the update unless each listed
    /// Extended key currently holds exactly that value.
    pub async fn update_entry(
        &self,
        dir: &str,
        entry: Entry,
        expected_extended: HashMap<String, Vec<u8>>,
    ) -> Result<()> {
        let path = join_path(dir, &entry.name);
        let req = UpdateEntryRequest {
            directory: dir.to_string(),
            entry: Some(entry),
            expected_extended,
            ..Default::default()
        };
        let mut inner = self.inner.clone();
        match timed(self.call_timeout, inner.update_entry(req)).await {
            Ok(_) => Ok(()),
            Err(s) if is_precondition(&s) => Err(FilerError::PreconditionFailed {
                path,
                message: s.message().to_string(),
            }),
            Err(s) => Err(FilerError::from_status("UpdateEntry", path, s)),
        }
    }

    /// Deletes `dir/name` (metadata and data). Deleting a missing entry is not
    /// an error.
    pub async fn delete_entry(&self, dir: &str, name: &str, recursive: bool) -> Result<()> {
        let path = join_path(dir, name);
        let req = DeleteEntryRequest {
            directory: dir.to_string(),
            name: name.to_string(),
            is_delete_data: true,
            is_recursive: recursive,
            ignore_recursive_error: false,
            ..Default::default()
        };
        let mut inner = self.inner.clone();
        match timed(self.call_timeout, inner.delete_entry(req))
            .await
            .map(|r| r.into_inner().error)
        {
            Ok(err) if !err.is_empty() && !err.contains(NOT_FOUND_TEXT) => {
                Err(FilerError::Server {
                    op: "DeleteEntry",
                    path,
                    message: err,
                    code: None,
                })
            }
            Ok(_) => Ok(()),
            Err(s) if s.message().contains(NOT_FOUND_TEXT) => Ok(()),
            Err(s) => Err(FilerError::from_status("DeleteEntry", path, s)),
        }
    }
}

struct PageState {
    client: FilerClient,
    dir: String,
    page: u32,
    last: String,
    in_page: u32,
    stream: Option<Streaming<ListEntriesResponse>>,
}

/// Runs one call (or one listing page read) under `limit`
/// ([`FilerClient::with_call_timeout`]).
async fn timed<T>(
    limit: Option<Duration>,
    call: impl Future<Output = std::result::Result<T, Status>>,
) -> std::result::Result<T, Status> {
    match limit {
        None => call.await,
        // DeadlineExceeded, which [`FilerError::from_status`] classifies as
        // transport.
        Some(d) => tokio::time::timeout(d, call).await.unwrap_or_else(|_| {
            Err(Status::deadline_exceeded(format!(
                "no answer within {} (cluster.filer_call_timeout)",
                humantime::format_duration(d)
            )))
        }),
    }
}

/// Next entry of a listing stream; responses without an entry are skipped.
async fn next_entry(
    stream: &mut Streaming<ListEntriesResponse>,
    dir: &str,
    timeout: Option<Duration>,
) -> Result<Option<Entry>> {
    loop {
        match timed(timeout, stream.message()).await {
            Ok(Some(ListEntriesResponse { entry: Some(e), .. })) => return Ok(Some(e)),
            Ok(Some(_)) => {}
            Ok(None) => return Ok(None),
            // A directory deleted under us (or never there) lists as empty.
            Err(s) if s.message().contains(NOT_FOUND_TEXT) => return Ok(None),
            Err(s) => return Err(FilerError::from_status("ListEntries", dir.to_string(), s)),
        }
    }
}

fn is_precondition(s: &Status) -> bool {
    s.code() == Code::FailedPrecondition
        || s.message().to_ascii_lowercase().contains("precondition")
}

fn classify_create(path: String, s: Status) -> FilerError {
    if s.code() == Code::AlreadyExists || s.message().contains("already exists") {
        FilerError::AlreadyExists { path }
    } else {
        FilerError::from_status("CreateEntry", path, s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_filer_address_on_another_port_named_no_fix() {
        let other = configuration_error(
            "h:9333",
            Status::unimplemented("unknown service filer_pb.SeaweedFiler"),
        )
        .to_string();
        assert!(
            other.contains("h:9333 answers gRPC but is not a filer")
                && other.contains("HTTP port + 10000"),
            "{other}"
        );
        let http =
            configuration_error("h:8888", Status::internal("h2 protocol error: http2 error"));
        assert!(
            http.to_string()
                .contains("h:8888 does not speak gRPC (an HTTP port?)"),
            "{http}"
        );
        let down = configuration_error("h:18888", Status::unavailable("tcp connect error"));
        assert!(matches!(down, FilerError::Transport { .. }), "{down}");
    }

    #[test]
    fn unknown_filer_error_code_was_taken_for_success() {
        let p = || "/etc/x".to_string();
        assert!(create_answer(p(), 0, String::new()).is_ok());
        match create_answer(p(), 42, String::new()) {
            Err(FilerError::Server { message, code, .. }) => {
                assert_eq!((message.as_str(), code), ("error code 42", Some(42)));
            }
            other => panic!("an unknown code is a failure: {other:?}"),
        }
        let e = create_answer(p(), 1, "too long".into()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "filer CreateEntry /etc/x failed: ENTRY_NAME_TOO_LONG: too long"
        );
        let e = create_answer(p(), 0, "disk full".into()).unwrap_err();
        assert_eq!(e.to_string(), "filer CreateEntry /etc/x failed: disk full");
        assert!(matches!(
            create_answer(p(), 5, String::new()),
            Err(FilerError::AlreadyExists { .. })
        ));
    }

    #[test]
    fn join_and_split_paths() {
        assert_eq!(join_path("/buckets", "b"), "/buckets/b");
        assert_eq!(join_path("/buckets/", "b"), "/buckets/b");
        assert_eq!(join_path("/", "etc"), "/etc");
        assert_eq!(
            split_path("/buckets/b/k/"),
            ("/buckets/b".into(), "k".into())
        );
        assert_eq!(split_path("/etc"), ("/".into(), "etc".into()));
    }

    #[test]
    fn status_classification_keeps_transport_apart() {
        let t = FilerError::from_status("X", "/p".into(), Status::unavailable("conn refused"));
        assert!(matches!(t, FilerError::Transport { .. }));
        let s = FilerError::from_status("X", "/p".into(), Status::unknown("boom"));
        assert!(!matches!(s, FilerError::Transport { .. }));
        assert!(s.to_string().contains("/p"), "{s}");
    }

    #[tokio::test]
    async fn connect_error_names_the_address() {
        // Port 1 on loopback: nothing listens there.
        let err = FilerClient::connect("127.0.0.1:1").await.unwrap_err();
        assert!(matches!(err, FilerError::Connect { .. }), "{err:?}");
        assert!(err.to_string().contains("127.0.0.1:1"), "{err}");
        let err = FilerClient::connect("http://bad host:1").await.unwrap_err();
        assert!(err.to_string().contains("bad host"), "{err}");
    }
}
