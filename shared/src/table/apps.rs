//! Printers for the replicated workloads: ReplicationController, ReplicaSet, Deployment,
//! StatefulSet, DaemonSet and ControllerRevision.

use jiff::Timestamp;
use serde_json::{Value, json};

use super::lookup::{at, int_at, list_at, opt_bool, opt_int, str_at};
use super::selector::{format_label_selector, format_labels, selector_string};
use super::{
    ColumnDefinition, age_col, col, created, name, name_col, workload_cells, workload_columns,
};

/// Where the workload spec is (the pod template is its `template`).
const SPEC: &[&str] = &["spec"];

/// `spec.replicas`, which the API server defaults to 1 before anything is printed.
fn desired_replicas(obj: &Value) -> i64 {
    opt_int(obj, &["spec", "replicas"]).unwrap_or(1)
}

/// The columns shared by ReplicationController and ReplicaSet.
pub(crate) fn replica_set_columns() -> Vec<ColumnDefinition> {
    let columns = vec![
        col("Desired", "integer", "Number of desired replicas."),
        col(
            "Current",
            "integer",
            "Number of most recently observed replicas.",
        ),
        col("Ready", "integer", "Number of ready replicas."),
    ];
    let selector = "Label query over the pods the controller manages.";
    workload_columns(columns, Some(selector))
}

fn replica_counts(obj: &Value, now: Timestamp) -> Vec<Value> {
    vec![
        name(obj),
        json!(desired_replicas(obj)),
        json!(int_at(obj, &["status", "replicas"])),
        json!(int_at(obj, &["status", "readyReplicas"])),
        created(obj, now),
    ]
}

pub(crate) fn replication_controller_cells(rc: &Value, now: Timestamp) -> Vec<Value> {
    // A ReplicationController's selector is a plain label map.
    let selector = format_labels(at(rc, &["spec", "selector"]));
    workload_cells(rc, replica_counts(rc, now), SPEC, Some(selector))
}

pub(crate) fn replica_set_cells(rs: &Value, now: Timestamp) -> Vec<Value> {
    let selector = format_label_selector(at(rs, &["spec", "selector"]));
    workload_cells(rs, replica_counts(rs, now), SPEC, Some(selector))
}

pub(crate) fn deployment_columns() -> Vec<ColumnDefinition> {
    let columns = vec![
        col("Ready", "string", "Number of the pod with ready state"),
        col(
            "Up-to-date",
            "string",
            "Total number of non-terminated pods with the desired template.",
        ),
        col("Available", "string", "Total number of available pods."),
    ];
    workload_columns(columns, Some("Label selector for pods."))
}

pub(crate) fn deployment_cells(d: &Value, now: Timestamp) -> Vec<Value> {
    let ready = format!(
        "{}/{}",
        int_at(d, &["status", "readyReplicas"]),
        desired_replicas(d)
    );
    // Unlike the other printers, an empty Deployment selector prints as "" and a bad one as
    // "<invalid>".
    let selector =
        selector_string(at(d, &["spec", "selector"])).unwrap_or_else(|_| "<invalid>".to_string());
    let cells = vec![
        name(d),
        json!(ready),
        json!(int_at(d, &["status", "updatedReplicas"])),
        json!(int_at(d, &["status", "availableReplicas"])),
        created(d, now),
    ];
    workload_cells(d, cells, SPEC, Some(selector))
}

pub(crate) fn stateful_set_columns() -> Vec<ColumnDefinition> {
    let ready = col("Ready", "string", "Number of the pod with ready state");
    workload_columns(vec![ready], None)
}

pub(crate) fn stateful_set_cells(sts: &Value, now: Timestamp) -> Vec<Value> {
    let ready = format!(
        "{}/{}",
        int_at(sts, &["status", "readyReplicas"]),
        desired_replicas(sts)
    );
    let cells = vec![name(sts), json!(ready), created(sts, now)];
    workload_cells(sts, cells, SPEC, None)
}

pub(crate) fn daemon_set_columns() -> Vec<ColumnDefinition> {
    let columns = vec![
        col(
            "Desired",
            "integer",
            "Number of nodes that should run the daemon pod.",
        ),
        col(
            "Current",
            "integer",
            "Number of nodes running at least one daemon pod.",
        ),
        col(
            "Ready",
            "integer",
            "Number of nodes with a ready daemon pod.",
        ),
        col(
            "Up-to-date",
            "integer",
            "Number of nodes running the updated daemon pod.",
        ),
        col(
            "Available",
            "integer",
            "Number of nodes with an available daemon pod.",
        ),
        col(
            "Node Selector",
            "string",
            "Node labels the daemon pods must match.",
        ),
    ];
    let selector = "Label query over the pods the daemon set manages.";
    workload_columns(columns, Some(selector))
}

pub(crate) fn daemon_set_cells(ds: &Value, now: Timestamp) -> Vec<Value> {
    let count = |field: &str| json!(int_at(ds, &["status", field]));
    let cells = vec![
        name(ds),
        count("desiredNumberScheduled"),
        count("currentNumberScheduled"),
        count("numberReady"),
        count("updatedNumberScheduled"),
        count("numberAvailable"),
        json!(format_labels(at(
            ds,
            &["spec", "template", "spec", "nodeSelector"]
        ))),
        created(ds, now),
    ];
    let selector = format_label_selector(at(ds, &["spec", "selector"]));
    workload_cells(ds, cells, SPEC, Some(selector))
}

pub(crate) fn controller_revision_columns() -> Vec<ColumnDefinition> {
    vec![
        name_col(),
        col("Controller", "string", "Controller of the object"),
        col("Revision", "string", "Revision number of the stored state."),
        age_col(),
    ]
}

/// `kind.group/name` of the controlling owner, lower-cased (`daemonset.apps/fluentd`), or
/// `<none>`.
fn controller_name(obj: &Value) -> String {
    let Some(owner) = list_at(obj, &["metadata", "ownerReferences"])
        .iter()
        .find(|o| opt_bool(o, &["controller"]) == Some(true))
    else {
        return "<none>".to_string();
    };
    let name = str_at(owner, &["name"]);
    let kind = str_at(owner, &["kind"]);
    let group = str_at(owner, &["apiVersion"])
        .rsplit_once('/')
        .map_or("", |(g, _)| g);
    let group_kind = match (kind, group) {
        ("", "") => return name.to_string(),
        (k, "") => k.to_string(),
        (k, g) => format!("{k}.{g}"),
    };
    format!("{}/{name}", group_kind.to_lowercase())
}

pub(crate) fn controller_revision_cells(cr: &Value, now: Timestamp) -> Vec<Value> {
    vec![
        name(cr),
        json!(controller_name(cr)),
        json!(int_at(cr, &["revision"])),
        created(cr, now),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::fixture::now;

    fn template() -> Value {
        json!({"metadata": {"labels": {"app": "nginx"}},
               "spec": {"containers": [{"name": "nginx", "image": "nginx:1.16.1"},
                                       {"name": "log", "image": "busybox:1.28"}]}})
    }

    fn workload(kind: &str, spec: Value, status: Value) -> Value {
        let mut spec = spec;
        spec["template"] = template();
        json!({"kind": kind,
               "metadata": {"name": "nginx", "namespace": "default",
                            "creationTimestamp": "2024-05-01T11:59:31Z"},
               "spec": spec, "status": status})
    }

    #[test]
    fn deployments_show_ready_over_desired_and_the_selector() {
        let d = workload(
            "Deployment",
            json!({"replicas": 3, "selector": {"matchLabels": {"app": "nginx"}}}),
            json!({"replicas": 3, "readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 2}),
        );
        assert_eq!(
            deployment_cells(&d, now()),
            vec![
                json!("nginx"),
                json!("2/3"),
                json!(3),
                json!(2),
                json!("29s"),
                json!("nginx,log"),
                json!("nginx:1.16.1,busybox:1.28"),
                json!("app=nginx"),
            ]
        );
        let fresh = workload("Deployment", json!({}), json!({}));
        let c = deployment_cells(&fresh, now());
        assert_eq!((c[1].clone(), c[7].clone()), (json!("0/1"), json!("")));
        assert_eq!(deployment_columns().len(), c.len());
    }

    #[test]
    fn replica_sets_and_controllers_show_counts_and_selectors() {
        let rs = workload(
            "ReplicaSet",
            json!({"replicas": 2, "selector": {"matchLabels": {"app": "nginx", "pod-template-hash": "5d4f8"}}}),
            json!({"replicas": 2, "readyReplicas": 1}),
        );
        let c = replica_set_cells(&rs, now());
        assert_eq!(&c[1..4], &[json!(2), json!(2), json!(1)]);
        assert_eq!(c[7], json!("app=nginx,pod-template-hash=5d4f8"));
        let rc = workload(
            "ReplicationController",
            json!({"replicas": 0, "selector": {"app": "nginx"}}),
            json!({}),
        );
        let c = replication_controller_cells(&rc, now());
        assert_eq!(&c[1..4], &[json!(0), json!(0), json!(0)]);
        assert_eq!(c[7], json!("app=nginx"));
        let bare = json!({"metadata": {"name": "x"}});
        assert_eq!(
            replication_controller_cells(&bare, now())[7],
            json!("<none>")
        );
        assert_eq!(replica_set_cells(&bare, now())[7], json!("<none>"));
        assert_eq!(replica_set_columns().len(), 8);
    }

    #[test]
    fn stateful_sets_show_ready_over_desired() {
        let sts = workload(
            "StatefulSet",
            json!({"replicas": 3}),
            json!({"readyReplicas": 3}),
        );
        assert_eq!(
            stateful_set_cells(&sts, now()),
            vec![
                json!("nginx"),
                json!("3/3"),
                json!("29s"),
                json!("nginx,log"),
                json!("nginx:1.16.1,busybox:1.28")
            ]
        );
    }

    #[test]
    fn daemon_sets_show_scheduling_counts_and_node_selector() {
        let mut ds = workload(
            "DaemonSet",
            json!({"selector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["agent"]}]}}),
            json!({"desiredNumberScheduled": 3, "currentNumberScheduled": 3, "numberReady": 2,
                   "updatedNumberScheduled": 3, "numberAvailable": 2}),
        );
        let c = daemon_set_cells(&ds, now());
        assert_eq!(
            &c[1..7],
            &[
                json!(3),
                json!(3),
                json!(2),
                json!(3),
                json!(2),
                json!("<none>")
            ]
        );
        assert_eq!(c[10], json!("app in (agent)"));
        ds["spec"]["template"]["spec"]["nodeSelector"] =
            json!({"kubernetes.io/os": "linux", "disk": "ssd"});
        assert_eq!(
            daemon_set_cells(&ds, now())[6],
            json!("disk=ssd,kubernetes.io/os=linux")
        );
        assert_eq!(daemon_set_columns().len(), c.len());
    }

    #[test]
    fn controller_revisions_name_their_controller_with_group() {
        let cr = |owners: Value| {
            json!({"metadata": {"name": "fluentd-5d4f8", "ownerReferences": owners,
                                "creationTimestamp": "2024-05-01T11:00:00Z"},
                   "revision": 2})
        };
        let owned = cr(json!([
            {"apiVersion": "v1", "kind": "Pod", "name": "other"},
            {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "fluentd", "controller": true}]));
        assert_eq!(
            controller_revision_cells(&owned, now()),
            vec![
                json!("fluentd-5d4f8"),
                json!("daemonset.apps/fluentd"),
                json!(2),
                json!("60m")
            ]
        );
        let core =
            cr(json!([{"apiVersion": "v1", "kind": "Pod", "name": "p", "controller": true}]));
        assert_eq!(controller_revision_cells(&core, now())[1], json!("pod/p"));
        assert_eq!(
            controller_revision_cells(&cr(json!([])), now())[1],
            json!("<none>")
        );
    }
}
