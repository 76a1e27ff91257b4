//! Walk failures are scoped to their bucket, on the real SeaweedFS 4.48 cluster: a bucket whose
//! walker deletes do not resolve no longer halts its shards, so the replay of every other bucket
//! on those shards still runs (docs/design-deviations.md#walk-failures).

use crate::common;

use s3_lifecycled::pb::s3_lifecycle_pb::seaweed_s3_lifecycle_internal_client::SeaweedS3LifecycleInternalClient;
use s3_lifecycled::pb::s3_lifecycle_pb::seaweed_s3_lifecycle_internal_server::SeaweedS3LifecycleInternal;
use s3_lifecycled::pb::s3_lifecycle_pb::{
    LifecycleDeleteOutcome, LifecycleDeleteRequest, LifecycleDeleteResponse,
};
use tonic::transport::Channel;

use common::*;

/// Objects per bucket: enough that every one of the 16 shards holds keys of both buckets.
const N: usize = 160;

/// A gateway that answers RETRY_LATER for one bucket and forwards everything else to the real
/// gateway.
struct RefusesOneBucket {
    refused: String,
    real: SeaweedS3LifecycleInternalClient<Channel>,
}

#[tonic::async_trait]
impl SeaweedS3LifecycleInternal for RefusesOneBucket {
    async fn lifecycle_delete(
        &self,
        request: tonic::Request<LifecycleDeleteRequest>,
    ) -> Result<tonic::Response<LifecycleDeleteResponse>, tonic::Status> {
        if request.get_ref().bucket == self.refused {
            return Ok(tonic::Response::new(LifecycleDeleteResponse {
                outcome: LifecycleDeleteOutcome::RetryLater as i32,
                reason: "refused by the test gateway".into(),
            }));
        }
        self.real
            .clone()
            .lifecycle_delete(request.into_inner())
            .await
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failing_walk_in_one_bucket_does_not_stop_replay_of_another() {
    let c = cluster();
    let s3 = c.s3_client();
    let t0 = now_ns();
    let walked = c.new_bucket("walk-fails").await.unwrap();
    let replayed = c.new_bucket("replay-goes-on").await.unwrap();
    c.put_objects_bulk(&walked, &keys("w/", N), b"x")
        .await
        .unwrap();
    c.put_objects_bulk(&replayed, &keys("r/", N), b"x")
        .await
        .unwrap();
    c.put_lifecycle_xml(&replayed, &lifecycle(&days_rule("days", "", 1)))
        .await
        .unwrap();
    let scope = Scope::new(&[&walked, &replayed]);

    // Pass 1: `replayed` starts (nothing due yet); its objects are left to replay.
    let p = run_once(c, &scope, Some(t0), &[], &[]).await;
    p.ok();
    assert_eq!(list_keys(&s3, &replayed).await.len(), N, "{}", p.describe());

    // `walked` gets a rule that is due at once: its recovery walk deletes, and every one of
    // those deletes is refused.
    c.put_lifecycle_xml(&walked, &lifecycle(&date_rule("past", "", PAST_DATE)))
        .await
        .unwrap();
    let real = SeaweedS3LifecycleInternalClient::connect(c.s3_grpc_url())
        .await
        .unwrap();
    let gateway = serve_gateway(RefusesOneBucket {
        refused: walked.clone(),
        real,
    })
    .await;
    let p = run_once_via(c, &scope, plus(t0, 3, 0), &gateway, &[]).await;
    assert_eq!(p.code, 3, "the failed walk is reported:\n{}", p.describe());
    let r = p.json();
    let halted = r.halted_shards();
    assert_eq!(
        halted.len(),
        16,
        "every shard walked `walked`:\n{}",
        p.describe()
    );
    for s in &halted {
        let why = s["halt_reason"].as_str().unwrap_or_default();
        assert!(
            why.starts_with(&format!("walk of bucket {walked} did not finish")),
            "{why}"
        );
    }
    assert_eq!(
        list_keys(&s3, &replayed).await.len(),
        0,
        "replay of the other bucket ran on every shard:\n{}",
        p.describe()
    );
    assert_eq!(list_keys(&s3, &walked).await.len(), N);

    // Pass 3, through the real gateway: `walked` recovers again and its objects go.
    let p = run_once(c, &scope, Some(plus(t0, 3, 1)), &[], &[]).await;
    let r = p.ok();
    assert!(
        r.recovery_reasons(&walked).contains("cold_start"),
        "{}",
        p.describe()
    );
    assert_eq!(list_keys(&s3, &walked).await.len(), 0, "{}", p.describe());
}
