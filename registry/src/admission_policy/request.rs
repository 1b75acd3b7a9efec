//! The `request` variable: the admission request as upstream's `CreateAdmissionRequest` gives
//! it to CEL (kind, resource, subresource, the requested ones, name, namespace, operation,
//! userInfo, dryRun, options), without the objects, which are `object` and `oldObject`.

use serde_json::{Map, Value, json};

use super::matching::{Attributes, Operation};
use crate::identity::Identity;

/// The options type upstream sends along with each operation.
fn options(op: Operation, dry_run: bool) -> Value {
    let kind = match op {
        Operation::Create => "CreateOptions",
        Operation::Update => "UpdateOptions",
        Operation::Delete => "DeleteOptions",
        Operation::Connect => return Value::Null,
    };
    let mut o = json!({"kind": kind, "apiVersion": "meta.k8s.io/v1"});
    if dry_run {
        o["dryRun"] = json!(["All"]);
    }
    o
}

/// Who the controller's own writes are made by, as upstream's controller manager
/// authenticates.
const CONTROLLER_USER: &str = "system:kube-controller-manager";

/// Who makes a request.
#[derive(Debug, Clone, Copy)]
pub enum Requester<'a> {
    User(&'a Identity),
    /// A write made inside the controller process.
    Controller,
}

/// `userInfo`, as `authentication.k8s.io/v1` `UserInfo` with its empty fields left out.
fn user_info(user: Requester<'_>) -> Value {
    let mut u = Map::new();
    match user {
        Requester::User(id) => {
            u.insert("username".into(), json!(id.user));
            if !id.uid.is_empty() {
                u.insert("uid".into(), json!(id.uid));
            }
            if !id.groups.is_empty() {
                u.insert("groups".into(), json!(id.groups));
            }
            if !id.extra.is_empty() {
                u.insert("extra".into(), json!(id.extra));
            }
        }
        Requester::Controller => {
            u.insert("username".into(), json!(CONTROLLER_USER));
            u.insert("groups".into(), json!([crate::identity::AUTHENTICATED]));
        }
    }
    Value::Object(u)
}

/// The `request` value for `a`, made by `user`.
pub fn request(a: &Attributes<'_>, user: Requester<'_>, dry_run: bool) -> Value {
    let kind = json!({"group": a.group, "version": a.version, "kind": a.kind});
    let resource = json!({"group": a.group, "version": a.version, "resource": a.resource});
    let mut r = json!({
        "uid": uuid::Uuid::new_v4().to_string(),
        "kind": kind,
        "resource": resource,
        "requestKind": kind,
        "requestResource": resource,
        "name": a.name,
        "namespace": a.namespace,
        "operation": a.operation.as_str(),
        "userInfo": user_info(user),
        "dryRun": dry_run,
        "options": options(a.operation, dry_run),
    });
    if !a.subresource.is_empty() {
        r["subResource"] = json!(a.subresource);
        r["requestSubResource"] = json!(a.subresource);
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_request_names_the_resource_the_operation_and_the_user() {
        let obj = json!({});
        let a = Attributes {
            group: "apps",
            version: "v1",
            resource: "deployments",
            subresource: "scale",
            kind: "Scale",
            namespace: "team",
            name: "web",
            operation: Operation::Update,
            object: Some(&obj),
            old_object: None,
        };
        let alice = Identity::new("alice", vec!["dev".into()]);
        let r = request(&a, Requester::User(&alice), true);
        assert_eq!(
            r["resource"],
            json!({"group": "apps", "version": "v1", "resource": "deployments"})
        );
        assert_eq!(r["kind"]["kind"], "Scale");
        assert_eq!(r["subResource"], "scale");
        assert_eq!(r["operation"], "UPDATE");
        assert_eq!(
            r["userInfo"],
            json!({"username": "alice", "groups": ["dev"]})
        );
        assert_eq!(r["dryRun"], true);
        assert_eq!(r["options"]["kind"], "UpdateOptions");
        assert_eq!(r["name"], "web");
        assert_eq!(r["namespace"], "team");
        let controller = request(
            &Attributes {
                subresource: "",
                ..a
            },
            Requester::Controller,
            false,
        );
        assert_eq!(
            controller["userInfo"],
            json!({"username": "system:kube-controller-manager", "groups": ["system:authenticated"]})
        );
        assert!(controller.get("subResource").is_none());
    }
}
