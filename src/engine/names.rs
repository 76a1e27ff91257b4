//! Buckets an operator names that the cluster does not have (a typo in
//! `pause`, `approve`, `forecast --bucket`, `pass.buckets`): the refusal,
//! naming the buckets that do exist and the likeliest one meant. Pure: the
//! caller lists the buckets.

/// At most this many names are listed in a refusal; the count says the rest.
const LISTED: usize = 10;

/// A bucket an operator named that is not in the cluster.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.message())]
pub struct UnknownBucket {
    /// The name as given.
    pub name: String,
    /// Buckets with a lifecycle configuration, sorted.
    pub with_rules: Vec<String>,
    /// How many buckets the cluster has in all.
    pub existing: usize,
    /// The existing bucket closest to `name`, when one is close.
    pub closest: Option<String>,
}

impl UnknownBucket {
    fn message(&self) -> String {
        let mut m = format!("bucket `{}` does not exist", self.name);
        if let Some(c) = &self.closest {
            m.push_str(&format!(" (did you mean `{c}`?)"));
        }
        let shown: Vec<&str> = self
            .with_rules
            .iter()
            .take(LISTED)
            .map(String::as_str)
            .collect();
        let more = self.with_rules.len().saturating_sub(LISTED);
        if shown.is_empty() {
            m.push_str("; no bucket has a lifecycle configuration");
        } else {
            m.push_str("; buckets with a lifecycle configuration: ");
            m.push_str(&shown.join(", "));
            if more > 0 {
                m.push_str(&format!(" and {more} more"));
            }
        }
        m.push_str(&format!(" ({} buckets in all)", self.existing));
        m
    }
}

/// `Err` when `name` is not among `existing` (every bucket, with whether it
/// has a lifecycle configuration).
pub fn check_exists<'a>(
    name: &str,
    existing: impl IntoIterator<Item = (&'a str, bool)>,
) -> Result<(), UnknownBucket> {
    let all: Vec<(&str, bool)> = existing.into_iter().collect();
    if all.iter().any(|(b, _)| *b == name) {
        return Ok(());
    }
    let mut with_rules: Vec<String> = all
        .iter()
        .filter(|(_, r)| *r)
        .map(|(b, _)| b.to_string())
        .collect();
    with_rules.sort();
    // A typo is a letter or two: closer than a third of the name.
    let closest = all
        .iter()
        .map(|(b, _)| (edit_distance(name, b), *b))
        .filter(|(d, b)| *d <= 2.max(b.len() / 3) && *d < name.len().max(1))
        .min()
        .map(|(_, b)| b.to_string());
    Err(UnknownBucket {
        name: name.to_string(),
        with_rules,
        existing: all.len(),
        closest,
    })
}

/// Levenshtein distance over bytes (bucket names are ASCII).
fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let here = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != cb)).min(row[j] + 1).min(here + 1);
            prev = here;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_typo_names_the_closest_bucket_and_those_with_rules() {
        let existing = [("photos", true), ("logs", true), ("tmp", false)];
        assert!(check_exists("logs", existing).is_ok());
        let e = check_exists("phtos", existing).unwrap_err();
        assert_eq!(e.closest.as_deref(), Some("photos"));
        assert_eq!(
            e.to_string(),
            "bucket `phtos` does not exist (did you mean `photos`?); buckets with a lifecycle \
             configuration: logs, photos (3 buckets in all)"
        );
        let e = check_exists("NO-SUCH-BUCKET", existing).unwrap_err();
        assert_eq!(e.closest, None);
        let none = check_exists("x", [("tmp", false)]).unwrap_err().to_string();
        assert!(
            none.contains("no bucket has a lifecycle configuration"),
            "{none}"
        );
    }

    #[test]
    fn long_lists_are_cut() {
        let names: Vec<String> = (0..25).map(|i| format!("b{i:02}")).collect();
        let e = check_exists("zzz", names.iter().map(|n| (n.as_str(), true))).unwrap_err();
        assert!(
            e.to_string()
                .contains("b09 and 15 more (25 buckets in all)"),
            "{e}"
        );
    }

    #[test]
    fn edit_distance_counts_letters() {
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("", "ab"), 2);
        assert_eq!(edit_distance("same", "same"), 0);
    }
}
