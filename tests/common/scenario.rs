//! The setup most end-to-end tests repeat, as one builder: a fresh bucket
//! (versioned or not), its objects and its lifecycle rules, written in the
//! order the builder names them, and `run-once` passes over it at `--now`
//! offsets from the moment the seeding ended (`t0`). Time travels by `--now`,
//! never by rewriting mtimes (`Cluster::backdate` stays for the tests of the
//! fixture).
//!
//! ```ignore
//! let s = Scenario::new("e2e-idem")
//!     .objects(&["tmp/1", "tmp/2", "keep/1"], b"data")
//!     .rules(&days_rule("tmp", "tmp/", 30))
//!     .build()
//!     .await;
//! let r = s.pass_at(40, 0).await.ok();
//! assert_eq!(s.keys().await, set(&["keep/1"]));
//! ```
//!
//! A test that seeds the bucket by hand (it needs the version ids its PUTs
//! answer, or delete markers) builds it without rules, writes through
//! [`Scenario::put`] and [`Scenario::delete`], then calls
//! [`Scenario::put_rules`], which starts the clock as `build` would have.

use std::collections::BTreeSet;

use super::bin::{Pass, Scope, run_once};
use super::clock::plus;
use super::cluster::{Cluster, cluster};
use super::rules::lifecycle;
use super::s3::{Ver, delete, enable_versioning, head_status, list_keys, list_versions, put};

/// What to seed; [`Scenario::build`] makes it.
pub struct ScenarioBuilder {
    prefix: String,
    versioned: bool,
    steps: Vec<Step>,
}

/// One write of the seeding, in the order the builder was given them.
enum Step {
    /// PUT through the SDK, with an optional tagging query.
    Object(String, Vec<u8>, Option<String>),
    /// PUTs over plain HTTP.
    Bulk(Vec<String>, Vec<u8>),
    /// The lifecycle document's rules.
    Rules(String),
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
    /// When the seeding ended (for a bucket seeded by hand, when
    /// [`Scenario::put_rules`] put its rules): the origin of [`Scenario::pass_at`].
    pub t0: i64,
}

impl Scenario {
    /// A scenario over a new bucket named after `prefix`.
    #[allow(clippy::new_ret_no_self)]
    pub fn new(prefix: &str) -> ScenarioBuilder {
        ScenarioBuilder {
            prefix: prefix.to_string(),
            versioned: false,
            steps: Vec::new(),
        }
    }

    /// Puts `rules` as the bucket's lifecycle document and restarts `t0` from now: the end of
    /// a seeding done by hand, as [`ScenarioBuilder::build`] ends its own.
    pub async fn put_rules(&mut self, rules: &str) {
        self.c
            .put_lifecycle_xml(&self.bucket, &lifecycle(rules))
            .await
            .unwrap();
        self.t0 = super::clock::now_ns();
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

    /// PUTs one object with `body` through the SDK; returns its version id.
    pub async fn put(&self, key: &str, body: &[u8]) -> Option<String> {
        put(&self.s3, &self.bucket, key, body, None).await
    }

    /// Deletes `key` (a delete marker on a versioned bucket), or one version of it.
    pub async fn delete(&self, key: &str, version: Option<&str>) {
        delete(&self.s3, &self.bucket, key, version).await;
    }

    /// The HTTP status of HeadObject on `key` (its current version, or `version`).
    pub async fn head(&self, key: &str, version: Option<&str>) -> u16 {
        head_status(&self.s3, &self.bucket, key, version).await
    }

    /// Every version and delete marker under `prefix`.
    pub async fn versions(&self, prefix: &str) -> Vec<Ver> {
        list_versions(&self.s3, &self.bucket, prefix).await
    }

    /// The bucket's keys now.
    pub async fn keys(&self) -> BTreeSet<String> {
        list_keys(&self.s3, &self.bucket).await
    }
}

impl ScenarioBuilder {
    /// Versioning on, right after the bucket is made (before anything is written).
    pub fn versioned(mut self) -> Self {
        self.versioned = true;
        self
    }

    /// The rules (`<Rule>` elements) of the bucket's lifecycle document.
    pub fn rules(mut self, rules: &str) -> Self {
        self.steps.push(Step::Rules(rules.to_string()));
        self
    }

    /// Objects with `body`, PUT through the SDK one by one.
    pub fn objects(mut self, keys: &[&str], body: &[u8]) -> Self {
        self.steps.extend(
            keys.iter()
                .map(|k| Step::Object(k.to_string(), body.to_vec(), None)),
        );
        self
    }

    /// One object with `body` and a tagging query (`k=v&k2=v2`).
    pub fn tagged(mut self, key: &str, body: &[u8], tagging: &str) -> Self {
        self.steps.push(Step::Object(
            key.to_string(),
            body.to_vec(),
            Some(tagging.to_string()),
        ));
        self
    }

    /// Many objects with `body`, over plain HTTP (far cheaper than the SDK).
    pub fn bulk(mut self, keys: Vec<String>, body: &[u8]) -> Self {
        self.steps.push(Step::Bulk(keys, body.to_vec()));
        self
    }

    /// Seeds the bucket, each write in the order the builder was given it
    /// (objects then rules: the first pass over it is a cold start that finds
    /// them), and starts the clock.
    pub async fn build(self) -> Scenario {
        let c = cluster();
        let s3 = c.s3_client();
        let bucket = c.new_bucket(&self.prefix).await.unwrap();
        if self.versioned {
            enable_versioning(&s3, &bucket).await;
        }
        for step in &self.steps {
            match step {
                Step::Object(key, body, tagging) => {
                    put(&s3, &bucket, key, body, tagging.as_deref()).await;
                }
                Step::Bulk(keys, body) => c.put_objects_bulk(&bucket, keys, body).await.unwrap(),
                Step::Rules(rules) => c
                    .put_lifecycle_xml(&bucket, &lifecycle(rules))
                    .await
                    .unwrap(),
            }
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
