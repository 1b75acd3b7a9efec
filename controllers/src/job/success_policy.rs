//! `spec.successPolicy` of an Indexed Job (upstream `matchSuccessPolicy`): the rules are tried
//! in order and the first one met declares the Job succeeded. `succeededIndexes` alone: every
//! listed index succeeded; `succeededCount` alone: that many indexes succeeded; both: that many
//! of the listed indexes succeeded. A rule whose index list reads as nothing is skipped.
//!
//! Worked example: completions 10, rule `succeededIndexes: "0,2-3"`, `succeededCount: 1`; index
//! 2 alone succeeded: one of {0, 2, 3} did, the rule is met: "Matched rules at index 0".
//!
//! Planner: pure, no I/O.

use super::intervals::Intervals;
use berth_shared::k8s_openapi::api::batch::v1 as batch;

/// The message of the first rule met, if one is.
pub fn met(
    policy: Option<&batch::SuccessPolicy>,
    completions: i32,
    succeeded: &Intervals,
) -> Option<String> {
    let policy = policy?;
    if succeeded.is_empty() {
        return None;
    }
    for (i, rule) in policy.rules.iter().enumerate() {
        let hit = match (&rule.succeeded_indexes, rule.succeeded_count) {
            (Some(listed), count) => {
                let required = Intervals::parse(listed, completions);
                if required.is_empty() {
                    continue;
                }
                let done = required.overlap(succeeded);
                done == required.total() || count.is_some_and(|c| done >= c)
            }
            (None, Some(count)) => succeeded.total() >= count,
            (None, None) => false,
        };
        if hit {
            return Some(format!("Matched rules at index {i}"));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn policy(rules: serde_json::Value) -> batch::SuccessPolicy {
        serde_json::from_value(json!({ "rules": rules })).unwrap()
    }

    #[test]
    fn rules_by_indexes_count_and_both() {
        let seed = policy(json!([{"succeededIndexes": "0,2-3", "succeededCount": 1}]));
        let all_of = policy(json!([{"succeededIndexes": "1,3"}]));
        let count = policy(json!([{"succeededCount": 3}]));
        let second = policy(json!([{"succeededIndexes": "8-9"}, {"succeededCount": 2}]));
        let unreadable = policy(json!([{"succeededIndexes": "x"}, {"succeededCount": 1}]));
        let cases = [
            ("the seed's Job when index 2 succeeds", &seed, "2", Some(0)),
            (
                "the seed's Job when an unlisted index succeeds",
                &seed,
                "5",
                None,
            ),
            ("every listed index succeeded", &all_of, "0-3", Some(0)),
            ("one listed index is missing", &all_of, "1,2", None),
            ("enough indexes succeeded", &count, "0,4,7", Some(0)),
            ("too few indexes succeeded", &count, "0,4", None),
            (
                "the first rule unmet, the second met",
                &second,
                "0,8",
                Some(1),
            ),
            ("an unreadable list is skipped", &unreadable, "4", Some(1)),
            ("nothing succeeded yet", &count, "", None),
        ];
        for (name, p, succeeded, want) in cases {
            let got = met(Some(p), 10, &Intervals::parse(succeeded, 10));
            assert_eq!(
                got,
                want.map(|i| format!("Matched rules at index {i}")),
                "{name}"
            );
        }
        assert_eq!(met(None, 10, &Intervals::parse("0-9", 10)), None);
    }
}
