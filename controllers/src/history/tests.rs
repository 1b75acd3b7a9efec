//! The history planner's table tests, on DaemonSets.

use super::*;
use crate::daemonset::template::history_owner;
use crate::daemonset::view::{DaemonSet, HASH_LABEL, TEMPLATE_GENERATION};
use serde_json::json;
use std::collections::BTreeMap;

fn ds(image: &str, limit: i32) -> DaemonSet {
    DaemonSet::from_value(&json!({
        "metadata": {"name": "agent", "namespace": "ops", "uid": "u",
            "annotations": {TEMPLATE_GENERATION: "1"}},
        "spec": {"selector": {"matchLabels": {"app": "agent"}}, "revisionHistoryLimit": limit,
            "template": {"metadata": {"labels": {"app": "agent"}},
                "spec": {"containers": [{"name": "c", "image": image}]}}}}))
    .unwrap()
}

fn revision(of: &DaemonSet, name: &str, number: i64) -> Arc<Revision> {
    Arc::new(Revision {
        name: name.into(),
        uid: format!("uid-{name}"),
        labels: BTreeMap::from([(HASH_LABEL.to_string(), name.to_string())]),
        revision: number,
        data: history_owner(of).revision_data(),
        controller: None,
        deleting: false,
    })
}

#[test]
fn a_first_template_gets_revision_one_named_after_its_hash() {
    let d = ds("v1", 10);
    let h = plan(&history_owner(&d), &[]);
    let Current::Create { hash, object } = &h.current else {
        panic!("{h:?}")
    };
    assert_eq!(*hash, history_owner(&d).template_hash());
    assert_eq!(object["metadata"]["name"], format!("agent-{hash}"));
    assert_eq!(object["revision"], 1);
    assert!(h.old.is_empty() && h.duplicates.is_empty());
}

#[test]
fn a_changed_template_gets_max_plus_one() {
    let r1 = revision(&ds("v1", 10), "r1", 1);
    let r2 = revision(&ds("v2", 10), "r2", 2);
    let h = plan(&history_owner(&ds("v3", 10)), &[r2.clone(), r1.clone()]);
    let Current::Create { object, .. } = &h.current else {
        panic!("{h:?}")
    };
    assert_eq!(object["revision"], 3);
    assert_eq!(h.old, [r1, r2], "oldest first");
}

#[test]
fn the_current_template_keeps_its_revision_unless_an_old_one_is_newer() {
    let r1 = revision(&ds("v1", 10), "r1", 1);
    let r2 = revision(&ds("v2", 10), "r2", 2);
    let steady = plan(&history_owner(&ds("v2", 10)), &[r1.clone(), r2.clone()]);
    assert_eq!(
        steady.current,
        Current::Found {
            revision: r2.clone(),
            renumber: None
        }
    );
    assert_eq!(steady.current.hash(HASH_LABEL), "r2");
    assert_eq!(steady.current.name(), "r2");
    // A rollback to v1: revision r1 comes back as number 3.
    let rollback = plan(&history_owner(&ds("v1", 10)), &[r1.clone(), r2.clone()]);
    assert_eq!(
        rollback.current,
        Current::Found {
            revision: r1,
            renumber: Some(3)
        }
    );
    assert_eq!(rollback.old, [r2]);
}

#[test]
fn duplicates_of_the_current_revision_fold_into_the_newest() {
    let d = ds("v1", 10);
    let a = revision(&d, "a", 1);
    let b = revision(&d, "b", 2);
    let h = plan(&history_owner(&d), &[b.clone(), a.clone()]);
    assert_eq!(h.duplicates, [a]);
    assert!(matches!(&h.current, Current::Found { revision, .. } if *revision == b));
}

#[test]
fn a_revision_without_the_hash_label_is_labelled_and_hashed_by_its_name() {
    let d = ds("v1", 10);
    let mut bare = (*revision(&d, "agent-xyz", 1)).clone();
    bare.labels.clear();
    let bare = Arc::new(bare);
    let h = plan(&history_owner(&d), std::slice::from_ref(&bare));
    assert_eq!(h.label, [bare]);
    assert_eq!(h.current.hash(HASH_LABEL), "agent-xyz");
}

#[test]
fn history_beyond_the_limit_goes_oldest_first_unless_pods_still_use_it() {
    let d = ds("v9", 2);
    let old: Vec<Arc<Revision>> = (1..=5)
        .map(|i| revision(&ds(&format!("v{i}"), 2), &format!("r{i}"), i))
        .collect();
    let live = BTreeSet::from(["r1".to_string()]);
    let gone: Vec<String> = cleanup(&history_owner(&d), &old, by_hash(HASH_LABEL, &live))
        .iter()
        .map(|r| r.name.clone())
        .collect();
    assert_eq!(gone, ["r2", "r3", "r4"]);
    let mut zero = d.clone();
    zero.revision_history_limit = 0;
    let none = BTreeSet::new();
    assert_eq!(
        cleanup(&history_owner(&zero), &old, by_hash(HASH_LABEL, &none)).len(),
        5
    );
    assert!(
        cleanup(
            &history_owner(&ds("v9", 10)),
            &old,
            by_hash(HASH_LABEL, &none)
        )
        .is_empty()
    );
}
