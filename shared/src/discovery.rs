//! Discovery documents built from the resource table: `/version`, legacy `/api`, `/apis`,
//! `/api/v1` and `/apis/<g>/<v>`, and aggregated discovery (`apidiscovery.k8s.io` v2 and
//! v2beta1), plus the Accept-header negotiation between the two forms.

use serde_json::{Map, Value, json};

use crate::resource::{self, ResourceType};

/// Content type of an aggregated discovery answer in `apidiscovery.k8s.io/v2`; the response must
/// echo it or kubectl ignores the body.
pub const AGGREGATED_V2: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";
/// The same in `v2beta1`, the only form kubectl 1.27–1.29 accept.
pub const AGGREGATED_V2BETA1: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList";

/// The verbs of a resource that has them all, in discovery's (sorted) order.
pub const ALL_VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];
/// Namespaces cannot be deleted as a collection upstream.
const NAMESPACE_VERBS: &[&str] = &[
    "create", "delete", "get", "list", "patch", "update", "watch",
];
const SUBRESOURCE_RW: &[&str] = &["get", "patch", "update"];

/// A subresource served under a resource (`pods/eviction`).
pub(crate) struct Subresource {
    pub(crate) name: &'static str,
    /// Group and version of the response kind when it differs from the parent's.
    pub(crate) group_version: Option<(&'static str, &'static str)>,
    /// Response kind; `None` means the parent's kind.
    pub(crate) kind: Option<&'static str>,
    pub(crate) verbs: &'static [&'static str],
}

/// The subresources of a resource, sorted by name as upstream lists them.
pub(crate) fn subresources(r: &ResourceType) -> Vec<Subresource> {
    let mut out = Vec::new();
    if r.group.is_empty() && r.plural == "pods" {
        out.extend([
            Subresource {
                name: "binding",
                group_version: None,
                kind: Some("Binding"),
                verbs: &["create"],
            },
            Subresource {
                name: "attach",
                group_version: None,
                kind: Some("PodAttachOptions"),
                verbs: &["create", "get"],
            },
            Subresource {
                name: "ephemeralcontainers",
                group_version: None,
                kind: None,
                verbs: SUBRESOURCE_RW,
            },
            Subresource {
                name: "eviction",
                group_version: Some(("policy", "v1")),
                kind: Some("Eviction"),
                verbs: &["create"],
            },
            Subresource {
                name: "exec",
                group_version: None,
                kind: Some("PodExecOptions"),
                verbs: &["create", "get"],
            },
            Subresource {
                name: "log",
                group_version: None,
                kind: Some("Pod"),
                verbs: &["get"],
            },
            Subresource {
                name: "portforward",
                group_version: None,
                kind: Some("PodPortForwardOptions"),
                verbs: &["create", "get"],
            },
        ]);
    }
    if r.group.is_empty() && r.plural == "serviceaccounts" {
        out.push(Subresource {
            name: "token",
            group_version: Some(("authentication.k8s.io", "v1")),
            kind: Some("TokenRequest"),
            verbs: &["create"],
        });
    }
    if r.has_scale {
        out.push(Subresource {
            name: "scale",
            group_version: Some(("autoscaling", "v1")),
            kind: Some("Scale"),
            verbs: SUBRESOURCE_RW,
        });
    }
    // `kubectl certificate approve|deny` writes the Approved/Denied conditions through it.
    if r.group == "certificates.k8s.io" && r.plural == "certificatesigningrequests" {
        out.push(Subresource {
            name: "approval",
            group_version: None,
            kind: None,
            verbs: SUBRESOURCE_RW,
        });
    }
    if r.has_status {
        out.push(Subresource {
            name: "status",
            group_version: None,
            kind: None,
            verbs: SUBRESOURCE_RW,
        });
    }
    out.sort_by_key(|s| s.name);
    out
}

/// The verbs a resource type supports.
pub(crate) fn verbs(r: &ResourceType) -> &'static [&'static str] {
    if r.create_only {
        &["create"]
    } else if r.read_only {
        &["get", "list"]
    } else if r.group.is_empty() && r.plural == "namespaces" {
        NAMESPACE_VERBS
    } else {
        ALL_VERBS
    }
}

/// The resources of one group-version, sorted by plural as upstream lists them.
fn resources_of(group: &str, version: &str) -> Vec<&'static ResourceType> {
    let mut list: Vec<&ResourceType> = resource::all()
        .into_iter()
        .filter(|r| r.group == group && r.version == version)
        .collect();
    list.sort_by_key(|r| r.plural);
    list
}

fn group_version(group: &str, version: &str) -> String {
    if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    }
}

/// Inserts a string list unless it is empty (the wire field is `omitempty`).
fn insert_list(map: &mut Map<String, Value>, key: &str, items: &[&str]) {
    if !items.is_empty() {
        map.insert(key.to_string(), json!(items));
    }
}

/// `/version`. `major`/`minor` come from `git_version` (`v1.31.4+berth.0.1.0` → 1, 31); the
/// minor decides which kubectl the `/usr/bin/kubectl` dispatcher runs.
pub fn version_info(git_version: &str) -> Value {
    let numbers = git_version.trim_start_matches('v');
    let mut parts = numbers.split(['.', '+', '-']);
    let major = parts.next().unwrap_or("");
    let minor = parts.next().unwrap_or("");
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    };
    json!({
        "major": major,
        "minor": minor,
        "gitVersion": git_version,
        "gitCommit": "",
        "gitTreeState": "clean",
        "buildDate": "1970-01-01T00:00:00Z",
        "goVersion": "",
        "compiler": "gc",
        "platform": format!("linux/{arch}"),
    })
}

/// Legacy `/api`: the core group's versions.
pub fn api_versions() -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": ""}],
    })
}

/// One group as `/apis` lists it: its versions, the preferred one first.
fn group_entry(group: &str, versions: &[&str]) -> Value {
    let gvs: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": group_version(group, v), "version": v}))
        .collect();
    let preferred = gvs.first().cloned().unwrap_or(Value::Null);
    json!({"name": group, "versions": gvs, "preferredVersion": preferred})
}

/// Legacy `/apis`: every non-core group with its versions, the preferred one first.
pub fn api_group_list() -> Value {
    let groups: Vec<Value> = resource::groups()
        .into_iter()
        .filter(|(g, _)| !g.is_empty())
        .map(|(g, versions)| group_entry(g, &versions))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `/apis/<group>`: the group's `APIGroup` document. `None` for a group not served.
pub fn api_group(group: &str) -> Option<Value> {
    let (g, versions) = resource::groups()
        .into_iter()
        .find(|(g, _)| !g.is_empty() && *g == group)?;
    let mut doc = group_entry(g, &versions);
    if let Some(map) = doc.as_object_mut() {
        map.insert("kind".into(), json!("APIGroup"));
        map.insert("apiVersion".into(), json!("v1"));
    }
    Some(doc)
}

/// Legacy `/api/v1` or `/apis/<group>/<version>`: an APIResourceList with each resource and,
/// as `<plural>/<sub>` entries, its subresources. `None` for a group-version not served.
pub fn api_resource_list(group: &str, version: &str) -> Option<Value> {
    let list = resources_of(group, version);
    if list.is_empty() {
        return None;
    }
    let mut entries = Vec::new();
    for r in list {
        let mut e = Map::new();
        e.insert("name".into(), json!(r.plural));
        e.insert("singularName".into(), json!(r.singular));
        e.insert("namespaced".into(), json!(r.namespaced));
        e.insert("kind".into(), json!(r.kind));
        e.insert("verbs".into(), json!(verbs(r)));
        insert_list(&mut e, "shortNames", r.short_names);
        insert_list(&mut e, "categories", r.categories);
        entries.push(Value::Object(e));
        for s in subresources(r) {
            let mut e = Map::new();
            e.insert("name".into(), json!(format!("{}/{}", r.plural, s.name)));
            e.insert("singularName".into(), json!(""));
            e.insert("namespaced".into(), json!(r.namespaced));
            if let Some((g, v)) = s.group_version {
                e.insert("group".into(), json!(g));
                e.insert("version".into(), json!(v));
            }
            e.insert("kind".into(), json!(s.kind.unwrap_or(r.kind)));
            e.insert("verbs".into(), json!(s.verbs));
            entries.push(Value::Object(e));
        }
    }
    Some(json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version(group, version),
        "resources": entries,
    }))
}

fn aggregated_resource(r: &ResourceType) -> Value {
    let mut e = Map::new();
    e.insert("resource".into(), json!(r.plural));
    e.insert(
        "responseKind".into(),
        json!({"group": r.group, "version": r.version, "kind": r.kind}),
    );
    e.insert(
        "scope".into(),
        json!(if r.namespaced {
            "Namespaced"
        } else {
            "Cluster"
        }),
    );
    e.insert("singularResource".into(), json!(r.singular));
    e.insert("verbs".into(), json!(verbs(r)));
    insert_list(&mut e, "shortNames", r.short_names);
    insert_list(&mut e, "categories", r.categories);
    let subs: Vec<Value> = subresources(r)
        .into_iter()
        .map(|s| {
            let (g, v) = s.group_version.unwrap_or((r.group, r.version));
            json!({
                "subresource": s.name,
                "responseKind": {"group": g, "version": v, "kind": s.kind.unwrap_or(r.kind)},
                "verbs": s.verbs,
            })
        })
        .collect();
    if !subs.is_empty() {
        e.insert("subresources".into(), Value::Array(subs));
    }
    Value::Object(e)
}

/// Aggregated discovery (`APIGroupDiscoveryList`) for `/api` (`core`: the one unnamed group) or
/// `/apis` (every other group). `api_version` is `apidiscovery.k8s.io/v2` or `.../v2beta1`;
/// the two bodies are otherwise identical.
pub fn aggregated_discovery(core: bool, api_version: &str) -> Value {
    let items: Vec<Value> = resource::groups()
        .into_iter()
        .filter(|(g, _)| g.is_empty() == core)
        .map(|(g, versions)| {
            let versions: Vec<Value> = versions
                .into_iter()
                .map(|v| {
                    let resources: Vec<Value> = resources_of(g, v)
                        .into_iter()
                        .map(aggregated_resource)
                        .collect();
                    json!({"version": v, "resources": resources, "freshness": "Current"})
                })
                .collect();
            // The core group's name is empty and, as upstream, omitted.
            let mut metadata = Map::new();
            if !g.is_empty() {
                metadata.insert("name".into(), json!(g));
            }
            metadata.insert("creationTimestamp".into(), Value::Null);
            json!({"metadata": metadata, "versions": versions})
        })
        .collect();
    json!({
        "kind": "APIGroupDiscoveryList",
        "apiVersion": api_version,
        "metadata": {},
        "items": items,
    })
}

/// One entry of an Accept header.
struct MediaRange<'a> {
    type_: String,
    params: Vec<(String, &'a str)>,
    q: f32,
}

impl MediaRange<'_> {
    fn param(&self, key: &str) -> Option<&str> {
        self.params.iter().find(|(k, _)| k == key).map(|(_, v)| *v)
    }

    /// Wildcards rank after concrete types at equal quality, as upstream's negotiation sorts.
    fn specificity(&self) -> u8 {
        match self.type_.as_str() {
            "*/*" => 0,
            t if t.ends_with("/*") => 1,
            _ => 2,
        }
    }
}

fn parse_accept(accept: &str) -> Vec<MediaRange<'_>> {
    let mut ranges: Vec<MediaRange> = accept
        .split(',')
        .filter_map(|item| {
            let mut parts = item.split(';');
            let type_ = parts.next()?.trim().to_ascii_lowercase();
            if type_.is_empty() {
                return None;
            }
            let mut q = 1.0;
            let mut params = Vec::new();
            for p in parts {
                let Some((k, v)) = p.split_once('=') else {
                    continue;
                };
                let (k, v) = (k.trim().to_ascii_lowercase(), v.trim().trim_matches('"'));
                if k == "q" {
                    q = v.parse().unwrap_or(0.0);
                } else {
                    params.push((k, v));
                }
            }
            Some(MediaRange { type_, params, q })
        })
        .filter(|m| m.q > 0.0)
        .collect();
    // Stable: equal ranges keep the client's order.
    ranges.sort_by(|a, b| {
        b.q.total_cmp(&a.q)
            .then_with(|| b.specificity().cmp(&a.specificity()))
    });
    ranges
}

/// Which discovery form to answer for an Accept header: `Some(AGGREGATED_V2)` or
/// `Some(AGGREGATED_V2BETA1)` when an acceptable aggregated type comes first (in preference
/// order), `None` when a plain JSON type (or a wildcard) comes first or nothing matches, which
/// means the legacy APIVersions/APIGroupList form.
pub fn negotiate_aggregated(accept: &str) -> Option<&'static str> {
    for m in parse_accept(accept) {
        match m.param("as") {
            Some(as_) if as_.eq_ignore_ascii_case("APIGroupDiscoveryList") => {
                if m.type_ != "application/json" || m.param("g") != Some("apidiscovery.k8s.io") {
                    continue;
                }
                match m.param("v") {
                    Some("v2") => return Some(AGGREGATED_V2),
                    Some("v2beta1") => return Some(AGGREGATED_V2BETA1),
                    _ => continue,
                }
            }
            Some(_) => continue,
            None => {
                if matches!(
                    m.type_.as_str(),
                    "application/json" | "application/*" | "*/*"
                ) {
                    return None;
                }
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn find<'a>(list: &'a Value, key: &str, name: &str) -> &'a Value {
        list.as_array()
            .unwrap()
            .iter()
            .find(|e| e[key] == name)
            .unwrap_or_else(|| panic!("no {key}={name}"))
    }

    #[test]
    fn version_reports_major_and_minor_from_the_git_version() {
        let cases = [
            ("v1.31.4+berth.0.1.0", "1", "31"),
            ("v1.30.2+rust", "1", "30"),
            ("v1.33.0-alpha.1", "1", "33"),
        ];
        for (git, major, minor) in cases {
            let v = version_info(git);
            assert_eq!(
                (v["major"].as_str(), v["minor"].as_str()),
                (Some(major), Some(minor))
            );
            assert_eq!(v["gitVersion"], git);
        }
        let v = version_info("v1.31.4");
        for key in [
            "gitCommit",
            "gitTreeState",
            "buildDate",
            "goVersion",
            "compiler",
            "platform",
        ] {
            assert!(v[key].is_string(), "{key}");
        }
        assert_eq!(v["compiler"], "gc");
        assert!(v["platform"].as_str().unwrap().starts_with("linux/"));
    }

    #[test]
    fn legacy_roots_list_core_v1_and_the_named_groups() {
        assert_eq!(
            api_versions(),
            json!({"kind": "APIVersions", "versions": ["v1"],
                   "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": ""}]})
        );
        let groups = api_group_list();
        assert_eq!(groups["kind"], "APIGroupList");
        assert_eq!(
            find(&groups["groups"], "name", "apps"),
            &json!({"name": "apps", "versions": [{"groupVersion": "apps/v1", "version": "v1"}],
                    "preferredVersion": {"groupVersion": "apps/v1", "version": "v1"}})
        );
        let names: Vec<&str> = groups["groups"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            names,
            [
                "apiregistration.k8s.io",
                "apps",
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
                "metrics.k8s.io"
            ]
        );
    }

    #[test]
    fn core_v1_lists_the_pod_subresources_drain_and_exec_need() {
        let list = api_resource_list("", "v1").unwrap();
        assert_eq!(list["kind"], "APIResourceList");
        assert_eq!(list["groupVersion"], "v1");
        let r = &list["resources"];
        // drain looks for exactly this entry before evicting.
        assert_eq!(
            find(r, "name", "pods/eviction"),
            &json!({"name": "pods/eviction", "singularName": "", "namespaced": true,
                    "group": "policy", "version": "v1", "kind": "Eviction", "verbs": ["create"]})
        );
        assert_eq!(find(r, "name", "pods/binding")["kind"], "Binding");
        assert_eq!(find(r, "name", "pods/binding")["verbs"], json!(["create"]));
        assert_eq!(find(r, "name", "pods/log")["kind"], "Pod");
        assert_eq!(find(r, "name", "pods/log")["verbs"], json!(["get"]));
        assert_eq!(find(r, "name", "pods/exec")["kind"], "PodExecOptions");
        assert_eq!(
            find(r, "name", "pods/exec")["verbs"],
            json!(["create", "get"])
        );
        assert_eq!(
            find(r, "name", "pods/status")["verbs"],
            json!(["get", "patch", "update"])
        );
        assert!(find(r, "name", "pods/status").get("group").is_none());
        assert_eq!(
            find(r, "name", "pods"),
            &json!({"name": "pods", "singularName": "pod", "namespaced": true, "kind": "Pod",
                    "verbs": ALL_VERBS, "shortNames": ["po"], "categories": ["all"]})
        );
        let ns = find(r, "name", "namespaces");
        assert_eq!(ns["namespaced"], false);
        assert!(
            !ns["verbs"]
                .as_array()
                .unwrap()
                .contains(&json!("deletecollection"))
        );
        assert!(find(r, "name", "secrets").get("shortNames").is_none());
        let names: Vec<&str> = r
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["name"].as_str().unwrap())
            .collect();
        let mut sorted = names.clone();
        sorted.sort_unstable();
        assert_eq!(names, sorted);
    }

    #[test]
    fn scale_subresources_answer_autoscaling_v1_scale() {
        let list = api_resource_list("apps", "v1").unwrap();
        assert_eq!(list["groupVersion"], "apps/v1");
        assert_eq!(
            find(&list["resources"], "name", "deployments/scale"),
            &json!({"name": "deployments/scale", "singularName": "", "namespaced": true,
                    "group": "autoscaling", "version": "v1", "kind": "Scale",
                    "verbs": ["get", "patch", "update"]})
        );
        assert!(find(&list["resources"], "name", "statefulsets/scale").is_object());
        let core = api_resource_list("", "v1").unwrap();
        assert!(find(&core["resources"], "name", "replicationcontrollers/scale").is_object());
    }

    #[test]
    fn unserved_group_versions_have_no_resource_list() {
        assert!(api_resource_list("apps", "v1beta1").is_none());
        assert!(api_resource_list("", "v2").is_none());
    }

    #[test]
    fn autoscaling_is_served_in_v2_preferred_and_in_v1() {
        let groups = api_group_list();
        let autoscaling = find(&groups["groups"], "name", "autoscaling");
        assert_eq!(
            autoscaling["preferredVersion"],
            json!({"groupVersion": "autoscaling/v2", "version": "v2"})
        );
        assert_eq!(autoscaling["versions"][1]["version"], "v1");
        for v in ["v1", "v2"] {
            let list = api_resource_list("autoscaling", v).expect("served");
            assert_eq!(list["resources"][0]["name"], "horizontalpodautoscalers");
            assert_eq!(
                list["resources"][1]["name"],
                "horizontalpodautoscalers/status"
            );
        }
        let aggregated = aggregated_discovery(false, "apidiscovery.k8s.io/v2");
        let item = aggregated["items"]
            .as_array()
            .and_then(|items| {
                items
                    .iter()
                    .find(|i| i["metadata"]["name"] == "autoscaling")
            })
            .expect("autoscaling in aggregated discovery");
        assert_eq!(item["versions"][0]["version"], "v2");
        assert_eq!(item["versions"][1]["version"], "v1");
    }

    #[test]
    fn aggregated_apps_group_matches_what_kubectl_reads() {
        let list = aggregated_discovery(false, "apidiscovery.k8s.io/v2");
        assert_eq!(list["kind"], "APIGroupDiscoveryList");
        assert_eq!(list["apiVersion"], "apidiscovery.k8s.io/v2");
        let apps = list["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["metadata"]["name"] == "apps")
            .unwrap();
        assert_eq!(apps["versions"][0]["version"], "v1");
        assert_eq!(apps["versions"][0]["freshness"], "Current");
        let deploy = find(&apps["versions"][0]["resources"], "resource", "deployments");
        assert_eq!(
            deploy,
            &json!({"resource": "deployments",
                    "responseKind": {"group": "apps", "version": "v1", "kind": "Deployment"},
                    "scope": "Namespaced", "singularResource": "deployment",
                    "verbs": ALL_VERBS, "shortNames": ["deploy"], "categories": ["all"],
                    "subresources": [
                        {"subresource": "scale",
                         "responseKind": {"group": "autoscaling", "version": "v1", "kind": "Scale"},
                         "verbs": ["get", "patch", "update"]},
                        {"subresource": "status",
                         "responseKind": {"group": "apps", "version": "v1", "kind": "Deployment"},
                         "verbs": ["get", "patch", "update"]}]})
        );
        assert!(
            list["items"]
                .as_array()
                .unwrap()
                .iter()
                .all(|i| i["metadata"]["name"] != "")
        );
        let beta = aggregated_discovery(false, "apidiscovery.k8s.io/v2beta1");
        assert_eq!(beta["apiVersion"], "apidiscovery.k8s.io/v2beta1");
        assert_eq!(beta["items"], list["items"]);
    }

    #[test]
    fn aggregated_core_is_one_unnamed_group_with_cluster_and_namespaced_scopes() {
        let list = aggregated_discovery(true, "apidiscovery.k8s.io/v2");
        let items = list["items"].as_array().unwrap();
        assert_eq!(items.len(), 1);
        assert_eq!(
            items[0]["metadata"]
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or(""),
            ""
        );
        let resources = &items[0]["versions"][0]["resources"];
        assert_eq!(find(resources, "resource", "nodes")["scope"], "Cluster");
        let pods = find(resources, "resource", "pods");
        assert_eq!(pods["scope"], "Namespaced");
        assert_eq!(
            pods["responseKind"],
            json!({"group": "", "version": "v1", "kind": "Pod"})
        );
        let eviction = find(&pods["subresources"], "subresource", "eviction");
        assert_eq!(
            eviction["responseKind"],
            json!({"group": "policy", "version": "v1", "kind": "Eviction"})
        );
        assert!(
            find(resources, "resource", "events")
                .get("subresources")
                .is_none()
        );
    }

    #[test]
    fn negotiation_picks_the_first_acceptable_form() {
        let v2 = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";
        let beta = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList";
        let cases: Vec<(String, Option<&str>)> = vec![
            // kubectl 1.30+
            (format!("{v2},{beta},application/json"), Some(AGGREGATED_V2)),
            // kubectl 1.27-1.29
            (format!("{beta},application/json"), Some(AGGREGATED_V2BETA1)),
            ("application/json".into(), None),
            ("application/json, */*".into(), None),
            (String::new(), None),
            (format!("application/json,{v2}"), None),
            (format!("application/json;q=0.5, {v2}"), Some(AGGREGATED_V2)),
            (format!("*/*, {beta}"), Some(AGGREGATED_V2BETA1)),
            ("application/json;g=apidiscovery.k8s.io;v=v3;as=APIGroupDiscoveryList, application/json".into(), None),
            (format!("application/vnd.kubernetes.protobuf;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,{beta}"),
             Some(AGGREGATED_V2BETA1)),
            ("application/json; g=apidiscovery.k8s.io; as=APIGroupDiscoveryList; v=v2".into(), Some(AGGREGATED_V2)),
            (format!("{v2};q=0, application/json"), None),
        ];
        for (accept, want) in cases {
            assert_eq!(negotiate_aggregated(&accept), want, "{accept}");
        }
    }
}
