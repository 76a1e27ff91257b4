//! Compiles `proto/` into Rust at build time with a vendored protoc, so a fresh
//! machine needs nothing installed by hand. An explicit `PROTOC` still wins.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto");
    let mut cfg = tonic_prost_build::Config::new();
    // plugin.proto imports google/protobuf/{timestamp,duration}.proto: the
    // vendored protoc ships them; a system protoc finds its own.
    let mut includes = vec!["proto".to_string()];
    if std::env::var_os("PROTOC").is_none() {
        cfg.protoc_executable(protoc_bin_vendored::protoc_bin_path()?);
        includes.push(protoc_bin_vendored::include_path()?.display().to_string());
    }
    // A meta-log event's entries are boxed: an `Entry` is ~450 bytes, and a
    // replay moved each event (two entries inline, ~1 KB) several times
    // between the decoder, the reader's batches and the router, which was a
    // fifth of a pass's CPU in memcpy (docs/meta-log.md#event-layout).
    cfg.boxed(".filer_pb.EventNotification.old_entry");
    cfg.boxed(".filer_pb.EventNotification.new_entry");
    // A log file record's event, as a slice of the chunk it was read in:
    // decoding it into a Vec copied every event once more before it was
    // decoded itself (docs/meta-log.md#direct-log-file-reads).
    cfg.bytes([".filer_pb.LogEntry.data"]);
    let out_dir = std::path::PathBuf::from(std::env::var("OUT_DIR")?);
    tonic_prost_build::configure()
        .file_descriptor_set_path(out_dir.join("descriptors.bin"))
        .build_server(true)
        .build_client(true)
        .compile_with_config(
            cfg,
            &[
                "proto/filer.proto",
                "proto/s3_lifecycle.proto",
                "proto/lifecycled_admin.proto",
                "proto/master.proto",
                "proto/plugin.proto",
            ],
            &includes.iter().map(String::as_str).collect::<Vec<_>>(),
        )?;
    Ok(())
}
