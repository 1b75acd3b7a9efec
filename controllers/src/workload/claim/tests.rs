//! The claim engine's decisions with each workload controller's rules as rows, and its writes
//! over a real registry: adoption re-checks the owner live, release drops the reference.

use super::*;
use crate::workload::controller_ref::uid_of;
use berth_registry::{Part, WriteOptions};
use berth_runtime::testing::ControlPlane;
use berth_shared::resource::{DAEMON_SETS, DEPLOYMENTS, JOBS, PODS, REPLICA_SETS, STATEFUL_SETS};

fn selector() -> LabelSelector {
    LabelSelector::from_set(&BTreeMap::from([("app".to_string(), "web".to_string())]))
}

/// The rules each controller declares (see their modules).
fn rules_of(rt: &ResourceType) -> Rules {
    if rt.kind == "ReplicaSet" {
        Rules {
            active_only: true,
            finalizer: None,
        }
    } else if rt.kind == "Job" {
        Rules {
            active_only: false,
            finalizer: Some("batch.kubernetes.io/job-tracking"),
        }
    } else {
        Rules::default()
    }
}

/// (owner kind, owner deleting, labels, controller uid, object deleting, finished, claim).
type Row<'a> = (
    &'static ResourceType,
    bool,
    &'a BTreeMap<String, String>,
    Option<&'static str>,
    bool,
    bool,
    Claim,
);

#[test]
fn each_controller_claims_by_its_rules() {
    use Claim::*;
    let web = BTreeMap::from([("app".to_string(), "web".to_string())]);
    let db = BTreeMap::from([("app".to_string(), "db".to_string())]);
    let sel = selector();
    // The owner's uid is "me".
    let (me, other) = (Some("me"), Some("other"));
    // (owner kind, owner deleting, labels, controller, object deleting, finished, want)
    let rows: [Row<'_>; 22] = [
        // Upstream's rules, the same for every controller.
        (DAEMON_SETS, false, &web, me, false, false, Owned),
        (DAEMON_SETS, false, &web, me, true, false, Owned),
        (DAEMON_SETS, false, &db, me, false, false, Release),
        (DAEMON_SETS, false, &web, None, false, false, Adopt),
        (DAEMON_SETS, false, &web, None, true, false, Ignore),
        (DAEMON_SETS, false, &db, None, false, false, Ignore),
        (DAEMON_SETS, false, &web, other, false, false, Ignore),
        (STATEFUL_SETS, false, &web, None, false, false, Adopt),
        (STATEFUL_SETS, false, &db, me, false, false, Release),
        // An owner being deleted keeps its own but neither adopts nor releases.
        (DEPLOYMENTS, true, &web, me, false, false, Owned),
        (DEPLOYMENTS, true, &db, me, false, false, Ignore),
        (DEPLOYMENTS, true, &web, None, false, false, Ignore),
        (DEPLOYMENTS, false, &web, None, true, false, Ignore),
        (DEPLOYMENTS, false, &web, None, false, false, Adopt),
        // The ReplicaSet claims active pods only: finished or terminating pods, its own
        // included, are neither counted, adopted nor released.
        (REPLICA_SETS, false, &web, me, false, true, Ignore),
        (REPLICA_SETS, false, &db, me, true, false, Ignore),
        (REPLICA_SETS, false, &web, None, false, true, Ignore),
        (REPLICA_SETS, false, &web, None, false, false, Adopt),
        // The Job counts finished pods: it keeps and adopts them.
        (JOBS, false, &web, me, false, true, Owned),
        (JOBS, false, &web, None, false, true, Adopt),
        (JOBS, true, &db, me, false, false, Ignore),
        (JOBS, false, &db, me, false, true, Release),
    ];
    for (i, (rt, deleting, labels, controller, obj_deleting, finished, want)) in
        rows.into_iter().enumerate()
    {
        let owner = Owner {
            resource: rt,
            namespace: "default",
            name: "owner",
            uid: "me",
            selector: &sel,
            deleting,
            rules: rules_of(rt),
        };
        let c = Candidate {
            labels,
            controller_uid: controller,
            deleting: obj_deleting,
            finished,
        };
        assert_eq!(owner.decide(&c), want, "row {i}: {} {c:?}", rt.kind);
    }
}

/// (id, labels, controller uid) of a candidate in [`Owner::sort`]'s test.
type Item<'a> = (usize, &'a BTreeMap<String, String>, Option<&'a str>);

#[test]
fn sorting_shared_and_distinct_label_sets_agrees_with_each_decision() {
    // The same map shared by several candidates (as interned label sets are), interleaved
    // with a distinct one and an equal copy at another address: the memo of the last set
    // matched must not carry a decision over to a set it did not match.
    let web = BTreeMap::from([("app".to_string(), "web".to_string())]);
    let db = BTreeMap::from([("app".to_string(), "db".to_string())]);
    let web_copy = web.clone();
    let sel = selector();
    let owner = Owner {
        resource: REPLICA_SETS,
        namespace: "default",
        name: "owner",
        uid: "me",
        selector: &sel,
        deleting: false,
        rules: rules_of(REPLICA_SETS),
    };
    let items: Vec<Item<'_>> = vec![
        (0, &web, Some("me")),
        (1, &web, None),
        (2, &db, Some("me")),
        (3, &db, None),
        (4, &web, Some("me")),
        (5, &web_copy, None),
        (6, &db, Some("me")),
        (7, &web, Some("other")),
    ];
    fn candidate<'a>(&(_, labels, controller_uid): &'a Item<'_>) -> Candidate<'a> {
        Candidate {
            labels,
            controller_uid,
            deleting: false,
            finished: false,
        }
    }
    let sorted = owner.sort(items.clone(), candidate);
    let ids = |v: &[Item<'_>]| v.iter().map(|i| i.0).collect::<Vec<_>>();
    assert_eq!(ids(&sorted.owned), [0, 4]);
    assert_eq!(ids(&sorted.adopt), [1, 5]);
    assert_eq!(ids(&sorted.release), [2, 6]);
    for item in &items {
        let want = owner.decide(&candidate(item));
        let got = if sorted.owned.contains(item) {
            Claim::Owned
        } else if sorted.adopt.contains(item) {
            Claim::Adopt
        } else if sorted.release.contains(item) {
            Claim::Release
        } else {
            Claim::Ignore
        };
        assert_eq!(got, want, "item {}", item.0);
    }
}

fn pod(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
}

fn daemon_set(name: &str) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}})
}

fn create(cp: &ControlPlane, rt: &ResourceType, v: Value) -> Value {
    cp.registry()
        .create(rt, Some("default"), v, &WriteOptions::default())
        .expect("create")
}

#[tokio::test]
async fn adoption_writes_the_reference_and_the_rule_finalizer_and_release_takes_them_off() {
    let cp = ControlPlane::start();
    let sel = selector();
    let owner_obj = create(
        &cp,
        JOBS,
        json!({"apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "j", "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"app": "web"}}, "manualSelector": true,
            "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"restartPolicy": "Never",
                    "containers": [{"name": "c", "image": "busybox"}]}}}}),
    );
    let uid = uid_of(&owner_obj).expect("uid").to_string();
    let p = create(&cp, PODS, pod("p"));
    let owner = Owner {
        resource: JOBS,
        namespace: "default",
        name: "j",
        uid: &uid,
        selector: &sel,
        deleting: false,
        rules: rules_of(JOBS),
    };
    let pod_uid = uid_of(&p).expect("uid");
    let adopted = owner
        .adopt(cp.registry(), PODS, "p", pod_uid)
        .expect("adopt")
        .expect("adopted");
    assert_eq!(controller_uid(&adopted), Some(uid.as_str()));
    assert_eq!(
        adopted["metadata"]["finalizers"],
        json!([rules_of(JOBS).finalizer])
    );
    assert_ne!(
        adopted["metadata"]["resourceVersion"], p["metadata"]["resourceVersion"],
        "the written version is returned"
    );
    let released = owner
        .release(cp.registry(), PODS, "p", pod_uid)
        .expect("release")
        .expect("still there");
    assert_eq!(controller_uid(&released), None);
    assert!(released["metadata"].get("finalizers").is_none());
}

#[tokio::test]
async fn an_owner_gone_replaced_or_being_deleted_adopts_nothing() {
    let cp = ControlPlane::start();
    let sel = selector();
    let first = create(&cp, DAEMON_SETS, daemon_set("ds"));
    let old_uid = uid_of(&first).expect("uid").to_string();
    let p = create(&cp, PODS, pod("p"));
    let pod_uid = uid_of(&p).expect("uid").to_string();
    let owner = |uid: &str| -> Option<Value> {
        Owner {
            resource: DAEMON_SETS,
            namespace: "default",
            name: "ds",
            uid,
            selector: &sel,
            deleting: false,
            rules: Rules::default(),
        }
        .adopt(cp.registry(), PODS, "p", &pod_uid)
        .expect("adopt")
    };
    // Replaced by a DaemonSet of the same name since the informer read: another uid.
    cp.registry()
        .delete(DAEMON_SETS, Some("default"), "ds", &Default::default())
        .expect("delete");
    assert!(owner(&old_uid).is_none(), "a deleted owner adopts");
    let planned = Owner {
        resource: DAEMON_SETS,
        namespace: "default",
        name: "ds",
        uid: &old_uid,
        selector: &sel,
        deleting: false,
        rules: Rules::default(),
    }
    .adopt_planned(cp.registry(), PODS, "p", &pod_uid);
    assert!(
        matches!(&planned, Err(SyncError::OwnerGone(o)) if o == "daemonset default/ds"),
        "a deleted owner fails a planned adoption: {planned:?}"
    );
    let second = create(&cp, DAEMON_SETS, daemon_set("ds"));
    assert!(owner(&old_uid).is_none(), "a replaced owner adopts");
    // Being deleted: a finalizer keeps it while its deletionTimestamp is set.
    let new_uid = uid_of(&second).expect("uid").to_string();
    cp.registry()
        .update_with(
            DAEMON_SETS,
            Some("default"),
            "ds",
            Part::Main,
            &WriteOptions::default(),
            |mut o| {
                o["metadata"]["finalizers"] = json!(["test/hold"]);
                Ok::<_, RegistryError>(o)
            },
        )
        .expect("finalizer");
    cp.registry()
        .delete(DAEMON_SETS, Some("default"), "ds", &Default::default())
        .expect("delete");
    assert!(owner(&new_uid).is_none(), "an owner being deleted adopts");
    let fresh = cp.registry().get(PODS, Some("default"), "p").expect("pod");
    assert_eq!(controller_uid(&fresh.value().expect("json")), None);
}
