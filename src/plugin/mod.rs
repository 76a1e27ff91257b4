//! s3-lifecycled as an `s3_lifecycle` plugin worker of `weed admin`
//! (docs/plugin-worker.md): the job's meaning ([`job`], no I/O), the admin's
//! HTTP API ([`admin_http`]), the one-enforcer check ([`enforcer`]) and the
//! `WorkerStream` session ([`worker`]).

pub mod admin_http;
pub mod enforcer;
pub mod job;
pub mod worker;
