//! The label sets of the metric families, and the histogram shapes they
//! share.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;

use crate::status::RunOutcome;

use super::RUN_DURATION_BUCKETS;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct ShardLabels {
    pub(super) shard: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct ShardOutcomeLabels {
    pub(super) shard: String,
    pub(super) outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct DispatchLabels {
    pub(super) bucket: String,
    pub(super) kind: &'static str,
    pub(super) outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct OutcomeLabels {
    pub(super) outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct ReasonLabels {
    pub(super) reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct MatchLabels {
    pub(super) kind: &'static str,
    pub(super) decision: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct CheckLabels {
    pub(super) bucket: String,
    pub(super) kind: &'static str,
    pub(super) verdict: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct BucketLabels {
    pub(super) bucket: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct CollectionLabels {
    pub(super) collection: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub(super) struct TtlLabels {
    pub(super) bucket: String,
    pub(super) source: String,
    pub(super) conflict: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub(super) struct RuleLabels {
    pub(super) bucket: String,
    /// The rule's ID, or its hash when it has none.
    pub(super) rule: String,
}

pub(super) type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

pub(super) fn run_duration_histogram() -> Histogram {
    Histogram::new(RUN_DURATION_BUCKETS)
}

pub(super) fn shard(shard: u8) -> ShardLabels {
    // Plain decimal, like the Go worker's label ("3", not "03").
    ShardLabels {
        shard: shard.to_string(),
    }
}

pub(super) fn bucket(bucket: &str) -> BucketLabels {
    BucketLabels {
        bucket: bucket.to_string(),
    }
}

pub(super) fn shard_outcome(shard: u8, outcome: RunOutcome) -> ShardOutcomeLabels {
    ShardOutcomeLabels {
        shard: shard.to_string(),
        outcome: outcome.as_str(),
    }
}
