//! Entry point of the `s3-lifecycled` binary, and its allocator.

/// mimalloc instead of glibc malloc: a replay allocates every decoded event on the reader's
/// thread and frees it on a shard's, and glibc spent about a third of a direct-read pass's CPU
/// on that (docs/baselines.md#allocator).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    std::process::exit(s3_lifecycled::cli::main());
}
