//! The parameter objects a binding hands its policy (upstream's `CollectParams`): none when the
//! policy has no `paramKind` or the binding no `paramRef`; else the object `paramRef.name`
//! names, or every object `paramRef.selector` selects, in `paramRef.namespace` or the
//! request's own namespace for a namespaced kind. Finding none is an error only under
//! `parameterNotFoundAction: Deny`; otherwise the binding validates nothing.

use berth_shared::k8s_openapi::api::admissionregistration::v1::ParamKind;
use berth_shared::resource::{self, ResourceType};
use berth_shared::selector::LabelSelector;
use serde_json::Value;

use super::compiled::ParamRef;

/// Where parameter objects are read from.
pub trait ParamSource {
    /// The object `name` of `rt` in `namespace`, if it exists.
    fn get(
        &self,
        rt: &ResourceType,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<Value>, String>;

    /// The objects of `rt` in `namespace` whose labels `selector` matches.
    fn select(
        &self,
        rt: &ResourceType,
        namespace: Option<&str>,
        selector: &LabelSelector,
    ) -> Result<Vec<Value>, String>;
}

/// The parameters to evaluate a policy with: once per object, `None` meaning `params` is null.
pub fn collect(
    kind: Option<&ParamKind>,
    param_ref: Option<&ParamRef>,
    request_namespace: &str,
    source: &dyn ParamSource,
) -> Result<Vec<Option<Value>>, String> {
    let (Some(kind), Some(param_ref)) = (kind, param_ref) else {
        return Ok(vec![None]);
    };
    let api_version = kind.api_version.as_deref().unwrap_or_default();
    let kind_name = kind.kind.as_deref().unwrap_or_default();
    let rt = resource::by_kind(api_version, kind_name).ok_or_else(|| {
        format!(
            "paramKind kind `&ParamKind{{APIVersion:{api_version},Kind:{kind_name},}}` not known"
        )
    })?;
    let namespace = if rt.namespaced {
        match param_ref.namespace.as_deref() {
            Some(ns) => Some(ns),
            None if !request_namespace.is_empty() => Some(request_namespace),
            None => {
                return Err(
                    "cannot use namespaced paramRef in policy binding that matches \
                     cluster-scoped resources"
                        .to_string(),
                );
            }
        }
    } else if param_ref.namespace.is_some() {
        return Err(
            "paramRef.namespace must not be provided for a cluster-scoped `paramKind`".to_string(),
        );
    } else {
        None
    };
    let found: Vec<Value> = match (&param_ref.name, &param_ref.selector) {
        (Some(_), Some(_)) => {
            return Err("paramRef.name and paramRef.selector are mutually exclusive".to_string());
        }
        (Some(name), None) => source.get(rt, namespace, name)?.into_iter().collect(),
        (None, Some(selector)) => {
            let selector = LabelSelector::from_k8s(selector).map_err(|e| e.to_string())?;
            source.select(rt, namespace, &selector)?
        }
        (None, None) => Vec::new(),
    };
    if found.is_empty() && param_ref.deny_when_missing {
        return Err(
            "no params found for policy binding with `Deny` parameterNotFoundAction".to_string(),
        );
    }
    Ok(found.into_iter().map(Some).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// ConfigMaps and ClusterRoles in memory.
    struct Objects(Vec<Value>);

    impl Objects {
        fn in_scope<'a>(
            &'a self,
            rt: &'a ResourceType,
            namespace: Option<&'a str>,
        ) -> impl Iterator<Item = &'a Value> + 'a {
            self.0.iter().filter(move |o| {
                o["kind"] == rt.kind
                    && o.pointer("/metadata/namespace").and_then(Value::as_str) == namespace
            })
        }
    }

    impl ParamSource for Objects {
        fn get(
            &self,
            rt: &ResourceType,
            namespace: Option<&str>,
            name: &str,
        ) -> Result<Option<Value>, String> {
            Ok(self
                .in_scope(rt, namespace)
                .find(|o| o["metadata"]["name"] == name)
                .cloned())
        }

        fn select(
            &self,
            rt: &ResourceType,
            namespace: Option<&str>,
            selector: &LabelSelector,
        ) -> Result<Vec<Value>, String> {
            Ok(self
                .in_scope(rt, namespace)
                .filter(|o| selector.matches(&super::super::matching::labels_of(Some(o))))
                .cloned()
                .collect())
        }
    }

    fn objects() -> Objects {
        Objects(vec![
            json!({"kind": "ConfigMap", "metadata": {"name": "limits", "namespace": "team",
                   "labels": {"policy": "replicas"}}}),
            json!({"kind": "ConfigMap", "metadata": {"name": "limits", "namespace": "shared"}}),
            json!({"kind": "ConfigMap", "metadata": {"name": "other", "namespace": "team",
                   "labels": {"policy": "replicas"}}}),
            json!({"kind": "ClusterRole", "metadata": {"name": "view"}}),
        ])
    }

    fn config_map() -> ParamKind {
        ParamKind {
            api_version: Some("v1".into()),
            kind: Some("ConfigMap".into()),
        }
    }

    fn by_name(name: &str, namespace: Option<&str>, deny: bool) -> ParamRef {
        ParamRef {
            name: Some(name.into()),
            namespace: namespace.map(String::from),
            selector: None,
            deny_when_missing: deny,
        }
    }

    fn names(params: &[Option<Value>]) -> Vec<String> {
        params
            .iter()
            .map(|p| match p {
                Some(o) => format!(
                    "{}/{}",
                    o.pointer("/metadata/namespace")
                        .and_then(Value::as_str)
                        .unwrap_or(""),
                    o["metadata"]["name"].as_str().unwrap_or("")
                ),
                None => "null".into(),
            })
            .collect()
    }

    #[test]
    fn params_come_from_the_named_object_in_the_request_namespace_or_the_ref_one() {
        let src = objects();
        let kind = config_map();
        let cases = [
            (
                by_name("limits", None, true),
                "team",
                Ok(vec!["team/limits"]),
            ),
            (
                by_name("limits", Some("shared"), true),
                "team",
                Ok(vec!["shared/limits"]),
            ),
            (
                by_name("missing", None, true),
                "team",
                Err("no params found for policy binding with `Deny` parameterNotFoundAction"),
            ),
            (by_name("missing", None, false), "team", Ok(vec![])),
            (
                by_name("limits", None, true),
                "",
                Err(
                    "cannot use namespaced paramRef in policy binding that matches cluster-scoped resources",
                ),
            ),
        ];
        for (r, ns, want) in cases {
            let got = collect(Some(&kind), Some(&r), ns, &src).map(|p| names(&p));
            let want = want
                .map(|v| v.iter().map(|s| s.to_string()).collect::<Vec<_>>())
                .map_err(String::from);
            assert_eq!(got, want, "{r:?} in {ns:?}");
        }
    }

    #[test]
    fn a_selector_collects_every_matching_object() {
        let r = ParamRef {
            name: None,
            namespace: None,
            selector: Some(
                serde_json::from_value(json!({"matchLabels": {"policy": "replicas"}})).unwrap(),
            ),
            deny_when_missing: false,
        };
        let got = collect(Some(&config_map()), Some(&r), "team", &objects()).unwrap();
        assert_eq!(names(&got), ["team/limits", "team/other"]);
    }

    #[test]
    fn without_param_kind_or_ref_the_policy_runs_once_with_null_params() {
        let src = objects();
        let r = by_name("limits", None, true);
        assert_eq!(collect(None, Some(&r), "team", &src), Ok(vec![None]));
        assert_eq!(
            collect(Some(&config_map()), None, "team", &src),
            Ok(vec![None])
        );
    }

    #[test]
    fn cluster_scoped_params_take_no_namespace() {
        let src = objects();
        let in_team = |kind: &ParamKind, r: ParamRef| collect(Some(kind), Some(&r), "team", &src);
        let kind = ParamKind {
            api_version: Some("rbac.authorization.k8s.io/v1".into()),
            kind: Some("ClusterRole".into()),
        };
        let got = in_team(&kind, by_name("view", None, true));
        assert_eq!(got.as_deref().map(names), Ok(vec!["/view".to_string()]));
        assert_eq!(
            in_team(&kind, by_name("view", Some("team"), true)),
            Err("paramRef.namespace must not be provided for a cluster-scoped `paramKind`".into())
        );
        let unknown = ParamKind {
            api_version: Some("example.com/v1".into()),
            kind: Some("Limits".into()),
        };
        let e = in_team(&unknown, by_name("x", None, true)).unwrap_err();
        assert!(e.contains("not known"), "{e}");
    }
}
