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
    // A dependent another live owner keeps loses only this reference; one already
    // terminating is left to finish; the others are deleted with `propagation`.
    let cascade = |propagation: Propagation| {
        dependents.iter().filter_map(move |d| {
            if d.has_other_live_owner {
                Some(release_ref(d))
            } else if d.deleting {
                None
            } else {
                Some(Action::Delete {
                    uid: d.uid.clone(),
                    propagation,
                })
            }
        })
    };
    let Some(owner) = owner else {
        return cascade(Propagation::Background).collect();
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
        let mut actions: Vec<Action> = cascade(Propagation::Foreground).collect();
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
    fn the_owner_decides_what_becomes_of_its_dependents() {
        let live = Owner {
            deleting: false,
            finalizers: vec![],
        };
        let orphaning = deleting(&[ORPHAN]);
        let foreground = deleting(&[FOREGROUND]);
        let delete = |propagation| Action::Delete {
            uid: "a".into(),
            propagation,
        };
        let release = || Action::RemoveOwnerReference {
            dependent: "a".into(),
            owner: "o".into(),
        };
        let unfinalize = |finalizer| Action::RemoveFinalizer {
            uid: "o".into(),
            finalizer,
        };
        let cases = [
            (
                "dependents of a vanished owner are deleted in the background",
                None,
                vec![dep("a", true, false, false), dep("b", false, false, true)],
                vec![delete(Propagation::Background)],
            ),
            (
                "a dependent with another live owner only loses the reference",
                None,
                vec![dep("a", false, true, false)],
                vec![release()],
            ),
            (
                "a live owner keeps its dependents",
                Some(&live),
                vec![dep("a", true, false, false)],
                vec![],
            ),
            (
                "orphaning strips references first",
                Some(&orphaning),
                vec![dep("a", true, false, false)],
                vec![release()],
            ),
            (
                "orphaning releases the owner after",
                Some(&orphaning),
                vec![],
                vec![unfinalize(ORPHAN)],
            ),
            (
                "foreground deletion deletes blocking dependents in the foreground",
                Some(&foreground),
                vec![dep("a", true, false, false)],
                vec![delete(Propagation::Foreground)],
            ),
            (
                "foreground deletion waits for a blocking dependent still terminating",
                Some(&foreground),
                vec![dep("a", true, false, true)],
                vec![],
            ),
            (
                "foreground deletion releases the owner when no dependent is left",
                Some(&foreground),
                vec![],
                vec![unfinalize(FOREGROUND)],
            ),
            (
                "non-blocking dependents do not hold a foreground owner",
                Some(&foreground),
                vec![dep("a", false, false, true)],
                vec![unfinalize(FOREGROUND)],
            ),
        ];
        for (case, owner, dependents, want) in cases {
            assert_eq!(plan("o", owner, &dependents), want, "{case}");
        }
    }
}
