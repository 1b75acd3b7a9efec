//! The strategic-merge table: for a list field at a path inside a kind, how upstream's Go struct
//! tags (`patchStrategy`, `patchMergeKey`) say to merge it. Lists not listed here are atomic.
//!
//! Paths are field names from the object root; entering a list's items adds no segment, so a
//! container's env in a Deployment is `spec.template.spec.containers.env`.

/// How a list field combines with a patch's list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListStrategy {
    /// The patch's list replaces the target's.
    Atomic,
    /// A list of objects merged item by item, matched on this key.
    MergeByKey(&'static str),
    /// A list of scalars merged as a set (`$deleteFromPrimitiveList` removes values).
    MergePrimitives,
}

/// Where each kind embeds a PodSpec.
fn pod_spec_roots(kind: &str) -> &'static [&'static [&'static str]] {
    match kind {
        "Pod" => &[&["spec"]],
        "PodTemplate" => &[&["template", "spec"]],
        "Deployment"
        | "ReplicaSet"
        | "ReplicationController"
        | "DaemonSet"
        | "StatefulSet"
        | "Job" => &[&["spec", "template", "spec"]],
        "CronJob" => &[&["spec", "jobTemplate", "spec", "template", "spec"]],
        _ => &[],
    }
}

/// Where each kind embeds an ObjectMeta (the object's own `metadata` and its templates').
fn object_meta_roots(kind: &str) -> &'static [&'static [&'static str]] {
    match kind {
        "PodTemplate" => &[&["metadata"], &["template", "metadata"]],
        "Deployment"
        | "ReplicaSet"
        | "ReplicationController"
        | "DaemonSet"
        | "StatefulSet"
        | "Job" => &[&["metadata"], &["spec", "template", "metadata"]],
        "CronJob" => &[
            &["metadata"],
            &["spec", "jobTemplate", "metadata"],
            &["spec", "jobTemplate", "spec", "template", "metadata"],
        ],
        _ => &[&["metadata"]],
    }
}

/// The strategy for the list at `path` in an object of `kind`.
pub fn list_strategy(kind: &str, path: &[String]) -> ListStrategy {
    for root in pod_spec_roots(kind) {
        if let Some(rest) = strip_root(path, root) {
            return pod_spec_list(rest);
        }
    }
    for root in object_meta_roots(kind) {
        if let Some([field]) = strip_root(path, root) {
            match field.as_str() {
                "finalizers" => return ListStrategy::MergePrimitives,
                "ownerReferences" => return ListStrategy::MergeByKey("uid"),
                _ => {}
            }
        }
    }
    let path: Vec<&str> = path.iter().map(String::as_str).collect();
    match (kind, path.as_slice()) {
        (_, ["status", "conditions"]) => ListStrategy::MergeByKey("type"),
        ("Pod", ["status", "podIPs" | "hostIPs"]) => ListStrategy::MergeByKey("ip"),
        ("Pod", ["status", "resourceClaimStatuses"]) => ListStrategy::MergeByKey("name"),
        ("Node", ["status", "addresses"]) => ListStrategy::MergeByKey("type"),
        ("Node", ["spec", "podCIDRs"]) => ListStrategy::MergePrimitives,
        ("Service", ["spec", "ports"]) => ListStrategy::MergeByKey("port"),
        ("CSINode", ["spec", "drivers"]) => ListStrategy::MergeByKey("name"),
        _ => ListStrategy::Atomic,
    }
}

fn strip_root<'p>(path: &'p [String], root: &[&str]) -> Option<&'p [String]> {
    let head = path.get(..root.len())?;
    head.iter()
        .zip(root)
        .all(|(a, b)| a == b)
        .then(|| &path[root.len()..])
}

/// Lists inside a PodSpec, given the path below the PodSpec.
fn pod_spec_list(rest: &[String]) -> ListStrategy {
    let rest: Vec<&str> = rest.iter().map(String::as_str).collect();
    match rest.as_slice() {
        [
            "containers"
            | "initContainers"
            | "ephemeralContainers"
            | "volumes"
            | "imagePullSecrets"
            | "resourceClaims"
            | "schedulingGates",
        ] => ListStrategy::MergeByKey("name"),
        ["hostAliases"] => ListStrategy::MergeByKey("ip"),
        ["topologySpreadConstraints"] => ListStrategy::MergeByKey("topologyKey"),
        [
            "containers" | "initContainers" | "ephemeralContainers",
            field,
        ] => match *field {
            "env" => ListStrategy::MergeByKey("name"),
            "ports" => ListStrategy::MergeByKey("containerPort"),
            "volumeMounts" => ListStrategy::MergeByKey("mountPath"),
            "volumeDevices" => ListStrategy::MergeByKey("devicePath"),
            _ => ListStrategy::Atomic,
        },
        _ => ListStrategy::Atomic,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ListStrategy::*;

    fn at(kind: &str, path: &str) -> ListStrategy {
        let path: Vec<String> = path.split('.').map(String::from).collect();
        list_strategy(kind, &path)
    }

    #[test]
    fn pod_spec_lists_are_found_under_every_workload_template() {
        let cases = [
            ("Pod", "spec.containers", MergeByKey("name")),
            (
                "Deployment",
                "spec.template.spec.containers",
                MergeByKey("name"),
            ),
            (
                "ReplicaSet",
                "spec.template.spec.initContainers",
                MergeByKey("name"),
            ),
            (
                "ReplicationController",
                "spec.template.spec.volumes",
                MergeByKey("name"),
            ),
            (
                "DaemonSet",
                "spec.template.spec.imagePullSecrets",
                MergeByKey("name"),
            ),
            (
                "StatefulSet",
                "spec.template.spec.hostAliases",
                MergeByKey("ip"),
            ),
            (
                "Job",
                "spec.template.spec.topologySpreadConstraints",
                MergeByKey("topologyKey"),
            ),
            (
                "CronJob",
                "spec.jobTemplate.spec.template.spec.containers",
                MergeByKey("name"),
            ),
            ("Pod", "spec.ephemeralContainers", MergeByKey("name")),
            ("Pod", "spec.resourceClaims", MergeByKey("name")),
            ("Pod", "spec.schedulingGates", MergeByKey("name")),
            ("Pod", "spec.tolerations", Atomic),
            ("Pod", "spec.readinessGates", Atomic),
            ("Deployment", "spec.containers", Atomic),
            ("ConfigMap", "spec.containers", Atomic),
        ];
        for (kind, path, want) in cases {
            assert_eq!(at(kind, path), want, "{kind} {path}");
        }
    }

    #[test]
    fn container_lists_merge_by_their_keys_and_the_rest_is_atomic() {
        let cases = [
            ("Pod", "spec.containers.env", MergeByKey("name")),
            (
                "Pod",
                "spec.initContainers.ports",
                MergeByKey("containerPort"),
            ),
            (
                "Deployment",
                "spec.template.spec.containers.volumeMounts",
                MergeByKey("mountPath"),
            ),
            (
                "Pod",
                "spec.ephemeralContainers.volumeDevices",
                MergeByKey("devicePath"),
            ),
            ("Pod", "spec.containers.envFrom", Atomic),
            ("Pod", "spec.containers.command", Atomic),
            ("Pod", "spec.containers.args", Atomic),
        ];
        for (kind, path, want) in cases {
            assert_eq!(at(kind, path), want, "{kind} {path}");
        }
    }

    #[test]
    fn metadata_status_and_node_lists_follow_upstream_tags() {
        let cases = [
            ("Secret", "metadata.finalizers", MergePrimitives),
            ("Pod", "metadata.ownerReferences", MergeByKey("uid")),
            (
                "Deployment",
                "spec.template.metadata.finalizers",
                MergePrimitives,
            ),
            ("Namespace", "spec.finalizers", Atomic),
            ("Deployment", "status.conditions", MergeByKey("type")),
            ("Lease", "status.conditions", MergeByKey("type")),
            ("Pod", "status.podIPs", MergeByKey("ip")),
            ("Pod", "status.containerStatuses", Atomic),
            ("Node", "status.addresses", MergeByKey("type")),
            ("Node", "status.conditions", MergeByKey("type")),
            ("Node", "spec.taints", Atomic),
            ("StatefulSet", "spec.volumeClaimTemplates", Atomic),
            ("Service", "spec.ports", MergeByKey("port")),
        ];
        for (kind, path, want) in cases {
            assert_eq!(at(kind, path), want, "{kind} {path}");
        }
    }
}
