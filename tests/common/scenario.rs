//! The setup most end-to-end tests repeat, as one builder: a fresh bucket,
//! its objects, its lifecycle rules, and `run-once` passes over it at `--now`
//! offsets from the moment it was seeded. Time travels by `--now`, never by
//! rewriting mtimes (`Cluster::backdate` stays for the tests of the fixture).
//!
//! ```ignore
//! let s = Scenario::new("e2e-idem")
//!     .rules(&days_rule("tmp", "tmp/", 30))
//!     .objects(&["tmp/1", "tmp/2", "keep/1"], b"data")
//!     .build()
//!     .await;
//! let r = s.pass_at(40, 0).await.ok();
//! assert_eq!(s.keys().await, set(&["keep/1"]));
//! ```

use std::collections::BTreeSet;

use super::bin::{Pass, Scope, run_once};
use super::clock::plus;
use super::cluster::{Cluster, cluster};
use super::rules::lifecycle;
use super::s3::{list_keys, put};

/// What to seed; [`Scenario::build`] makes it.
pub struct ScenarioBuilder {
    prefix: String,
    rules: Option<String>,
    objects: Vec<(String, Vec<u8>, Option<String>)>,
    bulk: Vec<(Vec<String>, Vec<u8>)>,
}

/// A seeded bucket on the shared cluster, with its own cursor dir.
pub struct Scenario {
    /// The cluster it lives on.
    pub c: &'static Cluster,
    /// An S3 client for it.
    pub s3: aws_sdk_s3::Client,
    /// The bucket's name (unique per test).
    pub bucket: String,
    /// `--buckets` and the cursor dir of its passes.
    pub scope: Scope,
    /// When the seeding ended: the origin of [`Scenario::pass_at`].
    pub t0: i64,
}

impl Scenario {
    /// A scenario over a new bucket named after `prefix`.
    #[allow(clippy::new_ret_no_self)]
    pub fn new(prefix: &str) -> ScenarioBuilder {
        ScenarioBuilder {
            prefix: prefix.to_string(),
            rules: None,
            objects: Vec::new(),
            bulk: Vec::new(),
        }
    }

    /// `run-once` at `t0` + `days` days + `hours` hours, with `extra` flags and `env`.
    pub async fn pass_with(
        &self,
        days: i64,
        hours: i64,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Pass {
        run_once(
            self.c,
            &self.scope,
            Some(plus(self.t0, days, hours)),
            extra,
            env,
        )
        .await
    }

    /// `run-once` at `t0` + `days` days + `hours` hours.
    pub async fn pass_at(&self, days: i64, hours: i64) -> Pass {
        self.pass_with(days, hours, &[], &[]).await
    }

    /// The bucket's keys now.
    pub async fn keys(&self) -> BTreeSet<String> {
        list_keys(&self.s3, &self.bucket).await
    }
}

impl ScenarioBuilder {
    /// The rules (`<Rule>` elements) of the bucket's lifecycle document.
    pub fn rules(mut self, rules: &str) -> Self {
        self.rules = Some(rules.to_string());
        self
    }

    /// Objects with `body`, PUT through the SDK one by one.
    pub fn objects(mut self, keys: &[&str], body: &[u8]) -> Self {
        self.objects
            .extend(keys.iter().map(|k| (k.to_string(), body.to_vec(), None)));
        self
    }

    /// One object with `body` and a tagging query (`k=v&k2=v2`).
    pub fn tagged(mut self, key: &str, body: &[u8], tagging: &str) -> Self {
        self.objects
            .push((key.to_string(), body.to_vec(), Some(tagging.to_string())));
        self
    }

    /// Many objects with `body`, over plain HTTP (far cheaper than the SDK).
    pub fn bulk(mut self, keys: Vec<String>, body: &[u8]) -> Self {
        self.bulk.push((keys, body.to_vec()));
        self
    }

    /// Seeds the bucket: objects first, then the rules, so the first pass
    /// over it is a cold start that finds them.
    pub async fn build(self) -> Scenario {
        let c = cluster();
        let s3 = c.s3_client();
        let bucket = c.new_bucket(&self.prefix).await.unwrap();
        for (key, body, tagging) in &self.objects {
            put(&s3, &bucket, key, body, tagging.as_deref()).await;
        }
        for (keys, body) in &self.bulk {
            c.put_objects_bulk(&bucket, keys, body).await.unwrap();
        }
        if let Some(rules) = &self.rules {
            c.put_lifecycle_xml(&bucket, &lifecycle(rules))
                .await
                .unwrap();
        }
        Scenario {
            c,
            s3,
            scope: Scope::new(&[&bucket]),
            bucket,
            t0: super::clock::now_ns(),
        }
    }
}
