//! A minimal blocking HTTP/1.x client over `std::net::TcpStream` for readiness probes, raw S3
//! requests the SDK cannot express byte for byte, and the service's own HTTP endpoints (no new
//! dependencies needed).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// One HTTP response: status code, headers as read, and the body bytes.
#[derive(Debug)]
pub struct Response {
    /// Status code from the status line.
    pub status: u16,
    /// Raw header block (everything before the blank line), for error messages.
    pub head: String,
    /// Body bytes (the connection is closed by the server, so this is the whole body).
    pub body: Vec<u8>,
}

impl Response {
    /// The body as lossy UTF-8, for assertions and error messages.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The value of header `name` (case-insensitive), trimmed.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.head
            .split("\r\n")
            .skip(1)
            .filter_map(|l| l.split_once(':'))
            .find(|(k, _)| k.trim().eq_ignore_ascii_case(name))
            .map(|(_, v)| v.trim())
    }
}

/// Sends one request with `Connection: close` and reads the response until EOF.
///
/// `headers` must not include Host, Content-Length or Connection; they are added here.
pub fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> std::io::Result<Response> {
    let timeout = Duration::from_secs(10);
    let mut stream = TcpStream::connect_timeout(&addr, timeout)?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    // Always send a length, even 0, so Go's server never waits for a body.
    req.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
    stream.write_all(req.as_bytes())?;
    stream.write_all(body)?;
    stream.flush()?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw)?;
    parse(&raw).ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!(
                "unparsable HTTP response from {addr} to {method} {path}: {:?}",
                String::from_utf8_lossy(&raw[..raw.len().min(200)])
            ),
        )
    })
}

/// Plain GET with optional extra headers.
pub fn get(addr: SocketAddr, path: &str, headers: &[(&str, &str)]) -> std::io::Result<Response> {
    request(addr, "GET", path, headers, &[])
}

/// [`get`] without extra headers, off the async runtime's threads (for a server running on the
/// same runtime).
pub async fn get_async(addr: SocketAddr, path: &str) -> std::io::Result<Response> {
    let path = path.to_string();
    tokio::task::spawn_blocking(move || get(addr, &path, &[]))
        .await
        .expect("joining the blocking GET")
}

fn parse(raw: &[u8]) -> Option<Response> {
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let status = head.split_whitespace().nth(1)?.parse().ok()?;
    let mut body = raw[split + 4..].to_vec();
    if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        body = dechunk(&body)?;
    }
    Some(Response { status, head, body })
}

/// Decodes a chunked body (Go uses chunked encoding for unsized bodies even on `Connection: close`).
fn dechunk(mut data: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let line_end = data.windows(2).position(|w| w == b"\r\n")?;
        let size_str = std::str::from_utf8(&data[..line_end]).ok()?;
        let size = usize::from_str_radix(size_str.split(';').next()?.trim(), 16).ok()?;
        data = &data[line_end + 2..];
        if size == 0 {
            return Some(out);
        }
        out.extend_from_slice(data.get(..size)?);
        data = data.get(size + 2..)?;
    }
}

/// `url` as headless Chromium renders it (the DOM after load, `--dump-dom`): for the status
/// page's server-rendered HTML and SVG. Needs the Debian packages `chromium` and
/// `chromium-driver` (`.ci/run` installs them); panics naming them when missing.
pub fn chromium_dom(url: &str) -> String {
    let chromium = "/usr/bin/chromium";
    assert!(
        std::path::Path::new(chromium).exists(),
        "{chromium} is missing: install the Debian packages `chromium` and `chromium-driver` \
         (`apt-get install -y chromium chromium-driver`; .ci/run does it)"
    );
    let profile = super::serve::TmpDir::new("chromium-profile");
    // Without the background-networking flags Chromium keeps dialling Google's hosts, which a
    // closed network refuses; a fresh profile per call keeps runs independent.
    let out = std::process::Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(["--dump-dom", url])
        .output()
        .expect("chromium runs");
    assert!(
        out.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}
