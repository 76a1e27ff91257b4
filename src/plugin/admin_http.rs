//! A small JSON client for the `weed admin` HTTP API (plaintext HTTP/1.1):
//! the one-enforcer check reads `/api/plugin/workers` with it, and tests and
//! operators' tooling drive runs and job-type configs through it.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper_util::rt::TokioIo;

/// Deadline of one admin HTTP call, connect included.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// Sends `method path` with an optional JSON body to `addr` (`host:port`)
/// and returns the status code and the parsed JSON answer (`Null` when the
/// answer is empty or not JSON). `timeout` bounds the whole call.
pub async fn call(
    addr: &str,
    method: &str,
    path: &str,
    body: Option<&serde_json::Value>,
    timeout: Duration,
) -> Result<(u16, serde_json::Value), String> {
    let what = format!("weed admin {method} http://{addr}{path}");
    tokio::time::timeout(timeout, call_inner(addr, method, path, body))
        .await
        .map_err(|_| format!("{what}: no answer within {timeout:?}"))?
        .map_err(|e| format!("{what}: {e}"))
}

async fn call_inner(
    addr: &str,
    method: &str,
    path: &str,
    body: Option<&serde_json::Value>,
) -> Result<(u16, serde_json::Value), String> {
    let stream = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|e| format!("connect: {e}"))?;
    let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| format!("handshake: {e}"))?;
    // The connection task ends when the exchange does (no keep-alive reuse).
    tokio::spawn(async move {
        let _ = conn.await;
    });
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

/// `GET path`, requiring a 2xx answer.
pub async fn get(addr: &str, path: &str) -> Result<serde_json::Value, String> {
    ok(
        addr,
        "GET",
        path,
        call(addr, "GET", path, None, CALL_TIMEOUT).await?,
    )
}

fn ok(
    addr: &str,
    method: &str,
    path: &str,
    (status, json): (u16, serde_json::Value),
) -> Result<serde_json::Value, String> {
    if (200..300).contains(&status) {
        Ok(json)
    } else {
        Err(format!(
            "weed admin {method} http://{addr}{path}: HTTP {status}: {json}"
        ))
    }
}
