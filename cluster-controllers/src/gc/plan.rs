//! The garbage collector's decisions for one owner uid, given what exists: delete dependents
//! whose owners are all gone (Background), delete dependents before a foreground-deleting owner
//! and release it when no blocking dependent remains, strip ownerReferences for an orphaning
//! owner and then release it.
//!
//! Planner: pure, no I/O.

/// Finalizer of an owner whose dependents are orphaned.
pub const ORPHAN: &str = "orphan";
/// Finalizer of an owner deleted in the foreground.
pub const FOREGROUND: &str = "foregroundDeletion";

/// The owner as the collector sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    pub deleting: bool,
    pub finalizers: Vec<String>,
}

/// One dependent of the owner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dependent {
    pub uid: String,
    /// Its ownerReference to this owner has `blockOwnerDeletion: true`.
    pub blocks_owner: bool,
    /// It has at least one other owner that still exists.
    pub has_other_live_owner: bool,
    pub deleting: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Propagation {
    Background,
    Foreground,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    Delete {
        uid: String,
        propagation: Propagation,
    },
    RemoveOwnerReference {
        dependent: String,
        owner: String,
    },
    RemoveFinalizer {
        uid: String,
        finalizer: &'static str,
    },
}

/// Plans one pass for `owner_uid`; `owner` is `None` when no object has that uid.
pub fn plan(owner_uid: &str, owner: Option<&Owner>, dependents: &[Dependent]) -> Vec<Action> {
    let release_ref = |d: &Dependent| Action::RemoveOwnerReference {
        dependent: d.uid.clone(),
        owner: owner_uid.to_string(),
    };
    let Some(owner) = owner else {
        return dependents
            .iter()
            .filter_map(|d| {
                if d.has_other_live_owner {
                    Some(release_ref(d))
                } else if d.deleting {
                    None
                } else {
                    Some(Action::Delete {
                        uid: d.uid.clone(),
                        propagation: Propagation::Background,
                    })
                }
            })
            .collect();
    };
    if !owner.deleting {
        return Vec::new();
    }
    let has = |f: &str| owner.finalizers.iter().any(|x| x == f);
    if has(ORPHAN) {
        let mut actions: Vec<Action> = dependents.iter().map(release_ref).collect();
        if actions.is_empty() {
            actions.push(Action::RemoveFinalizer {
                uid: owner_uid.to_string(),
                finalizer: ORPHAN,
            });
        }
        return actions;
    }
    if has(FOREGROUND) {
        let mut actions: Vec<Action> = dependents
            .iter()
            .filter_map(|d| {
                if d.has_other_live_owner {
                    Some(release_ref(d))
                } else if d.deleting {
                    None
                } else {
                    Some(Action::Delete {
                        uid: d.uid.clone(),
                        propagation: Propagation::Foreground,
                    })
                }
            })
            .collect();
        let blocked = dependents
            .iter()
            .any(|d| d.blocks_owner && !d.has_other_live_owner);
        if !blocked {
            actions.push(Action::RemoveFinalizer {
                uid: owner_uid.to_string(),
                finalizer: FOREGROUND,
            });
        }
        return actions;
    }
    Vec::new()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dep(uid: &str, blocks: bool, other: bool, deleting: bool) -> Dependent {
        Dependent {
            uid: uid.into(),
            blocks_owner: blocks,
            has_other_live_owner: other,
            deleting,
        }
    }

    fn deleting(fins: &[&str]) -> Owner {
        Owner {
            deleting: true,
            finalizers: fins.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn dependents_of_a_vanished_owner_are_deleted_in_the_background() {
        let actions = plan(
            "o",
            None,
            &[dep("a", true, false, false), dep("b", false, false, true)],
        );
        assert_eq!(
            actions,
            vec![Action::Delete {
                uid: "a".into(),
                propagation: Propagation::Background
            }]
        );
    }

    #[test]
    fn a_dependent_with_another_live_owner_only_loses_the_reference() {
        let actions = plan("o", None, &[dep("a", false, true, false)]);
        assert_eq!(
            actions,
            vec![Action::RemoveOwnerReference {
                dependent: "a".into(),
                owner: "o".into()
            }]
        );
    }

    #[test]
    fn a_live_owner_keeps_its_dependents() {
        let owner = Owner {
            deleting: false,
            finalizers: vec![],
        };
        assert!(plan("o", Some(&owner), &[dep("a", true, false, false)]).is_empty());
    }

    #[test]
    fn orphaning_strips_references_first_and_releases_the_owner_after() {
        let o = deleting(&[ORPHAN]);
        assert_eq!(
            plan("o", Some(&o), &[dep("a", true, false, false)]),
            vec![Action::RemoveOwnerReference {
                dependent: "a".into(),
                owner: "o".into()
            }]
        );
        assert_eq!(
            plan("o", Some(&o), &[]),
            vec![Action::RemoveFinalizer {
                uid: "o".into(),
                finalizer: ORPHAN
            }]
        );
    }

    #[test]
    fn foreground_deletion_waits_for_blocking_dependents() {
        let o = deleting(&[FOREGROUND]);
        assert_eq!(
            plan("o", Some(&o), &[dep("a", true, false, false)]),
            vec![Action::Delete {
                uid: "a".into(),
                propagation: Propagation::Foreground
            }]
        );
        assert!(
            plan("o", Some(&o), &[dep("a", true, false, true)]).is_empty(),
            "still terminating: wait"
        );
        assert_eq!(
            plan("o", Some(&o), &[]),
            vec![Action::RemoveFinalizer {
                uid: "o".into(),
                finalizer: FOREGROUND
            }]
        );
    }

    #[test]
    fn non_blocking_dependents_do_not_hold_a_foreground_owner() {
        let o = deleting(&[FOREGROUND]);
        let actions = plan("o", Some(&o), &[dep("a", false, false, true)]);
        assert_eq!(
            actions,
            vec![Action::RemoveFinalizer {
                uid: "o".into(),
                finalizer: FOREGROUND
            }]
        );
    }
}
