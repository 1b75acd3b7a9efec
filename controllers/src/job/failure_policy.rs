//! `spec.podFailurePolicy` (upstream `matchPodFailurePolicy`): the rules are tried in order on
//! a failed pod and the first that matches decides: `FailJob` fails the Job (with upstream's
//! message), `Ignore` does not count the failure, `Count` counts it, `FailIndex` fails the
//! pod's index; with no match the failure counts. `onExitCodes` looks at terminated containers
//! with a non-zero exit code, regular ones first, then init containers, optionally one
//! container by name; `onPodConditions` at the pod's conditions (type and status).
//!
//! Planner: pure, no I/O.

use super::view::JobPod;
use berth_shared::k8s_openapi::api::batch::v1 as batch;

/// The action of the rule that matched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    FailJob,
    Ignore,
    Count,
    FailIndex,
}

/// What the policy says about one failed pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// The Job's failure message, for a `FailJob` match.
    pub fail_job: Option<String>,
    /// Whether the failure counts towards `backoffLimit` (and the per-index limit).
    pub counts: bool,
    pub action: Option<Action>,
}

impl Verdict {
    const DEFAULT: Verdict = Verdict {
        fail_job: None,
        counts: true,
        action: None,
    };
}

/// The verdict of `policy` (if any) on the failed `pod`.
pub fn judge(policy: Option<&batch::PodFailurePolicy>, pod: &JobPod) -> Verdict {
    let Some(policy) = policy else {
        return Verdict::DEFAULT;
    };
    for (i, rule) in policy.rules.iter().enumerate() {
        let matched = if let Some(req) = &rule.on_exit_codes {
            match_exit_codes(pod, req).map(|(name, code)| {
                format!(
                    "Container {name} for pod {}/{} failed with exit code {code} matching {} rule at index {i}",
                    pod.namespace, pod.name, rule.action
                )
            })
        } else if let Some(patterns) = &rule.on_pod_conditions {
            match_conditions(pod, patterns).map(|type_| {
                format!(
                    "Pod {}/{} has condition {type_} matching {} rule at index {i}",
                    pod.namespace, pod.name, rule.action
                )
            })
        } else {
            None
        };
        let Some(message) = matched else { continue };
        // An action this version does not know matches nothing (upstream falls through).
        let verdict = match rule.action.as_str() {
            "Ignore" => Verdict {
                fail_job: None,
                counts: false,
                action: Some(Action::Ignore),
            },
            "Count" => Verdict {
                action: Some(Action::Count),
                ..Verdict::DEFAULT
            },
            "FailIndex" => Verdict {
                action: Some(Action::FailIndex),
                ..Verdict::DEFAULT
            },
            "FailJob" => Verdict {
                fail_job: Some(message),
                counts: true,
                action: Some(Action::FailJob),
            },
            _ => continue,
        };
        return verdict;
    }
    Verdict::DEFAULT
}

/// The first terminated container, regular before init, with a non-zero exit code the
/// requirement matches: its name and code.
fn match_exit_codes(
    pod: &JobPod,
    req: &batch::PodFailurePolicyOnExitCodesRequirement,
) -> Option<(String, i32)> {
    [&pod.containers, &pod.init_containers]
        .into_iter()
        .flatten()
        .find_map(|c| {
            let (code, _) = c.terminated?;
            if code == 0 || req.container_name.as_deref().is_some_and(|n| n != c.name) {
                return None;
            }
            let listed = req.values.contains(&code);
            let hit = match req.operator.as_str() {
                "In" => listed,
                "NotIn" => !listed,
                _ => false,
            };
            hit.then(|| (c.name.clone(), code))
        })
}

/// The type of the first pod condition a pattern matches.
fn match_conditions(
    pod: &JobPod,
    patterns: &[batch::PodFailurePolicyOnPodConditionsPattern],
) -> Option<String> {
    pod.conditions.iter().find_map(|(t, s)| {
        patterns
            .iter()
            .any(|p| p.type_ == *t && p.status == *s)
            .then(|| t.clone())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::view::ContainerEnd;
    use serde_json::json;

    fn policy(rules: serde_json::Value) -> batch::PodFailurePolicy {
        serde_json::from_value(json!({ "rules": rules })).unwrap()
    }

    /// The seed's policy: FailJob on `main` exiting 42, Ignore on DisruptionTarget.
    fn seed() -> batch::PodFailurePolicy {
        policy(json!([
            {"action": "FailJob", "onExitCodes": {"containerName": "main", "operator": "In", "values": [42]}},
            {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}
        ]))
    }

    fn pod(main: Option<i32>, init: Option<i32>, conditions: &[(&str, &str)]) -> JobPod {
        let end = |name: &str, code: Option<i32>| ContainerEnd {
            name: name.into(),
            terminated: code.map(|c| (c, None)),
        };
        JobPod {
            name: "p".into(),
            namespace: "ns".into(),
            phase: "Failed".into(),
            containers: vec![end("main", main), end("side", Some(0))],
            init_containers: vec![end("setup", init)],
            conditions: conditions
                .iter()
                .map(|(t, s)| (t.to_string(), s.to_string()))
                .collect(),
            ..JobPod::default()
        }
    }

    #[test]
    fn the_first_matching_rule_decides() {
        let s = seed();
        let counted = Verdict::DEFAULT;
        let ignored = Verdict {
            fail_job: None,
            counts: false,
            action: Some(Action::Ignore),
        };
        let cases = [
            (
                "exit 42 of main fails the Job",
                pod(Some(42), None, &[]),
                None,
            ),
            (
                "another exit code counts",
                pod(Some(1), None, &[]),
                Some(counted.clone()),
            ),
            (
                "a disrupted pod is ignored",
                pod(Some(137), None, &[("DisruptionTarget", "True")]),
                Some(ignored.clone()),
            ),
            (
                "a condition that is False does not match",
                pod(Some(1), None, &[("DisruptionTarget", "False")]),
                Some(counted.clone()),
            ),
            (
                "exit 42 wins over the later Ignore rule",
                pod(Some(42), None, &[("DisruptionTarget", "True")]),
                None,
            ),
            (
                "a container still running matches no code",
                pod(None, None, &[]),
                Some(counted),
            ),
        ];
        for (name, p, want) in cases {
            let got = judge(Some(&s), &p);
            match want {
                Some(w) => assert_eq!(got, w, "{name}"),
                None => {
                    assert_eq!(got.action, Some(Action::FailJob), "{name}");
                    assert_eq!(
                        got.fail_job.as_deref(),
                        Some(
                            "Container main for pod ns/p failed with exit code 42 matching FailJob rule at index 0"
                        ),
                        "{name}"
                    );
                }
            }
        }
    }

    #[test]
    fn exit_code_rules_by_operator_container_and_init_containers() {
        let not_in = policy(
            json!([{"action": "Count", "onExitCodes": {"operator": "NotIn", "values": [1, 2]}},
            {"action": "Ignore", "onExitCodes": {"operator": "In", "values": [1]}}]),
        );
        let by_init = policy(json!([{"action": "FailIndex",
            "onExitCodes": {"containerName": "setup", "operator": "In", "values": [3]}}]));
        let cases = [
            (
                "NotIn matches an unlisted code",
                &not_in,
                pod(Some(5), None, &[]),
                Some(Action::Count),
            ),
            (
                "NotIn passes a listed code on",
                &not_in,
                pod(Some(1), None, &[]),
                Some(Action::Ignore),
            ),
            (
                "exit 0 never matches NotIn",
                &not_in,
                pod(Some(0), None, &[]),
                None,
            ),
            (
                "an init container's code",
                &by_init,
                pod(None, Some(3), &[]),
                Some(Action::FailIndex),
            ),
            (
                "another container's code",
                &by_init,
                pod(Some(3), None, &[]),
                None,
            ),
        ];
        for (name, pol, p, want) in cases {
            assert_eq!(judge(Some(pol), &p).action, want, "{name}");
        }
        assert_eq!(judge(None, &pod(Some(42), None, &[])), Verdict::DEFAULT);
        let by_condition = policy(json!([{"action": "FailJob",
            "onPodConditions": [{"type": "ConfigIssue", "status": "True"}]}]));
        assert_eq!(
            judge(
                Some(&by_condition),
                &pod(Some(1), None, &[("ConfigIssue", "True")])
            )
            .fail_job,
            Some("Pod ns/p has condition ConfigIssue matching FailJob rule at index 0".into())
        );
    }
}
