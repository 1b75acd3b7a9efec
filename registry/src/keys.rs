//! Store keys: `/<group>/<plural>/<namespace>/<name>` (`core` for the legacy group; no namespace
//! segment for cluster-scoped kinds). Prefixes end in `/` so `default` never matches `default2`.

use berth_shared::resource::ResourceType;

fn group(rt: &ResourceType) -> &str {
    if rt.group.is_empty() {
        "core"
    } else {
        rt.group
    }
}

pub fn object_key(rt: &ResourceType, ns: Option<&str>, name: &str) -> String {
    match (rt.namespaced, ns) {
        (true, Some(ns)) => format!("/{}/{}/{}/{}", group(rt), rt.plural, ns, name),
        _ => format!("/{}/{}/{}", group(rt), rt.plural, name),
    }
}

/// The key prefix of a collection: all namespaces when `ns` is `None`.
pub fn prefix(rt: &ResourceType, ns: Option<&str>) -> String {
    match (rt.namespaced, ns) {
        (true, Some(ns)) => format!("/{}/{}/{}/", group(rt), rt.plural, ns),
        _ => format!("/{}/{}/", group(rt), rt.plural),
    }
}

/// The resource type, namespace and name a store key names.
pub fn parse_key(key: &str) -> Option<(&'static ResourceType, Option<String>, String)> {
    let segs: Vec<&str> = key.trim_start_matches('/').split('/').collect();
    let (group, plural, ns, name) = match segs.as_slice() {
        [g, p, ns, n] => (*g, *p, Some(ns.to_string()), n.to_string()),
        [g, p, n] => (*g, *p, None, n.to_string()),
        _ => return None,
    };
    let group = if group == "core" { "" } else { group };
    let rt = berth_shared::resource::all()
        .into_iter()
        .find(|r| r.group == group && r.plural == plural && r.stored_as.is_none())?;
    Some((rt, ns, name))
}

/// Whether a store key names an object of a built-in kind (not a custom resource): every
/// field a watch may select such an object by is in the store's index.
pub fn names_builtin_kind(key: &str) -> bool {
    let mut segs = key.trim_start_matches('/').split('/');
    let (Some(group), Some(plural)) = (segs.next(), segs.next()) else {
        return false;
    };
    let group = if group == "core" { "" } else { group };
    berth_shared::resource::RESOURCES
        .iter()
        .any(|r| r.group == group && r.plural == plural)
}

/// The store key of an object, from its apiVersion, kind, namespace and name.
pub fn key_of_value(obj: &serde_json::Value) -> Option<String> {
    let s = |p: &str| obj.pointer(p).and_then(serde_json::Value::as_str);
    let rt = berth_shared::resource::by_kind(s("/apiVersion")?, s("/kind")?)?;
    Some(object_key(
        rt,
        s("/metadata/namespace"),
        s("/metadata/name")?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use berth_shared::resource::by_plural;

    #[test]
    fn built_in_kinds_are_told_from_custom_resources_by_group_and_plural() {
        let pods = by_plural("", "v1", "pods").unwrap();
        let deployments = by_plural("apps", "v1", "deployments").unwrap();
        assert!(names_builtin_kind(&object_key(pods, Some("d"), "p")));
        assert!(names_builtin_kind(&object_key(deployments, Some("d"), "x")));
        assert!(!names_builtin_kind("/stable.example.com/crontabs/d/x"));
        assert!(!names_builtin_kind("/apps/crontabs/d/x"));
        assert!(!names_builtin_kind("/"));
    }

    #[test]
    fn namespaced_and_cluster_keys_differ_in_shape() {
        let pods = by_plural("", "v1", "pods").unwrap();
        let nodes = by_plural("", "v1", "nodes").unwrap();
        assert_eq!(
            object_key(pods, Some("default"), "a"),
            "/core/pods/default/a"
        );
        assert_eq!(object_key(nodes, None, "n1"), "/core/nodes/n1");
        assert_eq!(prefix(pods, Some("default")), "/core/pods/default/");
        assert_eq!(prefix(pods, None), "/core/pods/");
        let (rt, ns, name) = parse_key("/core/pods/default/a").unwrap();
        assert_eq!(
            (rt.kind, ns.as_deref(), name.as_str()),
            ("Pod", Some("default"), "a")
        );
        let (rt, ns, _) = parse_key("/core/nodes/n1").unwrap();
        assert_eq!((rt.kind, ns), ("Node", None));
    }
}
