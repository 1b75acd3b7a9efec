//! Table tests of CSIDriver, CSINode and VolumeAttachment admission through
//! [`crate::admission::admit`]: upstream's defaults, messages and immutable fields.

use serde_json::{Value, json};

use crate::admission::{AdmissionError, Operation, admit};

fn object(kind: &str, name: &str, spec: Value) -> Value {
    json!({"apiVersion": "storage.k8s.io/v1", "kind": kind,
           "metadata": {"name": name, "uid": "u1"}, "spec": spec})
}

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

fn admitted(kind: &str, name: &str, spec: Value) -> Value {
    let mut obj = object(kind, name, spec);
    admit(kind, Operation::Create, &mut obj, None).expect("admitted");
    obj
}

#[test]
fn a_csi_driver_gets_upstreams_defaults() {
    let d = admitted("CSIDriver", "hostpath.csi.k8s.io", json!({}));
    assert_eq!(
        d["spec"],
        json!({"attachRequired": true, "podInfoOnMount": false, "requiresRepublish": false,
               "storageCapacity": false, "volumeLifecycleModes": ["Persistent"],
               "fsGroupPolicy": "ReadWriteOnceWithFSType", "seLinuxMount": false})
    );
    let chosen = admitted(
        "CSIDriver",
        "x.csi.example.com",
        json!({"attachRequired": false, "volumeLifecycleModes": ["Ephemeral"], "fsGroupPolicy": "File"}),
    );
    assert_eq!(chosen["spec"]["attachRequired"], false);
    assert_eq!(chosen["spec"]["volumeLifecycleModes"], json!(["Ephemeral"]));
    assert_eq!(chosen["spec"]["fsGroupPolicy"], "File");
}

#[test]
fn csi_drivers_are_judged_as_upstream_judges_them() {
    let cases: Vec<(&str, Value, Vec<&str>)> = vec![
        (
            "an unknown mode and policy",
            json!({"volumeLifecycleModes": ["Persistent", "Forever"], "fsGroupPolicy": "Always"}),
            vec![
                "spec.fsGroupPolicy: Unsupported value: \"Always\": supported values: \"File\", \"None\", \"ReadWriteOnceWithFSType\"",
                "spec.volumeLifecycleModes: Unsupported value: \"Forever\": supported values: \"Persistent\", \"Ephemeral\"",
            ],
        ),
        (
            "token requests with a repeated audience and short and long lifetimes",
            json!({"tokenRequests": [{"audience": "vault", "expirationSeconds": 60},
                                     {"audience": "vault"},
                                     {"audience": "", "expirationSeconds": 5_000_000_000_i64}]}),
            vec![
                "spec.tokenRequests[0].expirationSeconds: Invalid value: 60: may not specify a duration less than 10 minutes",
                "spec.tokenRequests[1].audience: Duplicate value: \"vault\"",
                "spec.tokenRequests[2].expirationSeconds: Invalid value: 5000000000: may not specify a duration larger than 2^32 seconds",
            ],
        ),
    ];
    for (name, spec, want) in cases {
        assert_eq!(
            messages(
                "CSIDriver",
                object("CSIDriver", "d.example.com", spec),
                None
            ),
            want,
            "{name}"
        );
    }
}

#[test]
fn a_csi_driver_keeps_attach_required_and_its_modes() {
    let old = admitted("CSIDriver", "d.example.com", json!({}));
    let mut new = old.clone();
    new["spec"]["attachRequired"] = json!(false);
    new["spec"]["volumeLifecycleModes"] = json!(["Persistent", "Ephemeral"]);
    new["spec"]["podInfoOnMount"] = json!(true);
    assert_eq!(
        messages("CSIDriver", new, Some(&old)),
        [
            "spec.attachedRequired: Invalid value: false: field is immutable",
            "spec.volumeLifecycleModes: Invalid value: []string{\"Persistent\", \"Ephemeral\"}: field is immutable",
        ]
    );
}

#[test]
fn csi_nodes_are_judged_as_upstream_judges_them() {
    let ok = json!({"drivers": [{"name": "hostpath.csi.k8s.io", "nodeID": "node-1",
        "topologyKeys": ["topology.hostpath.csi/node"], "allocatable": {"count": 10}}]});
    assert_eq!(
        messages("CSINode", object("CSINode", "node-1", ok.clone()), None),
        Vec::<String>::new()
    );
    let bad = json!({"drivers": [
        {"name": "a.example.com", "nodeID": ""},
        {"name": "a.example.com", "nodeID": "n", "allocatable": {"count": -1},
         "topologyKeys": ["zone", "zone"]}]});
    assert_eq!(
        messages("CSINode", object("CSINode", "node-1", bad), None),
        [
            "spec.drivers[0].nodeID: Required value",
            "spec.drivers[1].allocatable.count: Invalid value: -1: must be greater than or equal to 0",
            "spec.drivers[1].name: Duplicate value: \"a.example.com\"",
            "spec.drivers[1]: Duplicate value: \"zone\"",
        ]
    );
    let old = admitted("CSINode", "node-1", ok);
    let mut changed = old.clone();
    changed["spec"]["drivers"][0]["nodeID"] = json!("node-2");
    let got = messages("CSINode", changed, Some(&old));
    assert_eq!(got.len(), 1);
    assert!(
        got[0].starts_with("spec.drivers: Invalid value: "),
        "{got:?}"
    );
    assert!(got[0].ends_with(": field is immutable"), "{got:?}");
}

fn attachment(spec: Value) -> Value {
    object("VolumeAttachment", "csi-0123", spec)
}

#[test]
fn volume_attachments_are_judged_as_upstream_judges_them() {
    let cases: Vec<(&str, Value, Vec<&str>)> = vec![
        (
            "a realistic attachment",
            json!({"attacher": "hostpath.csi.k8s.io", "nodeName": "node-1",
                   "source": {"persistentVolumeName": "pv-1"}}),
            vec![],
        ),
        (
            "no source",
            json!({"attacher": "hostpath.csi.k8s.io", "nodeName": "node-1", "source": {}}),
            vec![
                "spec.source: Required value: must specify exactly one of inlineVolumeSpec and persistentVolumeName",
            ],
        ),
        (
            "both sources",
            json!({"attacher": "hostpath.csi.k8s.io", "nodeName": "node-1",
                   "source": {"persistentVolumeName": "pv-1", "inlineVolumeSpec": {}}}),
            vec![
                "spec.source: Forbidden: must specify exactly one of inlineVolumeSpec and persistentVolumeName",
            ],
        ),
        (
            "an attacher that is no DNS subdomain",
            json!({"attacher": "Host_Path", "nodeName": "node-1", "source": {"persistentVolumeName": "pv-1"}}),
            vec![
                "spec.attacher: Invalid value: \"Host_Path\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
            ],
        ),
    ];
    for (name, spec, want) in cases {
        assert_eq!(
            messages("VolumeAttachment", attachment(spec), None),
            want,
            "{name}"
        );
    }
}

#[test]
fn a_volume_attachments_spec_is_read_only() {
    let old = admitted(
        "VolumeAttachment",
        "csi-0123",
        json!({"attacher": "hostpath.csi.k8s.io", "nodeName": "node-1",
               "source": {"persistentVolumeName": "pv-1"}}),
    );
    let mut status = old.clone();
    status["status"] = json!({"attached": true, "attachmentMetadata": {"devicePath": "/dev/sdb"}});
    assert_eq!(
        messages("VolumeAttachment", status, Some(&old)),
        Vec::<String>::new()
    );
    let mut moved = old.clone();
    moved["spec"]["nodeName"] = json!("node-2");
    let got = messages("VolumeAttachment", moved, Some(&old));
    assert_eq!(got.len(), 1);
    assert!(got[0].starts_with("spec: Invalid value: "), "{got:?}");
    assert!(got[0].ends_with(": field is immutable"), "{got:?}");
}
