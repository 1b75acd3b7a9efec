//! The Priority plugin's decisions, pure: which class a new pod gets (its own, else the global
//! default with the lowest value, else none: priority 0 and `PreemptLowerPriority`), and the
//! refusals upstream words: an unknown class, a `spec.priority` or `spec.preemptionPolicy`
//! the pod sets that differs from the class's, a second global default.
//!
//! Planner: pure, no I/O.

use berth_shared::admission::priority_class::PREEMPT_LOWER_PRIORITY;
use serde_json::{Value, json};

/// What admission needs of one PriorityClass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Class {
    pub name: String,
    pub value: i64,
    pub global_default: bool,
    pub preemption_policy: String,
}

impl Class {
    pub fn from_value(v: &Value) -> Class {
        Class {
            name: v
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            value: v.get("value").and_then(Value::as_i64).unwrap_or(0),
            global_default: v
                .get("globalDefault")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            preemption_policy: v
                .get("preemptionPolicy")
                .and_then(Value::as_str)
                .filter(|p| !p.is_empty())
                .unwrap_or(PREEMPT_LOWER_PRIORITY)
                .to_string(),
        }
    }
}

/// The global default: of several (a race may make two), the one with the lowest value.
pub fn global_default(classes: &[Class]) -> Option<&Class> {
    classes
        .iter()
        .filter(|c| c.global_default)
        .min_by_key(|c| c.value)
}

/// Resolves a new pod's priority in place, or says why upstream would refuse it (the reason
/// of a 403).
pub fn admit_pod(pod: &mut Value, classes: &[Class]) -> Result<(), String> {
    let named = pod
        .pointer("/spec/priorityClassName")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let (class_name, priority, policy) = if named.is_empty() {
        match global_default(classes) {
            Some(c) => (c.name.clone(), c.value, c.preemption_policy.clone()),
            None => (String::new(), 0, PREEMPT_LOWER_PRIORITY.to_string()),
        }
    } else {
        let Some(c) = classes.iter().find(|c| c.name == named) else {
            return Err(format!("no PriorityClass with name {named} was found"));
        };
        (named.clone(), c.value, c.preemption_policy.clone())
    };
    if let Some(given) = pod.pointer("/spec/priority").and_then(Value::as_i64)
        && given != priority
    {
        return Err(format!(
            "the integer value of priority ({given}) must not be provided in pod spec; priority admission controller computed {priority} from the given PriorityClass name"
        ));
    }
    if let Some(given) = pod
        .pointer("/spec/preemptionPolicy")
        .and_then(Value::as_str)
        && given != policy
    {
        return Err(format!(
            "the string value of PreemptionPolicy ({given}) must not be provided in pod spec; priority admission controller computed {policy} from the given PriorityClass name"
        ));
    }
    let spec = &mut pod["spec"];
    if !class_name.is_empty() {
        spec["priorityClassName"] = json!(class_name);
    }
    spec["priority"] = json!(priority);
    spec["preemptionPolicy"] = json!(policy);
    Ok(())
}

/// A class marked `globalDefault` while another one is: refused (an update of the default
/// itself is fine).
pub fn check_single_default(class: &Class, classes: &[Class]) -> Result<(), String> {
    if !class.global_default {
        return Ok(());
    }
    match global_default(classes) {
        Some(d) if d.name != class.name => Err(format!(
            "PriorityClass {} is already marked as default. Only one default can exist",
            d.name
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(name: &str, value: i64, default: bool, policy: &str) -> Class {
        Class {
            name: name.into(),
            value,
            global_default: default,
            preemption_policy: policy.into(),
        }
    }

    fn classes() -> Vec<Class> {
        vec![
            class(
                "system-node-critical",
                2_000_001_000,
                false,
                "PreemptLowerPriority",
            ),
            class("high", 1000, false, "PreemptLowerPriority"),
            class("polite", 1000, false, "Never"),
        ]
    }

    fn admitted(spec: Value, classes: &[Class]) -> Result<Value, String> {
        let mut pod = json!({"metadata": {"name": "p"}, "spec": spec});
        admit_pod(&mut pod, classes).map(|()| pod["spec"].clone())
    }

    #[test]
    fn a_pod_gets_its_classs_priority_and_policy_or_is_refused_as_upstream() {
        type Case = (
            &'static str,
            Value,
            Result<(i64, &'static str, &'static str), &'static str>,
        );
        let cases: Vec<Case> = vec![
            (
                "no class and no default: priority 0",
                json!({}),
                Ok((0, "", "PreemptLowerPriority")),
            ),
            (
                "a named class gives its value",
                json!({"priorityClassName": "high"}),
                Ok((1000, "high", "PreemptLowerPriority")),
            ),
            (
                "a Never class gives its policy",
                json!({"priorityClassName": "polite"}),
                Ok((1000, "polite", "Never")),
            ),
            (
                "a built-in class resolves",
                json!({"priorityClassName": "system-node-critical"}),
                Ok((
                    2_000_001_000,
                    "system-node-critical",
                    "PreemptLowerPriority",
                )),
            ),
            (
                "an unknown class is refused",
                json!({"priorityClassName": "nope"}),
                Err("no PriorityClass with name nope was found"),
            ),
            (
                "a priority without a class is refused",
                json!({"priority": 5}),
                Err(
                    "the integer value of priority (5) must not be provided in pod spec; priority admission controller computed 0 from the given PriorityClass name",
                ),
            ),
            (
                "the same priority as the class is accepted",
                json!({"priorityClassName": "high", "priority": 1000}),
                Ok((1000, "high", "PreemptLowerPriority")),
            ),
            (
                "another preemption policy than the class's is refused",
                json!({"priorityClassName": "polite", "preemptionPolicy": "PreemptLowerPriority"}),
                Err(
                    "the string value of PreemptionPolicy (PreemptLowerPriority) must not be provided in pod spec; priority admission controller computed Never from the given PriorityClass name",
                ),
            ),
        ];
        for (name, spec, want) in cases {
            let got = admitted(spec, &classes()).map(|s| {
                (
                    s["priority"].as_i64().unwrap(),
                    s["priorityClassName"]
                        .as_str()
                        .map(String::from)
                        .unwrap_or_default(),
                    s["preemptionPolicy"].as_str().unwrap().to_string(),
                )
            });
            let want = want
                .map(|(p, c, pol)| (p, c.to_string(), pol.to_string()))
                .map_err(String::from);
            assert_eq!(got, want, "{name}");
        }
    }

    #[test]
    fn the_global_default_with_the_lowest_value_names_a_classless_pod() {
        let mut cs = classes();
        cs.push(class("batch", 10, true, "Never"));
        cs.push(class("racing", 20, true, "PreemptLowerPriority"));
        let spec = admitted(json!({}), &cs).unwrap();
        assert_eq!(
            (
                &spec["priorityClassName"],
                &spec["priority"],
                &spec["preemptionPolicy"]
            ),
            (&json!("batch"), &json!(10), &json!("Never"))
        );
    }

    #[test]
    fn only_one_class_may_be_the_global_default() {
        let mut cs = classes();
        let d = class("batch", 10, true, "PreemptLowerPriority");
        assert_eq!(check_single_default(&d, &cs), Ok(()));
        cs.push(d.clone());
        assert_eq!(
            check_single_default(&d, &cs),
            Ok(()),
            "updating the default itself"
        );
        assert_eq!(
            check_single_default(&class("other", 5, true, "Never"), &cs),
            Err(
                "PriorityClass batch is already marked as default. Only one default can exist"
                    .into()
            )
        );
        assert_eq!(
            check_single_default(&class("other", 5, false, "Never"), &cs),
            Ok(())
        );
    }
}
