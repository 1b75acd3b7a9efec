//! The dispatcher against a fake transport: matching, denials, failure policies, dry runs,
//! patches and reinvocation.

use std::collections::BTreeMap;
use std::sync::Mutex;

use base64::Engine;
use serde_json::{Value, json};

use super::compiled::Hook;
use super::dispatch::{self, Call, Lookup, Refusal, Request, Transport};
use crate::admission_policy::matching::{Attributes, Operation};

/// Answers each call with `answer(webhook path, review)` and records what was called.
struct Fake<F> {
    answer: F,
    calls: Mutex<Vec<(String, String, String)>>,
}

impl<F: Fn(&str, &Value) -> Result<Value, String> + Send + Sync> Transport for Fake<F> {
    fn post(&self, call: &Call<'_>) -> Result<Vec<u8>, String> {
        let review: Value = serde_json::from_slice(&call.body).map_err(|e| e.to_string())?;
        self.calls.lock().unwrap_or_else(|e| e.into_inner()).push((
            call.host.clone(),
            call.server_name.clone(),
            call.path.clone(),
        ));
        let response = (self.answer)(&call.path, &review)?;
        let uid = review["request"]["uid"].clone();
        let mut r = response;
        r["uid"] = uid;
        serde_json::to_vec(
            &json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "response": r}),
        )
        .map_err(|e| e.to_string())
    }
}

fn fake<F: Fn(&str, &Value) -> Result<Value, String> + Send + Sync>(answer: F) -> Fake<F> {
    Fake {
        answer,
        calls: Mutex::new(Vec::new()),
    }
}

impl<F> Fake<F> {
    fn paths(&self) -> Vec<String> {
        self.calls
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|c| c.2.clone())
            .collect()
    }
}

struct Cluster;

impl Lookup for Cluster {
    fn namespace_labels(&self, name: &str) -> Result<BTreeMap<String, String>, String> {
        let mut l = BTreeMap::new();
        l.insert("team".to_string(), name.to_string());
        Ok(l)
    }

    fn service_endpoint(&self, ns: &str, name: &str, port: u16) -> Result<(String, u16), String> {
        match (ns, name, port) {
            ("hooks", "svc", 443) => Ok(("10.42.0.7".into(), 8443)),
            _ => Err(format!(
                "no endpoints available for service \"{ns}/{name}\""
            )),
        }
    }
}

/// A configuration of one webhook at `path`, merged with `extra`.
fn hooks(mutating: bool, hooks: &[(&str, Value)]) -> Vec<Hook> {
    let webhooks: Vec<Value> = hooks
        .iter()
        .map(|(path, extra)| {
            let mut w = json!({
                "name": format!("{}.example.com", path.trim_start_matches('/')),
                "clientConfig": {"url": format!("https://127.0.0.1:9443{path}")},
                "rules": [{"operations": ["CREATE", "UPDATE"], "apiGroups": [""], "apiVersions": ["v1"],
                           "resources": ["pods"], "scope": "*"}],
                "sideEffects": "None",
                "admissionReviewVersions": ["v1"],
                "failurePolicy": "Fail",
                "timeoutSeconds": 10,
            });
            if let (Some(w), Some(e)) = (w.as_object_mut(), extra.as_object()) {
                for (k, v) in e {
                    w.insert(k.clone(), v.clone());
                }
            }
            w
        })
        .collect();
    let obj = json!({"metadata": {"name": "c"}, "webhooks": webhooks});
    if mutating {
        Hook::mutating(&obj)
    } else {
        Hook::validating(&obj)
    }
}

fn pod(labels: Value, annotations: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "p", "namespace": "dev", "labels": labels, "annotations": annotations},
           "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
}

fn with_request<T>(op: Operation, dry_run: bool, f: impl FnOnce(&Request<'_>) -> T) -> T {
    let attributes = Attributes {
        group: "",
        version: "v1",
        resource: "pods",
        subresource: "",
        kind: "Pod",
        namespace: "dev",
        name: "p",
        operation: op,
        object: None,
        old_object: None,
    };
    let request = crate::admission_policy::request::request(
        &attributes,
        crate::admission_policy::request::Requester::Controller,
        dry_run,
    );
    f(&Request {
        attributes,
        equivalents: &[],
        request: &request,
        dry_run,
    })
}

fn patch(ops: Value) -> Value {
    let b = base64::engine::general_purpose::STANDARD
        .encode(serde_json::to_vec(&ops).unwrap_or_default());
    json!({"allowed": true, "patchType": "JSONPatch", "patch": b})
}

#[test]
fn a_mutating_webhook_patches_only_the_objects_its_selector_matches() {
    let hs = hooks(
        true,
        &[(
            "/label",
            json!({"objectSelector": {"matchLabels": {"inject": "yes"}}}),
        )],
    );
    let refs: Vec<&Hook> = hs.iter().collect();
    let t = fake(|_, _| {
        Ok(patch(
            json!([{"op": "add", "path": "/metadata/labels/injected", "value": "true"}]),
        ))
    });
    for (labels, want) in [
        (json!({"inject": "yes"}), Some("true")),
        (json!({"inject": "no"}), None),
    ] {
        let mut obj = Some(pod(labels, json!({})));
        let out = with_request(Operation::Create, false, |r| {
            dispatch::mutate(&refs, r, &mut obj, &t, &Cluster)
        });
        assert_eq!(out, Ok(dispatch::Outcome::default()));
        let obj = obj.unwrap_or_default();
        assert_eq!(
            obj.pointer("/metadata/labels/injected")
                .and_then(Value::as_str),
            want
        );
    }
    assert_eq!(t.paths(), vec!["/label?timeout=10s"]);
}

#[test]
fn a_denial_carries_the_webhooks_message_and_code_and_warnings_are_kept() {
    let hs = hooks(false, &[("/deny", json!({}))]);
    let refs: Vec<&Hook> = hs.iter().collect();
    let t = fake(|_, review| {
        let bad = review
            .pointer("/request/object/metadata/annotations/forbidden")
            .is_some();
        Ok(json!({"allowed": !bad, "warnings": ["looked at it"],
                  "status": {"code": 403, "reason": "Forbidden", "message": "annotation forbidden is not allowed"}}))
    });
    let run = |obj: Value| {
        with_request(Operation::Create, false, |r| {
            dispatch::validate(&refs, r, Some(&obj), &t, &Cluster)
        })
    };
    assert_eq!(
        run(pod(json!({}), json!({}))),
        Ok(dispatch::Outcome {
            warnings: vec!["looked at it".into()]
        })
    );
    match run(pod(json!({}), json!({"forbidden": "x"}))) {
        Err(Refusal::Denied(d)) => {
            assert_eq!(d.code, 403);
            assert_eq!(d.reason, "Forbidden");
            assert_eq!(
                d.message,
                "admission webhook \"deny.example.com\" denied the request: annotation forbidden is not allowed"
            );
        }
        other => panic!("expected a denial, got {other:?}"),
    }
}

#[test]
fn a_failed_call_refuses_under_fail_and_passes_under_ignore() {
    let t = fake(|_, _| Err("dial tcp 127.0.0.1:9443: connect: connection refused".into()));
    let obj = pod(json!({}), json!({}));
    for (policy, want) in [
        (
            "Fail",
            Err(Refusal::Failed(
                "failed calling webhook \"down.example.com\": failed to call webhook: Post \"https://127.0.0.1:9443/down?timeout=10s\": dial tcp 127.0.0.1:9443: connect: connection refused".into(),
            )),
        ),
        ("Ignore", Ok(dispatch::Outcome::default())),
    ] {
        let hs = hooks(false, &[("/down", json!({"failurePolicy": policy}))]);
        let refs: Vec<&Hook> = hs.iter().collect();
        let got = with_request(Operation::Create, false, |r| {
            dispatch::validate(&refs, r, Some(&obj), &t, &Cluster)
        });
        assert_eq!(got, want, "{policy}");
    }
}

#[test]
fn rules_namespace_selectors_and_match_conditions_decide_who_is_called() {
    let t = fake(|_, _| Ok(json!({"allowed": true})));
    let obj = pod(json!({"app": "web"}), json!({}));
    let cases: &[(&str, Value, Operation, bool)] = &[
        ("the rules match", json!({}), Operation::Create, true),
        (
            "another operation",
            json!({"rules": [{"operations": ["DELETE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}]}),
            Operation::Create,
            false,
        ),
        (
            "another resource",
            json!({"rules": [{"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["pods/status"]}]}),
            Operation::Create,
            false,
        ),
        (
            "the namespace's labels match",
            json!({"namespaceSelector": {"matchLabels": {"team": "dev"}}}),
            Operation::Create,
            true,
        ),
        (
            "the namespace's labels do not match",
            json!({"namespaceSelector": {"matchLabels": {"team": "ops"}}}),
            Operation::Create,
            false,
        ),
        (
            "a match condition holds",
            json!({"matchConditions": [{"name": "web", "expression": "object.metadata.labels.app == 'web'"}]}),
            Operation::Create,
            true,
        ),
        (
            "a match condition does not hold",
            json!({"matchConditions": [{"name": "db", "expression": "object.metadata.labels.app == 'db'"}]}),
            Operation::Create,
            false,
        ),
    ];
    for (name, extra, op, called) in cases {
        let hs = hooks(false, &[("/v", extra.clone())]);
        let refs: Vec<&Hook> = hs.iter().collect();
        let before = t.paths().len();
        let got = with_request(*op, false, |r| {
            dispatch::validate(&refs, r, Some(&obj), &t, &Cluster)
        });
        assert_eq!(got, Ok(dispatch::Outcome::default()), "{name}");
        assert_eq!(t.paths().len() - before, usize::from(*called), "{name}");
    }
}

#[test]
fn dry_runs_reach_only_webhooks_without_side_effects() {
    let t = fake(|_, review| {
        assert_eq!(review["request"]["dryRun"], true);
        Ok(json!({"allowed": true}))
    });
    let obj = pod(json!({}), json!({}));
    for (effects, want) in [
        ("NoneOnDryRun", Ok(dispatch::Outcome::default())),
        (
            "Some",
            Err(Refusal::DryRunUnsupported("dry.example.com".into())),
        ),
    ] {
        let hs = hooks(false, &[("/dry", json!({"sideEffects": effects}))]);
        let refs: Vec<&Hook> = hs.iter().collect();
        let got = with_request(Operation::Create, true, |r| {
            dispatch::validate(&refs, r, Some(&obj), &t, &Cluster)
        });
        assert_eq!(got, want, "{effects}");
    }
    assert_eq!(
        Refusal::DryRunUnsupported("dry.example.com".into()).to_string(),
        "admission webhook \"dry.example.com\" does not support dry run"
    );
}

#[test]
fn an_if_needed_webhook_runs_again_when_a_later_one_changed_the_object() {
    let t = fake(|path, _| {
        Ok(if path.starts_with("/second") {
            patch(json!([{"op": "add", "path": "/metadata/labels/second", "value": "x"}]))
        } else {
            json!({"allowed": true})
        })
    });
    for (policy, want) in [
        (
            "IfNeeded",
            vec![
                "/first?timeout=10s",
                "/second?timeout=10s",
                "/first?timeout=10s",
            ],
        ),
        ("Never", vec!["/first?timeout=10s", "/second?timeout=10s"]),
    ] {
        let hs = hooks(
            true,
            &[
                ("/first", json!({"reinvocationPolicy": policy})),
                ("/second", json!({})),
            ],
        );
        let refs: Vec<&Hook> = hs.iter().collect();
        t.calls.lock().unwrap_or_else(|e| e.into_inner()).clear();
        let mut obj = Some(pod(json!({}), json!({})));
        let got = with_request(Operation::Create, false, |r| {
            dispatch::mutate(&refs, r, &mut obj, &t, &Cluster)
        });
        assert_eq!(got, Ok(dispatch::Outcome::default()), "{policy}");
        assert_eq!(t.paths(), want, "{policy}");
    }
}

#[test]
fn a_service_webhook_is_dialled_at_its_endpoint_under_the_services_name() {
    let hs = hooks(
        false,
        &[(
            "/v",
            json!({"clientConfig": {"service": {"namespace": "hooks", "name": "svc", "path": "/check"}}}),
        )],
    );
    let refs: Vec<&Hook> = hs.iter().collect();
    let t = fake(|_, _| Ok(json!({"allowed": true})));
    let obj = pod(json!({}), json!({}));
    let got = with_request(Operation::Create, false, |r| {
        dispatch::validate(&refs, r, Some(&obj), &t, &Cluster)
    });
    assert_eq!(got, Ok(dispatch::Outcome::default()));
    let calls = t.calls.lock().unwrap_or_else(|e| e.into_inner()).clone();
    assert_eq!(
        calls,
        vec![(
            "10.42.0.7".to_string(),
            "svc.hooks.svc".to_string(),
            "/check?timeout=10s".to_string()
        )]
    );
}

#[test]
fn webhook_urls_split_into_host_port_and_path() {
    let cases = [
        (
            "https://h.example.com/x/y",
            Ok(("h.example.com".into(), 443, "/x/y".into())),
        ),
        (
            "https://127.0.0.1:9443",
            Ok(("127.0.0.1".into(), 9443, "/".into())),
        ),
        (
            "https://[::1]:8443/v",
            Ok(("::1".into(), 8443, "/v".into())),
        ),
        (
            "http://h/x",
            Err("unsupported webhook URL \"http://h/x\"".to_string()),
        ),
    ];
    for (url, want) in cases {
        assert_eq!(dispatch::split_url(url), want, "{url}");
    }
}

/// The registry's create, update and delete paths call the installed webhooks: a patch is
/// stored, a denial answers with the webhook's code, deletes are asked about, and the webhook
/// configurations themselves are never sent to webhooks.
#[test]
fn the_write_path_calls_the_installed_webhooks() {
    use std::sync::Arc;

    use crate::{DeleteOptions, Part, RegistryError, WriteOptions, testing};
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("dir: {e}"));
    let registry = testing::registry(dir.path());
    let configmaps = berth_shared::resource::by_plural("", "v1", "configmaps")
        .unwrap_or_else(|| panic!("configmaps"));
    let rule = json!([{"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"]}]);
    let hook = |path: &str| {
        json!({"name": format!("{}.example.com", &path[1..]),
               "clientConfig": {"url": format!("https://127.0.0.1:9443{path}")},
               "rules": rule, "sideEffects": "None", "admissionReviewVersions": ["v1"],
               "failurePolicy": "Fail", "timeoutSeconds": 10})
    };
    let mutating = json!({"kind": "MutatingWebhookConfiguration",
        "metadata": {"name": "m", "uid": "m", "resourceVersion": "1"}, "webhooks": [hook("/stamp")]});
    let validating = json!({"kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "v", "uid": "v", "resourceVersion": "1"}, "webhooks": [hook("/judge")]});
    registry.admission_webhooks().install(
        std::slice::from_ref(&validating),
        std::slice::from_ref(&mutating),
    );
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let transport = {
        let seen = seen.clone();
        fake(move |path, review| {
            let op = review["request"]["operation"].as_str().unwrap_or_default();
            seen.lock().unwrap_or_else(|e| e.into_inner()).push(format!(
                "{} {op}",
                path.split('?').next().unwrap_or_default()
            ));
            let name = review["request"]["name"].as_str().unwrap_or_default();
            Ok(match (path.starts_with("/stamp"), op, name) {
                (true, "CREATE" | "UPDATE", _) => patch(json!([
                    {"op": "add", "path": "/data/stamped", "value": "yes"}])),
                (false, _, "bad") => json!({"allowed": false,
                    "status": {"code": 403, "reason": "Forbidden", "message": "bad names are refused"}}),
                _ => json!({"allowed": true}),
            })
        })
    };
    registry
        .admission_webhooks()
        .set_transport(Arc::new(transport));
    let cm = |name: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"a": "1"}});
    let opts = WriteOptions::default();
    let stored = registry
        .create(configmaps, Some("default"), cm("good"), &opts)
        .unwrap_or_else(|e| panic!("create: {e}"));
    assert_eq!(stored["data"]["stamped"], "yes");
    let e = registry
        .create(configmaps, Some("default"), cm("bad"), &opts)
        .err();
    let Some(RegistryError::WebhookDenied {
        code,
        reason,
        message,
    }) = e
    else {
        panic!("expected a denial, got {e:?}")
    };
    assert_eq!((code, reason), (403, "Forbidden"));
    assert_eq!(
        message,
        "admission webhook \"judge.example.com\" denied the request: bad names are refused"
    );
    let mut changed = cm("good");
    changed["data"]["a"] = json!("2");
    let updated = registry
        .update(
            configmaps,
            Some("default"),
            "good",
            changed,
            Part::Main,
            &opts,
        )
        .unwrap_or_else(|e| panic!("update: {e}"));
    assert_eq!(updated["data"]["stamped"], "yes");
    registry
        .delete(
            configmaps,
            Some("default"),
            "good",
            &DeleteOptions::default(),
        )
        .unwrap_or_else(|e| panic!("delete: {e}"));
    let configurations = berth_shared::resource::VALIDATING_WEBHOOK_CONFIGURATIONS;
    let own = json!({"apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration", "metadata": {"name": "bad"}, "webhooks": [hook("/judge")]});
    registry
        .create(configurations, None, own, &opts)
        .unwrap_or_else(|e| panic!("a webhook configuration is not sent to webhooks: {e}"));
    let seen = seen.lock().unwrap_or_else(|e| e.into_inner()).clone();
    assert_eq!(
        seen,
        [
            "/stamp CREATE",
            "/judge CREATE",
            "/stamp CREATE",
            "/judge CREATE",
            "/stamp UPDATE",
            "/judge UPDATE",
            "/stamp DELETE",
            "/judge DELETE",
        ]
    );
}

/// A mutating webhook cannot make a pod privileged behind Pod Security's back: the patched
/// pod is checked again, as upstream checks it after mutating admission.
#[test]
fn pod_security_judges_what_a_mutating_webhook_made() {
    use std::sync::Arc;

    use crate::{RegistryError, WriteOptions, testing};
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("dir: {e}"));
    let registry = testing::registry(dir.path());
    let namespaces = berth_shared::resource::NAMESPACES;
    let pods =
        berth_shared::resource::by_plural("", "v1", "pods").unwrap_or_else(|| panic!("pods"));
    let opts = WriteOptions::default();
    registry
        .create(
            namespaces,
            None,
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "dev",
                "labels": {"pod-security.kubernetes.io/enforce": "baseline"}}}),
            &opts,
        )
        .unwrap_or_else(|e| panic!("namespace: {e}"));
    let mutating = json!({"kind": "MutatingWebhookConfiguration",
        "metadata": {"name": "m", "uid": "m", "resourceVersion": "1"},
        "webhooks": [{"name": "privileged.example.com",
            "clientConfig": {"url": "https://127.0.0.1:9443/escalate"},
            "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}],
            "objectSelector": {"matchLabels": {"escalate": "yes"}},
            "sideEffects": "None", "admissionReviewVersions": ["v1"]}]});
    registry
        .admission_webhooks()
        .install(&[], std::slice::from_ref(&mutating));
    registry
        .admission_webhooks()
        .set_transport(Arc::new(fake(|_, _| {
            Ok(patch(json!([{"op": "add",
            "path": "/spec/containers/0/securityContext",
            "value": {"privileged": true}}])))
        })));
    let pod = |name: &str, escalate: &str| {
        json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": {"escalate": escalate}},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
    };
    registry
        .create(pods, Some("dev"), pod("plain", "no"), &opts)
        .unwrap_or_else(|e| panic!("an unpatched pod is admitted: {e}"));
    let e = registry
        .create(pods, Some("dev"), pod("escalated", "yes"), &opts)
        .err();
    let Some(RegistryError::Forbidden(message)) = &e else {
        panic!("expected Pod Security's refusal, got {e:?}")
    };
    assert!(
        message.contains("violates PodSecurity \"baseline:latest\": privileged"),
        "{message}"
    );
}
