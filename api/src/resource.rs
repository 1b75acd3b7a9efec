//! The table of resource types Berth serves: the one place that knows each kind's group,
//! version, plural, scope, short names and subresources. Discovery, OpenAPI, routing, storage
//! keys, tables and admission all read it. Custom resource types (CustomResourceDefinitions)
//! join it at run time.

use std::collections::BTreeSet;
use std::sync::{Mutex, RwLock};

/// One servable resource type (a kind in a group-version).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResourceType {
    /// API group; `""` is the legacy core group served under `/api`.
    pub group: &'static str,
    pub version: &'static str,
    pub kind: &'static str,
    /// Lower-case plural used in URLs (`deployments`).
    pub plural: &'static str,
    /// Lower-case singular (`deployment`).
    pub singular: &'static str,
    pub namespaced: bool,
    pub short_names: &'static [&'static str],
    pub categories: &'static [&'static str],
    /// Has a `status` stanza served through the `/status` subresource.
    pub has_status: bool,
    /// Serves the `/scale` subresource (autoscaling/v1 Scale).
    pub has_scale: bool,
    /// Only `create` is served, and nothing is stored: the answer is computed (the access and
    /// identity reviews).
    pub create_only: bool,
    /// Only `get` and `list` are served, and nothing is stored: the answer is computed (the
    /// resource metrics API).
    pub read_only: bool,
    /// The version whose objects are stored, when it is not this one: requests in this version
    /// are converted to and from it (autoscaling/v1 HorizontalPodAutoscalers are stored as
    /// autoscaling/v2).
    pub stored_as: Option<&'static str>,
    /// Served for a CustomResourceDefinition (registered at run time through [`set_custom`]),
    /// not built in.
    pub custom: bool,
}

impl ResourceType {
    /// `apps/v1`, or `v1` for the core group.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// The `kind` of the list type (`DeploymentList`).
    pub fn list_kind(&self) -> String {
        format!("{}List", self.kind)
    }

    /// `deployments.apps`, or `pods` for the core group: how kubectl names the resource.
    pub fn group_resource(&self) -> String {
        if self.group.is_empty() {
            self.plural.to_string()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }
}

const ALL: &[&str] = &["all"];

macro_rules! rt {
    ($group:expr, $version:expr, $kind:expr, $plural:expr, $singular:expr, $ns:expr,
     $short:expr, $cat:expr, status=$status:expr, scale=$scale:expr) => {
        ResourceType {
            group: $group,
            version: $version,
            kind: $kind,
            plural: $plural,
            singular: $singular,
            namespaced: $ns,
            short_names: $short,
            categories: $cat,
            has_status: $status,
            has_scale: $scale,
            create_only: false,
            read_only: false,
            stored_as: None,
            custom: false,
        }
    };
}

/// A kind whose answers are computed and never stored: `$computed` is `create_only` or
/// `read_only`.
macro_rules! computed {
    ($group:expr, $version:expr, $kind:expr, $plural:expr, $singular:expr, $ns:expr,
     $computed:ident) => {
        ResourceType {
            $computed: true,
            ..rt!(
                $group,
                $version,
                $kind,
                $plural,
                $singular,
                $ns,
                &[],
                &[],
                status = false,
                scale = false
            )
        }
    };
}

/// A create-only review kind: cluster-scoped unless `namespaced`.
macro_rules! review {
    ($group:expr, $kind:expr, $plural:expr, $singular:expr, $ns:expr) => {
        computed!($group, "v1", $kind, $plural, $singular, $ns, create_only)
    };
}

/// A read-only kind of the resource metrics API (`metrics.k8s.io/v1beta1`).
macro_rules! resource_metrics {
    ($kind:expr, $plural:expr, $singular:expr, $ns:expr) => {
        computed!(
            "metrics.k8s.io",
            "v1beta1",
            $kind,
            $plural,
            $singular,
            $ns,
            read_only
        )
    };
}

/// Every resource type Berth serves, in discovery order: one row a type.
#[rustfmt::skip]
pub static RESOURCES: &[ResourceType] = &[
    rt!("", "v1", "Namespace", "namespaces", "namespace", false, &["ns"], &[], status = true, scale = false),
    rt!("", "v1", "Node", "nodes", "node", false, &["no"], &[], status = true, scale = false),
    rt!("", "v1", "Pod", "pods", "pod", true, &["po"], ALL, status = true, scale = false),
    rt!("", "v1", "Event", "events", "event", true, &["ev"], &[], status = false, scale = false),
    rt!("", "v1", "ConfigMap", "configmaps", "configmap", true, &["cm"], &[], status = false, scale = false),
    rt!("", "v1", "Secret", "secrets", "secret", true, &[], &[], status = false, scale = false),
    rt!("", "v1", "ReplicationController", "replicationcontrollers", "replicationcontroller", true, &["rc"], ALL, status = true, scale = true),
    rt!("apps", "v1", "Deployment", "deployments", "deployment", true, &["deploy"], ALL, status = true, scale = true),
    rt!("apps", "v1", "ReplicaSet", "replicasets", "replicaset", true, &["rs"], ALL, status = true, scale = true),
    rt!("apps", "v1", "StatefulSet", "statefulsets", "statefulset", true, &["sts"], ALL, status = true, scale = true),
    rt!("apps", "v1", "DaemonSet", "daemonsets", "daemonset", true, &["ds"], ALL, status = true, scale = false),
    rt!("apps", "v1", "ControllerRevision", "controllerrevisions", "controllerrevision", true, &[], &[], status = false, scale = false),
    rt!("batch", "v1", "Job", "jobs", "job", true, &[], ALL, status = true, scale = false),
    rt!("batch", "v1", "CronJob", "cronjobs", "cronjob", true, &["cj"], ALL, status = true, scale = false),
    rt!("policy", "v1", "PodDisruptionBudget", "poddisruptionbudgets", "poddisruptionbudget", true, &["pdb"], &[], status = true, scale = false),
    rt!("coordination.k8s.io", "v1", "Lease", "leases", "lease", true, &[], &[], status = false, scale = false),
    rt!("", "v1", "ServiceAccount", "serviceaccounts", "serviceaccount", true, &["sa"], &[], status = false, scale = false),
    rt!("rbac.authorization.k8s.io", "v1", "Role", "roles", "role", true, &[], &[], status = false, scale = false),
    rt!("rbac.authorization.k8s.io", "v1", "RoleBinding", "rolebindings", "rolebinding", true, &[], &[], status = false, scale = false),
    rt!("rbac.authorization.k8s.io", "v1", "ClusterRole", "clusterroles", "clusterrole", false, &[], &[], status = false, scale = false),
    rt!("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding", "clusterrolebindings", "clusterrolebinding", false, &[], &[], status = false, scale = false),
    rt!("scheduling.k8s.io", "v1", "PriorityClass", "priorityclasses", "priorityclass", false, &["pc"], &[], status = false, scale = false),
    review!("authentication.k8s.io", "SelfSubjectReview", "selfsubjectreviews", "selfsubjectreview", false),
    review!("authentication.k8s.io", "TokenReview", "tokenreviews", "tokenreview", false),
    review!("authorization.k8s.io", "LocalSubjectAccessReview", "localsubjectaccessreviews", "localsubjectaccessreview", true),
    review!("authorization.k8s.io", "SelfSubjectAccessReview", "selfsubjectaccessreviews", "selfsubjectaccessreview", false),
    review!("authorization.k8s.io", "SelfSubjectRulesReview", "selfsubjectrulesreviews", "selfsubjectrulesreview", false),
    review!("authorization.k8s.io", "SubjectAccessReview", "subjectaccessreviews", "subjectaccessreview", false),
    resource_metrics!("NodeMetrics", "nodes", "", false),
    resource_metrics!("PodMetrics", "pods", "", true),
    rt!("autoscaling", "v2", "HorizontalPodAutoscaler", "horizontalpodautoscalers", "horizontalpodautoscaler", true, &["hpa"], ALL, status = true, scale = false),
    // autoscaling/v1 is served by converting to and from the stored autoscaling/v2.
    ResourceType { stored_as: Some("v2"), ..rt!("autoscaling", "v1", "HorizontalPodAutoscaler", "horizontalpodautoscalers", "horizontalpodautoscaler", true, &["hpa"], ALL, status = true, scale = false) },
    rt!("", "v1", "Service", "services", "service", true, &["svc"], ALL, status = true, scale = false),
    rt!("", "v1", "Endpoints", "endpoints", "endpoints", true, &["ep"], &[], status = false, scale = false),
    rt!("discovery.k8s.io", "v1", "EndpointSlice", "endpointslices", "endpointslice", true, &[], &[], status = false, scale = false),
    rt!("", "v1", "PersistentVolume", "persistentvolumes", "persistentvolume", false, &["pv"], &[], status = true, scale = false),
    rt!("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims", "persistentvolumeclaim", true, &["pvc"], &[], status = true, scale = false),
    rt!("storage.k8s.io", "v1", "StorageClass", "storageclasses", "storageclass", false, &["sc"], &[], status = false, scale = false),
    rt!("certificates.k8s.io", "v1", "CertificateSigningRequest", "certificatesigningrequests", "certificatesigningrequest", false, &["csr"], &[], status = true, scale = false),
    rt!("apiextensions.k8s.io", "v1", "CustomResourceDefinition", "customresourcedefinitions", "customresourcedefinition", false, &["crd", "crds"], &["api-extensions"], status = true, scale = false),
    rt!("admissionregistration.k8s.io", "v1", "ValidatingAdmissionPolicy", "validatingadmissionpolicies", "validatingadmissionpolicy", false, &[], &["api-extensions"], status = true, scale = false),
    rt!("admissionregistration.k8s.io", "v1", "ValidatingAdmissionPolicyBinding", "validatingadmissionpolicybindings", "validatingadmissionpolicybinding", false, &[], &["api-extensions"], status = false, scale = false),
    rt!("admissionregistration.k8s.io", "v1", "ValidatingWebhookConfiguration", "validatingwebhookconfigurations", "validatingwebhookconfiguration", false, &[], &["api-extensions"], status = false, scale = false),
    rt!("admissionregistration.k8s.io", "v1", "MutatingWebhookConfiguration", "mutatingwebhookconfigurations", "mutatingwebhookconfiguration", false, &[], &["api-extensions"], status = false, scale = false),
    rt!("apiregistration.k8s.io", "v1", "APIService", "apiservices", "apiservice", false, &[], &["api-extensions"], status = true, scale = false),
    rt!("networking.k8s.io", "v1", "Ingress", "ingresses", "ingress", true, &["ing"], &[], status = true, scale = false),
    rt!("networking.k8s.io", "v1", "IngressClass", "ingressclasses", "ingressclass", false, &[], &[], status = false, scale = false),
    rt!("networking.k8s.io", "v1", "NetworkPolicy", "networkpolicies", "networkpolicy", true, &["netpol"], &[], status = false, scale = false),
    rt!("node.k8s.io", "v1", "RuntimeClass", "runtimeclasses", "runtimeclass", false, &[], &[], status = false, scale = false),
    rt!("storage.k8s.io", "v1", "CSIDriver", "csidrivers", "csidriver", false, &[], &[], status = false, scale = false),
    rt!("storage.k8s.io", "v1", "CSINode", "csinodes", "csinode", false, &[], &[], status = false, scale = false),
    rt!("storage.k8s.io", "v1", "VolumeAttachment", "volumeattachments", "volumeattachment", false, &[], &[], status = true, scale = false),
];

// Each resource type by name, so code names the type it means instead of looking it up by a
// string (a test below checks each name against its entry).
pub static NAMESPACES: &ResourceType = &RESOURCES[0];
pub static NODES: &ResourceType = &RESOURCES[1];
pub static PODS: &ResourceType = &RESOURCES[2];
pub static EVENTS: &ResourceType = &RESOURCES[3];
pub static CONFIG_MAPS: &ResourceType = &RESOURCES[4];
pub static SECRETS: &ResourceType = &RESOURCES[5];
pub static REPLICATION_CONTROLLERS: &ResourceType = &RESOURCES[6];
pub static DEPLOYMENTS: &ResourceType = &RESOURCES[7];
pub static REPLICA_SETS: &ResourceType = &RESOURCES[8];
pub static STATEFUL_SETS: &ResourceType = &RESOURCES[9];
pub static DAEMON_SETS: &ResourceType = &RESOURCES[10];
pub static CONTROLLER_REVISIONS: &ResourceType = &RESOURCES[11];
pub static JOBS: &ResourceType = &RESOURCES[12];
pub static CRON_JOBS: &ResourceType = &RESOURCES[13];
pub static POD_DISRUPTION_BUDGETS: &ResourceType = &RESOURCES[14];
pub static LEASES: &ResourceType = &RESOURCES[15];
pub static SERVICE_ACCOUNTS: &ResourceType = &RESOURCES[16];
pub static ROLES: &ResourceType = &RESOURCES[17];
pub static ROLE_BINDINGS: &ResourceType = &RESOURCES[18];
pub static CLUSTER_ROLES: &ResourceType = &RESOURCES[19];
pub static CLUSTER_ROLE_BINDINGS: &ResourceType = &RESOURCES[20];
pub static PRIORITY_CLASSES: &ResourceType = &RESOURCES[21];
pub static SELF_SUBJECT_REVIEWS: &ResourceType = &RESOURCES[22];
pub static TOKEN_REVIEWS: &ResourceType = &RESOURCES[23];
pub static LOCAL_SUBJECT_ACCESS_REVIEWS: &ResourceType = &RESOURCES[24];
pub static SELF_SUBJECT_ACCESS_REVIEWS: &ResourceType = &RESOURCES[25];
pub static SELF_SUBJECT_RULES_REVIEWS: &ResourceType = &RESOURCES[26];
pub static SUBJECT_ACCESS_REVIEWS: &ResourceType = &RESOURCES[27];
pub static NODE_METRICS: &ResourceType = &RESOURCES[28];
pub static POD_METRICS: &ResourceType = &RESOURCES[29];
pub static HORIZONTAL_POD_AUTOSCALERS: &ResourceType = &RESOURCES[30];
pub static HORIZONTAL_POD_AUTOSCALERS_V1: &ResourceType = &RESOURCES[31];
pub static SERVICES: &ResourceType = &RESOURCES[32];
pub static ENDPOINTS: &ResourceType = &RESOURCES[33];
pub static ENDPOINT_SLICES: &ResourceType = &RESOURCES[34];
pub static PERSISTENT_VOLUMES: &ResourceType = &RESOURCES[35];
pub static PERSISTENT_VOLUME_CLAIMS: &ResourceType = &RESOURCES[36];
pub static STORAGE_CLASSES: &ResourceType = &RESOURCES[37];
pub static CERTIFICATE_SIGNING_REQUESTS: &ResourceType = &RESOURCES[38];
pub static CUSTOM_RESOURCE_DEFINITIONS: &ResourceType = &RESOURCES[39];
pub static VALIDATING_ADMISSION_POLICIES: &ResourceType = &RESOURCES[40];
pub static VALIDATING_ADMISSION_POLICY_BINDINGS: &ResourceType = &RESOURCES[41];
pub static VALIDATING_WEBHOOK_CONFIGURATIONS: &ResourceType = &RESOURCES[42];
pub static MUTATING_WEBHOOK_CONFIGURATIONS: &ResourceType = &RESOURCES[43];
pub static API_SERVICES: &ResourceType = &RESOURCES[44];
pub static INGRESSES: &ResourceType = &RESOURCES[45];
pub static INGRESS_CLASSES: &ResourceType = &RESOURCES[46];
pub static NETWORK_POLICIES: &ResourceType = &RESOURCES[47];
pub static RUNTIME_CLASSES: &ResourceType = &RESOURCES[48];
pub static CSI_DRIVERS: &ResourceType = &RESOURCES[49];
pub static CSI_NODES: &ResourceType = &RESOURCES[50];
pub static VOLUME_ATTACHMENTS: &ResourceType = &RESOURCES[51];

/// The resource types served for CustomResourceDefinitions, in the order [`set_custom`] was
/// given them. Entries are leaked: a definition's types live as long as the process, and an
/// entry equal to one registered before is reused, so re-registering costs nothing.
static CUSTOM: RwLock<Vec<&'static ResourceType>> = RwLock::new(Vec::new());

/// Every entry ever registered, to reuse instead of leaking again.
static INTERNED: Mutex<Vec<&'static ResourceType>> = Mutex::new(Vec::new());

/// Strings of custom types, leaked once each.
static STRINGS: Mutex<BTreeSet<&'static str>> = Mutex::new(BTreeSet::new());

/// `s` as a `&'static str`, leaked the first time it is seen: for the names of custom types,
/// of which there are few and which rarely change.
pub fn intern(s: &str) -> &'static str {
    let mut strings = STRINGS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(found) = strings.get(s) {
        return found;
    }
    let leaked: &'static str = Box::leak(s.to_string().into_boxed_str());
    strings.insert(leaked);
    leaked
}

/// Replaces the custom resource types served (each CustomResourceDefinition's served versions,
/// built with [`intern`]ed strings and `custom: true`).
pub fn set_custom(types: Vec<ResourceType>) {
    let mut interned = INTERNED.lock().unwrap_or_else(|e| e.into_inner());
    let entries = types
        .into_iter()
        .map(|t| match interned.iter().find(|e| ***e == t) {
            Some(e) => *e,
            None => {
                let leaked: &'static ResourceType = Box::leak(Box::new(t));
                interned.push(leaked);
                leaked
            }
        })
        .collect();
    *CUSTOM.write().unwrap_or_else(|e| e.into_inner()) = entries;
}

/// The custom resource types served now.
pub fn custom() -> Vec<&'static ResourceType> {
    CUSTOM.read().unwrap_or_else(|e| e.into_inner()).clone()
}

/// Every resource type served now: the built-in table, then the custom types.
pub fn all() -> Vec<&'static ResourceType> {
    RESOURCES.iter().chain(custom()).collect()
}

/// The resource types whose objects are stored (all but the create-only reviews, the
/// read-only metrics and the versions converted to another one's storage), each once.
pub fn stored() -> impl Iterator<Item = &'static ResourceType> {
    all()
        .into_iter()
        .filter(|r| !r.create_only && !r.read_only && r.stored_as.is_none())
}

/// The resource type whose objects a request to `rt` reads and writes: `rt` itself, or the
/// version it is stored as.
pub fn storage_of(rt: &'static ResourceType) -> &'static ResourceType {
    rt.stored_as
        .and_then(|v| by_plural(rt.group, v, rt.plural))
        .unwrap_or(rt)
}

/// Looks up a resource type by group, version and URL plural.
pub fn by_plural(group: &str, version: &str, plural: &str) -> Option<&'static ResourceType> {
    let matches =
        |r: &&ResourceType| r.group == group && r.version == version && r.plural == plural;
    RESOURCES
        .iter()
        .find(matches)
        .or_else(|| custom().into_iter().find(matches))
}

/// Looks up a resource type by `apiVersion` and `kind` as they appear in a manifest.
pub fn by_kind(api_version: &str, kind: &str) -> Option<&'static ResourceType> {
    let matches = |r: &&ResourceType| r.kind == kind && r.api_version() == api_version;
    RESOURCES
        .iter()
        .find(matches)
        .or_else(|| custom().into_iter().find(matches))
}

/// kube-apiserver's group order in discovery (`/apis`); groups it does not list go last.
const UPSTREAM_GROUP_ORDER: &[&str] = &[
    "",
    "apiregistration.k8s.io",
    "apps",
    "events.k8s.io",
    "authentication.k8s.io",
    "authorization.k8s.io",
    "autoscaling",
    "batch",
    "certificates.k8s.io",
    "networking.k8s.io",
    "policy",
    "rbac.authorization.k8s.io",
    "storage.k8s.io",
    "admissionregistration.k8s.io",
    "apiextensions.k8s.io",
    "scheduling.k8s.io",
    "coordination.k8s.io",
    "node.k8s.io",
    "discovery.k8s.io",
    "flowcontrol.apiserver.k8s.io",
];

/// The API groups served, in upstream's discovery order, each with its versions (the
/// preferred one first: the order of the table).
pub fn groups() -> Vec<(&'static str, Vec<&'static str>)> {
    let mut out: Vec<(&'static str, Vec<&'static str>)> = Vec::new();
    for r in all() {
        match out.iter_mut().find(|(g, _)| *g == r.group) {
            Some((_, versions)) if !versions.contains(&r.version) => versions.push(r.version),
            Some(_) => {}
            None => out.push((r.group, vec![r.version])),
        }
    }
    out.sort_by_key(|(g, _)| {
        UPSTREAM_GROUP_ORDER
            .iter()
            .position(|u| u == g)
            .unwrap_or(UPSTREAM_GROUP_ORDER.len())
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_named_statics_name_their_entries() {
        let named = [
            (NAMESPACES, "NAMESPACES"),
            (NODES, "NODES"),
            (PODS, "PODS"),
            (EVENTS, "EVENTS"),
            (CONFIG_MAPS, "CONFIG_MAPS"),
            (SECRETS, "SECRETS"),
            (REPLICATION_CONTROLLERS, "REPLICATION_CONTROLLERS"),
            (DEPLOYMENTS, "DEPLOYMENTS"),
            (REPLICA_SETS, "REPLICA_SETS"),
            (STATEFUL_SETS, "STATEFUL_SETS"),
            (DAEMON_SETS, "DAEMON_SETS"),
            (CONTROLLER_REVISIONS, "CONTROLLER_REVISIONS"),
            (JOBS, "JOBS"),
            (CRON_JOBS, "CRON_JOBS"),
            (POD_DISRUPTION_BUDGETS, "POD_DISRUPTION_BUDGETS"),
            (LEASES, "LEASES"),
            (SERVICE_ACCOUNTS, "SERVICE_ACCOUNTS"),
            (ROLES, "ROLES"),
            (ROLE_BINDINGS, "ROLE_BINDINGS"),
            (CLUSTER_ROLES, "CLUSTER_ROLES"),
            (CLUSTER_ROLE_BINDINGS, "CLUSTER_ROLE_BINDINGS"),
            (PRIORITY_CLASSES, "PRIORITY_CLASSES"),
            (SELF_SUBJECT_REVIEWS, "SELF_SUBJECT_REVIEWS"),
            (TOKEN_REVIEWS, "TOKEN_REVIEWS"),
            (LOCAL_SUBJECT_ACCESS_REVIEWS, "LOCAL_SUBJECT_ACCESS_REVIEWS"),
            (SELF_SUBJECT_ACCESS_REVIEWS, "SELF_SUBJECT_ACCESS_REVIEWS"),
            (SELF_SUBJECT_RULES_REVIEWS, "SELF_SUBJECT_RULES_REVIEWS"),
            (SUBJECT_ACCESS_REVIEWS, "SUBJECT_ACCESS_REVIEWS"),
            (NODE_METRICS, "NODES"),
            (POD_METRICS, "PODS"),
            (HORIZONTAL_POD_AUTOSCALERS, "HORIZONTAL_POD_AUTOSCALERS"),
            (HORIZONTAL_POD_AUTOSCALERS_V1, "HORIZONTAL_POD_AUTOSCALERS"),
            (SERVICES, "SERVICES"),
            (ENDPOINTS, "ENDPOINTS"),
            (ENDPOINT_SLICES, "ENDPOINT_SLICES"),
            (PERSISTENT_VOLUMES, "PERSISTENT_VOLUMES"),
            (PERSISTENT_VOLUME_CLAIMS, "PERSISTENT_VOLUME_CLAIMS"),
            (STORAGE_CLASSES, "STORAGE_CLASSES"),
            (CERTIFICATE_SIGNING_REQUESTS, "CERTIFICATE_SIGNING_REQUESTS"),
            (CUSTOM_RESOURCE_DEFINITIONS, "CUSTOM_RESOURCE_DEFINITIONS"),
            (
                VALIDATING_ADMISSION_POLICIES,
                "VALIDATING_ADMISSION_POLICIES",
            ),
            (
                VALIDATING_ADMISSION_POLICY_BINDINGS,
                "VALIDATING_ADMISSION_POLICY_BINDINGS",
            ),
            (
                VALIDATING_WEBHOOK_CONFIGURATIONS,
                "VALIDATING_WEBHOOK_CONFIGURATIONS",
            ),
            (
                MUTATING_WEBHOOK_CONFIGURATIONS,
                "MUTATING_WEBHOOK_CONFIGURATIONS",
            ),
            (API_SERVICES, "API_SERVICES"),
            (INGRESSES, "INGRESSES"),
            (INGRESS_CLASSES, "INGRESS_CLASSES"),
            (NETWORK_POLICIES, "NETWORK_POLICIES"),
            (RUNTIME_CLASSES, "RUNTIME_CLASSES"),
            (CSI_DRIVERS, "CSI_DRIVERS"),
            (CSI_NODES, "CSI_NODES"),
            (VOLUME_ATTACHMENTS, "VOLUME_ATTACHMENTS"),
        ];
        assert_eq!(named.len(), RESOURCES.len());
        for (rt, name) in named {
            let plural = name.to_lowercase().replace('_', "");
            assert_eq!(rt.plural, plural, "{name}");
        }
    }

    #[test]
    fn core_kinds_resolve_by_plural_and_by_kind() {
        assert_eq!(by_plural("", "v1", "pods").map(|r| r.kind), Some("Pod"));
        assert_eq!(
            by_kind("apps/v1", "Deployment").map(|r| r.plural),
            Some("deployments")
        );
        assert!(by_kind("apps/v1beta1", "Deployment").is_none());
    }

    #[test]
    fn custom_types_join_the_table_and_leave_it() {
        let crontab = ResourceType {
            custom: true,
            ..rt!(
                intern("stable.example.com"),
                intern("v1"),
                intern("CronTab"),
                intern("crontabs"),
                intern("crontab"),
                true,
                &[],
                &[],
                status = false,
                scale = false
            )
        };
        set_custom(vec![crontab]);
        let found = by_plural("stable.example.com", "v1", "crontabs").expect("served");
        assert!(found.custom);
        assert!(std::ptr::eq(
            by_kind("stable.example.com/v1", "CronTab").expect("by kind"),
            found
        ));
        assert!(groups().iter().any(|(g, _)| *g == "stable.example.com"));
        // The same type registered again is the same entry, not a second leak.
        set_custom(vec![crontab]);
        assert!(std::ptr::eq(
            by_plural("stable.example.com", "v1", "crontabs").expect("served"),
            found
        ));
        assert!(std::ptr::eq(intern("crontabs"), found.plural));
        set_custom(Vec::new());
        assert!(by_plural("stable.example.com", "v1", "crontabs").is_none());
    }

    #[test]
    fn groups_are_listed_once_each() {
        let g = groups();
        assert_eq!(g[0], ("", vec!["v1"]));
        assert_eq!(g.iter().filter(|(g, _)| *g == "apps").count(), 1);
        let autoscaling = g.iter().find(|(g, _)| *g == "autoscaling");
        assert_eq!(autoscaling.map(|(_, v)| v.clone()), Some(vec!["v2", "v1"]));
    }

    #[test]
    fn a_converted_version_is_stored_as_its_storage_version_and_listed_once() {
        assert!(std::ptr::eq(
            storage_of(HORIZONTAL_POD_AUTOSCALERS_V1),
            HORIZONTAL_POD_AUTOSCALERS
        ));
        assert!(std::ptr::eq(storage_of(PODS), PODS));
        let hpas = stored().filter(|r| r.plural == "horizontalpodautoscalers");
        assert_eq!(hpas.map(|r| r.version).collect::<Vec<_>>(), vec!["v2"]);
    }
}
