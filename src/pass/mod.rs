//! The daily pass: per-bucket recovery planning, retry policy and pass
//! summaries (pure), and later the actors that run a pass. The lifecycle
//! decisions themselves live in [`crate::engine`].

pub mod dispatch;
pub mod plan;
pub mod retry;
