//! s3-lifecycled as an `s3_lifecycle` plugin worker of `weed admin`
//! (docs/plugin-worker.md): the job's meaning ([`job`], no I/O), the admin's
//! HTTP API ([`admin_http`]), the one-enforcer check ([`enforcer`]), the
//! worker's entry point and reconnect loop ([`worker`]), one `WorkerStream`
//! session ([`session`]), one job's execution (`execute`), what those two
//! share (`shared`), the state directory ([`state_dir`]) and the worker's
//! `/metrics` ([`http`]).

pub mod admin_http;
pub mod enforcer;
mod execute;
pub mod http;
pub mod job;
pub mod session;
mod shared;
pub mod state_dir;
pub mod worker;
