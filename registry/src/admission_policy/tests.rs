//! Dispatch over installed policies and bindings, with namespaces and parameters in memory:
//! the acceptance policy (at most 5 replicas in `env=test` namespaces) under each action, the
//! failure policies, params, and the messages upstream answers with.

use std::path::Path;
use std::time::Instant;

use serde_json::{Value, json};

use super::Policies;
use super::compiled::Reason;
use super::dispatch::{self, Denial, Lookup, Request, Verdict};
use super::matching::{Attributes, Operation, labels_of};
use super::params::ParamSource;
use super::request::Requester;
use crate::{DeleteOptions, Registry, RegistryError, WriteOptions};
use berth_shared::resource::ResourceType;
use berth_shared::selector::LabelSelector;

/// Namespaces and ConfigMaps in memory.
#[derive(Default)]
struct World {
    namespaces: Vec<Value>,
    config_maps: Vec<Value>,
}

impl World {
    fn new() -> World {
        World {
            namespaces: vec![
                json!({"metadata": {"name": "test-ns", "labels": {"env": "test"},
                        "managedFields": [{"manager": "kubectl"}]}}),
                json!({"metadata": {"name": "prod-ns", "labels": {"env": "prod"}}}),
            ],
            config_maps: vec![
                json!({"metadata": {"name": "limits", "namespace": "test-ns"},
                                     "data": {"max": "2"}}),
            ],
        }
    }
}

impl ParamSource for World {
    fn get(&self, _: &ResourceType, ns: Option<&str>, name: &str) -> Result<Option<Value>, String> {
        Ok(self
            .config_maps
            .iter()
            .find(|c| c["metadata"]["name"] == name && c["metadata"]["namespace"].as_str() == ns)
            .cloned())
    }

    fn select(
        &self,
        _: &ResourceType,
        ns: Option<&str>,
        selector: &LabelSelector,
    ) -> Result<Vec<Value>, String> {
        Ok(self
            .config_maps
            .iter()
            .filter(|c| c["metadata"]["namespace"].as_str() == ns)
            .filter(|c| selector.matches(&labels_of(Some(c))))
            .cloned()
            .collect())
    }
}

impl Lookup for World {
    fn namespace(&self, name: &str) -> Result<Value, String> {
        self.namespaces
            .iter()
            .find(|n| n["metadata"]["name"] == name)
            .cloned()
            .ok_or_else(|| format!("namespaces \"{name}\" not found"))
    }
}

fn replicas_policy(extra: Value) -> Value {
    let mut p = json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": "max-replicas", "uid": "p1", "resourceVersion": "1"},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"],
                "operations": ["CREATE", "UPDATE"], "resources": ["deployments"]}]},
            "validations": [{"expression": "object.spec.replicas <= 5",
                             "message": "replicas must be at most 5"}]
        }
    });
    if let (Some(spec), Some(extra)) = (p["spec"].as_object_mut(), extra.as_object()) {
        spec.extend(extra.clone());
    }
    p
}

fn binding(name: &str, actions: &[&str], extra: Value) -> Value {
    let mut b = json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name, "uid": format!("b-{name}"), "resourceVersion": "1"},
        "spec": {"policyName": "max-replicas", "validationActions": actions,
                 "matchResources": {"namespaceSelector": {"matchLabels": {"env": "test"}}}}
    });
    if let (Some(spec), Some(extra)) = (b["spec"].as_object_mut(), extra.as_object()) {
        spec.extend(extra.clone());
    }
    b
}

fn deployment(replicas: i64) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
           "metadata": {"name": "web", "labels": {"app": "web"}},
           "spec": {"replicas": replicas}})
}

/// A controller's request with `attributes`.
fn request(attributes: Attributes<'_>) -> Request<'_> {
    Request {
        attributes,
        equivalents: &[],
        user: Requester::Controller,
        dry_run: false,
    }
}

fn admit(policies: &Policies, ns: &str, obj: &Value, op: Operation) -> Verdict {
    let hooks = policies.hooks();
    let req = request(Attributes::deployment_write(ns, op, obj, None));
    dispatch::dispatch(&hooks, &req, &World::new())
}

fn installed(policies: &[Value], bindings: &[Value]) -> Policies {
    let p = Policies::default();
    p.install(policies, bindings);
    p
}

#[test]
fn a_deny_binding_refuses_in_matching_namespaces_only() {
    let p = installed(
        &[replicas_policy(json!({}))],
        &[binding("test-only", &["Deny"], json!({}))],
    );
    let v = admit(&p, "test-ns", &deployment(6), Operation::Create);
    let denial = v.denial.expect("denied");
    assert_eq!(
        denial.text(),
        "ValidatingAdmissionPolicy 'max-replicas' with binding 'test-only' denied request: replicas must be at most 5"
    );
    assert_eq!(denial.reason, Reason::Invalid);
    assert_eq!(denial.reason.code(), 422);
    assert_eq!(
        admit(&p, "prod-ns", &deployment(6), Operation::Create),
        Verdict::default()
    );
    assert_eq!(
        admit(&p, "test-ns", &deployment(5), Operation::Create),
        Verdict::default()
    );
    // The rule names CREATE and UPDATE only.
    assert_eq!(
        admit(&p, "test-ns", &deployment(6), Operation::Delete),
        Verdict::default()
    );
}

#[test]
fn a_warn_binding_lets_the_write_through_with_upstream_warning() {
    let p = installed(
        &[replicas_policy(json!({}))],
        &[binding("warn", &["Warn", "Audit"], json!({}))],
    );
    let v = admit(&p, "test-ns", &deployment(6), Operation::Create);
    assert_eq!(v.denial, None);
    assert_eq!(
        v.warnings,
        [
            "Validation failed for ValidatingAdmissionPolicy 'max-replicas' with binding 'warn': replicas must be at most 5"
        ]
    );
    assert_eq!(v.audit.len(), 1);
    assert_eq!(
        v.audit[0].0,
        "validation.policy.admission.k8s.io/validation_failure"
    );
    let record: Value = serde_json::from_str(&v.audit[0].1).unwrap();
    assert_eq!(record[0]["validationActions"], json!(["Warn", "Audit"]));
    assert_eq!(record[0]["expressionIndex"], 0);
}

#[test]
fn a_policy_without_bindings_or_with_another_name_is_not_in_force() {
    let p = installed(&[replicas_policy(json!({}))], &[]);
    assert!(p.hooks().is_empty());
    let mut other = binding("b", &["Deny"], json!({}));
    other["spec"]["policyName"] = json!("something-else");
    let p = installed(&[replicas_policy(json!({}))], &[other]);
    assert!(p.hooks().is_empty());
}

#[test]
fn a_removed_binding_stops_applying_and_unchanged_objects_are_not_recompiled() {
    let policy = replicas_policy(json!({}));
    let b = binding("test-only", &["Deny"], json!({}));
    let p = installed(std::slice::from_ref(&policy), &[b]);
    let first = p.hooks()[0].policy.clone();
    assert!(
        admit(&p, "test-ns", &deployment(6), Operation::Create)
            .denial
            .is_some()
    );
    p.install(&[policy], &[]);
    assert!(
        admit(&p, "test-ns", &deployment(6), Operation::Create)
            .denial
            .is_none()
    );
    p.install(
        &[replicas_policy(json!({}))],
        &[binding("again", &["Deny"], json!({}))],
    );
    assert!(std::sync::Arc::ptr_eq(&first, &p.hooks()[0].policy));
}

#[test]
fn params_from_a_config_map_set_the_limit() {
    let policy = replicas_policy(json!({
        "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
        "validations": [{"expression": "object.spec.replicas <= int(params.data.max)",
                         "messageExpression": "'at most ' + params.data.max + ' replicas'",
                         "reason": "Forbidden"}]
    }));
    let with_ref = |name: &str, action: &str| {
        binding(
            "params",
            &["Deny"],
            json!({"paramRef": {"name": name, "parameterNotFoundAction": action}}),
        )
    };
    let p = installed(std::slice::from_ref(&policy), &[with_ref("limits", "Deny")]);
    let denial = admit(&p, "test-ns", &deployment(3), Operation::Create)
        .denial
        .expect("denied");
    assert_eq!(denial.message, "at most 2 replicas");
    assert_eq!(denial.reason.code(), 403);
    assert!(
        admit(&p, "test-ns", &deployment(2), Operation::Create)
            .denial
            .is_none()
    );

    let p = installed(
        std::slice::from_ref(&policy),
        &[with_ref("missing", "Deny")],
    );
    assert_eq!(
        admit(&p, "test-ns", &deployment(1), Operation::Create).denial,
        Some(Denial {
            policy: "max-replicas".into(),
            binding: Some("params".into()),
            message: "failed to configure binding: no params found for policy binding with `Deny` parameterNotFoundAction".into(),
            reason: Reason::Invalid,
        })
    );
    let p = installed(&[policy], &[with_ref("missing", "Allow")]);
    assert_eq!(
        admit(&p, "test-ns", &deployment(9), Operation::Create),
        Verdict::default()
    );
}

#[test]
fn a_missing_namespace_is_a_configuration_error_under_the_failure_policy() {
    for (failure, denied) in [("Fail", true), ("Ignore", false)] {
        let p = installed(
            &[replicas_policy(json!({"failurePolicy": failure}))],
            &[binding("b", &["Deny"], json!({}))],
        );
        let v = admit(&p, "gone", &deployment(1), Operation::Create);
        assert_eq!(v.denial.is_some(), denied, "{failure}");
        if let Some(d) = v.denial {
            assert_eq!(
                d.text(),
                "ValidatingAdmissionPolicy 'max-replicas' with binding 'b' denied request: failed to configure binding: namespaces \"gone\" not found"
            );
        }
    }
}

#[test]
fn a_stored_policy_that_does_not_compile_fails_closed_or_open() {
    for (failure, denied) in [("Fail", true), ("Ignore", false)] {
        let broken = replicas_policy(json!({"failurePolicy": failure,
            "validations": [{"expression": "object.spec.("}]}));
        let p = installed(&[broken], &[binding("b", &["Deny"], json!({}))]);
        let v = admit(&p, "test-ns", &deployment(1), Operation::Create);
        assert_eq!(v.denial.is_some(), denied, "{failure}");
        if let Some(d) = v.denial {
            assert!(
                d.text().starts_with(
                    "ValidatingAdmissionPolicy 'max-replicas' denied request: failed to configure policy: compilation failed: "
                ),
                "{}",
                d.text()
            );
        }
    }
}

#[test]
fn the_namespace_object_and_request_are_visible_to_expressions() {
    let policy = replicas_policy(json!({"validations": [
        {"expression": "namespaceObject.metadata.labels.env == 'prod'",
         "messageExpression": "request.operation + ' ' + request.namespace + '/' + request.name + ' in ' + namespaceObject.metadata.labels.env"},
        {"expression": "!has(namespaceObject.metadata.managedFields)"},
    ]}));
    let p = installed(&[policy], &[binding("b", &["Warn"], json!({}))]);
    let v = admit(&p, "test-ns", &deployment(1), Operation::Create);
    assert_eq!(
        v.warnings,
        [
            "Validation failed for ValidatingAdmissionPolicy 'max-replicas' with binding 'b': CREATE test-ns/web in test"
        ]
    );
}

#[test]
fn audit_annotations_are_recorded_under_the_policy_name() {
    let policy = replicas_policy(json!({
        "validations": [],
        "auditAnnotations": [{"key": "high-replicas",
            "valueExpression": "object.spec.replicas > 3 ? 'replicas: ' + string(object.spec.replicas) : null"}]
    }));
    let p = installed(
        &[policy],
        &[
            binding("a", &["Audit"], json!({})),
            binding("b", &["Audit"], json!({})),
        ],
    );
    let v = admit(&p, "test-ns", &deployment(4), Operation::Create);
    assert_eq!(v.denial, None);
    assert_eq!(
        v.audit,
        [(
            "max-replicas/high-replicas".to_string(),
            "replicas: 4".to_string()
        )]
    );
    assert!(
        admit(&p, "test-ns", &deployment(2), Operation::Create)
            .audit
            .is_empty()
    );
}

#[test]
fn policies_never_apply_to_policy_objects() {
    let policy = replicas_policy(json!({"matchConstraints": {"resourceRules": [
        {"apiGroups": ["*"], "apiVersions": ["*"], "operations": ["*"], "resources": ["*"]}]},
        "validations": [{"expression": "false"}]}));
    let b = json!({"metadata": {"name": "all"},
        "spec": {"policyName": "max-replicas", "validationActions": ["Deny"]}});
    let p = installed(&[policy], &[b]);
    let obj = json!({"metadata": {"name": "x"}});
    let hooks = p.hooks();
    for resource in [
        "validatingadmissionpolicies",
        "validatingadmissionpolicybindings",
    ] {
        let req = request(Attributes {
            group: "admissionregistration.k8s.io",
            version: "v1",
            resource,
            subresource: "",
            kind: "ValidatingAdmissionPolicy",
            namespace: "",
            name: "x",
            operation: Operation::Delete,
            object: None,
            old_object: Some(&obj),
        });
        assert_eq!(
            dispatch::dispatch(&hooks, &req, &World::new()),
            Verdict::default()
        );
    }
    assert!(
        admit(&p, "prod-ns", &deployment(1), Operation::Delete)
            .denial
            .is_some()
    );
}

/// A Deployment as stored after defaulting, with the managed fields kubectl's apply leaves:
/// what a policy sees of a real write (about 3 KB of JSON).
fn stored_deployment(replicas: i64) -> Value {
    let container = json!({"name": "web", "image": "nginx:1.14.2", "imagePullPolicy": "IfNotPresent",
        "ports": [{"containerPort": 80, "protocol": "TCP"}],
        "resources": {"limits": {"cpu": "500m", "memory": "128Mi"}, "requests": {"cpu": "250m", "memory": "64Mi"}},
        "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"});
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "test-ns", "uid": "5b0c7e4e-1f1c-4a55-9f0e-2a7c1d9e8f10",
            "resourceVersion": "1234", "generation": 1, "creationTimestamp": "2026-11-29T22:00:00Z",
            "labels": {"app": "web", "tier": "frontend"},
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\"}"},
            "managedFields": [{"manager": "kubectl-client-side-apply", "operation": "Update",
                "apiVersion": "apps/v1", "time": "2026-11-29T22:00:00Z", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:spec": {"f:replicas": {}, "f:selector": {}, "f:template": {"f:spec": {"f:containers": {"k:{\"name\":\"web\"}": {".": {}, "f:image": {}, "f:name": {}}}}}}}}]},
        "spec": {"replicas": replicas, "revisionHistoryLimit": 10, "progressDeadlineSeconds": 600,
            "selector": {"matchLabels": {"app": "web"}},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}},
            "template": {"metadata": {"labels": {"app": "web", "tier": "frontend"}},
                "spec": {"containers": [container.clone(), container], "restartPolicy": "Always",
                    "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
                    "schedulerName": "default-scheduler", "securityContext": {}}}},
        "status": {}})
}

/// The README's figure: what a policy of five rules adds to one admission of a realistic
/// Deployment, the evaluation alone (matching, the namespace read from memory, the `request`
/// value, binding the objects, five expressions), for a create and for an update (which binds
/// the old object too). Printed, not asserted beyond a loose bound a slow machine still meets.
#[test]
fn five_rule_policy_admission_cost() {
    let policy = replicas_policy(json!({"validations": [
        {"expression": "object.spec.replicas <= 5"},
        {"expression": "object.metadata.name.size() < 64"},
        {"expression": "has(object.metadata.labels) && 'app' in object.metadata.labels"},
        {"expression": "object.spec.template.spec.containers.all(c, has(c.resources.limits))"},
        {"expression": "request.operation != 'UPDATE' || object.spec.selector == oldObject.spec.selector"},
    ]}));
    let p = installed(&[policy], &[binding("b", &["Deny"], json!({}))]);
    let hooks = p.hooks();
    let (obj, old) = (stored_deployment(3), stored_deployment(2));
    let world = World::new();
    for (label, old_object) in [("create", None), ("update", Some(&old))] {
        let operation = if old_object.is_some() {
            Operation::Update
        } else {
            Operation::Create
        };
        let req = request(Attributes::deployment_write(
            "test-ns", operation, &obj, old_object,
        ));
        // Warm up the CEL environment and the allocator.
        for _ in 0..50 {
            assert_eq!(dispatch::dispatch(&hooks, &req, &world), Verdict::default());
        }
        let rounds = 2000;
        let start = Instant::now();
        for _ in 0..rounds {
            assert_eq!(dispatch::dispatch(&hooks, &req, &world), Verdict::default());
        }
        let per = start.elapsed() / rounds;
        println!("admission policy with 5 rules, {label} of a Deployment: {per:?} per request");
        assert!(per.as_millis() < 20, "{per:?}");
    }
}

/// A registry over `dir` where `policy` is bound everywhere to deny, by binding `deny`; and
/// the ConfigMap resource the write-path tests write.
fn registry_denying_by(dir: &Path, policy: &Value) -> (Registry, &'static ResourceType) {
    let registry = crate::testing::registry(dir);
    let name = policy["metadata"]["name"].as_str().unwrap_or_default();
    registry.admission_policies().install(
        std::slice::from_ref(policy),
        &[configmap_binding("deny", name, "Deny")],
    );
    let configmaps = berth_shared::resource::by_plural("", "v1", "configmaps").expect("cm");
    (registry, configmaps)
}

/// A policy over ConfigMaps for `operation` (`*` for all), failing closed, with `validations`.
fn configmap_policy(name: &str, operation: &str, validations: Value) -> Value {
    json!({"metadata": {"name": name, "uid": "p", "resourceVersion": "1"},
        "spec": {"failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                "operations": [operation], "resources": ["configmaps"]}]},
            "validations": validations}})
}

/// A binding of `policy` everywhere with the one validation action `action`.
fn configmap_binding(name: &str, policy: &str, action: &str) -> Value {
    json!({"metadata": {"name": name, "uid": name, "resourceVersion": "1"},
        "spec": {"policyName": policy, "validationActions": [action]}})
}

/// The registry's create, update and delete paths consult the policies it was given.
#[test]
fn the_write_path_consults_the_installed_policies() {
    use crate::Part;
    let policy = configmap_policy(
        "small-config",
        "*",
        json!([
            {"expression": "request.operation == 'DELETE' || object.data.size() <= 1",
             "message": "one key at most"},
            {"expression": "request.operation != 'DELETE' || oldObject.metadata.name != 'keep'",
             "messageExpression": "'cannot delete ' + oldObject.metadata.name", "reason": "Forbidden"}]),
    );
    let dir = tempfile::tempdir().expect("dir");
    let (registry, configmaps) = registry_denying_by(dir.path(), &policy);
    let cm = |name: &str, keys: &[&str]| {
        let data: serde_json::Map<String, Value> =
            keys.iter().map(|k| (k.to_string(), json!("v"))).collect();
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data})
    };
    let opts = WriteOptions::default();
    let e = registry
        .create(configmaps, Some("default"), cm("big", &["a", "b"]), &opts)
        .unwrap_err();
    let RegistryError::PolicyDenied { code, reason, .. } = &e else {
        panic!("{e:?}")
    };
    assert_eq!((*code, *reason), (422, "Invalid"));
    assert_eq!(
        e.to_string(),
        "configmaps \"big\" is forbidden: ValidatingAdmissionPolicy 'small-config' with binding 'deny' denied request: one key at most"
    );
    let dry = WriteOptions {
        dry_run: true,
        ..WriteOptions::default()
    };
    assert!(
        registry
            .create(configmaps, Some("default"), cm("big", &["a", "b"]), &dry)
            .is_err()
    );
    registry
        .create(configmaps, Some("default"), cm("keep", &["a"]), &opts)
        .expect("a small one is admitted");
    let e = registry
        .update(
            configmaps,
            Some("default"),
            "keep",
            cm("keep", &["a", "b"]),
            Part::Main,
            &opts,
        )
        .unwrap_err();
    assert!(matches!(e, RegistryError::PolicyDenied { .. }), "{e:?}");
    let e = registry
        .delete(
            configmaps,
            Some("default"),
            "keep",
            &DeleteOptions::default(),
        )
        .unwrap_err();
    assert!(
        matches!(&e, RegistryError::PolicyDenied { code: 403, detail, .. } if detail.ends_with("cannot delete keep")),
        "{e:?}"
    );

    // As a warning the same write goes through and says why.
    let warn = configmap_binding("warn", "small-config", "Warn");
    registry.admission_policies().install(&[policy], &[warn]);
    registry
        .create(configmaps, Some("default"), cm("big", &["a", "b"]), &opts)
        .expect("warned, not refused");
    assert_eq!(
        opts.warnings.take(),
        [
            "Validation failed for ValidatingAdmissionPolicy 'small-config' with binding 'warn': one key at most"
        ]
    );
    registry
        .delete(
            configmaps,
            Some("default"),
            "keep",
            &DeleteOptions::default(),
        )
        .expect("deletes only warn");
}

/// A delete is judged with its requester, as upstream's `request.userInfo`.
#[test]
fn deletes_see_who_deletes() {
    use crate::identity::Identity;
    let policy = configmap_policy(
        "admins-delete",
        "DELETE",
        json!([{"expression": "'admins' in request.userInfo.groups",
            "messageExpression": "request.userInfo.username + ' may not delete ' + oldObject.metadata.name"}]),
    );
    let dir = tempfile::tempdir().expect("dir");
    let (registry, configmaps) = registry_denying_by(dir.path(), &policy);
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"}});
    registry
        .create(configmaps, Some("default"), cm, &WriteOptions::default())
        .expect("create");
    let opts = DeleteOptions::default();
    let alice = Identity::new("alice", vec!["dev".into()]);
    let e = registry
        .delete_by(configmaps, Some("default"), "cfg", &opts, Some(&alice))
        .unwrap_err();
    assert!(
        matches!(&e, RegistryError::PolicyDenied { detail, .. } if detail.ends_with("alice may not delete cfg")),
        "{e:?}"
    );
    let admin = Identity::new("root", vec!["admins".into()]);
    registry
        .delete_by(configmaps, Some("default"), "cfg", &opts, Some(&admin))
        .expect("an admin deletes");
}
