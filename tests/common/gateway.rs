//! Stand-in S3 gateways: a loopback tonic server answering `LifecycleDelete` however a test
//! needs (a gateway whose own reads fail, one that refuses one bucket and forwards the rest to
//! the real gateway), and `run-once` pointed at it.

use tokio_stream::wrappers::TcpListenerStream;

use s3_lifecycled::pb::s3_lifecycle_pb::seaweed_s3_lifecycle_internal_server::{
    SeaweedS3LifecycleInternal, SeaweedS3LifecycleInternalServer,
};

use super::bin::{Pass, Scope, run_once_args, run_raw};
use super::cluster::Cluster;

/// Serves `gateway` on a fresh loopback port until the test process ends; returns the
/// `host:port` to pass as `--s3-grpc`.
pub async fn serve_gateway<G: SeaweedS3LifecycleInternal>(gateway: G) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move {
        tonic::transport::Server::builder()
            .add_service(SeaweedS3LifecycleInternalServer::new(gateway))
            .serve_with_incoming(TcpListenerStream::new(listener))
            .await
            .unwrap();
    });
    addr
}

/// `run-once` for `scope` at `now`, deleting through the gateway at `s3_grpc` (a stand-in, or
/// an address nothing answers at), with `env` overrides.
pub async fn run_once_via(
    c: &Cluster,
    scope: &Scope,
    now: i64,
    s3_grpc: &str,
    env: &[(&str, &str)],
) -> Pass {
    let mut args = run_once_args(c, scope, Some(now), &[]);
    let i = args.iter().position(|a| a == "--s3-grpc").unwrap();
    args[i + 1] = s3_grpc.to_string();
    let mut all_env = vec![("S3_LIFECYCLED__CURSOR__DIR", scope.cursor_dir.as_str())];
    all_env.extend_from_slice(env);
    run_raw(&args, &all_env).await
}
