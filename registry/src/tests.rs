//! The registry's answers to writes that upstream refuses, over a real store: in upstream's
//! order, with upstream's errors.

use super::*;
use crate::testing;
use berth_shared::resource::by_plural;

fn configmaps() -> &'static ResourceType {
    by_plural("", "v1", "configmaps").expect("configmaps")
}

fn configmap(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": "v"}})
}

#[test]
fn a_create_carrying_a_resource_version_is_refused_after_validation_and_never_in_a_dry_run() {
    let dir = tempfile::tempdir().expect("dir");
    let registry = testing::registry(dir.path());
    let opts = WriteOptions::default();
    let mut body = configmap("versioned");
    body["metadata"]["resourceVersion"] = json!("12");
    let e = registry
        .create(configmaps(), Some("default"), body.clone(), &opts)
        .unwrap_err();
    assert!(matches!(e, RegistryError::ResourceVersionOnCreate), "{e:?}");
    assert!(
        registry
            .get(configmaps(), Some("default"), "versioned")
            .is_err()
    );

    let mut invalid = body.clone();
    invalid["metadata"]["name"] = json!("Not_Valid");
    let e = registry
        .create(configmaps(), Some("default"), invalid, &opts)
        .unwrap_err();
    assert!(matches!(e, RegistryError::Invalid { .. }), "{e:?}");

    let dry = WriteOptions {
        dry_run: true,
        ..WriteOptions::default()
    };
    assert!(
        registry
            .create(configmaps(), Some("default"), body, &dry)
            .is_ok()
    );
}

#[test]
fn a_put_names_its_object_and_its_uid_is_a_precondition() {
    let dir = tempfile::tempdir().expect("dir");
    let registry = testing::registry(dir.path());
    let opts = WriteOptions::default();
    let created = registry
        .create(configmaps(), Some("default"), configmap("cm"), &opts)
        .expect("create");
    let put =
        |body: Value| registry.update(configmaps(), Some("default"), "cm", body, Part::Main, &opts);

    let mut nameless = created.clone();
    nameless["metadata"]["name"] = json!("");
    assert!(
        matches!(put(nameless), Err(RegistryError::BadRequest(m)) if m.contains("undeterminable"))
    );
    let mut forged = created.clone();
    forged["metadata"]["uid"] = json!("forged");
    let e = put(forged).unwrap_err();
    assert!(
        matches!(&e, RegistryError::Conflict { detail, .. } if detail.contains("UID in precondition: forged")),
        "{e:?}"
    );
    // Without a uid there is no precondition, and the stored uid stays.
    let mut no_uid = created.clone();
    no_uid["metadata"]
        .as_object_mut()
        .expect("metadata")
        .remove("uid");
    let kept = put(no_uid).expect("an update without a uid");
    assert_eq!(kept["metadata"]["uid"], created["metadata"]["uid"]);
}

#[test]
fn a_read_modify_write_may_not_rename_or_re_uid_the_object() {
    let dir = tempfile::tempdir().expect("dir");
    let registry = testing::registry(dir.path());
    let opts = WriteOptions::default();
    registry
        .create(configmaps(), Some("default"), configmap("cm"), &opts)
        .expect("create");
    let change = |f: fn(&mut Value)| {
        registry.update_with(
            configmaps(),
            Some("default"),
            "cm",
            Part::Main,
            &opts,
            |mut v| {
                f(&mut v);
                Ok::<_, RegistryError>(v)
            },
        )
    };
    let e = change(|v| v["metadata"]["name"] = json!("other")).unwrap_err();
    assert!(
        matches!(&e, RegistryError::BadRequest(m) if m.contains("does not match the name on the URL")),
        "{e:?}"
    );
    let e = change(|v| v["metadata"]["uid"] = json!("forged")).unwrap_err();
    assert!(
        matches!(&e, RegistryError::Invalid { causes, .. } if causes[0].field == "metadata.uid"),
        "{e:?}"
    );
    let e = change(|v| {
        v.as_object_mut().expect("object").remove("metadata");
    })
    .unwrap_err();
    assert!(
        matches!(&e, RegistryError::BadRequest(m) if m.contains("undeterminable")),
        "{e:?}"
    );
}

#[test]
fn a_nodes_forbidden_write_is_forbidden_even_when_it_is_stale() {
    let dir = tempfile::tempdir().expect("dir");
    let registry = testing::registry(dir.path());
    let nodes = by_plural("", "v1", "nodes").expect("nodes");
    let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}});
    let created = registry
        .create(nodes, None, node, &WriteOptions::default())
        .expect("create");
    // Someone else writes the node after the node read it.
    registry
        .update_with(
            nodes,
            None,
            "n1",
            Part::Main,
            &WriteOptions::default(),
            |mut v| {
                v["metadata"]["annotations"] = json!({"touched": "yes"});
                Ok::<_, RegistryError>(v)
            },
        )
        .expect("admin update");
    let mut stale = created.clone();
    stale["metadata"]["labels"] = json!({"node-role.kubernetes.io/control-plane": ""});
    let as_node = WriteOptions {
        node: Some("n1".to_string()),
        ..WriteOptions::default()
    };
    let e = registry
        .update(nodes, None, "n1", stale, Part::Main, &as_node)
        .unwrap_err();
    assert!(matches!(e, RegistryError::Forbidden(_)), "{e:?}");
}

#[test]
fn a_new_claim_gets_the_default_class_and_may_not_grow_past_a_fixed_class() {
    use berth_shared::resource::{PERSISTENT_VOLUME_CLAIMS, STORAGE_CLASSES};
    let dir = tempfile::tempdir().expect("dir");
    let registry = testing::registry(dir.path());
    let opts = WriteOptions::default();
    crate::local_path_class::ensure(&registry).expect("local-path");
    let claim = |name: &str, spec: Value| {
        json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": name}, "spec": spec})
    };
    let spec = json!({"accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": "1Gi"}}});
    let stored = registry
        .create(
            PERSISTENT_VOLUME_CLAIMS,
            Some("default"),
            claim("data", spec.clone()),
            &opts,
        )
        .expect("created");
    assert_eq!(stored["spec"]["storageClassName"], "local-path");
    assert_eq!(stored["status"]["phase"], "Pending");
    assert_eq!(
        stored["metadata"]["finalizers"],
        json!(["kubernetes.io/pvc-protection"])
    );
    assert!(stored["metadata"].get("generation").is_none());

    let mut classless = spec.clone();
    classless["storageClassName"] = json!("");
    let stored = registry
        .create(
            PERSISTENT_VOLUME_CLAIMS,
            Some("default"),
            claim("static", classless),
            &opts,
        )
        .expect("created");
    assert_eq!(stored["spec"]["storageClassName"], "");

    // Bound, then grown: local-path does not allow expansion.
    registry
        .update_with(
            PERSISTENT_VOLUME_CLAIMS,
            Some("default"),
            "data",
            Part::Status,
            &opts,
            |mut c| {
                c["status"]["phase"] = json!("Bound");
                Ok::<_, RegistryError>(c)
            },
        )
        .expect("bound");
    let grow = |registry: &Registry| {
        registry.update_with(
            PERSISTENT_VOLUME_CLAIMS,
            Some("default"),
            "data",
            Part::Main,
            &opts,
            |mut c| {
                c["spec"]["resources"]["requests"]["storage"] = json!("2Gi");
                Ok::<_, RegistryError>(c)
            },
        )
    };
    let e = grow(&registry).unwrap_err();
    assert_eq!(
        e.to_string(),
        "persistentvolumeclaims \"data\" is forbidden: only dynamically provisioned pvc can be resized and the storageclass that provisions the pvc must support resize"
    );
    registry
        .delete(
            STORAGE_CLASSES,
            None,
            "local-path",
            &DeleteOptions::default(),
        )
        .expect("deleted");
    let expandable = json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"name": "local-path"}, "provisioner": "berth.io/local-path",
        "allowVolumeExpansion": true});
    registry
        .create(STORAGE_CLASSES, None, expandable, &opts)
        .expect("expandable class");
    let grown = grow(&registry).expect("grown");
    assert_eq!(grown["spec"]["resources"]["requests"]["storage"], "2Gi");
}
