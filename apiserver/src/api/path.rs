//! Parsing of resource request paths: `/api/v1/...` and `/apis/<group>/<version>/...` into the
//! resource type, namespace, name and subresource.

use berth_shared::resource::{self, ResourceType};

/// A request for a resource collection or object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourcePath {
    pub rt: &'static ResourceType,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub subresource: Option<String>,
}

/// What a path names: a resource request, or a group-version discovery document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApiPath {
    Resource(ResourcePath),
    GroupVersion {
        group: String,
        version: String,
    },
    /// `/apis/<group>`: the group's discovery document.
    Group(String),
    Unknown,
}

pub fn parse(path: &str) -> ApiPath {
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, version, rest) = match segs.as_slice() {
        ["apis", g] => return ApiPath::Group(g.to_string()),
        ["api", v, rest @ ..] => ("", *v, rest),
        ["apis", g, v, rest @ ..] => (*g, *v, rest),
        _ => return ApiPath::Unknown,
    };
    if rest.is_empty() {
        return ApiPath::GroupVersion {
            group: group.to_string(),
            version: version.to_string(),
        };
    }
    let lookup = |plural: &str| resource::by_plural(group, version, plural);
    let resource = |rt: Option<&'static ResourceType>,
                    ns: Option<&str>,
                    name: Option<&str>,
                    sub: Option<&str>| {
        match rt {
            Some(rt) => ApiPath::Resource(ResourcePath {
                rt,
                namespace: ns.map(String::from),
                name: name.map(String::from),
                subresource: sub.map(String::from),
            }),
            None => ApiPath::Unknown,
        }
    };
    match rest {
        // /namespaces/{ns}/{plural}[/{name}[/{sub}]] for namespaced kinds
        ["namespaces", ns, plural, tail @ ..] if lookup(plural).is_some_and(|rt| rt.namespaced) => {
            match tail {
                [] => resource(lookup(plural), Some(ns), None, None),
                [name] => resource(lookup(plural), Some(ns), Some(name), None),
                [name, sub] => resource(lookup(plural), Some(ns), Some(name), Some(sub)),
                _ => ApiPath::Unknown,
            }
        }
        [plural] => resource(lookup(plural), None, None, None),
        [plural, name] => resource(lookup(plural), None, Some(name), None),
        [plural, name, sub] => resource(lookup(plural), None, Some(name), Some(sub)),
        _ => ApiPath::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn res(path: &str) -> ResourcePath {
        match parse(path) {
            ApiPath::Resource(r) => r,
            other => panic!("{path}: {other:?}"),
        }
    }

    #[test]
    fn namespaced_collection_object_and_subresource_paths_parse() {
        let r = res("/apis/apps/v1/namespaces/default/deployments/web/scale");
        assert_eq!(r.rt.kind, "Deployment");
        assert_eq!(r.namespace.as_deref(), Some("default"));
        assert_eq!(r.name.as_deref(), Some("web"));
        assert_eq!(r.subresource.as_deref(), Some("scale"));
        let r = res("/api/v1/pods");
        assert_eq!((r.rt.kind, r.namespace, r.name), ("Pod", None, None));
    }

    #[test]
    fn a_namespace_object_and_its_subresources_are_not_namespaced_paths() {
        let r = res("/api/v1/namespaces/default");
        assert_eq!(
            (r.rt.kind, r.name.as_deref()),
            ("Namespace", Some("default"))
        );
        let r = res("/api/v1/namespaces/default/status");
        assert_eq!(r.subresource.as_deref(), Some("status"));
        let r = res("/api/v1/namespaces/kube-system/pods");
        assert_eq!(
            (r.rt.kind, r.namespace.as_deref()),
            ("Pod", Some("kube-system"))
        );
    }

    #[test]
    fn unknown_resources_and_group_versions_are_told_apart() {
        assert_eq!(parse("/apis/apps/v1/widgets"), ApiPath::Unknown);
        assert_eq!(parse("/apis/apps"), ApiPath::Group("apps".into()));
        assert_eq!(
            parse("/apis/apps/v1"),
            ApiPath::GroupVersion {
                group: "apps".into(),
                version: "v1".into()
            }
        );
    }
}
