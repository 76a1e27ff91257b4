//! Addresses as weed reads them: to weed a bare `HOST:PORT` is an HTTP port
//! whose gRPC server listens on PORT + 10000 (`weed shell -master=localhost:9333`
//! dials 19333), where our settings take a bare address as the gRPC port
//! itself. An address at which no gRPC server answers, while its weed reading
//! does, is read as weed reads it, with a warning naming the setting to write
//! (docs/grpc.md#weed-form).

use std::time::Duration;

use tonic::Code;
use tonic::codegen::http::uri::PathAndQuery;

use crate::seaweed::endpoint::{EndpointOptions, GrpcEndpoint};
use crate::seaweed::tls::ClientTls;

/// How long one probe may take, all of it: a server on loopback or a LAN
/// answers in milliseconds. A probe that runs out only means "not shown to
/// answer", so the address stays as given; what it bounds is the start-up
/// delay an address that accepts and never answers (a hung server) adds.
const PROBE_TIMEOUT: Duration = Duration::from_secs(1);

/// A method no server has: a gRPC server answers it `Unimplemented`, whatever
/// services it serves; an HTTP/1 server fails the HTTP/2 connection.
const PROBE_PATH: &str = "/s3lifecycled.Probe/Probe";

/// weed's reading of a bare `HOST:PORT`: `HOST:PORT+10000`. `None` for every
/// other form (`HOST:HTTPPORT.GRPCPORT` names its gRPC port, a URL is ours).
pub fn weed_reading(addr: &str) -> Option<String> {
    let addr = addr.trim();
    if addr.contains("://") {
        return None;
    }
    let (host, port) = addr.rsplit_once(':')?;
    let grpc = port.parse::<u16>().ok()?.checked_add(10_000)?;
    (!host.is_empty()).then(|| format!("{host}:{grpc}"))
}

/// Whether a gRPC server answers at `addr` (over client `tls` when set).
pub async fn speaks_grpc(addr: &str, tls: Option<&ClientTls>) -> bool {
    probe_grpc(addr, tls).await == Some(true)
}

/// [`speaks_grpc`], or `None` when the probe ran out of time: something
/// accepted the connection and never answered (a hung server), which an
/// HTTP/1 server would not do either.
async fn probe_grpc(addr: &str, tls: Option<&ClientTls>) -> Option<bool> {
    tokio::time::timeout(PROBE_TIMEOUT, grpc_answers(addr, tls))
        .await
        .ok()
}

async fn grpc_answers(addr: &str, tls: Option<&ClientTls>) -> bool {
    let options = EndpointOptions::new()
        .connect_timeout(PROBE_TIMEOUT)
        .call_timeout(PROBE_TIMEOUT)
        .tls(tls.cloned());
    let Ok(endpoint) = GrpcEndpoint::new(addr, &options) else {
        return false;
    };
    let Ok(channel) = endpoint.connect().await else {
        return false;
    };
    let mut grpc = tonic::client::Grpc::new(channel);
    if grpc.ready().await.is_err() {
        return false;
    }
    let codec = tonic_prost::ProstCodec::<(), ()>::default();
    let path = PathAndQuery::from_static(PROBE_PATH);
    match grpc.unary(tonic::Request::new(()), path, codec).await {
        Ok(_) => true,
        // What a server says, not what the transport says: a gRPC server
        // that checks callers may refuse before routing.
        Err(s) => matches!(
            s.code(),
            Code::Unimplemented | Code::Unauthenticated | Code::PermissionDenied
        ),
    }
}

/// `addr`, or its [`weed_reading`] when a gRPC server answers only there;
/// `key` names the setting in the warning.
pub async fn settle(key: &str, addr: &str, tls: Option<&ClientTls>) -> String {
    let Some(weed) = weed_reading(addr) else {
        return addr.to_string();
    };
    // Both at once: the start-up waits for one probe's bound at the most.
    let (given, read_as_weed) = tokio::join!(probe_grpc(addr, tls), speaks_grpc(&weed, tls));
    if given == Some(true) {
        return addr.to_string();
    }
    if !read_as_weed {
        // The call that follows fails with an HTTP/2 protocol error, which
        // does not say that the port is a server's HTTP port. Not asked of a
        // server that answered nothing at all.
        if given.is_some() && speaks_http1(addr).await {
            tracing::warn!(
                "`{key}` {addr} answers HTTP/1, not gRPC: it is a server's HTTP port. Give its \
                 gRPC port (weed's -<role>.port.grpc, PORT + 10000 unless set), or \
                 HOST:HTTPPORT.GRPCPORT"
            );
        }
        return addr.to_string();
    }
    tracing::warn!(
        "`{key}` {addr}: no gRPC server answers there, one does at {weed}: read as weed reads a \
         bare HOST:PORT (an HTTP port, gRPC on PORT + 10000); write {weed} (or {}.{}) to skip \
         this probe",
        addr.trim(),
        weed.rsplit_once(':').map_or("", |(_, p)| p)
    );
    weed
}

/// Whether an HTTP/1 server answers at `addr` (plain TCP): a `HEAD /` answered
/// with an `HTTP/1.` status line.
pub async fn speaks_http1(addr: &str) -> bool {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let exchange = async {
        let mut conn = tokio::net::TcpStream::connect(addr.trim()).await.ok()?;
        conn.write_all(b"HEAD / HTTP/1.0\r\n\r\n").await.ok()?;
        let mut head = [0u8; 7];
        conn.read_exact(&mut head).await.ok()?;
        Some(&head == b"HTTP/1.")
    };
    let answered = tokio::time::timeout(PROBE_TIMEOUT, exchange).await;
    answered.ok().flatten().unwrap_or(false)
}

/// [`settle_all`] for `cluster.master`: one master or several, comma-separated
/// ([`masters`](crate::seaweed::discovery::masters)); the same list back.
pub async fn settle_masters(master: &str, tls: Option<&ClientTls>) -> String {
    let masters = crate::seaweed::discovery::masters(master);
    settle_all("cluster.master", &masters, tls).await.join(",")
}

/// [`settle`] for each of `addrs`, probed together.
pub async fn settle_all(key: &str, addrs: &[String], tls: Option<&ClientTls>) -> Vec<String> {
    futures::future::join_all(addrs.iter().map(|a| settle(key, a, tls))).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_bare_host_port_has_a_weed_reading() {
        assert_eq!(
            weed_reading("localhost:9333").as_deref(),
            Some("localhost:19333")
        );
        assert_eq!(weed_reading(" [::1]:8888 ").as_deref(), Some("[::1]:18888"));
        assert_eq!(weed_reading("h:8888.18888"), None);
        assert_eq!(weed_reading("http://h:18888"), None);
        assert_eq!(weed_reading("h:60000"), None);
        assert_eq!(weed_reading(":8888"), None);
        assert_eq!(weed_reading("h"), None);
    }

    #[tokio::test]
    async fn nothing_listening_is_not_grpc_and_the_address_stays() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        drop(l);
        let addr = format!("127.0.0.1:{port}");
        assert!(!speaks_grpc(&addr, None).await);
        assert_eq!(settle("cluster.filer", &addr, None).await, addr);
    }
}
