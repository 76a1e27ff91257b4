//! Cluster addresses written as weed reads them, on a cluster with weed's own
//! gRPC ports (HTTP port + 10000, `common::weed_defaults_cluster()`): a bare
//! `HOST:PORT` copied from `weed shell -master=…` or `-filer=…` is an HTTP
//! port to weed (docs/grpc.md#weed-form).

use crate::common;

use common::*;

/// [`Cluster::bucket_due_in_a_day`], and a cursor dir of its own.
async fn due_bucket(c: &Cluster, name: &str) -> (String, String) {
    let b = c.bucket_due_in_a_day(name).await;
    (b.clone(), format!("/etc/s3/lifecycle/e2e-weed-form-{b}"))
}

/// A `--json` pass three days on over `bucket` through `filer` and `s3` (`--filer`,
/// `--s3-grpc`), with cursor dir `dir`.
async fn pass_via(filer: &str, s3: &str, bucket: &str, dir: &str) -> Pass {
    let later = rfc3339(now_ns() + 3 * DAY_NS);
    let args = [
        "run-once",
        "--filer",
        filer,
        "--s3-grpc",
        s3,
        "--buckets",
        bucket,
        "--now",
        &later,
        "--json",
    ];
    run_raw(&args, &[("S3_LIFECYCLED__CURSOR__DIR", dir)]).await
}

/// `cluster.master = "HOST:9333"` (weed shell's default form, the master's
/// HTTP port) and `--filer HOST:8888 --s3-grpc HOST:8333` were dialled as gRPC
/// ports: the pass failed with "h2 protocol error" where weed reads them as
/// HTTP ports whose gRPC is on PORT + 10000. Now a pass completes through
/// each, and the warning names the address to write.
#[tokio::test(flavor = "multi_thread")]
async fn weed_style_http_addresses_were_dialled_as_grpc_ports() {
    let c = weed_defaults_cluster();
    let s3 = c.s3_client();
    let later = rfc3339(now_ns() + 3 * DAY_NS);
    let master_http = c.master_http_addr().to_string();
    let master_grpc = c.master_grpc_addr().to_string();

    // Through the master alone: filers and gateways come from its membership.
    let (b, dir) = due_bucket(c, "e2e-weed-form-master").await;
    let args = ["run-once", "--buckets", &b, "--now", &later, "--json"];
    let env = [
        ("S3_LIFECYCLED__CLUSTER__MASTER", master_http.as_str()),
        ("S3_LIFECYCLED__CURSOR__DIR", dir.as_str()),
    ];
    let p = run_raw(&args, &env).await;
    assert_eq!(p.code, 0, "{}", p.describe());
    assert_eq!(count_objects(&s3, &b).await, 0, "{}", p.describe());
    assert!(
        p.stderr.contains(&format!(
            "`cluster.master` {master_http}: no gRPC server answers there"
        )) && p.stderr.contains(&master_grpc),
        "the warning names the setting and the gRPC address to write:\n{}",
        p.describe()
    );

    // The filer's and the gateway's HTTP ports, given on the command line.
    let (b, dir) = due_bucket(c, "e2e-weed-form-filer").await;
    let filer_http = c.filer_http_addr().to_string();
    let s3_http = c.s3_addr().to_string();
    let p = pass_via(&filer_http, &s3_http, &b, &dir).await;
    assert_eq!(p.code, 0, "{}", p.describe());
    assert_eq!(p.json().total("DONE"), 2, "{}", p.describe());
    assert_eq!(count_objects(&s3, &b).await, 0, "{}", p.describe());
    for (key, grpc) in [
        ("`cluster.filer`", c.filer_grpc_addr()),
        ("`cluster.s3_grpc`", c.s3_grpc_addr()),
    ] {
        let warning = format!("{key} 127.0.0.1:");
        assert!(
            p.stderr.contains(&warning)
                && p.stderr.contains("no gRPC server answers there")
                && p.stderr.contains(&grpc.to_string()),
            "the warning names {key} and {grpc}:\n{}",
            p.describe()
        );
    }

    // The gRPC ports as given still work, without a warning.
    let (b, dir) = due_bucket(c, "e2e-weed-form-grpc").await;
    let filer_grpc = c.filer_grpc_addr().to_string();
    let s3_grpc = c.s3_grpc_addr().to_string();
    let p = pass_via(&filer_grpc, &s3_grpc, &b, &dir).await;
    assert_eq!(p.code, 0, "{}", p.describe());
    assert_eq!(count_objects(&s3, &b).await, 0, "{}", p.describe());
    assert!(
        !p.stderr.contains("no gRPC server answers there"),
        "{}",
        p.describe()
    );
}

/// On a cluster whose gRPC ports are not weed's defaults, a master HTTP port given as
/// `cluster.master` still fails (nothing answers gRPC there nor at PORT + 10000), and the log
/// now says the address is an HTTP port, where the error said only "Cancelled: operation was
/// canceled".
#[tokio::test(flavor = "multi_thread")]
async fn a_master_http_port_failed_as_cancelled_without_a_word_of_the_port() {
    let c = cluster();
    let master_http = c.master_http_addr().to_string();
    let args = ["run-once", "--buckets", "e2e-no-such-bucket"];
    let env = [
        ("S3_LIFECYCLED__CLUSTER__MASTER", master_http.as_str()),
        (
            "S3_LIFECYCLED__CURSOR__DIR",
            "/etc/s3/lifecycle/e2e-master-http",
        ),
    ];
    let p = run_raw(&args, &env).await;
    assert_eq!(p.code, 1, "{}", p.describe());
    assert!(
        p.stderr.contains(&format!(
            "`cluster.master` {master_http} answers HTTP/1, not gRPC"
        )),
        "{}",
        p.describe()
    );
}

/// `--filer HOST:HTTPPORT.GRPCPORT` and `--s3-grpc` in the same form (weed's own way of naming
/// both ports, as `weed shell -filer=…` takes it) were refused as configuration errors (exit 2,
/// "the port must be a number"). They name the gRPC port, which the pass now dials.
#[tokio::test(flavor = "multi_thread")]
async fn weeds_dot_form_for_the_filer_and_the_gateway_was_refused() {
    let c = cluster();
    let (b, dir) = due_bucket(c, "e2e-dot-form").await;
    let filer = c.filer_weed_arg();
    let s3 = format!("127.0.0.1:{}.{}", c.ports.s3, c.ports.s3_grpc);
    let p = pass_via(&filer, &s3, &b, &dir).await;
    assert_eq!(p.code, 0, "{}", p.describe());
    assert_eq!(p.json().total("DONE"), 2, "{}", p.describe());
    assert_eq!(
        count_objects(&c.s3_client(), &b).await,
        0,
        "{}",
        p.describe()
    );
}
