//! The `s3-lifecycled` command-line surface: argument parsing and subcommands.

/// Runs the CLI and returns the process exit code.
pub fn main() -> i32 {
    0
}
