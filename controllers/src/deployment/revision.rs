//! Revisions and the annotations the Deployment controller keeps on ReplicaSets: the
//! `deployment.kubernetes.io/revision` number (max of the old ones + 1 on the new ReplicaSet,
//! also when an old ReplicaSet is reused by a rollback, whose previous numbers then go to
//! `revision-history`), `desired-replicas`/`max-replicas` for proportional scaling, and the
//! Deployment's own annotations (e.g. `kubernetes.io/change-cause`) copied onto the new
//! ReplicaSet (DEP-11, DEP-12, DEP-24, D-03).
//!
//! Worked example (T-DEP-07): revisions 1, 2 and 3 exist; `rollout undo` puts revision 2's
//! template back, so the revision-2 ReplicaSet is the new one again: it becomes revision 4 with
//! `revision-history: 2`, and `rollout history` lists 1, 3, 4.
//!
//! Planner: pure, no I/O.

use berth_shared::k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use serde_json::{Value, json};
use std::collections::BTreeMap;

pub const REVISION: &str = "deployment.kubernetes.io/revision";
pub const REVISION_HISTORY: &str = "deployment.kubernetes.io/revision-history";
pub const DESIRED_REPLICAS: &str = "deployment.kubernetes.io/desired-replicas";
pub const MAX_REPLICAS: &str = "deployment.kubernetes.io/max-replicas";
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";
const ROLLBACK_TO: &str = "deprecated.deployment.rollback.to";

/// `revision-history` stops growing at about 100 entries.
const MAX_HISTORY_CHARS: usize = 2000;

/// Deployment annotations that are never copied onto its ReplicaSets.
fn skip_copy(key: &str) -> bool {
    matches!(
        key,
        LAST_APPLIED | REVISION | REVISION_HISTORY | DESIRED_REPLICAS | MAX_REPLICAS | ROLLBACK_TO
    )
}

/// The value of a ReplicaSet's annotation `key`.
pub fn annotation<'a>(rs: &'a ReplicaSet, key: &str) -> Option<&'a str> {
    rs.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
}

/// The revision of a ReplicaSet: 0 without the annotation, `None` when it is not a number
/// (such ReplicaSets are skipped when looking for the maximum, as upstream does).
pub fn revision(rs: &ReplicaSet) -> Option<i64> {
    match annotation(rs, REVISION) {
        None => Some(0),
        Some(v) => v.parse().ok(),
    }
}

/// The highest revision among `rss`.
pub fn max_revision<'a>(rss: impl IntoIterator<Item = &'a ReplicaSet>) -> i64 {
    rss.into_iter()
        .filter_map(revision)
        .max()
        .unwrap_or(0)
        .max(0)
}

fn parse_i32(v: Option<&str>) -> Option<i32> {
    v?.parse().ok()
}

/// The `desired-replicas` annotation, when present and numeric.
pub fn desired_replicas(rs: &ReplicaSet) -> Option<i32> {
    parse_i32(annotation(rs, DESIRED_REPLICAS))
}

/// The `max-replicas` annotation, when present and numeric.
pub fn max_replicas(rs: &ReplicaSet) -> Option<i32> {
    parse_i32(annotation(rs, MAX_REPLICAS))
}

fn annotations_mut(rs: &mut ReplicaSet) -> &mut BTreeMap<String, String> {
    rs.metadata.annotations.get_or_insert_with(BTreeMap::new)
}

/// Upstream `ReplicasAnnotationsNeedUpdate`.
pub fn replicas_annotations_need_update(rs: &ReplicaSet, desired: i32, max: i32) -> bool {
    annotation(rs, DESIRED_REPLICAS) != Some(desired.to_string().as_str())
        || annotation(rs, MAX_REPLICAS) != Some(max.to_string().as_str())
}

/// Upstream `SetReplicasAnnotations`; true when something changed.
pub fn set_replicas_annotations(rs: &mut ReplicaSet, desired: i32, max: i32) -> bool {
    let mut changed = false;
    let a = annotations_mut(rs);
    for (key, value) in [(DESIRED_REPLICAS, desired), (MAX_REPLICAS, max)] {
        let value = value.to_string();
        if a.get(key) != Some(&value) {
            a.insert(key.to_string(), value);
            changed = true;
        }
    }
    changed
}

/// Copies the Deployment's annotations (but the skipped ones) onto the ReplicaSet; true when
/// something changed. Annotations are only added or overwritten, never removed.
fn copy_deployment_annotations(d: &Deployment, rs: &mut ReplicaSet) -> bool {
    let mut changed = false;
    let a = annotations_mut(rs);
    for (k, v) in d.metadata.annotations.iter().flatten() {
        if skip_copy(k) || a.get(k) == Some(v) {
            continue;
        }
        a.insert(k.clone(), v.clone());
        changed = true;
    }
    changed
}

/// Upstream `SetNewReplicaSetAnnotations`: copies the Deployment's annotations, raises the
/// revision to `new_revision` when it is lower (recording the previous number in
/// `revision-history` when there was one: a rollback), and on creation sets the replicas
/// annotations to (`desired`, `max`). True when the ReplicaSet changed.
pub fn set_new_rs_annotations(
    d: &Deployment,
    rs: &mut ReplicaSet,
    new_revision: i64,
    exists: bool,
    desired: i32,
    max: i32,
) -> bool {
    let mut changed = copy_deployment_annotations(d, rs);
    let old = annotation(rs, REVISION).map(String::from);
    let old_number = match old.as_deref() {
        None | Some("") => 0,
        Some(v) => match v.parse::<i64>() {
            Ok(n) => n,
            Err(_) => return false,
        },
    };
    if old_number < new_revision {
        annotations_mut(rs).insert(REVISION.into(), new_revision.to_string());
        changed = true;
        if let Some(old) = old {
            push_history(rs, &old);
        }
    }
    if !exists && set_replicas_annotations(rs, desired, max) {
        changed = true;
    }
    changed
}

/// Appends `old` to `revision-history`, dropping the oldest entries past the length limit.
fn push_history(rs: &mut ReplicaSet, old: &str) {
    let current = annotation(rs, REVISION_HISTORY)
        .unwrap_or_default()
        .to_string();
    if current.is_empty() {
        annotations_mut(rs).insert(REVISION_HISTORY.into(), old.to_string());
        return;
    }
    let mut entries: Vec<&str> = current.split(',').collect();
    let mut total = current.len() + old.len() + 1;
    let mut start = 0;
    while total > MAX_HISTORY_CHARS && start < entries.len() {
        total -= entries[start].len() + 1;
        start += 1;
    }
    if total <= MAX_HISTORY_CHARS {
        entries = entries.split_off(start);
        entries.push(old);
        let joined = entries.join(",");
        annotations_mut(rs).insert(REVISION_HISTORY.into(), joined);
    }
}

/// Upstream `SetDeploymentRevision`: true when the Deployment's annotation changed.
pub fn set_deployment_revision(d: &mut Deployment, revision: &str) -> bool {
    let a = d.metadata.annotations.get_or_insert_with(BTreeMap::new);
    if a.get(REVISION).map(String::as_str) == Some(revision) {
        return false;
    }
    a.insert(REVISION.into(), revision.to_string());
    true
}

/// The revision annotation set on a stored Deployment (the write of `Action::SetRevision`).
pub fn annotate(obj: &mut Value, revision: &str) {
    let a = &mut obj["metadata"]["annotations"];
    if !a.is_object() {
        *a = json!({});
    }
    a[REVISION] = json!(revision);
}

/// The revision annotation of a ReplicaSet, as written on it.
pub fn revision_text(rs: &ReplicaSet) -> &str {
    annotation(rs, REVISION).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use berth_shared::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn meta(name: &str, annotations: &[(&str, &str)]) -> ObjectMeta {
        let annotations = annotations
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()));
        ObjectMeta {
            name: Some(name.into()),
            annotations: Some(annotations.collect()),
            ..Default::default()
        }
    }

    fn rs(annotations: &[(&str, &str)]) -> ReplicaSet {
        let metadata = meta("web-abc", annotations);
        ReplicaSet {
            metadata,
            ..Default::default()
        }
    }

    fn deployment(annotations: &[(&str, &str)]) -> Deployment {
        let metadata = meta("web", annotations);
        Deployment {
            metadata,
            ..Default::default()
        }
    }

    fn get<'a>(rs: &'a ReplicaSet, key: &str) -> Option<&'a str> {
        annotation(rs, key)
    }

    #[test]
    fn the_max_revision_skips_unparsable_and_counts_missing_as_zero() {
        let rss = [
            rs(&[(REVISION, "3")]),
            rs(&[(REVISION, "x")]),
            rs(&[]),
            rs(&[(REVISION, "12")]),
        ];
        assert_eq!(max_revision(&rss), 12);
        assert_eq!(max_revision(&rss[..0]), 0);
        assert_eq!(revision(&rss[1]), None);
        assert_eq!(revision(&rss[2]), Some(0));
    }

    #[test]
    fn a_new_replica_set_gets_the_next_revision_replicas_annotations_and_change_cause() {
        let d = deployment(&[
            (
                "kubernetes.io/change-cause",
                "kubectl set image nginx=nginx:1.16.1",
            ),
            (REVISION, "1"),
            (LAST_APPLIED, "{}"),
        ]);
        let mut new = rs(&[]);
        assert!(set_new_rs_annotations(&d, &mut new, 2, false, 3, 4));
        assert_eq!(get(&new, REVISION), Some("2"));
        assert_eq!(get(&new, DESIRED_REPLICAS), Some("3"));
        assert_eq!(get(&new, MAX_REPLICAS), Some("4"));
        assert_eq!(
            get(&new, "kubernetes.io/change-cause"),
            Some("kubectl set image nginx=nginx:1.16.1")
        );
        assert_eq!(get(&new, LAST_APPLIED), None);
        assert_eq!(get(&new, REVISION_HISTORY), None);
    }

    #[test]
    fn a_reused_replica_set_gets_max_plus_one_and_remembers_its_old_numbers() {
        let d = deployment(&[]);
        let cases = [
            ("first rollback", "2", None, 4, Some("4"), Some("2")),
            ("second rollback", "4", Some("2"), 6, Some("6"), Some("2,4")),
            ("already newest", "5", None, 5, Some("5"), None),
            ("newer than asked", "7", None, 5, Some("7"), None),
        ];
        for (name, current, history, next, want_rev, want_history) in cases {
            let mut ann = vec![(REVISION, current)];
            if let Some(h) = history {
                ann.push((REVISION_HISTORY, h));
            }
            let mut reused = rs(&ann);
            set_new_rs_annotations(&d, &mut reused, next, true, 3, 4);
            assert_eq!(get(&reused, REVISION), want_rev, "{name}");
            assert_eq!(get(&reused, REVISION_HISTORY), want_history, "{name}");
            assert_eq!(get(&reused, DESIRED_REPLICAS), None, "{name}");
        }
    }

    #[test]
    fn an_existing_replica_set_with_nothing_to_change_is_left_alone() {
        let d = deployment(&[("kubernetes.io/change-cause", "x")]);
        let mut same = rs(&[(REVISION, "2"), ("kubernetes.io/change-cause", "x")]);
        assert!(!set_new_rs_annotations(&d, &mut same, 2, true, 3, 4));
    }

    #[test]
    fn the_revision_history_is_bounded() {
        let long: String = (0..700)
            .map(|i| i.to_string())
            .collect::<Vec<_>>()
            .join(",");
        let mut reused = rs(&[(REVISION, "999"), (REVISION_HISTORY, &long)]);
        set_new_rs_annotations(&deployment(&[]), &mut reused, 1000, true, 1, 1);
        let h = get(&reused, REVISION_HISTORY).unwrap();
        assert!(h.len() <= MAX_HISTORY_CHARS, "{}", h.len());
        assert!(h.ends_with(",999"));
    }

    #[test]
    fn replicas_annotations_are_compared_as_text() {
        let mut r = rs(&[(DESIRED_REPLICAS, "10"), (MAX_REPLICAS, "13")]);
        assert!(!replicas_annotations_need_update(&r, 10, 13));
        assert!(replicas_annotations_need_update(&r, 15, 18));
        assert!(set_replicas_annotations(&mut r, 15, 18));
        assert_eq!(
            (desired_replicas(&r), max_replicas(&r)),
            (Some(15), Some(18))
        );
        assert!(!set_replicas_annotations(&mut r, 15, 18));
    }

    #[test]
    fn the_deployment_revision_is_set_once() {
        let mut d = deployment(&[]);
        assert!(set_deployment_revision(&mut d, "4"));
        assert!(!set_deployment_revision(&mut d, "4"));
    }

    #[test]
    fn the_revision_annotation_is_set_on_a_stored_deployment() {
        let cases = [
            (json!({"metadata": {"name": "web"}}), json!({REVISION: "3"})),
            (
                json!({"metadata": {"annotations": null}}),
                json!({REVISION: "3"}),
            ),
            (
                json!({"metadata": {"annotations": {"a": "b", REVISION: "2"}}}),
                json!({"a": "b", REVISION: "3"}),
            ),
        ];
        for (mut obj, want) in cases {
            annotate(&mut obj, "3");
            assert_eq!(obj["metadata"]["annotations"], want);
        }
    }
}
