//! Entry point of the `s3-lifecycled` binary.

fn main() {
    std::process::exit(s3_lifecycled::cli::main());
}
