//! The registry of Pod Security checks: which check applies at which level and version, in
//! upstream's order (baseline checks by id, then restricted ones; a restricted check may
//! replace a baseline one), and the helpers the checks share.
//! Planner: pure, no I/O.

use super::level::{Level, LevelVersion};
use super::{baseline, probes, profiles, restricted};
use k8s_openapi::api::core::v1::{ContainerPort, PodSpec, SecurityContext};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use std::collections::BTreeSet;

/// What one check found wrong: `privileged` and `container "c" must not set …`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub reason: String,
    pub detail: String,
}

impl Violation {
    pub(super) fn new(reason: impl Into<String>, detail: impl Into<String>) -> Violation {
        Violation {
            reason: reason.into(),
            detail: detail.into(),
        }
    }

    /// `reason` for the containers `names`, when there are any: the detail is
    /// `container "a" <what>` / `containers "a", "b" <what>`, `what` worded only then.
    pub(super) fn for_containers(
        reason: &str,
        names: &[&str],
        what: impl FnOnce() -> String,
    ) -> Option<Violation> {
        (!names.is_empty())
            .then(|| Violation::new(reason, format!("{} {}", containers_phrase(names), what())))
    }
}

pub(super) type CheckFn = fn(&ObjectMeta, &PodSpec) -> Option<Violation>;

/// One version of a check: it applies from `since` (a minor version of 1.x) until the next.
pub(super) struct Since {
    pub since: u32,
    pub check: CheckFn,
    /// The baseline checks this restricted one replaces.
    pub overrides: &'static [&'static str],
}

pub(super) struct Check {
    pub id: &'static str,
    pub level: Level,
    pub versions: &'static [Since],
}

/// Every check, baseline first, each level's sorted by id as Go sorts strings (bytewise).
fn all() -> [&'static Check; 18] {
    [
        &profiles::APP_ARMOR,
        &baseline::CAPABILITIES,
        &baseline::HOST_NAMESPACES,
        &baseline::HOST_PATH_VOLUMES,
        &baseline::HOST_PORTS,
        &probes::HOST_PROBES_AND_HOST_LIFECYCLE,
        &baseline::PRIVILEGED,
        &baseline::PROC_MOUNT,
        &profiles::SE_LINUX,
        &profiles::SECCOMP,
        &profiles::SYSCTLS,
        &baseline::WINDOWS_HOST_PROCESS,
        &restricted::ALLOW_PRIVILEGE_ESCALATION,
        &restricted::CAPABILITIES,
        &restricted::VOLUMES,
        &restricted::RUN_AS_NON_ROOT,
        &restricted::RUN_AS_USER,
        &restricted::SECCOMP,
    ]
}

/// The version of `check` in force at minor version `minor`, if any.
fn in_force(check: &Check, minor: u32) -> Option<&'static Since> {
    check.versions.iter().rev().find(|v| v.since <= minor)
}

/// What the pod (its metadata and spec, or a template's) violates at `lv`, in upstream's order.
pub fn evaluate(lv: LevelVersion, meta: &ObjectMeta, spec: &PodSpec) -> Vec<Violation> {
    if lv.level == Level::Privileged {
        return Vec::new();
    }
    let minor = lv.version.effective_minor();
    let checks: Vec<(&Check, &Since)> = all()
        .into_iter()
        .filter(|c| c.level <= lv.level)
        .filter_map(|c| in_force(c, minor).map(|v| (c, v)))
        .collect();
    let overridden: Vec<&str> = checks
        .iter()
        .flat_map(|(_, v)| v.overrides.iter().copied())
        .collect();
    checks
        .iter()
        .filter(|(c, _)| !overridden.contains(&c.id))
        .filter_map(|(_, v)| (v.check)(meta, spec))
        .collect()
}

/// `reason (detail), reason (detail)`: upstream's `ForbiddenDetail()`.
pub fn forbidden_detail(violations: &[Violation]) -> String {
    violations
        .iter()
        .map(|v| {
            if v.detail.is_empty() {
                v.reason.clone()
            } else {
                format!("{} ({})", v.reason, v.detail)
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// `reason, reason`: upstream's `ForbiddenReason()`.
pub fn forbidden_reason(violations: &[Violation]) -> String {
    violations
        .iter()
        .map(|v| v.reason.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// `"a", "b"`.
pub(super) fn join_quote<S: AsRef<str>>(items: impl IntoIterator<Item = S>) -> String {
    items
        .into_iter()
        .map(|s| quote(s.as_ref()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Go's `%q` of a string.
pub(super) fn quote(s: &str) -> String {
    super::super::field::quote(s)
}

pub(super) fn pluralize(singular: &'static str, plural: &'static str, n: usize) -> &'static str {
    if n == 1 { singular } else { plural }
}

/// `container "a"` / `containers "a", "b"`.
pub(super) fn containers_phrase(names: &[&str]) -> String {
    named_phrase("container", "containers", names)
}

/// `volume "a"` / `volumes "a", "b"`.
pub(super) fn volumes_phrase(names: &[&str]) -> String {
    named_phrase("volume", "volumes", names)
}

fn named_phrase(singular: &'static str, plural: &'static str, names: &[&str]) -> String {
    format!(
        "{} {}",
        pluralize(singular, plural, names.len()),
        join_quote(names)
    )
}

/// Names of the containers for which `bad` holds.
pub(super) fn bad_containers<'a>(
    spec: &'a PodSpec,
    mut bad: impl FnMut(&ContainerView<'a>) -> bool,
) -> Vec<&'a str> {
    containers(spec)
        .iter()
        .filter(|c| bad(c))
        .map(|c| c.name)
        .collect()
}

/// The containers with at least one offending value, and those values (sorted, each once):
/// `offending` lists what a container sets that the check forbids.
pub(super) fn offending_values<'a, T: Ord>(
    spec: &'a PodSpec,
    mut offending: impl FnMut(&ContainerView<'a>) -> Vec<T>,
) -> (Vec<&'a str>, BTreeSet<T>) {
    let mut values = BTreeSet::new();
    let names = bad_containers(spec, |c| {
        let found = offending(c);
        let bad = !found.is_empty();
        values.extend(found);
        bad
    });
    (names, values)
}

/// `pod and containers "a", "b"` from who set a forbidden value.
pub(super) fn setters(pod: bool, names: &[&str]) -> String {
    let mut parts = Vec::new();
    if pod {
        parts.push("pod".to_string());
    }
    if !names.is_empty() {
        parts.push(containers_phrase(names));
    }
    parts.join(" and ")
}

/// What the checks read of a container, ephemeral ones included.
pub(super) struct ContainerView<'a> {
    pub name: &'a str,
    pub security_context: Option<&'a SecurityContext>,
    pub ports: &'a [ContainerPort],
}

/// Init containers, containers, then ephemeral containers, as upstream visits them.
pub(super) fn containers(spec: &PodSpec) -> Vec<ContainerView<'_>> {
    let init = spec.init_containers.iter().flatten();
    let mut out: Vec<ContainerView<'_>> = init
        .chain(spec.containers.iter())
        .map(|c| ContainerView {
            name: &c.name,
            security_context: c.security_context.as_ref(),
            ports: c.ports.as_deref().unwrap_or_default(),
        })
        .collect();
    out.extend(
        spec.ephemeral_containers
            .iter()
            .flatten()
            .map(|c| ContainerView {
                name: &c.name,
                security_context: c.security_context.as_ref(),
                ports: c.ports.as_deref().unwrap_or_default(),
            }),
    );
    out
}

/// `spec.os.name == windows`: the restricted Linux-only checks pass from 1.25.
pub(super) fn is_windows(spec: &PodSpec) -> bool {
    spec.os.as_ref().is_some_and(|os| os.name == "windows")
}

#[cfg(test)]
mod tests {
    use super::super::level::Version;
    use super::*;

    #[test]
    fn checks_run_in_upstreams_order() {
        let ids: Vec<(Level, &str)> = all().iter().map(|c| (c.level, c.id)).collect();
        let mut sorted = ids.clone();
        // Baseline first, then each level's ids in Go's bytewise order.
        sorted.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.as_bytes().cmp(b.1.as_bytes())));
        assert_eq!(ids, sorted);
    }

    #[test]
    fn versions_of_a_check_are_strictly_increasing() {
        for c in all() {
            assert!(
                c.versions.windows(2).all(|w| w[0].since < w[1].since),
                "{}",
                c.id
            );
            for v in c.versions {
                assert!(v.overrides.is_empty() || c.level == Level::Restricted);
            }
        }
    }

    fn privileged_spec() -> PodSpec {
        serde_json::from_value(serde_json::json!({
            "hostNetwork": true,
            "containers": [{"name": "c", "image": "i",
                            "securityContext": {"privileged": true}}]}))
        .unwrap()
    }

    #[test]
    fn privileged_level_checks_nothing() {
        let spec = privileged_spec();
        let lv = LevelVersion::new(Level::Privileged, Version::Latest);
        assert!(evaluate(lv, &ObjectMeta::default(), &spec).is_empty());
    }

    #[test]
    fn baseline_reports_every_violation_in_order() {
        let spec = privileged_spec();
        let lv = LevelVersion::new(Level::Baseline, Version::Latest);
        let v = evaluate(lv, &ObjectMeta::default(), &spec);
        assert_eq!(
            forbidden_detail(&v),
            "host namespaces (hostNetwork=true), privileged (container \"c\" must not set securityContext.privileged=true)"
        );
        assert_eq!(forbidden_reason(&v), "host namespaces, privileged");
    }

    #[test]
    fn restricted_replaces_the_baseline_checks_it_overrides() {
        let spec: PodSpec = serde_json::from_value(serde_json::json!({
            "containers": [{"name": "c", "image": "i",
                            "securityContext": {"capabilities": {"add": ["SYS_ADMIN"]}}}],
            "volumes": [{"name": "h", "hostPath": {"path": "/"}}]}))
        .unwrap();
        let lv = LevelVersion::new(Level::Restricted, Version::Latest);
        let reasons = forbidden_reason(&evaluate(lv, &ObjectMeta::default(), &spec));
        assert_eq!(
            reasons,
            "allowPrivilegeEscalation != false, unrestricted capabilities, restricted volume types, runAsNonRoot != true, seccompProfile"
        );
    }

    #[test]
    fn an_old_version_uses_the_checks_of_its_time() {
        // Before 1.22 restricted had no capabilities check of its own: baseline's applies;
        // before 1.8 no allowPrivilegeEscalation; before 1.19 seccomp was annotations only.
        let spec: PodSpec = serde_json::from_value(serde_json::json!({
            "securityContext": {"runAsNonRoot": true},
            "containers": [{"name": "c", "image": "i",
                            "securityContext": {"capabilities": {"add": ["SYS_ADMIN"]}}}]}))
        .unwrap();
        let at = |m| {
            forbidden_reason(&evaluate(
                LevelVersion::new(Level::Restricted, Version::Minor(m)),
                &ObjectMeta::default(),
                &spec,
            ))
        };
        assert_eq!(at(7), "non-default capabilities");
        assert_eq!(
            at(18),
            "non-default capabilities, allowPrivilegeEscalation != false"
        );
        assert_eq!(
            at(22),
            "allowPrivilegeEscalation != false, unrestricted capabilities, seccompProfile"
        );
    }
}
