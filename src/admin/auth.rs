//! Authentication of the admin API and the status page: a bearer token read
//! from `service.admin_token_file`, checked on every admin gRPC call and on
//! `/` and `/status.json` (they show object keys), sent by the `trigger` and
//! `status` CLI. `/metrics`, `/health`, `/ready` and gRPC health stay open
//! for probes and scrapers. A bind beyond loopback without a token is a
//! configuration error (docs/admin-auth.md).

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use tonic::metadata::{Ascii, MetadataValue};
use tonic::{Request, Status};

/// The shared secret. Cheap to clone; never printed.
#[derive(Clone)]
pub struct AdminToken(Arc<str>);

impl std::fmt::Debug for AdminToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AdminToken(..)")
    }
}

/// Why a request was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthFailure {
    /// No `authorization: Bearer …` header.
    Missing,
    /// A bearer token that is not ours.
    Wrong,
}

impl AuthFailure {
    /// The message returned to the caller.
    pub fn message(self) -> &'static str {
        match self {
            AuthFailure::Missing => {
                "missing bearer token: send `authorization: Bearer <token>` (the CLI reads it from \
                 service.admin_token_file or --admin-token-file)"
            }
            AuthFailure::Wrong => {
                "wrong bearer token: it does not match the service's service.admin_token_file"
            }
        }
    }
}

impl AdminToken {
    /// Reads the token from `path` (surrounding whitespace and newline
    /// trimmed). The message names the file and the key.
    pub fn from_file(path: &Path) -> Result<AdminToken, String> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            format!(
                "configuration key `service.admin_token_file`: cannot read {}: {e}",
                path.display()
            )
        })?;
        AdminToken::new(text.trim()).map_err(|m| {
            format!(
                "configuration key `service.admin_token_file`: {}: {m}",
                path.display()
            )
        })
    }

    /// A token from its text: at least 16 visible ASCII characters, so it
    /// fits an HTTP header and is not trivially guessed.
    pub fn new(token: &str) -> Result<AdminToken, String> {
        if token.len() < 16 {
            return Err(format!(
                "the token must be at least 16 characters (got {}); e.g. `openssl rand -hex 32`",
                token.len()
            ));
        }
        if !token.bytes().all(|b| b.is_ascii_graphic()) {
            return Err("the token must be visible ASCII characters without spaces".into());
        }
        Ok(AdminToken(token.into()))
    }

    /// The `authorization` header value the client sends.
    pub fn header_value(&self) -> MetadataValue<Ascii> {
        // Checked to be visible ASCII in `new`.
        format!("Bearer {}", self.0)
            .parse()
            .unwrap_or_else(|_| MetadataValue::from_static(""))
    }

    /// Checks an `authorization` header value.
    pub fn check(&self, header: Option<&[u8]>) -> Result<(), AuthFailure> {
        let Some(h) = header else {
            return Err(AuthFailure::Missing);
        };
        let Some(given) = h
            .strip_prefix(b"Bearer ")
            .or_else(|| h.strip_prefix(b"bearer "))
        else {
            return Err(AuthFailure::Missing);
        };
        if constant_time_eq(given.trim_ascii(), self.0.as_bytes()) {
            Ok(())
        } else {
            Err(AuthFailure::Wrong)
        }
    }

    /// The gRPC server side: refuses a call without the token
    /// (`UNAUTHENTICATED`).
    pub fn check_request<T>(&self, req: Request<T>) -> Result<Request<T>, Status> {
        let h = req.metadata().get("authorization").map(|v| v.as_bytes());
        match self.check(h) {
            Ok(()) => Ok(req),
            Err(f) => Err(Status::unauthenticated(f.message())),
        }
    }
}

/// Compares without an early exit, so the time taken does not tell how many
/// leading bytes of a guess were right.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let mut diff = a.len() ^ b.len();
    for (i, x) in b.iter().enumerate() {
        diff |= usize::from(a.get(i).copied().unwrap_or(0) ^ x);
    }
    diff == 0
}

/// The client side: adds the token (if any) to every call.
#[derive(Debug, Clone, Default)]
pub struct SendToken(pub Option<AdminToken>);

impl tonic::service::Interceptor for SendToken {
    fn call(&mut self, mut req: Request<()>) -> Result<Request<()>, Status> {
        if let Some(t) = &self.0 {
            req.metadata_mut().insert("authorization", t.header_value());
        }
        Ok(req)
    }
}

/// `service.admin_listen` / `service.http_listen` (`key`) is `addr`: beyond
/// loopback it needs a token. `Err` is the configuration message (exit 2).
pub fn require_auth_beyond_loopback(
    key: &str,
    addr: &str,
    token: Option<&AdminToken>,
) -> Result<(), String> {
    let Ok(sa) = addr.trim().parse::<SocketAddr>() else {
        // Not an address: the bind reports it with the expected form.
        return Ok(());
    };
    if sa.ip().is_loopback() || token.is_some() {
        return Ok(());
    }
    Err(format!(
        "configuration key `{key}`: {sa} is reachable beyond loopback, and the admin API and \
         status page must then be authenticated: set service.admin_token_file to a file holding \
         a bearer token (e.g. `openssl rand -hex 32 > /etc/s3-lifecycled/admin.token`), or bind \
         to 127.0.0.1"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_token_is_checked_and_failures_are_distinct() {
        let t = AdminToken::new("0123456789abcdef0123").unwrap();
        assert_eq!(t.check(Some(b"Bearer 0123456789abcdef0123")), Ok(()));
        assert_eq!(t.check(None), Err(AuthFailure::Missing));
        assert_eq!(t.check(Some(b"Basic abc")), Err(AuthFailure::Missing));
        assert_eq!(
            t.check(Some(b"Bearer 0123456789abcdef0124")),
            Err(AuthFailure::Wrong)
        );
        assert_eq!(t.check(Some(b"Bearer 0123")), Err(AuthFailure::Wrong));
        assert_eq!(
            t.check(Some(b"Bearer 0123456789abcdef01234")),
            Err(AuthFailure::Wrong)
        );
        assert_eq!(format!("{t:?}"), "AdminToken(..)");
    }

    #[test]
    fn short_or_odd_tokens_are_refused_with_the_fix() {
        assert!(AdminToken::new("short").unwrap_err().contains("16"));
        assert!(AdminToken::new("has a space in it here").is_err());
        let e = AdminToken::from_file(Path::new("/nonexistent/admin.token")).unwrap_err();
        assert!(e.contains("service.admin_token_file") && e.contains("/nonexistent/admin.token"));
    }

    #[test]
    fn beyond_loopback_without_a_token_is_an_error() {
        let t = AdminToken::new("0123456789abcdef0123").unwrap();
        assert!(
            require_auth_beyond_loopback("service.admin_listen", "127.0.0.1:9710", None).is_ok()
        );
        assert!(require_auth_beyond_loopback("service.admin_listen", "[::1]:9710", None).is_ok());
        let e =
            require_auth_beyond_loopback("service.http_listen", "0.0.0.0:9711", None).unwrap_err();
        assert!(
            e.contains("service.http_listen") && e.contains("service.admin_token_file"),
            "{e}"
        );
        assert!(
            require_auth_beyond_loopback("service.admin_listen", "0.0.0.0:9710", Some(&t)).is_ok()
        );
    }
}
