//! Table tests of PersistentVolume, PersistentVolumeClaim and StorageClass admission through
//! [`crate::admission::admit`]: defaults, finalizers, and upstream's messages.

use serde_json::{Value, json};

use super::{fill_default_class, resize_forbidden};
use crate::admission::{AdmissionError, Operation, admit};
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::api::storage::v1::StorageClass;

fn messages(kind: &str, mut obj: Value, old: Option<&Value>) -> Vec<String> {
    let op = if old.is_some() {
        Operation::Update
    } else {
        Operation::Create
    };
    match admit(kind, op, &mut obj, old) {
        Ok(()) => Vec::new(),
        Err(AdmissionError::Invalid(errs)) => errs.iter().map(|e| e.message()).collect(),
        Err(e) => vec![e.to_string()],
    }
}

fn admitted(kind: &str, mut obj: Value) -> Value {
    admit(kind, Operation::Create, &mut obj, None).expect("admitted");
    obj
}

fn pv(spec: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": {"name": "pv1", "uid": "u1"}, "spec": spec})
}

fn pvc(spec: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": "data", "namespace": "default", "uid": "u2"}, "spec": spec})
}

fn sc(body: Value) -> Value {
    let mut obj = json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"name": "fast", "uid": "u3"}, "provisioner": "berth.io/local-path"});
    for (k, v) in body.as_object().expect("an object").clone() {
        obj[k] = v;
    }
    obj
}

fn good_pv_spec() -> Value {
    json!({"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
        "hostPath": {"path": "/srv/data"}})
}

#[test]
fn a_new_volume_gets_retain_filesystem_pending_and_its_protection_finalizer() {
    let v = admitted("PersistentVolume", pv(good_pv_spec()));
    assert_eq!(v["spec"]["persistentVolumeReclaimPolicy"], "Retain");
    assert_eq!(v["spec"]["volumeMode"], "Filesystem");
    assert_eq!(v["spec"]["hostPath"]["type"], "");
    assert_eq!(v["status"]["phase"], "Pending");
    assert_eq!(
        v["metadata"]["finalizers"],
        json!(["kubernetes.io/pv-protection"])
    );
}

#[test]
fn a_new_claim_gets_filesystem_pending_and_its_protection_finalizer() {
    let c = admitted(
        "PersistentVolumeClaim",
        pvc(json!({"accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}}})),
    );
    assert_eq!(c["spec"]["volumeMode"], "Filesystem");
    assert_eq!(c["status"]["phase"], "Pending");
    assert_eq!(
        c["metadata"]["finalizers"],
        json!(["kubernetes.io/pvc-protection"])
    );
    assert!(c["spec"].get("storageClassName").is_none());
}

#[test]
fn a_new_class_gets_delete_and_immediate() {
    let c = admitted("StorageClass", sc(json!({})));
    assert_eq!(c["reclaimPolicy"], "Delete");
    assert_eq!(c["volumeBindingMode"], "Immediate");
}

#[test]
fn invalid_volumes_are_refused_with_upstreams_messages() {
    let cases: &[(&str, Value, &[&str])] = &[
        (
            "no capacity, modes or source",
            json!({}),
            &[
                "spec.accessModes: Required value",
                "spec.capacity: Required value",
                "spec.capacity: Unsupported value: \"map[]\": supported values: \"storage\"",
                "spec: Required value: must specify a volume type",
            ],
        ),
        (
            "two sources",
            json!({"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                "hostPath": {"path": "/a"}, "local": {"path": "/b"},
                "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "kubernetes.io/hostname", "operator": "In", "values": ["n1"]}]}]}}}),
            &["spec.local: Forbidden: may not specify more than 1 volume type"],
        ),
        (
            "a bad access mode and a zero capacity",
            json!({"capacity": {"storage": "0"}, "accessModes": ["ReadWriteSometimes"],
                "hostPath": {"path": "/a"}}),
            &[
                "spec.accessModes: Unsupported value: \"ReadWriteSometimes\": supported values: \"ReadOnlyMany\", \"ReadWriteMany\", \"ReadWriteOnce\", \"ReadWriteOncePod\"",
                "spec.capacity[storage]: Invalid value: \"0\": must be greater than zero",
            ],
        ),
        (
            "a local volume without node affinity",
            json!({"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                "local": {"path": "/mnt/disk"}}),
            &["metadata.annotations: Required value: Local volume requires node affinity"],
        ),
        (
            "node affinity without terms",
            json!({"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                "hostPath": {"path": "/a"}, "nodeAffinity": {"required": {"nodeSelectorTerms": []}}}),
            &[
                "spec.nodeAffinity.required.nodeSelectorTerms: Required value: must have at least one node selector term",
            ],
        ),
        (
            "a bad reclaim policy, volume mode and path",
            json!({"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                "hostPath": {"path": "/a/../b"}, "persistentVolumeReclaimPolicy": "Keep",
                "volumeMode": "Disk"}),
            &[
                "spec.persistentVolumeReclaimPolicy: Unsupported value: \"Keep\": supported values: \"Delete\", \"Recycle\", \"Retain\"",
                "spec.hostPath.path: Invalid value: \"/a/../b\": must not contain '..'",
                "spec.volumeMode: Unsupported value: \"Disk\": supported values: \"Block\", \"Filesystem\"",
            ],
        ),
    ];
    for (what, spec, want) in cases {
        assert_eq!(
            messages("PersistentVolume", pv(spec.clone()), None),
            *want,
            "{what}"
        );
    }
}

#[test]
fn a_volumes_source_and_mode_are_immutable_but_its_claim_ref_is_not() {
    let old = admitted("PersistentVolume", pv(good_pv_spec()));
    let mut new = old.clone();
    new["spec"]["hostPath"]["path"] = json!("/elsewhere");
    new["spec"]["volumeMode"] = json!("Block");
    assert_eq!(
        messages("PersistentVolume", new, Some(&old)),
        [
            "spec.persistentvolumesource: Forbidden: spec.persistentvolumesource is immutable after creation",
            "volumeMode: Invalid value: \"Block\": field is immutable",
        ]
    );
    let mut bound = old.clone();
    bound["spec"]["claimRef"] = json!({"namespace": "default", "name": "data", "uid": "u2"});
    assert!(messages("PersistentVolume", bound, Some(&old)).is_empty());
}

#[test]
fn invalid_claims_are_refused_with_upstreams_messages() {
    let cases: &[(&str, Value, &[&str])] = &[
        (
            "nothing",
            json!({}),
            &[
                "spec.accessModes: Required value: at least 1 access mode is required",
                "spec.resources[storage]: Required value",
            ],
        ),
        (
            "a negative request and a bad class",
            json!({"accessModes": ["ReadWriteOnce"], "storageClassName": "Fast_Disks",
                "resources": {"requests": {"storage": "-1Gi"}}}),
            &[
                "spec.resources[storage]: Invalid value: \"-1Gi\": must be greater than or equal to 0",
                "spec.resources[storage]: Invalid value: \"-1Gi\": must be greater than zero",
                "spec.storageClassName: Invalid value: \"Fast_Disks\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
            ],
        ),
        (
            "ReadWriteOncePod with another mode",
            json!({"accessModes": ["ReadWriteOncePod", "ReadOnlyMany"],
                "resources": {"requests": {"storage": "1Gi"}}}),
            &["spec.accessModes: Forbidden: may not use ReadWriteOncePod with other access modes"],
        ),
    ];
    for (what, spec, want) in cases {
        assert_eq!(
            messages("PersistentVolumeClaim", pvc(spec.clone()), None),
            *want,
            "{what}"
        );
    }
}

#[test]
fn a_claims_spec_is_immutable_except_an_empty_volume_name_and_a_bound_claims_request() {
    let old = admitted(
        "PersistentVolumeClaim",
        pvc(
            json!({"accessModes": ["ReadWriteOnce"], "storageClassName": "local-path",
            "resources": {"requests": {"storage": "1Gi"}}}),
        ),
    );
    let mut named = old.clone();
    named["spec"]["volumeName"] = json!("pv1");
    assert!(messages("PersistentVolumeClaim", named.clone(), Some(&old)).is_empty());

    let mut renamed = named.clone();
    renamed["spec"]["volumeName"] = json!("pv2");
    let immutable = "spec: Forbidden: spec is immutable after creation except resources.requests for bound claims";
    assert_eq!(
        messages("PersistentVolumeClaim", renamed, Some(&named)),
        [immutable]
    );

    let mut grown = old.clone();
    grown["spec"]["resources"]["requests"]["storage"] = json!("2Gi");
    assert_eq!(
        messages("PersistentVolumeClaim", grown.clone(), Some(&old)),
        [immutable],
        "a pending claim"
    );
    let mut bound_old = old.clone();
    bound_old["status"]["phase"] = json!("Bound");
    grown["status"]["phase"] = json!("Bound");
    assert!(messages("PersistentVolumeClaim", grown, Some(&bound_old)).is_empty());

    let mut shrunk = bound_old.clone();
    shrunk["spec"]["resources"]["requests"]["storage"] = json!("512Mi");
    assert_eq!(
        messages("PersistentVolumeClaim", shrunk, Some(&bound_old)),
        ["spec.resources.requests.storage: Forbidden: field can not be less than previous value"]
    );

    let mut reclassed = old.clone();
    reclassed["spec"]["storageClassName"] = json!("other");
    assert_eq!(
        messages("PersistentVolumeClaim", reclassed, Some(&old)),
        [immutable]
    );
}

#[test]
fn invalid_classes_are_refused_with_upstreams_messages() {
    let cases: &[(&str, Value, &[&str])] = &[
        (
            "no provisioner",
            json!({"provisioner": ""}),
            &["provisioner: Required value"],
        ),
        (
            "a bad policy and mode",
            json!({"reclaimPolicy": "Recycle", "volumeBindingMode": "Later"}),
            &[
                "reclaimPolicy: Unsupported value: \"Recycle\": supported values: \"Delete\", \"Retain\"",
                "volumeBindingMode: Unsupported value: \"Later\": supported values: \"Immediate\", \"WaitForFirstConsumer\"",
            ],
        ),
    ];
    for (what, body, want) in cases {
        assert_eq!(
            messages("StorageClass", sc(body.clone()), None),
            *want,
            "{what}"
        );
    }
}

#[test]
fn a_classes_provisioner_parameters_policy_and_binding_mode_are_immutable() {
    let old = admitted(
        "StorageClass",
        sc(json!({"parameters": {"nodePath": "/data"}})),
    );
    let mut new = old.clone();
    new["provisioner"] = json!("example.com/other");
    new["parameters"] = json!({"nodePath": "/elsewhere"});
    new["reclaimPolicy"] = json!("Retain");
    new["volumeBindingMode"] = json!("WaitForFirstConsumer");
    assert_eq!(
        messages("StorageClass", new, Some(&old)),
        [
            "parameters: Forbidden: updates to parameters are forbidden.",
            "provisioner: Forbidden: updates to provisioner are forbidden.",
            "reclaimPolicy: Forbidden: updates to reclaimPolicy are forbidden.",
            "volumeBindingMode: Invalid value: \"WaitForFirstConsumer\": field is immutable",
        ]
    );
    let mut annotated = old.clone();
    annotated["metadata"]["annotations"] =
        json!({"storageclass.kubernetes.io/is-default-class": "true"});
    annotated["allowVolumeExpansion"] = json!(true);
    assert!(messages("StorageClass", annotated, Some(&old)).is_empty());
}

fn class(name: &str, created: &str, default: bool, expand: bool) -> StorageClass {
    let ann = if default {
        json!({"storageclass.kubernetes.io/is-default-class": "true"})
    } else {
        json!({})
    };
    serde_json::from_value(
        json!({"metadata": {"name": name, "creationTimestamp": created,
        "annotations": ann}, "provisioner": "berth.io/local-path",
        "allowVolumeExpansion": expand}),
    )
    .expect("a class")
}

#[test]
fn a_claim_without_a_class_gets_the_newest_default_class() {
    let classes = [
        class("old-default", "2026-01-01T00:00:00Z", true, false),
        class("b-new", "2026-01-02T00:00:00Z", true, false),
        class("a-new", "2026-01-02T00:00:00Z", true, false),
        class("newest-plain", "2026-01-03T00:00:00Z", false, false),
    ];
    let cases = [
        (
            "no field",
            json!({"accessModes": ["ReadWriteOnce"]}),
            json!("a-new"),
        ),
        (
            "an explicit empty class",
            json!({"storageClassName": ""}),
            json!(""),
        ),
        (
            "a named class",
            json!({"storageClassName": "fast"}),
            json!("fast"),
        ),
    ];
    for (what, spec, want) in cases {
        let mut claim = pvc(spec);
        fill_default_class(&mut claim, &classes);
        assert_eq!(claim["spec"]["storageClassName"], want, "{what}");
    }
    let mut claim = pvc(json!({}));
    fill_default_class(&mut claim, &classes[3..]);
    assert!(
        claim["spec"].get("storageClassName").is_none(),
        "no default class"
    );
}

#[test]
fn a_claim_may_grow_only_when_its_class_allows_expansion() {
    let claim = |size: &str, class: &str| -> PersistentVolumeClaim {
        serde_json::from_value(pvc(json!({"storageClassName": class,
            "resources": {"requests": {"storage": size}}})))
        .expect("a claim")
    };
    let expandable = class("fast", "2026-01-01T00:00:00Z", false, true);
    let fixed = class("fast", "2026-01-01T00:00:00Z", false, false);
    let (small, big) = (claim("1Gi", "fast"), claim("2Gi", "fast"));
    assert!(!resize_forbidden(&big, &small, Some(&expandable)));
    assert!(resize_forbidden(&big, &small, Some(&fixed)));
    assert!(resize_forbidden(&big, &small, None), "the class is gone");
    assert!(!resize_forbidden(&small, &small, Some(&fixed)), "no growth");
    let (none_small, none_big) = (claim("1Gi", ""), claim("2Gi", ""));
    assert!(resize_forbidden(&none_big, &none_small, Some(&expandable)));
}
