//! Fuzz target: PATCH bodies. A JSON input `[target, patch]` applies the patch to the target
//! with every patch type that takes it; any JSON input is also applied as a patch to a fixed
//! Deployment, and as a server-side apply configuration that creates. Checked on the way: a
//! failed JSON patch leaves its target unchanged, and a JSON merge patch is idempotent.
#![no_main]

use berth_shared::patch::{PatchType, applied_object, apply_json_patch, apply_patch};
use libfuzzer_sys::fuzz_target;
use serde_json::{Value, json};

fuzz_target!(|data: &[u8]| {
    let Ok(doc) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    if let Value::Array(pair) = &doc
        && let [target, patch] = pair.as_slice()
    {
        let kind = target.get("kind").and_then(Value::as_str).unwrap_or("Pod");
        apply_all(kind, target, patch);
    }
    apply_all("Deployment", &deployment(), &doc);
    let _ = applied_object(&doc, "applied");
});

fn apply_all(kind: &str, target: &Value, patch: &Value) {
    for pt in [
        PatchType::Json,
        PatchType::Merge,
        PatchType::Strategic,
        PatchType::Apply,
    ] {
        let _ = apply_patch(kind, pt, target.clone(), patch);
    }
    let mut t = target.clone();
    if apply_json_patch(&mut t, patch).is_err() {
        assert_eq!(&t, target, "a failed JSON patch changed its target");
    }
    if let Ok(once) = apply_patch(kind, PatchType::Merge, target.clone(), patch) {
        let twice = apply_patch(kind, PatchType::Merge, once.clone(), patch);
        assert_eq!(twice.as_ref(), Ok(&once), "merge patch is not idempotent");
    }
}

fn deployment() -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web"},
                     "finalizers": ["a"], "ownerReferences": [{"uid": "1", "name": "o"}]},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "web"}},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {
                    "containers": [
                        {"name": "nginx", "image": "nginx:1.14.2",
                         "env": [{"name": "A", "value": "1"}],
                         "ports": [{"containerPort": 80}],
                         "volumeMounts": [{"name": "data", "mountPath": "/d"}]},
                        {"name": "sidecar", "image": "busybox"}
                    ],
                    "volumes": [{"name": "data", "emptyDir": {}}],
                    "tolerations": [{"key": "k", "operator": "Exists"}]
                }
            }
        },
        "status": {"conditions": [{"type": "Available", "status": "True"}]}
    })
}
