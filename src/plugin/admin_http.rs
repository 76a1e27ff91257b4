//! A small JSON client for the `weed admin` HTTP API (HTTP/1.1, plaintext or
//! HTTPS when the admin has `[https.admin]`, docs/plugin-worker.md#admin-https):
//! the one-enforcer check reads `/api/plugin/workers` with it, and tests and
//! operators' tooling drive runs and job-type configs through it.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper_util::rt::TokioIo;

use crate::seaweed::tls::ClientTls;

/// Deadline of one admin HTTP call, connect included.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// Sends `method path` with an optional JSON body to `addr` (`host:port`)
/// over HTTPS with `tls` (made with [`crate::seaweed::tls_failure::TlsUse::AdminHttps`]),
/// plain HTTP with `None`, and returns the status code and the parsed JSON
/// answer (`Null` when the answer is empty or not JSON). `timeout` bounds the
/// whole call.
pub async fn call(
    tls: Option<&ClientTls>,
    addr: &str,
    method: &str,
    path: &str,
    body: Option<&serde_json::Value>,
    timeout: Duration,
) -> Result<(u16, serde_json::Value), String> {
    let what = format!("weed admin {method} {}{path}", base_url(tls, addr));
    tokio::time::timeout(timeout, call_inner(tls, addr, method, path, body))
        .await
        .map_err(|_| format!("{what}: no answer within {timeout:?}"))?
        .map_err(|e| format!("{what}: {e}"))
}

/// `http://addr` or `https://addr`, for messages.
fn base_url(tls: Option<&ClientTls>, addr: &str) -> String {
    let scheme = if tls.is_some() { "https" } else { "http" };
    format!("{scheme}://{addr}")
}

async fn call_inner(
    tls: Option<&ClientTls>,
    addr: &str,
    method: &str,
    path: &str,
    body: Option<&serde_json::Value>,
) -> Result<(u16, serde_json::Value), String> {
    let mut send = match tls {
        None => {
            let stream = tokio::net::TcpStream::connect(addr)
                .await
                .map_err(|e| format!("connect: {e}"))?;
            handshake(TokioIo::new(stream)).await?
        }
        Some(tls) => {
            let (host, port) = crate::seaweed::tls::host_port(addr)
                .ok_or_else(|| format!("{addr:?} is not host:port"))?;
            // A refused handshake says why (unknown CA, name, our
            // certificate), in the words of docs/tls.md#how-failures-surface.
            let io = tls
                .dial(&host, port)
                .await
                .map_err(|e| format!("TLS connect: {e}"))?;
            handshake(TokioIo::new(io)).await?
        }
    };
    let payload = body.map(|b| b.to_string()).unwrap_or_default();
    let req = Request::builder()
        .method(method)
        .uri(path)
        .header(hyper::header::HOST, addr)
        .header(hyper::header::CONTENT_TYPE, "application/json")
        .header(hyper::header::ACCEPT, "application/json")
        .body(Full::new(Bytes::from(payload)))
        .map_err(|e| format!("request: {e}"))?;
    let resp = send
        .send_request(req)
        .await
        .map_err(|e| format!("send: {e}"))?;
    let status = resp.status().as_u16();
    let bytes = resp
        .into_body()
        .collect()
        .await
        .map_err(|e| format!("read body: {e}"))?
        .to_bytes();
    let json = if bytes.is_empty() {
        serde_json::Value::Null
    } else {
        serde_json::from_slice(&bytes).unwrap_or_else(|_| {
            serde_json::Value::String(String::from_utf8_lossy(&bytes).into_owned())
        })
    };
    Ok((status, json))
}

/// The HTTP/1.1 exchange over `io`; the connection is driven by a task of
/// its own, which ends when the exchange does (no keep-alive reuse).
async fn handshake<I>(io: I) -> Result<hyper::client::conn::http1::SendRequest<Full<Bytes>>, String>
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let (send, conn) = hyper::client::conn::http1::handshake(io)
        .await
        .map_err(|e| format!("handshake: {e}"))?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok(send)
}

/// `GET path`, requiring a 2xx answer.
pub async fn get(
    tls: Option<&ClientTls>,
    addr: &str,
    path: &str,
) -> Result<serde_json::Value, String> {
    let (status, json) = call(tls, addr, "GET", path, None, CALL_TIMEOUT).await?;
    if (200..300).contains(&status) {
        Ok(json)
    } else {
        Err(format!(
            "weed admin GET {}{path}: HTTP {status}: {json}",
            base_url(tls, addr)
        ))
    }
}
