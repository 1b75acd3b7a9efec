//! Which pods and ControllerRevisions a DaemonSet owns, adopts and releases (upstream's
//! `ControllerRefManager.ClaimObject`): its own that still match its selector are kept (being
//! deleted or finished makes no difference), its own that stopped matching are released,
//! orphans that match are adopted unless they are being deleted; what another controller owns
//! is left alone.
//!
//! Planner: pure, no I/O.

use super::view::DaemonSet;
use crate::controllers::replicaset::view::ControllerRef;
use std::collections::BTreeMap;

/// What to do about one object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claim {
    /// Ours, and matching.
    Owned,
    /// An orphan to adopt.
    Adopt,
    /// Ours but no longer matching: drop our reference.
    Release,
    /// Someone else's, or an orphan we do not want.
    Ignore,
}

/// The claim on an object with these labels, controller and deletion state.
pub fn claim(
    ds: &DaemonSet,
    labels: &BTreeMap<String, String>,
    controller: Option<&ControllerRef>,
    deleting: bool,
) -> Claim {
    let matches = ds.selector.matches(labels);
    match controller {
        Some(c) if c.uid == ds.uid => {
            if matches {
                Claim::Owned
            } else {
                Claim::Release
            }
        }
        Some(_) => Claim::Ignore,
        None if matches && !deleting => Claim::Adopt,
        None => Claim::Ignore,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ds() -> DaemonSet {
        DaemonSet::from_value(&json!({"metadata": {"name": "agent", "uid": "ds-uid"},
            "spec": {"selector": {"matchLabels": {"app": "agent"}},
                "template": {"metadata": {"labels": {"app": "agent"}}}}}))
        .unwrap()
    }

    fn owner(uid: &str) -> ControllerRef {
        ControllerRef {
            api_version: "apps/v1".into(),
            kind: "DaemonSet".into(),
            name: "x".into(),
            uid: uid.into(),
        }
    }

    #[test]
    fn claims_follow_the_controller_reference_and_the_selector() {
        let agent = BTreeMap::from([("app".to_string(), "agent".to_string())]);
        let other = BTreeMap::from([("app".to_string(), "web".to_string())]);
        let ours = owner("ds-uid");
        let theirs = owner("rs-uid");
        let cases = [
            (
                "ours and matching",
                &agent,
                Some(&ours),
                false,
                Claim::Owned,
            ),
            (
                "ours, matching, being deleted",
                &agent,
                Some(&ours),
                true,
                Claim::Owned,
            ),
            (
                "ours but relabelled",
                &other,
                Some(&ours),
                false,
                Claim::Release,
            ),
            ("a matching orphan", &agent, None, false, Claim::Adopt),
            (
                "a matching orphan being deleted",
                &agent,
                None,
                true,
                Claim::Ignore,
            ),
            (
                "an orphan that does not match",
                &other,
                None,
                false,
                Claim::Ignore,
            ),
            (
                "another controller's",
                &agent,
                Some(&theirs),
                false,
                Claim::Ignore,
            ),
        ];
        for (name, labels, controller, deleting, want) in cases {
            assert_eq!(claim(&ds(), labels, controller, deleting), want, "{name}");
        }
    }
}
