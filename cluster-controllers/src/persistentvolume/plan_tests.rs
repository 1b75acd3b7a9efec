//! Table tests of the PersistentVolume planner: binding (matching, smallest fit, pre-bound
//! volumes, the step order), WaitForFirstConsumer and local-path provisioning, claim and
//! volume phases, reclaim policies and the protection finalizers.

use super::*;
use serde_json::{Value, json};

fn claim(spec: Value, annotations: Value) -> PersistentVolumeClaim {
    let mut s = json!({"accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": "1Gi"}}, "volumeMode": "Filesystem"});
    for (k, v) in spec.as_object().expect("an object") {
        s[k] = v.clone();
    }
    serde_json::from_value(json!({"metadata": {"name": "data", "namespace": "default",
        "uid": "claim-uid", "resourceVersion": "7", "annotations": annotations,
        "finalizers": ["kubernetes.io/pvc-protection"]},
        "spec": s, "status": {"phase": "Pending"}}))
    .expect("a claim")
}

fn volume(name: &str, size: &str, extra: Value) -> PersistentVolume {
    let mut v = json!({"metadata": {"name": name, "uid": format!("{name}-uid"),
            "finalizers": ["kubernetes.io/pv-protection"]},
        "spec": {"capacity": {"storage": size}, "accessModes": ["ReadWriteOnce", "ReadOnlyMany"],
            "hostPath": {"path": format!("/srv/{name}")}, "volumeMode": "Filesystem",
            "persistentVolumeReclaimPolicy": "Retain"},
        "status": {"phase": "Available"}});
    merge(&mut v, extra);
    serde_json::from_value(v).expect("a volume")
}

fn merge(into: &mut Value, from: Value) {
    match (into, from) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                merge(a.entry(k).or_insert(Value::Null), v);
            }
        }
        (slot, v) => *slot = v,
    }
}

fn class(mode: &str, provisioner: &str) -> StorageClass {
    serde_json::from_value(json!({"metadata": {"name": "local-path"},
        "provisioner": provisioner, "reclaimPolicy": "Delete", "volumeBindingMode": mode}))
    .expect("a class")
}

fn node(name: &str, annotations: Value) -> Node {
    serde_json::from_value(
        json!({"metadata": {"name": name, "annotations": annotations,
        "labels": {"kubernetes.io/hostname": name, "zone": "a"}}}),
    )
    .expect("a node")
}

fn view<'a>(
    volumes: &'a [PersistentVolume],
    class: Option<&'a StorageClass>,
    node: Option<&'a Node>,
) -> ClaimView<'a> {
    ClaimView {
        volumes,
        class,
        selected_node: node,
        in_use: false,
    }
}

/// Asserts that a plan takes no step and says why in its first event.
fn assert_waits(plan: &ClaimPlan, message: &str) {
    assert_eq!(plan.step, None);
    assert_eq!(plan.events[0].message, message);
}

fn bound_to_claim() -> Value {
    json!({"spec": {"claimRef": {"namespace": "default", "name": "data", "uid": "claim-uid"}}})
}

fn bind_volume(name: &str) -> Option<ClaimStep> {
    Some(ClaimStep::BindVolume {
        volume: name.to_string(),
        by_controller: true,
    })
}

#[test]
fn a_claim_binds_to_the_smallest_matching_volume() {
    let volumes = [
        volume("big", "10Gi", json!({})),
        volume("small", "2Gi", json!({})),
        volume("tiny", "512Mi", json!({})),
        volume(
            "rwx-only",
            "1Gi",
            json!({"spec": {"accessModes": ["ReadWriteMany"]}}),
        ),
        volume(
            "classy",
            "1Gi",
            json!({"spec": {"storageClassName": "fast"}}),
        ),
        volume("block", "1Gi", json!({"spec": {"volumeMode": "Block"}})),
        volume(
            "taken",
            "1Gi",
            json!({"spec": {"claimRef": {"namespace": "default", "name": "other", "uid": "x"}}}),
        ),
    ];
    let plan = plan_claim(&claim(json!({}), json!({})), &view(&volumes, None, None));
    assert_eq!(plan.step, bind_volume("small"));
}

#[test]
fn a_claims_selector_and_requested_volume_name_narrow_the_choice() {
    let volumes = [
        volume("small", "1Gi", json!({})),
        volume(
            "labelled",
            "5Gi",
            json!({"metadata": {"labels": {"tier": "gold"}}}),
        ),
    ];
    let selecting = claim(
        json!({"selector": {"matchLabels": {"tier": "gold"}}}),
        json!({}),
    );
    assert_eq!(
        plan_claim(&selecting, &view(&volumes, None, None)).step,
        bind_volume("labelled")
    );
    let naming = claim(json!({"volumeName": "labelled"}), json!({}));
    assert_eq!(
        plan_claim(&naming, &view(&volumes, None, None)).step,
        bind_volume("labelled")
    );
    let too_big = claim(
        json!({"volumeName": "small", "resources": {"requests": {"storage": "3Gi"}}}),
        json!({}),
    );
    let plan = plan_claim(&too_big, &view(&volumes, None, None));
    assert_waits(
        &plan,
        "Cannot bind to requested volume \"small\": requested PV is too small",
    );
}

#[test]
fn a_volume_pre_bound_to_a_claim_is_bound_only_to_that_claim() {
    let pre_bound = json!({"spec": {"claimRef": {"namespace": "default", "name": "data"}}});
    let volumes = [
        volume("small", "1Gi", json!({})),
        volume("reserved", "8Gi", pre_bound.clone()),
    ];
    let plan = plan_claim(&claim(json!({}), json!({})), &view(&volumes, None, None));
    assert_eq!(
        plan.step,
        Some(ClaimStep::BindVolume {
            volume: "reserved".into(),
            by_controller: true
        })
    );
    let mut other = claim(json!({}), json!({}));
    other.metadata.name = Some("other".into());
    assert_eq!(
        plan_claim(&other, &view(&volumes[1..], None, None)).step,
        None,
        "reserved for another claim"
    );
}

#[test]
fn binding_goes_one_step_at_a_time_until_both_are_bound() {
    let c = claim(json!({}), json!({}));
    let ref_set = volume("pv1", "1Gi", bound_to_claim());
    assert_eq!(
        plan_claim(&c, &view(std::slice::from_ref(&ref_set), None, None)).step,
        Some(ClaimStep::SetVolumePhase {
            volume: "pv1".into(),
            phase: VolumePhase::Bound
        })
    );
    let phase_set = volume("pv1", "1Gi", {
        let mut e = bound_to_claim();
        e["status"] = json!({"phase": "Bound"});
        e
    });
    let volumes = [phase_set];
    assert_eq!(
        plan_claim(&c, &view(&volumes, None, None)).step,
        Some(ClaimStep::BindClaim {
            volume: "pv1".into(),
            by_controller: true
        })
    );
    let named = claim(
        json!({"volumeName": "pv1"}),
        json!({"pv.kubernetes.io/bind-completed": "yes"}),
    );
    assert_eq!(
        plan_claim(&named, &view(&volumes, None, None)).step,
        Some(ClaimStep::SetClaimStatus {
            phase: ClaimPhase::Bound,
            from_volume: Some("pv1".into())
        })
    );
    let mut done = named.clone();
    done.status = serde_json::from_value(json!({"phase": "Bound",
        "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce", "ReadOnlyMany"]}))
    .ok();
    assert_eq!(
        plan_claim(&done, &view(&volumes, None, None)),
        ClaimPlan::default()
    );
}

#[test]
fn a_claim_without_a_class_and_without_a_volume_waits_with_failed_binding() {
    let plan = plan_claim(&claim(json!({}), json!({})), &view(&[], None, None));
    assert_eq!(plan.step, None);
    assert_eq!(plan.events[0].reason, "FailedBinding");
    assert_eq!(
        plan.events[0].message,
        "no persistent volumes available for this claim and no storage class is set"
    );
}

#[test]
fn a_wait_for_first_consumer_claim_waits_for_the_selected_node() {
    let sc = class("WaitForFirstConsumer", "berth.io/local-path");
    let volumes = [volume(
        "static",
        "1Gi",
        json!({"spec": {"storageClassName": "local-path"}}),
    )];
    let c = claim(json!({"storageClassName": "local-path"}), json!({}));
    let plan = plan_claim(&c, &view(&volumes, Some(&sc), None));
    assert_eq!(plan.step, None);
    assert_eq!(
        plan.events,
        vec![Event {
            severity: Severity::Normal,
            reason: "WaitForFirstConsumer",
            message: "waiting for first consumer to be created before binding".into()
        }]
    );
}

#[test]
fn a_selected_node_binds_a_static_volume_whose_affinity_admits_it() {
    let sc = class("WaitForFirstConsumer", "berth.io/local-path");
    let pinned = |host: &str| {
        json!({"spec": {"storageClassName": "local-path", "nodeAffinity": {"required": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "kubernetes.io/hostname",
                "operator": "In", "values": [host]}]}]}}}})
    };
    let volumes = [
        volume("on-n2", "1Gi", pinned("n2")),
        volume("on-n1", "5Gi", pinned("n1")),
    ];
    let n1 = node("n1", json!({}));
    let c = claim(
        json!({"storageClassName": "local-path"}),
        json!({"volume.kubernetes.io/selected-node": "n1"}),
    );
    assert_eq!(
        plan_claim(&c, &view(&volumes, Some(&sc), Some(&n1))).step,
        bind_volume("on-n1")
    );
}

#[test]
fn a_local_path_claim_on_a_selected_node_is_annotated_then_provisioned_there() {
    let sc = class("WaitForFirstConsumer", "berth.io/local-path");
    let n1 = node(
        "n1",
        json!({"storage.berth.io/local-path-dir": "/data/berth/"}),
    );
    let selected = json!({"volume.kubernetes.io/selected-node": "n1"});
    let c = claim(json!({"storageClassName": "local-path"}), selected.clone());
    assert_eq!(
        plan_claim(&c, &view(&[], Some(&sc), Some(&n1))).step,
        Some(ClaimStep::AnnotateProvisioner {
            provisioner: "berth.io/local-path".into()
        })
    );
    let mut annotated = selected.clone();
    annotated["volume.kubernetes.io/storage-provisioner"] = json!("berth.io/local-path");
    let c = claim(json!({"storageClassName": "local-path"}), annotated);
    let plan = plan_claim(&c, &view(&[], Some(&sc), Some(&n1)));
    let reasons: Vec<&str> = plan.events.iter().map(|e| e.reason).collect();
    assert_eq!(reasons, ["Provisioning", "ProvisioningSucceeded"]);
    let Some(ClaimStep::Provision(pv)) = plan.step else {
        panic!("expected a provisioned volume, got {:?}", plan.step);
    };
    let pv = serde_json::to_value(&*pv).expect("json");
    assert_eq!(
        pv,
        json!({"apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": "pvc-claim-uid",
                "annotations": {"pv.kubernetes.io/provisioned-by": "berth.io/local-path"},
                "finalizers": ["kubernetes.io/pv-protection", "storage.berth.io/local-path-cleanup"]},
            "spec": {"accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"},
                "claimRef": {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                    "name": "data", "namespace": "default", "resourceVersion": "7",
                    "uid": "claim-uid"},
                "hostPath": {"path": "/data/berth/pvc-claim-uid_default_data",
                    "type": "DirectoryOrCreate"},
                "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "kubernetes.io/hostname", "operator": "In", "values": ["n1"]}]}]}},
                "persistentVolumeReclaimPolicy": "Delete", "storageClassName": "local-path",
                "volumeMode": "Filesystem"}})
    );
}

#[test]
fn the_local_path_directory_comes_from_the_node_then_the_class_then_the_default() {
    let mut sc = class("WaitForFirstConsumer", "berth.io/local-path");
    let plain = node("n1", json!({}));
    assert_eq!(local_path_dir(&plain, &sc), "/var/lib/berth-agent/storage");
    sc.parameters = Some([("nodePath".to_string(), "/mnt/pv".to_string())].into());
    assert_eq!(local_path_dir(&plain, &sc), "/mnt/pv");
    let annotated = node("n1", json!({"storage.berth.io/local-path-dir": "/srv/pv"}));
    assert_eq!(local_path_dir(&annotated, &sc), "/srv/pv");
}

#[test]
fn other_provisioners_are_awaited_with_external_provisioning() {
    let sc = class("Immediate", "example.com/nfs");
    let c = claim(json!({"storageClassName": "local-path"}), json!({}));
    let plan = plan_claim(&c, &view(&[], Some(&sc), None));
    assert_eq!(
        plan.step,
        Some(ClaimStep::AnnotateProvisioner {
            provisioner: "example.com/nfs".into()
        })
    );
    assert_eq!(plan.events[0].reason, "ExternalProvisioning");
    let immediate_local = class("Immediate", "berth.io/local-path");
    let c = claim(
        json!({"storageClassName": "local-path"}),
        json!({"volume.kubernetes.io/storage-provisioner": "berth.io/local-path"}),
    );
    let plan = plan_claim(&c, &view(&[], Some(&immediate_local), None));
    assert_waits(&plan, "configuration error, no node was specified");
}

#[test]
fn a_bound_claim_whose_volume_vanished_is_lost() {
    let c = claim(
        json!({"volumeName": "gone"}),
        json!({"pv.kubernetes.io/bind-completed": "yes"}),
    );
    let plan = plan_claim(&c, &view(&[], None, None));
    assert_eq!(
        plan.step,
        Some(ClaimStep::SetClaimStatus {
            phase: ClaimPhase::Lost,
            from_volume: None
        })
    );
    assert_eq!(plan.events[0].reason, "ClaimLost");
    let asked = claim(json!({"volumeName": "not-yet"}), json!({}));
    assert_eq!(
        plan_claim(&asked, &view(&[], None, None)),
        ClaimPlan::default()
    );
}

#[test]
fn a_deleted_claim_keeps_its_finalizer_while_a_pod_uses_it() {
    let mut c = claim(json!({}), json!({}));
    c.metadata.deletion_timestamp = serde_json::from_value(json!("2026-01-01T00:00:00Z")).ok();
    let mut v = view(&[], None, None);
    v.in_use = true;
    assert_eq!(plan_claim(&c, &v), ClaimPlan::default());
    v.in_use = false;
    assert_eq!(plan_claim(&c, &v).step, Some(ClaimStep::RemoveFinalizer));
}

fn phase_step(phase: VolumePhase) -> Option<VolumeStep> {
    Some(VolumeStep::SetPhase {
        phase,
        message: None,
    })
}

#[test]
fn volume_phases_follow_their_claims() {
    let c = claim(json!({"volumeName": "pv1"}), json!({}));
    let pending = volume("pv1", "1Gi", json!({"status": {"phase": "Pending"}}));
    assert_eq!(
        plan_volume(&pending, ClaimLookup::NoRef).step,
        phase_step(VolumePhase::Available)
    );
    let bound_ref = volume("pv1", "1Gi", bound_to_claim());
    assert_eq!(
        plan_volume(&bound_ref, ClaimLookup::Found(&c)).step,
        phase_step(VolumePhase::Bound)
    );
    let unbound_claim = claim(json!({}), json!({}));
    assert_eq!(
        plan_volume(&bound_ref, ClaimLookup::Found(&unbound_claim)),
        VolumePlan::default(),
        "the claim's pass is binding it"
    );
    assert_eq!(
        plan_volume(&bound_ref, ClaimLookup::Missing).step,
        phase_step(VolumePhase::Released)
    );
    let mut recreated = c.clone();
    recreated.metadata.uid = Some("another-uid".into());
    assert_eq!(
        plan_volume(&bound_ref, ClaimLookup::Found(&recreated)).step,
        phase_step(VolumePhase::Released)
    );
}

fn released(policy: &str, annotations: Value) -> PersistentVolume {
    let mut extra = bound_to_claim();
    extra["spec"]["persistentVolumeReclaimPolicy"] = json!(policy);
    extra["status"] = json!({"phase": "Released"});
    extra["metadata"] = json!({"annotations": annotations});
    volume("pv1", "1Gi", extra)
}

#[test]
fn a_released_volume_with_retain_stays_released() {
    let v = released("Retain", json!({}));
    assert_eq!(plan_volume(&v, ClaimLookup::Missing), VolumePlan::default());
}

#[test]
fn a_released_provisioned_volume_with_delete_is_deleted() {
    let v = released(
        "Delete",
        json!({"pv.kubernetes.io/provisioned-by": "berth.io/local-path"}),
    );
    assert_eq!(
        plan_volume(&v, ClaimLookup::Missing).step,
        Some(VolumeStep::Delete)
    );
    let external = released(
        "Delete",
        json!({"pv.kubernetes.io/provisioned-by": "example.com/nfs"}),
    );
    assert_eq!(
        plan_volume(&external, ClaimLookup::Missing),
        VolumePlan::default()
    );
}

#[test]
fn a_released_static_volume_with_delete_fails_with_volume_failed_delete() {
    let v = released("Delete", json!({}));
    let plan = plan_volume(&v, ClaimLookup::Missing);
    let message = "error getting deleter volume plugin for volume \"pv1\": no deletable volume plugin matched";
    assert_eq!(
        plan.step,
        Some(VolumeStep::SetPhase {
            phase: VolumePhase::Failed,
            message: Some(message.into())
        })
    );
    assert_eq!(plan.events[0].reason, "VolumeFailedDelete");
    assert_eq!(plan.events[0].severity, Severity::Warning);
    let mut failed = v.clone();
    failed.status = serde_json::from_value(json!({"phase": "Failed"})).ok();
    assert_eq!(
        plan_volume(&failed, ClaimLookup::Missing),
        VolumePlan::default()
    );
}

#[test]
fn a_deleted_volume_keeps_its_finalizer_while_bound() {
    let mut v = volume("pv1", "1Gi", bound_to_claim());
    v.metadata.deletion_timestamp = serde_json::from_value(json!("2026-01-01T00:00:00Z")).ok();
    v.status = serde_json::from_value(json!({"phase": "Bound"})).ok();
    assert_eq!(plan_volume(&v, ClaimLookup::Missing), VolumePlan::default());
    v.status = serde_json::from_value(json!({"phase": "Released"})).ok();
    assert_eq!(
        plan_volume(&v, ClaimLookup::Missing).step,
        Some(VolumeStep::RemoveFinalizer)
    );
}

#[test]
fn a_volume_the_controller_bound_to_a_claim_now_bound_elsewhere_is_unbound() {
    let mut v = volume("pv1", "1Gi", bound_to_claim());
    let elsewhere = claim(json!({"volumeName": "pv2"}), json!({}));
    assert_eq!(
        plan_volume(&v, ClaimLookup::Found(&elsewhere)).step,
        None,
        "a user's pre-binding is kept"
    );
    v.metadata.annotations = Some(
        [(
            "pv.kubernetes.io/bound-by-controller".to_string(),
            "yes".to_string(),
        )]
        .into(),
    );
    assert_eq!(
        plan_volume(&v, ClaimLookup::Found(&elsewhere)).step,
        Some(VolumeStep::Unbind)
    );
}
