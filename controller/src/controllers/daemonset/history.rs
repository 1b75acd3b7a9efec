//! A DaemonSet's ControllerRevisions (upstream `constructHistory`, `dedupCurHistories` and
//! `cleanupHistory`): the revision whose data is the current template's is the current one (a
//! rollback to an old template finds its old revision and renumbers it max + 1, so `kubectl
//! rollout history` shows it last); without one a new revision `<ds>-<hash>` numbered max + 1
//! is created; duplicates of the current one (two passes racing) are folded into the newest;
//! old revisions beyond `revisionHistoryLimit` go, oldest first, unless a pod still carries
//! their hash.
//!
//! Planner: pure, no I/O.

use super::template::{new_revision, revision_data, template_hash};
use super::view::{DaemonSet, HASH_LABEL, Revision};
use serde_json::Value;
use std::collections::BTreeSet;
use std::sync::Arc;

/// The current revision: found, or to be created.
#[derive(Debug, Clone, PartialEq)]
pub enum Current {
    /// This one; `renumber` when its number must become max + 1.
    Found {
        revision: Arc<Revision>,
        renumber: Option<i64>,
    },
    /// None matches: create this ControllerRevision (named `<ds>-<hash>`).
    Create { hash: String, object: Value },
}

/// What the history needs done before pods are looked at.
#[derive(Debug, Clone, PartialEq)]
pub struct History {
    pub current: Current,
    /// Revisions lacking the hash label get their name as hash (upstream does the same, so
    /// no hash needs recomputing).
    pub label: Vec<Arc<Revision>>,
    /// Other revisions matching the template: delete them, relabelling pods of their hash.
    pub duplicates: Vec<Arc<Revision>>,
    /// The old revisions, oldest first.
    pub old: Vec<Arc<Revision>>,
}

impl Current {
    /// The hash new pods are labelled with.
    pub fn hash(&self) -> String {
        match self {
            Current::Found { revision, .. } => match revision.hash() {
                "" => revision.name.clone(),
                h => h.to_string(),
            },
            Current::Create { hash, .. } => hash.clone(),
        }
    }
}

/// Sorts the claimed revisions against the DaemonSet's template.
pub fn plan(ds: &DaemonSet, revisions: &[Arc<Revision>]) -> History {
    let data = revision_data(ds);
    let label = revisions
        .iter()
        .filter(|r| !r.labels.contains_key(HASH_LABEL))
        .cloned()
        .collect();
    let (mut current, mut old): (Vec<_>, Vec<_>) =
        revisions.iter().cloned().partition(|r| r.data == data);
    old.sort_by(|a, b| a.revision.cmp(&b.revision).then(a.name.cmp(&b.name)));
    let next = old.iter().map(|r| r.revision).max().unwrap_or(0) + 1;
    // The newest of the matching ones is kept (upstream keeps the last of equal numbers).
    current.sort_by(|a, b| a.revision.cmp(&b.revision).then(a.name.cmp(&b.name)));
    let kept = current.pop();
    let found = match kept {
        Some(revision) => Current::Found {
            renumber: (revision.revision < next).then_some(next),
            revision,
        },
        None => {
            let hash = template_hash(ds);
            Current::Create {
                object: new_revision(ds, &hash, next),
                hash,
            }
        }
    };
    History {
        current: found,
        label,
        duplicates: current,
        old,
    }
}

/// The old revisions to delete: beyond `revisionHistoryLimit`, oldest first, skipping those
/// whose hash a pod (finished ones included) still carries.
pub fn cleanup(
    ds: &DaemonSet,
    old: &[Arc<Revision>],
    live_hashes: &BTreeSet<String>,
) -> Vec<Arc<Revision>> {
    let keep = usize::try_from(ds.revision_history_limit).unwrap_or(0);
    let mut excess = old.len().saturating_sub(keep);
    let mut out = Vec::new();
    for r in old {
        if excess == 0 {
            break;
        }
        if live_hashes.contains(r.hash()) {
            continue;
        }
        out.push(r.clone());
        excess -= 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controllers::daemonset::view::TEMPLATE_GENERATION;
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
            data: revision_data(of),
            controller: None,
            deleting: false,
        })
    }

    #[test]
    fn a_first_template_gets_revision_one_named_after_its_hash() {
        let d = ds("v1", 10);
        let h = plan(&d, &[]);
        let Current::Create { hash, object } = &h.current else {
            panic!("{h:?}")
        };
        assert_eq!(*hash, template_hash(&d));
        assert_eq!(object["metadata"]["name"], format!("agent-{hash}"));
        assert_eq!(object["revision"], 1);
        assert!(h.old.is_empty() && h.duplicates.is_empty());
    }

    #[test]
    fn a_changed_template_gets_max_plus_one() {
        let r1 = revision(&ds("v1", 10), "r1", 1);
        let r2 = revision(&ds("v2", 10), "r2", 2);
        let h = plan(&ds("v3", 10), &[r2.clone(), r1.clone()]);
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
        let steady = plan(&ds("v2", 10), &[r1.clone(), r2.clone()]);
        assert_eq!(
            steady.current,
            Current::Found {
                revision: r2.clone(),
                renumber: None
            }
        );
        assert_eq!(steady.current.hash(), "r2");
        // A rollback to v1: revision r1 comes back as number 3.
        let rollback = plan(&ds("v1", 10), &[r1.clone(), r2.clone()]);
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
        let h = plan(&d, &[b.clone(), a.clone()]);
        assert_eq!(h.duplicates, [a]);
        assert!(matches!(&h.current, Current::Found { revision, .. } if *revision == b));
    }

    #[test]
    fn a_revision_without_the_hash_label_is_labelled_and_hashed_by_its_name() {
        let d = ds("v1", 10);
        let mut bare = (*revision(&d, "agent-xyz", 1)).clone();
        bare.labels.clear();
        let bare = Arc::new(bare);
        let h = plan(&d, std::slice::from_ref(&bare));
        assert_eq!(h.label, [bare]);
        assert_eq!(h.current.hash(), "agent-xyz");
    }

    #[test]
    fn history_beyond_the_limit_goes_oldest_first_unless_pods_still_use_it() {
        let d = ds("v9", 2);
        let old: Vec<Arc<Revision>> = (1..=5)
            .map(|i| revision(&ds(&format!("v{i}"), 2), &format!("r{i}"), i))
            .collect();
        let live = BTreeSet::from(["r1".to_string()]);
        let gone: Vec<String> = cleanup(&d, &old, &live)
            .iter()
            .map(|r| r.name.clone())
            .collect();
        assert_eq!(gone, ["r2", "r3", "r4"]);
        let mut zero = d.clone();
        zero.revision_history_limit = 0;
        assert_eq!(cleanup(&zero, &old, &BTreeSet::new()).len(), 5);
        assert!(cleanup(&ds("v9", 10), &old, &BTreeSet::new()).is_empty());
    }
}
