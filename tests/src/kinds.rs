//! What the tests expect of each served kind, written down independently of the controller's
//! own resource table: group/version, plural and short name, scope, and the column headers
//! kubectl prints for it (upstream Kubernetes 1.31's printers; `wide` = the extra `-o wide`
//! columns).

/// Expectations for one kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Kind {
    pub kind: &'static str,
    /// `apps/v1`, or `v1` for the core group.
    pub api_version: &'static str,
    pub plural: &'static str,
    /// The one short name kubectl api-resources lists, if any.
    pub short: Option<&'static str>,
    pub namespaced: bool,
    /// `kubectl get` headers.
    pub columns: &'static [&'static str],
    /// Extra headers with `-o wide`, appended after `columns`.
    pub wide: &'static [&'static str],
}

const WORKLOAD_WIDE: &[&str] = &["CONTAINERS", "IMAGES", "SELECTOR"];

/// Every kind the controller serves (the contract's list).
pub static KINDS: &[Kind] = &[
    k(
        "Namespace",
        "v1",
        "namespaces",
        Some("ns"),
        false,
        &["NAME", "STATUS", "AGE"],
        &[],
    ),
    k(
        "Node",
        "v1",
        "nodes",
        Some("no"),
        false,
        &["NAME", "STATUS", "ROLES", "AGE", "VERSION"],
        &[
            "INTERNAL-IP",
            "EXTERNAL-IP",
            "OS-IMAGE",
            "KERNEL-VERSION",
            "CONTAINER-RUNTIME",
        ],
    ),
    k(
        "Pod",
        "v1",
        "pods",
        Some("po"),
        true,
        &["NAME", "READY", "STATUS", "RESTARTS", "AGE"],
        &["IP", "NODE", "NOMINATED NODE", "READINESS GATES"],
    ),
    k(
        "Event",
        "v1",
        "events",
        Some("ev"),
        true,
        &["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"],
        &["SUBOBJECT", "SOURCE", "FIRST SEEN", "COUNT", "NAME"],
    ),
    k(
        "ConfigMap",
        "v1",
        "configmaps",
        Some("cm"),
        true,
        &["NAME", "DATA", "AGE"],
        &[],
    ),
    k(
        "Secret",
        "v1",
        "secrets",
        None,
        true,
        &["NAME", "TYPE", "DATA", "AGE"],
        &[],
    ),
    k(
        "ReplicationController",
        "v1",
        "replicationcontrollers",
        Some("rc"),
        true,
        &["NAME", "DESIRED", "CURRENT", "READY", "AGE"],
        WORKLOAD_WIDE,
    ),
    k(
        "Deployment",
        "apps/v1",
        "deployments",
        Some("deploy"),
        true,
        &["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"],
        WORKLOAD_WIDE,
    ),
    k(
        "ReplicaSet",
        "apps/v1",
        "replicasets",
        Some("rs"),
        true,
        &["NAME", "DESIRED", "CURRENT", "READY", "AGE"],
        WORKLOAD_WIDE,
    ),
    k(
        "StatefulSet",
        "apps/v1",
        "statefulsets",
        Some("sts"),
        true,
        &["NAME", "READY", "AGE"],
        &["CONTAINERS", "IMAGES"],
    ),
    k(
        "DaemonSet",
        "apps/v1",
        "daemonsets",
        Some("ds"),
        true,
        &[
            "NAME",
            "DESIRED",
            "CURRENT",
            "READY",
            "UP-TO-DATE",
            "AVAILABLE",
            "NODE SELECTOR",
            "AGE",
        ],
        WORKLOAD_WIDE,
    ),
    k(
        "ControllerRevision",
        "apps/v1",
        "controllerrevisions",
        None,
        true,
        &["NAME", "CONTROLLER", "REVISION", "AGE"],
        &[],
    ),
    k(
        "Job",
        "batch/v1",
        "jobs",
        None,
        true,
        &["NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE"],
        WORKLOAD_WIDE,
    ),
    k(
        "CronJob",
        "batch/v1",
        "cronjobs",
        Some("cj"),
        true,
        &[
            "NAME",
            "SCHEDULE",
            "TIMEZONE",
            "SUSPEND",
            "ACTIVE",
            "LAST SCHEDULE",
            "AGE",
        ],
        WORKLOAD_WIDE,
    ),
    k(
        "PodDisruptionBudget",
        "policy/v1",
        "poddisruptionbudgets",
        Some("pdb"),
        true,
        &[
            "NAME",
            "MIN AVAILABLE",
            "MAX UNAVAILABLE",
            "ALLOWED DISRUPTIONS",
            "AGE",
        ],
        &[],
    ),
    k(
        "PriorityClass",
        "scheduling.k8s.io/v1",
        "priorityclasses",
        Some("pc"),
        false,
        &["NAME", "VALUE", "GLOBAL-DEFAULT", "AGE", "PREEMPTIONPOLICY"],
        &[],
    ),
    k(
        "Lease",
        "coordination.k8s.io/v1",
        "leases",
        None,
        true,
        &["NAME", "HOLDER", "AGE"],
        &[],
    ),
    k(
        "Service",
        "v1",
        "services",
        Some("svc"),
        true,
        &[
            "NAME",
            "TYPE",
            "CLUSTER-IP",
            "EXTERNAL-IP",
            "PORT(S)",
            "AGE",
        ],
        &["SELECTOR"],
    ),
    k(
        "Endpoints",
        "v1",
        "endpoints",
        Some("ep"),
        true,
        &["NAME", "ENDPOINTS", "AGE"],
        &[],
    ),
    k(
        "EndpointSlice",
        "discovery.k8s.io/v1",
        "endpointslices",
        None,
        true,
        &["NAME", "ADDRESSTYPE", "PORTS", "ENDPOINTS", "AGE"],
        &[],
    ),
];

const fn k(
    kind: &'static str,
    api_version: &'static str,
    plural: &'static str,
    short: Option<&'static str>,
    namespaced: bool,
    columns: &'static [&'static str],
    wide: &'static [&'static str],
) -> Kind {
    Kind {
        kind,
        api_version,
        plural,
        short,
        namespaced,
        columns,
        wide,
    }
}

/// `kubectl get hpa` headers (upstream's printer). HorizontalPodAutoscaler is not in the
/// contract's list ([`KINDS`]), whose every entry the discovery tests walk.
pub const HPA_COLUMNS: &[&str] = &[
    "NAME",
    "REFERENCE",
    "TARGETS",
    "MINPODS",
    "MAXPODS",
    "REPLICAS",
    "AGE",
];

/// The expectations for `kind`; panics on a kind the contract does not list.
pub fn kind(kind: &str) -> &'static Kind {
    KINDS
        .iter()
        .find(|k| k.kind == kind)
        .unwrap_or_else(|| panic!("{kind} is not a served kind"))
}

impl Kind {
    /// The API group (`""` for core).
    pub fn group(&self) -> &'static str {
        match self.api_version.split_once('/') {
            Some((group, _)) => group,
            None => "",
        }
    }

    /// How kubectl names objects of this kind in `-o name` and in apply/delete messages:
    /// `deployment.apps`, `pod`, `lease.coordination.k8s.io`.
    pub fn kubectl_type(&self) -> String {
        let lower = self.kind.to_ascii_lowercase();
        match self.group() {
            "" => lower,
            group => format!("{lower}.{group}"),
        }
    }

    /// The collection path: `/apis/apps/v1/namespaces/NS/deployments` or `/api/v1/nodes`.
    pub fn collection_path(&self, namespace: Option<&str>) -> String {
        let prefix = if self.group().is_empty() {
            "/api"
        } else {
            "/apis"
        };
        match namespace.filter(|_| self.namespaced) {
            Some(ns) => format!(
                "{prefix}/{}/namespaces/{ns}/{}",
                self.api_version, self.plural
            ),
            None => format!("{prefix}/{}/{}", self.api_version, self.plural),
        }
    }

    /// The object path.
    pub fn object_path(&self, namespace: Option<&str>, name: &str) -> String {
        format!("{}/{name}", self.collection_path(namespace))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubectl_type_adds_the_group_except_for_core() {
        assert_eq!(kind("Deployment").kubectl_type(), "deployment.apps");
        assert_eq!(kind("Pod").kubectl_type(), "pod");
        assert_eq!(kind("Lease").kubectl_type(), "lease.coordination.k8s.io");
    }

    #[test]
    fn paths_follow_group_and_scope() {
        assert_eq!(
            kind("Deployment").object_path(Some("default"), "web"),
            "/apis/apps/v1/namespaces/default/deployments/web"
        );
        assert_eq!(
            kind("Node").object_path(Some("ignored"), "n1"),
            "/api/v1/nodes/n1"
        );
        assert_eq!(kind("Pod").collection_path(None), "/api/v1/pods");
    }

    #[test]
    fn every_kind_is_listed_once_with_name_as_a_column() {
        for (i, a) in KINDS.iter().enumerate() {
            assert!(
                KINDS[i + 1..].iter().all(|b| b.kind != a.kind),
                "{} twice",
                a.kind
            );
            assert!(
                a.columns.contains(&"NAME") || a.kind == "Event",
                "{}",
                a.kind
            );
        }
        assert_eq!(KINDS.len(), 20);
    }
}
