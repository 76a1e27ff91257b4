//! s3-lifecycled as an `s3_lifecycle` plugin worker of `weed admin`
//! (docs/plugin-worker.md): the job's meaning ([`job`], no I/O), the admin's
//! HTTP API ([`admin_http`]), the one-enforcer check ([`enforcer`]), the
//! `WorkerStream` session ([`worker`]) and its `/metrics` ([`http`]).

pub mod admin_http;
pub mod enforcer;
pub mod http;
pub mod job;
pub mod worker;
