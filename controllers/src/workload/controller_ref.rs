//! The one controller-reference type ([`ControllerRef`], the shared view's) and what every
//! controller asks of an object's references: its uid, its controller's uid, the reference a
//! controller puts on what it makes or adopts (`controller: true`, `blockOwnerDeletion: true`,
//! as upstream's `NewControllerRef`). Pure.

pub use crate::views::{ControllerRef, controller_of};
use berth_runtime::informer::OwnerRef;
use berth_shared::k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use berth_shared::resource::ResourceType;
use serde_json::{Value, json};

impl ControllerRef {
    /// The reference to the object `name`/`uid` of type `rt`.
    pub fn to(rt: &ResourceType, name: &str, uid: &str) -> ControllerRef {
        ControllerRef {
            api_version: rt.api_version().to_string(),
            kind: rt.kind.to_string(),
            name: name.to_string(),
            uid: uid.to_string(),
        }
    }

    /// The controller reference among an informer object's owners.
    pub fn of_owner(r: &OwnerRef) -> ControllerRef {
        ControllerRef {
            api_version: r.api_version.clone(),
            kind: r.kind.clone(),
            name: r.name.clone(),
            uid: r.uid.clone(),
        }
    }

    /// As the typed API's owner reference (controlling, blocking its owner's deletion).
    pub fn to_owner_reference(&self) -> OwnerReference {
        OwnerReference {
            api_version: self.api_version.clone(),
            kind: self.kind.clone(),
            name: self.name.clone(),
            uid: self.uid.clone(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }
    }

    /// As written into `ownerReferences` by the controller.
    pub fn to_value(&self) -> Value {
        json!({
            "apiVersion": self.api_version,
            "kind": self.kind,
            "name": self.name,
            "uid": self.uid,
            "controller": true,
            "blockOwnerDeletion": true,
        })
    }
}

/// The object's `metadata.uid`.
pub fn uid_of(obj: &Value) -> Option<&str> {
    obj.pointer("/metadata/uid").and_then(Value::as_str)
}

/// The uid in the object's controller reference, if it has one.
pub fn controller_uid(obj: &Value) -> Option<&str> {
    obj.pointer("/metadata/ownerReferences")?
        .as_array()?
        .iter()
        .find(|r| r.get("controller").and_then(Value::as_bool) == Some(true))?
        .get("uid")?
        .as_str()
}

#[cfg(test)]
mod tests {
    use super::*;
    use berth_shared::resource::DEPLOYMENTS;

    #[test]
    fn a_controller_reference_is_written_as_controlling_and_blocking() {
        let r = ControllerRef::to(DEPLOYMENTS, "web", "d-uid");
        let v = r.to_value();
        assert_eq!(v["apiVersion"], "apps/v1");
        assert_eq!(v["kind"], "Deployment");
        assert_eq!(
            (v["controller"].clone(), v["blockOwnerDeletion"].clone()),
            (json!(true), json!(true))
        );
        let obj = json!({"metadata": {"uid": "rs", "ownerReferences": [
            {"uid": "other"}, v]}});
        assert_eq!(controller_uid(&obj), Some("d-uid"));
        assert_eq!(controller_of(&obj), Some(r));
        assert_eq!(uid_of(&obj), Some("rs"));
    }
}
