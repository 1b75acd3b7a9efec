//! Planner: pure, no I/O.
//!
//! Which Ingresses are Berth's: the one rule the agents' proxy (which serves them) and the
//! controller's Ingress status controller (which lists the serving nodes in their status)
//! both follow, with Berth's IngressClass names and the Node annotation between the two.

use k8s_openapi::api::networking::v1::{Ingress, IngressClass};

/// The IngressClass the controller makes at start, and the class name the agents serve.
pub const CLASS: &str = "berth";
/// The `spec.controller` of Berth's IngressClass.
pub const CONTROLLER: &str = "berth.io/ingress";
/// Marks the cluster's default IngressClass.
pub const DEFAULT_CLASS_ANNOTATION: &str = "ingressclass.kubernetes.io/is-default-class";
/// The class annotation of Ingresses from before `spec.ingressClassName` (deprecated).
pub const LEGACY_CLASS_ANNOTATION: &str = "kubernetes.io/ingress.class";
/// The Node annotation carrying the ports the node's ingress proxy serves (`80,443`; `none`
/// when both are off): the agent writes it when it registers its Node; the controller's Ingress
/// status controller reads it to list the serving Ready nodes in each Ingress's
/// `status.loadBalancer.ingress`.
pub const PORTS_ANNOTATION: &str = "ingress.berth.io/ports";

/// Whether Berth serves `ing`: its `spec.ingressClassName` names a class of Berth's controller
/// (or `berth` while no such class exists yet), or it has no class name and its deprecated
/// `kubernetes.io/ingress.class` annotation says `berth`, or it has neither and a default class
/// (annotated `ingressclass.kubernetes.io/is-default-class: "true"`) is Berth's.
pub fn is_ours(ing: &Ingress, classes: &[IngressClass]) -> bool {
    if let Some(name) = ing
        .spec
        .as_ref()
        .and_then(|s| s.ingress_class_name.as_deref())
    {
        return classes
            .iter()
            .find(|c| c.metadata.name.as_deref() == Some(name))
            .map_or(name == CLASS, is_berths);
    }
    if let Some(annotated) = ing
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(LEGACY_CLASS_ANNOTATION))
    {
        return annotated == CLASS;
    }
    classes.iter().any(|c| {
        c.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(DEFAULT_CLASS_ANNOTATION))
            .is_some_and(|v| v == "true")
            && is_berths(c)
    })
}

/// Whether `class` names Berth's controller.
fn is_berths(class: &IngressClass) -> bool {
    class.spec.as_ref().and_then(|s| s.controller.as_deref()) == Some(CONTROLLER)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ingress(class_name: Option<&str>, legacy: Option<&str>) -> Ingress {
        let mut i = json!({"metadata": {"namespace": "default", "name": "i"}, "spec": {}});
        if let Some(name) = class_name {
            i["spec"]["ingressClassName"] = json!(name);
        }
        if let Some(value) = legacy {
            i["metadata"]["annotations"] = json!({LEGACY_CLASS_ANNOTATION: value});
        }
        serde_json::from_value(i).unwrap()
    }

    fn class(name: &str, controller: &str, default: bool) -> IngressClass {
        let mut c = json!({"metadata": {"name": name}, "spec": {"controller": controller}});
        if default {
            c["metadata"]["annotations"] = json!({DEFAULT_CLASS_ANNOTATION: "true"});
        }
        serde_json::from_value(c).unwrap()
    }

    #[test]
    fn only_ingresses_of_berths_class_are_ours() {
        let ours_default = vec![
            class(CLASS, CONTROLLER, true),
            class("nginx", "k8s.io/ingress-nginx", false),
        ];
        let theirs_default = vec![
            class(CLASS, CONTROLLER, false),
            class("nginx", "k8s.io/ingress-nginx", true),
        ];
        let renamed = vec![class("edge", CONTROLLER, false)];
        let impostor = vec![class(CLASS, "k8s.io/ingress-nginx", false)];
        let mut annotated_false = class(CLASS, CONTROLLER, false);
        annotated_false.metadata.annotations =
            Some([(DEFAULT_CLASS_ANNOTATION.to_string(), "false".to_string())].into());
        let not_default = vec![annotated_false];
        let cases: Vec<(&str, Ingress, &[IngressClass], bool)> = vec![
            (
                "named berth",
                ingress(Some("berth"), None),
                &ours_default,
                true,
            ),
            (
                "named nginx",
                ingress(Some("nginx"), None),
                &ours_default,
                false,
            ),
            (
                "unset, berth is default",
                ingress(None, None),
                &ours_default,
                true,
            ),
            (
                "unset, nginx is default",
                ingress(None, None),
                &theirs_default,
                false,
            ),
            ("unset, no classes", ingress(None, None), &[], false),
            (
                "unset, ours annotated not default",
                ingress(None, None),
                &not_default,
                false,
            ),
            (
                "berth before its class exists",
                ingress(Some("berth"), None),
                &[],
                true,
            ),
            (
                "a class of our controller by another name",
                ingress(Some("edge"), None),
                &renamed,
                true,
            ),
            (
                "a class named berth of another controller",
                ingress(Some("berth"), None),
                &impostor,
                false,
            ),
            (
                "legacy annotation berth",
                ingress(None, Some("berth")),
                &theirs_default,
                true,
            ),
            (
                "legacy annotation nginx",
                ingress(None, Some("nginx")),
                &ours_default,
                false,
            ),
            (
                "the class name wins over the legacy annotation",
                ingress(Some("nginx"), Some("berth")),
                &ours_default,
                false,
            ),
        ];
        for (what, ing, classes, want) in cases {
            assert_eq!(is_ours(&ing, classes), want, "{what}");
        }
    }
}
