//! Which objects a controller owns, adopts and releases (upstream's
//! `ControllerRefManager.ClaimObject`), and the writes that adopt and release: its own that
//! still match its selector are kept (being deleted or finished makes no difference), its own
//! that stopped matching are released, orphans that match are adopted unless they are being
//! deleted; what another controller owns is left alone. Used by the DaemonSet and StatefulSet
//! controllers for their pods, revisions and claims.

use crate::controllers::views::{ControllerRef, string_map};
use crate::registry::{Part, Registry, RegistryError, WriteOptions};
use berth_shared::resource::ResourceType;
use berth_shared::selector::LabelSelector;
use serde_json::{Value, json};
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

/// The controlling object, as claiming needs it.
#[derive(Debug, Clone)]
pub struct Owner<'a> {
    /// Its resource type (to recheck that it still lives before adopting).
    pub resource: &'static ResourceType,
    pub namespace: &'a str,
    pub name: &'a str,
    pub uid: &'a str,
    pub selector: &'a LabelSelector,
    /// The controller reference it puts on what it adopts.
    pub controller_ref: Value,
}

/// The object's `metadata.uid`.
pub(crate) fn uid_of(obj: &Value) -> Option<&str> {
    obj.pointer("/metadata/uid").and_then(Value::as_str)
}

/// The uid in the object's controller reference, if it has one.
pub(crate) fn controller_uid(obj: &Value) -> Option<&str> {
    obj.pointer("/metadata/ownerReferences")?
        .as_array()?
        .iter()
        .find(|r| r.get("controller").and_then(Value::as_bool) == Some(true))?
        .get("uid")?
        .as_str()
}

impl Owner<'_> {
    /// The claim on an object with these labels, controller and deletion state. Pure.
    pub fn claim(
        &self,
        labels: &BTreeMap<String, String>,
        controller: Option<&ControllerRef>,
        deleting: bool,
    ) -> Claim {
        let matches = self.selector.matches(labels);
        match controller {
            Some(c) if c.uid == self.uid => {
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

    /// Makes the owner the controller of the orphan `name` of type `rt`; true when it is ours
    /// now. The owner is rechecked first (upstream's `RecheckDeletionTimestamp`), and the
    /// object on the fresh copy: it may have been adopted, relabelled or deleted meanwhile.
    pub fn adopt(
        &self,
        registry: &Registry,
        rt: &ResourceType,
        name: &str,
        uid: &str,
    ) -> Result<bool, RegistryError> {
        if !registry.is_live_owner(self.resource, self.namespace, self.name, self.uid)? {
            return Ok(false);
        }
        let r = registry.update_with(
            rt,
            Some(self.namespace),
            name,
            Part::Main,
            &WriteOptions::default(),
            |mut obj| {
                if uid_of(&obj) != Some(uid)
                    || obj.pointer("/metadata/deletionTimestamp").is_some()
                    || controller_uid(&obj).is_some()
                    || !self
                        .selector
                        .matches(&string_map(obj.pointer("/metadata/labels")))
                {
                    return Ok::<_, RegistryError>(obj);
                }
                let refs = &mut obj["metadata"]["ownerReferences"];
                match refs.as_array_mut() {
                    Some(list) => {
                        list.retain(|r| r.get("uid").and_then(Value::as_str) != Some(self.uid));
                        list.push(self.controller_ref.clone());
                    }
                    None => *refs = json!([self.controller_ref]),
                }
                Ok(obj)
            },
        );
        match r {
            Ok(obj) => Ok(controller_uid(&obj) == Some(self.uid)),
            Err(RegistryError::NotFound { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Drops the owner's reference from `name`, which stopped matching its selector.
    pub fn release(
        &self,
        registry: &Registry,
        rt: &ResourceType,
        name: &str,
        uid: &str,
    ) -> Result<(), RegistryError> {
        let r = registry.update_with(
            rt,
            Some(self.namespace),
            name,
            Part::Main,
            &WriteOptions::default(),
            |mut obj| {
                if uid_of(&obj) != Some(uid) {
                    return Ok::<_, RegistryError>(obj);
                }
                crate::registry::meta::release_owner(&mut obj, self.uid);
                Ok(obj)
            },
        );
        match r {
            Ok(_) | Err(RegistryError::NotFound { .. }) => Ok(()),
            Err(e) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn owner_of(uid: &str) -> Owner<'_> {
        Owner {
            resource: berth_shared::resource::DAEMON_SETS,
            namespace: "ops",
            name: "agent",
            uid,
            selector: Box::leak(Box::new(
                LabelSelector::from_k8s(
                    &serde_json::from_value(json!({"matchLabels": {"app": "agent"}}))
                        .expect("selector"),
                )
                .expect("selector"),
            )),
            controller_ref: json!({}),
        }
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
            assert_eq!(
                owner_of("ds-uid").claim(labels, controller, deleting),
                want,
                "{name}"
            );
        }
    }
}
