//! The one place gRPC client endpoints are built: address parsing, HTTP/2
//! keepalive, connect and call timeouts, and the message-size limit, shared by
//! every client this crate opens (filer, `LifecycleDelete`, the admin CLI).
//!
//! Callers describe a connection with [`EndpointOptions`] and turn an address
//! into a [`GrpcEndpoint`]; they never touch tonic's `Endpoint` themselves, so
//! a new transport setting is one more option here rather than an edit in
//! every client. TLS is one such option ([`EndpointOptions::tls`]): with it,
//! every connection is dialled through [`ClientTls`]'s connector (chain
//! verified, name checked only on request, files re-read on change;
//! docs/tls.md#what-a-client-needs).

use std::time::Duration;

use tonic::transport::{Channel, Endpoint};

use crate::seaweed::tls::ClientTls;

/// Largest gRPC message any client decodes or encodes. Batched meta-log
/// responses and big directory pages can be large, and SeaweedFS's Go clients
/// allow 1 GiB (docs/grpc.md#message-size); the limit is generous rather than tight
/// because a rejected message fails a whole pass.
pub const MAX_MESSAGE_BYTES: usize = 1 << 30;

/// HTTP/2 keepalive pings on a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Keepalive {
    /// Time between pings.
    pub interval: Duration,
    /// How long to wait for a ping's answer before dropping the connection.
    pub timeout: Duration,
}

impl Keepalive {
    /// What SeaweedFS's Go servers tolerate: they refuse pings more often than
    /// every 20 s (and eventually close the connection), so ping every 60 s,
    /// and only while calls are in flight (docs/grpc.md#keepalive).
    pub const SEAWEED: Keepalive = Keepalive {
        interval: Duration::from_secs(60),
        timeout: Duration::from_secs(20),
    };
}

/// How to connect to one gRPC server. Built with the methods below rather
/// than a struct literal, so that adding a setting (TLS next) does not change
/// any caller.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EndpointOptions {
    connect_timeout: Option<Duration>,
    call_timeout: Option<Duration>,
    keepalive: Option<Keepalive>,
    tls: Option<ClientTls>,
}

impl EndpointOptions {
    /// Nothing set: no connect timeout, no per-call deadline, no keepalive.
    pub fn new() -> EndpointOptions {
        EndpointOptions::default()
    }

    /// For SeaweedFS filer and S3 servers: a 10 s connect timeout, keepalive
    /// per [`Keepalive::SEAWEED`], and no per-call deadline, because versioned
    /// deletes and big listings can legitimately take many seconds
    /// (docs/lifecycle-delete.md#latency); callers bound a pass as a whole instead.
    pub fn seaweed() -> EndpointOptions {
        EndpointOptions::new()
            .connect_timeout(Duration::from_secs(10))
            .keepalive(Keepalive::SEAWEED)
    }

    /// Gives up opening the TCP connection after `timeout`.
    pub fn connect_timeout(mut self, timeout: Duration) -> EndpointOptions {
        self.connect_timeout = Some(timeout);
        self
    }

    /// Fails every call that takes longer than `timeout` (`DeadlineExceeded`).
    pub fn call_timeout(mut self, timeout: Duration) -> EndpointOptions {
        self.call_timeout = Some(timeout);
        self
    }

    /// Dials with mutual TLS (`None`: plaintext HTTP/2).
    pub fn tls(mut self, tls: Option<ClientTls>) -> EndpointOptions {
        self.tls = tls;
        self
    }

    /// Sends HTTP/2 keepalive pings while calls are in flight.
    pub fn keepalive(mut self, keepalive: Keepalive) -> EndpointOptions {
        self.keepalive = Some(keepalive);
        self
    }
}

/// An address that cannot be used as a gRPC endpoint.
#[derive(Debug, thiserror::Error)]
pub enum EndpointError {
    /// The address does not parse as `HOST:PORT` or a URL.
    #[error(
        "invalid gRPC address {addr:?}: {reason}; expected HOST:PORT or http://HOST:PORT, \
         e.g. 127.0.0.1:18888"
    )]
    Address { addr: String, reason: String },
}

impl EndpointError {
    /// What is wrong, without the address: for callers whose own error
    /// message already names the address and the expected form.
    pub fn reason(&self) -> &str {
        let EndpointError::Address { reason, .. } = self;
        reason
    }
}

/// HTTP/2 receive window of one stream (docs/grpc.md#flow-control-windows):
/// how far the filer may send ahead of our reader.
pub const STREAM_WINDOW_BYTES: u32 = 4 << 20;
/// HTTP/2 receive window of one connection, shared by its streams.
pub const CONNECTION_WINDOW_BYTES: u32 = 8 << 20;

/// A parsed and configured gRPC endpoint, ready to connect. Cheap to clone.
#[derive(Debug, Clone)]
pub struct GrpcEndpoint {
    endpoint: Endpoint,
    tls: Option<ClientTls>,
}

impl GrpcEndpoint {
    /// Parses `addr`, `HOST:PORT` (plain HTTP/2 is assumed) or a URL such as
    /// `http://HOST:PORT`, and applies `options`. Nothing is dialled yet.
    pub fn new(addr: &str, options: &EndpointOptions) -> Result<GrpcEndpoint, EndpointError> {
        let url = if addr.contains("://") {
            addr.to_string()
        } else {
            format!("http://{addr}")
        };
        let bad = |reason: String| EndpointError::Address {
            addr: addr.to_string(),
            reason,
        };
        let endpoint = Endpoint::from_shared(url).map_err(|e| bad(e.to_string()))?;
        // The URI parser takes any digits as a port: `HOST:99999` dialled port
        // 80, and `HOST` alone became a DNS error at the first call.
        let uri = endpoint.uri();
        if uri.host().is_none_or(str::is_empty) {
            return Err(bad("no host".into()));
        }
        let authority = uri.authority().map_or("", |a| a.as_str());
        match authority.rsplit_once(':') {
            _ if authority.ends_with(']') => return Err(bad("no port".into())),
            None => return Err(bad("no port".into())),
            Some((_, port)) if port.parse::<u16>().is_ok_and(|p| p > 0) => {}
            Some(_) => return Err(bad("the port must be a number from 1 to 65535".into())),
        }
        let mut endpoint = endpoint
            // Requests are small and latency-bound; tonic's default, stated so
            // it does not depend on one.
            .tcp_nodelay(true)
            // HTTP/2 flow-control windows well above the 64 KiB default: a
            // meta-log replay streams tens of MB, and with the default window
            // the filer stopped every 64 KiB until our reader thread was
            // scheduled to send a window update, which on a busy box cost a
            // replay up to half its rate (docs/grpc.md#flow-control-windows).
            .initial_stream_window_size(Some(STREAM_WINDOW_BYTES))
            .initial_connection_window_size(Some(CONNECTION_WINDOW_BYTES));
        if let Some(t) = options.connect_timeout {
            endpoint = endpoint.connect_timeout(t);
        }
        if let Some(t) = options.call_timeout {
            endpoint = endpoint.timeout(t);
        }
        if let Some(k) = options.keepalive {
            endpoint = endpoint
                .http2_keep_alive_interval(k.interval)
                .keep_alive_timeout(k.timeout)
                .keep_alive_while_idle(false);
        }
        Ok(GrpcEndpoint {
            endpoint,
            tls: options.tls.clone(),
        })
    }

    /// Dials now and fails when nothing answers (within the connect timeout).
    pub async fn connect(&self) -> Result<Channel, tonic::transport::Error> {
        match &self.tls {
            // The URI keeps its `http` scheme: TLS is done by our connector,
            // below HTTP/2, not by tonic.
            Some(tls) => self.endpoint.connect_with_connector(tls.connector()).await,
            None => self.endpoint.connect().await,
        }
    }

    /// A channel that dials on first use and redials on demand, so an
    /// unreachable server shows up per call instead of here. Must be called
    /// inside a tokio runtime, which then hosts the channel's buffer task.
    pub fn connect_lazy(&self) -> Channel {
        match &self.tls {
            Some(tls) => self.endpoint.connect_with_connector_lazy(tls.connector()),
            None => self.endpoint.connect_lazy(),
        }
    }

    /// The client TLS this endpoint dials with, if any.
    pub fn client_tls(&self) -> Option<&ClientTls> {
        self.tls.as_ref()
    }

    /// The URI that will be dialled.
    pub fn uri(&self) -> &tonic::transport::Uri {
        self.endpoint.uri()
    }
}

/// A SeaweedFS server address as weed writes it: `HOST:PORT`, where the gRPC
/// port is the HTTP port + 10000, or `HOST:HTTPPORT.GRPCPORT` with both given
/// (docs/plugin-worker.md#addresses). The one parser for masters, filers
/// and `weed admin`; IPv6 hosts keep their brackets (`[::1]:8888`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerAddress {
    host: String,
    http: u16,
    grpc: u16,
}

/// Why an address is not a SeaweedFS server address.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "`{addr}` is not a SeaweedFS server address ({why}): give HOST:PORT (gRPC on PORT + 10000) \
     or HOST:HTTPPORT.GRPCPORT"
)]
pub struct AddressError {
    pub addr: String,
    /// What is wrong with it.
    pub why: &'static str,
}

impl ServerAddress {
    /// Parses `addr` (surrounding blanks ignored).
    pub fn parse(addr: &str) -> Result<ServerAddress, AddressError> {
        let addr = addr.trim();
        let bad = |why| AddressError {
            addr: addr.to_string(),
            why,
        };
        let (host, ports) = addr.rsplit_once(':').ok_or_else(|| bad("no port"))?;
        if host.is_empty() {
            return Err(bad("no host"));
        }
        let (http, grpc) = match ports.split_once('.') {
            Some((http, grpc)) => (
                http.parse().map_err(|_| bad("HTTP port is not a number"))?,
                grpc.parse().map_err(|_| bad("gRPC port is not a number"))?,
            ),
            None => {
                let http: u16 = ports.parse().map_err(|_| bad("port is not a number"))?;
                let grpc = http
                    .checked_add(10_000)
                    .ok_or_else(|| bad("HTTP port + 10000 is past 65535; give both ports"))?;
                (http, grpc)
            }
        };
        Ok(ServerAddress {
            host: host.to_string(),
            http,
            grpc,
        })
    }

    /// The gRPC address of `addr` where a bare port is already the gRPC port
    /// (`cluster.master`, a job's `filer_grpc_address`): `HOST:GRPCPORT` as
    /// given, or the gRPC half of `HOST:HTTPPORT.GRPCPORT`.
    pub fn grpc_as_given(addr: &str) -> Result<String, AddressError> {
        let addr = addr.trim();
        match addr.rsplit_once(':') {
            Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok() => {
                Ok(addr.to_string())
            }
            _ => ServerAddress::parse(addr).map(|a| a.grpc()),
        }
    }

    /// `HOST:GRPCPORT`.
    pub fn grpc(&self) -> String {
        format!("{}:{}", self.host, self.grpc)
    }

    /// `HOST:HTTPPORT`.
    pub fn http(&self) -> String {
        format!("{}:{}", self.host, self.http)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_port_gets_http_scheme_and_urls_are_kept() {
        let e = GrpcEndpoint::new("127.0.0.1:18888", &EndpointOptions::seaweed()).unwrap();
        assert_eq!(e.uri().to_string(), "http://127.0.0.1:18888/");
        let e = GrpcEndpoint::new("http://filer:18888", &EndpointOptions::new()).unwrap();
        assert_eq!(e.uri().to_string(), "http://filer:18888/");
    }

    #[test]
    fn bad_address_names_it_and_the_expected_form() {
        for bad in ["", "host name:1", "http://[::1"] {
            let err = GrpcEndpoint::new(bad, &EndpointOptions::seaweed()).unwrap_err();
            let EndpointError::Address { addr, .. } = &err;
            assert_eq!(addr, bad);
            assert!(!err.reason().is_empty());
            let msg = err.to_string();
            assert!(msg.contains(&format!("{bad:?}")), "{msg}");
            assert!(msg.contains("HOST:PORT"), "{msg}");
        }
    }

    /// `HOST:99999` dialled port 80 and `HOST` alone failed as a DNS error at
    /// the first call: the URI parser takes any digits, or none, as a port.
    #[test]
    fn an_out_of_range_or_missing_port_dialled_port_80() {
        let reason = |a: &str| {
            GrpcEndpoint::new(a, &EndpointOptions::seaweed())
                .unwrap_err()
                .reason()
                .to_string()
        };
        assert_eq!(
            reason("127.0.0.1:99999"),
            "the port must be a number from 1 to 65535"
        );
        assert_eq!(reason("g:0"), "the port must be a number from 1 to 65535");
        assert_eq!(reason("nohost"), "no port");
        assert_eq!(reason("http://[::1]"), "no port");
        for ok in ["[::1]:18888", "http://filer-2:18888", "h:65535"] {
            assert!(
                GrpcEndpoint::new(ok, &EndpointOptions::seaweed()).is_ok(),
                "{ok}"
            );
        }
    }

    #[test]
    fn options_apply_to_the_endpoint() {
        let e = GrpcEndpoint::new("h:1", &EndpointOptions::seaweed()).unwrap();
        assert_eq!(
            e.endpoint.get_connect_timeout(),
            Some(Duration::from_secs(10))
        );
        assert!(e.endpoint.get_tcp_nodelay());
        let e = GrpcEndpoint::new("h:1", &EndpointOptions::new()).unwrap();
        assert_eq!(e.endpoint.get_connect_timeout(), None);
        let opts = EndpointOptions::new()
            .connect_timeout(Duration::from_secs(5))
            .call_timeout(Duration::from_secs(30));
        assert_eq!(opts.keepalive, None);
        let e = GrpcEndpoint::new("h:1", &opts).unwrap();
        assert_eq!(
            e.endpoint.get_connect_timeout(),
            Some(Duration::from_secs(5))
        );
    }

    #[tokio::test]
    async fn lazy_channel_does_not_dial() {
        // Port 1 on loopback: nothing listens, yet building the channel succeeds.
        let e = GrpcEndpoint::new("127.0.0.1:1", &EndpointOptions::seaweed()).unwrap();
        let _channel = e.connect_lazy();
        assert!(e.connect().await.is_err());
    }

    #[test]
    fn server_addresses_convert_like_weed() {
        let grpc = |a: &str| ServerAddress::parse(a).map(|s| s.grpc());
        assert_eq!(grpc("10.0.0.1:8888.18889").unwrap(), "10.0.0.1:18889");
        assert_eq!(grpc("filer:8888").unwrap(), "filer:18888");
        assert_eq!(grpc(" h:8888 ").unwrap(), "h:18888");
        assert_eq!(grpc("[::1]:8888.9999").unwrap(), "[::1]:9999");
        assert_eq!(grpc("[::1]:8888").unwrap(), "[::1]:18888");
        assert_eq!(
            ServerAddress::parse("h:23646.33999").unwrap().http(),
            "h:23646"
        );
        let given = |a: &str| ServerAddress::grpc_as_given(a);
        assert_eq!(given("m:19333").unwrap(), "m:19333");
        assert_eq!(given("m:60000").unwrap(), "m:60000");
        assert_eq!(given("m:9333.19333").unwrap(), "m:19333");
        assert!(given("m").is_err() && given("m:x").is_err());
        for bad in ["filer", ":8888", "h:x", "h:60000", "h:1.x", "h:x.1", "h:"] {
            let e = ServerAddress::parse(bad).unwrap_err().to_string();
            assert!(
                e.contains(bad) && e.contains("HOST:HTTPPORT.GRPCPORT"),
                "{e}"
            );
        }
    }
}
