//! PriorityClass admission (scheduling.k8s.io/v1): the preemption policy's default, and
//! upstream's `ValidatePriorityClass` / `ValidatePriorityClassUpdate`: names starting with
//! `system-` are only the built-in classes with their values, user classes stay at or below
//! one billion, and value and preemption policy never change. The built-in classes themselves
//! are listed here, so the controller that creates them and this check agree.

use k8s_openapi::api::scheduling::v1::PriorityClass;

use super::field::{FieldError, Path};
use super::meta::{validate_object_meta, validate_object_meta_update};

/// Upstream `HighestUserDefinablePriority`.
pub const HIGHEST_USER_DEFINABLE_PRIORITY: i32 = 1_000_000_000;
/// Upstream `SystemPriorityClassPrefix`.
pub const SYSTEM_PREFIX: &str = "system-";
pub const PREEMPT_LOWER_PRIORITY: &str = "PreemptLowerPriority";
pub const NEVER: &str = "Never";
const POLICIES: &[&str] = &[PREEMPT_LOWER_PRIORITY, NEVER];

/// The built-in classes: name, value and description, as upstream creates them.
pub const SYSTEM_CLASSES: &[(&str, i32, &str)] = &[
    (
        "system-node-critical",
        2_000_001_000,
        "Used for system critical pods that must not be moved from their current node.",
    ),
    (
        "system-cluster-critical",
        2_000_000_000,
        "Used for system critical pods that must run in the cluster, but can be moved to another node if necessary.",
    ),
];

/// Upstream `IsKnownSystemPriorityClass`.
fn known_system_class(name: &str, value: i32, global_default: bool) -> Result<(), String> {
    let Some((_, want, _)) = SYSTEM_CLASSES.iter().find(|(n, _, _)| *n == name) else {
        return Err(format!("{name} is not a known system priority class"));
    };
    if *want != value {
        return Err(format!("value of {name} PriorityClass must be {want}"));
    }
    if global_default {
        return Err(format!(
            "globalDefault of {name} PriorityClass must be false"
        ));
    }
    Ok(())
}

/// Upstream `SetDefaults_PriorityClass`.
pub(crate) fn default_priority_class(pc: &mut PriorityClass) {
    pc.preemption_policy
        .get_or_insert_with(|| PREEMPT_LOWER_PRIORITY.into());
}

pub(crate) fn validate_priority_class(
    pc: &PriorityClass,
    old: Option<&PriorityClass>,
) -> Vec<FieldError> {
    if let Some(old) = old {
        let mut errs = validate_object_meta_update(&pc.metadata, &old.metadata);
        if pc.value != old.value {
            errs.push(FieldError::forbidden(
                &Path::new("value"),
                "may not be changed in an update.",
            ));
        }
        if pc.preemption_policy != old.preemption_policy {
            errs.push(FieldError::immutable(
                &Path::new("preemptionPolicy"),
                pc.preemption_policy.clone().unwrap_or_default(),
            ));
        }
        return errs;
    }
    let mut errs = validate_object_meta(&pc.metadata, "PriorityClass", false);
    let name = pc.metadata.name.as_deref().unwrap_or_default();
    if name.starts_with(SYSTEM_PREFIX) {
        if let Err(e) = known_system_class(name, pc.value, pc.global_default.unwrap_or(false)) {
            errs.push(FieldError::forbidden(
                &Path::new("metadata").child("name"),
                format!(
                    "priority class names with '{SYSTEM_PREFIX}' prefix are reserved for system use only. error: {e}"
                ),
            ));
        }
    } else if pc.value > HIGHEST_USER_DEFINABLE_PRIORITY {
        errs.push(FieldError::forbidden(
            &Path::new("value"),
            format!(
                "maximum allowed value of a user defined priority is {HIGHEST_USER_DEFINABLE_PRIORITY}"
            ),
        ));
    }
    match pc.preemption_policy.as_deref() {
        None | Some("") => errs.push(FieldError::required(&Path::new("preemptionPolicy"), "")),
        Some(p) if !POLICIES.contains(&p) => errs.push(FieldError::not_supported(
            &Path::new("preemptionPolicy"),
            p,
            POLICIES,
        )),
        Some(_) => {}
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn class(name: &str, value: i32, default: bool) -> PriorityClass {
        let mut pc = PriorityClass {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            value,
            global_default: Some(default),
            ..Default::default()
        };
        default_priority_class(&mut pc);
        pc
    }

    fn messages(errs: Vec<FieldError>) -> Vec<String> {
        errs.iter().map(FieldError::message).collect()
    }

    #[test]
    fn classes_are_checked_like_upstream() {
        let cases: [(&str, PriorityClass, Vec<&str>); 5] = [
            (
                "a user class up to one billion is fine",
                class("high", 1_000_000_000, true),
                vec![],
            ),
            (
                "a user class above one billion is refused",
                class("higher", 1_000_000_001, false),
                vec![
                    "value: Forbidden: maximum allowed value of a user defined priority is 1000000000",
                ],
            ),
            (
                "a built-in class with its own value is fine",
                class("system-node-critical", 2_000_001_000, false),
                vec![],
            ),
            (
                "a built-in class with another value is refused",
                class("system-cluster-critical", 5, false),
                vec![
                    "metadata.name: Forbidden: priority class names with 'system-' prefix are reserved for system use only. error: value of system-cluster-critical PriorityClass must be 2000000000",
                ],
            ),
            (
                "an unknown system- name is refused",
                class("system-mine", 5, false),
                vec![
                    "metadata.name: Forbidden: priority class names with 'system-' prefix are reserved for system use only. error: system-mine is not a known system priority class",
                ],
            ),
        ];
        for (name, pc, want) in cases {
            assert_eq!(messages(validate_priority_class(&pc, None)), want, "{name}");
        }
    }

    #[test]
    fn value_and_preemption_policy_never_change() {
        let old = class("high", 10, false);
        let mut new = class("high", 11, false);
        new.preemption_policy = Some(NEVER.into());
        assert_eq!(
            messages(validate_priority_class(&new, Some(&old))),
            [
                "value: Forbidden: may not be changed in an update.",
                "preemptionPolicy: Invalid value: \"Never\": field is immutable"
            ]
        );
        let mut described = old.clone();
        described.description = Some("now described".into());
        assert!(validate_priority_class(&described, Some(&old)).is_empty());
    }
}
