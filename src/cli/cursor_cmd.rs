//! `s3-lifecycled cursor …`: inspect, reset and migrate the per-shard cursors
//! stored in the filer (see ops/runbook.md). A reset forces a cold start of the
//! shard on the next pass (a recovery walk, then replay from `now − TTL`).

use std::path::PathBuf;

use clap::{Args, Subcommand};

use crate::cli::{EXIT_OK, Fail, failed, load_settings, one_shot_runtime, usage};
use crate::config::{Settings, parse_shards};
use crate::engine::Snapshot;
use crate::engine::go_activity;
use crate::pass::migrate::import_go;
use crate::pass::plan::PassPlan;
use crate::seaweed::buckets::list_bucket_configs;
use crate::seaweed::cursor::{CursorStore, GO_CURSOR_DIR};
use crate::seaweed::retention;

/// Where the cursors are.
#[derive(Debug, Clone, Args)]
pub struct CursorTarget {
    /// TOML configuration file (optional).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Filer gRPC address (overrides `cluster.filer`).
    #[arg(long)]
    pub filer: Option<String>,
    /// Shards: `0-15`, `3` or `1,5,7`.
    #[arg(long, default_value = "0-15")]
    pub shards: String,
}

#[derive(Debug, Subcommand)]
pub enum CursorCommand {
    /// Print each selected shard's cursor file (JSON), or say it is cold.
    Show {
        #[command(flatten)]
        target: CursorTarget,
        /// Show the Go worker's cursors (`/etc/s3/lifecycle/daily-cursors`) instead.
        #[arg(long)]
        go: bool,
    },
    /// Delete cursor files, forcing a cold start (recovery walk) of those
    /// shards on the next pass.
    Reset {
        #[command(flatten)]
        target: CursorTarget,
        /// Really delete (without it, only say what would be deleted).
        #[arg(long)]
        yes: bool,
    },
    /// Seed our cursors from the Go worker's, where they provably cover the
    /// current rules (unversioned buckets; see `pass::migrate`), so the first
    /// pass resumes from Go's position. Never overwrites an existing cursor.
    ImportGo {
        #[command(flatten)]
        target: CursorTarget,
        /// Say what would be written without writing.
        #[arg(long = "dry-run")]
        dry_run: bool,
    },
}

pub fn run(cmd: CursorCommand) -> Result<i32, Fail> {
    let (CursorCommand::Show { target, .. }
    | CursorCommand::Reset { target, .. }
    | CursorCommand::ImportGo { target, .. }) = &cmd;
    let s = load_settings(target.config.as_deref(), target.filer.as_deref())?;
    let shards = parse_shards(&target.shards).map_err(|m| usage(format!("flag --shards: {m}")))?;
    // The filer may be TLS-only: [tls] or cluster.security_toml apply here too.
    let tls = s.client_tls().map_err(usage)?;
    one_shot_runtime()?.block_on(run_async(cmd, s, shards, tls))
}

async fn run_async(
    cmd: CursorCommand,
    s: Settings,
    shards: Vec<u8>,
    tls: Option<crate::seaweed::tls::ClientTls>,
) -> Result<i32, Fail> {
    let client = crate::cli::first_filer_with(&s, tls).await?;
    let store = CursorStore::new(client.clone(), &s.cursor.dir);
    match cmd {
        CursorCommand::Show { go, .. } => {
            for shard in shards {
                let text = if go {
                    let c = store.load_go(shard).await.map_err(failed)?;
                    c.map(|c| serde_json::to_string(&c).unwrap_or_default())
                } else {
                    let c = store.load(shard).await.map_err(failed)?;
                    c.map(|c| String::from_utf8_lossy(&c.to_json()).trim_end().to_string())
                };
                let text = text.unwrap_or_else(|| "cold (no cursor file)".into());
                println!("shard={shard:02} {text}");
            }
        }
        CursorCommand::Reset { yes, .. } => {
            for shard in shards {
                let path = store.path(shard);
                if yes {
                    if store.reset(shard).await.map_err(failed)? {
                        println!(
                            "shard={shard:02} reset: deleted {path} (next pass cold-starts it)"
                        );
                    } else {
                        println!(
                            "shard={shard:02} no cursor file {path}: already cold, nothing deleted"
                        );
                    }
                } else {
                    println!("shard={shard:02} would delete {path} (add --yes)");
                }
            }
        }
        CursorCommand::ImportGo { dry_run, .. } => {
            let root = if s.cluster.buckets_root.is_empty() {
                client.buckets_root().await.map_err(failed)?
            } else {
                s.cluster.buckets_root.clone()
            };
            let scan = list_bucket_configs(&client, &root).await.map_err(failed)?;
            let keep = scan.errors.iter().map(|e| e.bucket.clone()).collect();
            let configs = scan
                .buckets
                .iter()
                .filter(|b| b.has_rules())
                .map(|b| b.to_config())
                .collect();
            let snap = Snapshot::compile(configs, s.time.time_config());
            let now = crate::clock::wall_ns();
            let earliest = if s.pass.meta_log_retention.is_zero() {
                let e = retention::earliest_available(&mut client.raw()).await;
                e.map_err(failed)?.map(|e| e.ts_ns)
            } else {
                None
            };
            let plan = PassPlan::build(&snap, now, now, earliest, &s.pass, keep);
            // Recorded in each imported cursor, so that the first pass
            // warns only if the Go worker runs again after the import
            // (docs/go-cursor.md#another-enforcer).
            let listed = client.list_dir(GO_CURSOR_DIR).await.map_err(failed)?;
            let go_files = go_activity::stamps(&listed);
            for shard in shards {
                if store.load(shard).await.map_err(failed)?.is_some() {
                    println!(
                        "shard={shard:02} skipped: {} exists (reset it first)",
                        store.path(shard)
                    );
                    continue;
                }
                let Some(go) = store.load_go(shard).await.map_err(failed)? else {
                    println!(
                        "shard={shard:02} skipped: no Go cursor; the first pass cold-starts it"
                    );
                    continue;
                };
                match import_go(&go, &plan) {
                    Err(why) => println!("shard={shard:02} not imported: {why}"),
                    Ok(mut imp) => {
                        imp.cursor.go_cursor = go_files.get(&shard).copied();
                        if !dry_run {
                            store.save(&imp.cursor, now).await.map_err(failed)?;
                        }
                        println!(
                            "shard={shard:02} {} at ts_ns={} buckets={} cold={}",
                            if dry_run { "would import" } else { "imported" },
                            go.ts_ns,
                            imp.cursor.buckets.len(),
                            if imp.cold.is_empty() {
                                "-".to_string()
                            } else {
                                imp.cold.join(",")
                            },
                        );
                    }
                }
            }
        }
    }
    Ok(EXIT_OK)
}
