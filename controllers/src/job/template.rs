//! What the Job controller writes from the template: a new pod (upstream
//! `CreatePodsWithGenerateName` + the Job's additions): the template's labels, annotations and
//! finalizers plus the tracking finalizer, `generateName: <job>-`, the controller reference;
//! for an Indexed Job the index as annotation and label, `generateName: <job>-<index>-`,
//! hostname `<job>-<index>` (the template's subdomain is kept, as upstream does) and
//! `JOB_COMPLETION_INDEX` in every container from the index label; with a per-index limit the
//! index's failure counts.
//!
//! Planner: pure, no I/O.

use super::plan::NewPod;
use super::view::{
    COMPLETION_INDEX, INDEX_FAILURE_COUNT, INDEX_IGNORED_FAILURE_COUNT, Job, TRACKING_FINALIZER,
};
use serde_json::{Map, Value, json};

pub const KIND: &str = "Job";
pub const API_VERSION: &str = "batch/v1";
/// The environment variable that carries the index.
pub const INDEX_ENV: &str = "JOB_COMPLETION_INDEX";
/// Upstream `names.MaxGeneratedNameLength`: 63 less the 5 random characters.
const MAX_GENERATED_NAME: usize = 58;

/// The controller reference a Job's pods carry.
pub fn controller_ref(job: &Job) -> Value {
    json!({
        "apiVersion": API_VERSION,
        "kind": KIND,
        "name": job.name,
        "uid": job.uid,
        "controller": true,
        "blockOwnerDeletion": true,
    })
}

/// Upstream `podGenerateNameWithIndex`: `<job>-<index>-`, the Job's name cut so the prefix
/// stays within the generated-name limit.
pub fn generate_name(job: &str, index: Option<i32>) -> String {
    let Some(ix) = index else {
        return format!("{job}-");
    };
    let suffix = format!("-{ix}-");
    let room = MAX_GENERATED_NAME.saturating_sub(suffix.len());
    let mut cut = job.len().min(room);
    while !job.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}{suffix}", &job[..cut])
}

fn add_index_env(containers: Option<&mut Value>) {
    let Some(list) = containers.and_then(Value::as_array_mut) else {
        return;
    };
    for c in list.iter_mut().filter_map(Value::as_object_mut) {
        let env = c.entry("env").or_insert_with(|| json!([]));
        let Some(env) = env.as_array_mut() else {
            continue;
        };
        if env
            .iter()
            .any(|e| e.get("name").and_then(Value::as_str) == Some(INDEX_ENV))
        {
            continue;
        }
        env.push(json!({"name": INDEX_ENV, "valueFrom": {"fieldRef": {
            "fieldPath": format!("metadata.labels['{COMPLETION_INDEX}']")}}}));
    }
}

/// A new pod of `job`.
pub fn new_pod(job: &Job, new: &NewPod) -> Value {
    let meta = job.spec.template.metadata.clone().unwrap_or_default();
    let mut labels = meta.labels.unwrap_or_default();
    let mut annotations = meta.annotations.unwrap_or_default();
    let mut finalizers = meta.finalizers.unwrap_or_default();
    if !finalizers.iter().any(|f| f == TRACKING_FINALIZER) {
        finalizers.push(TRACKING_FINALIZER.into());
    }
    let mut spec = serde_json::to_value(job.spec.template.spec.clone().unwrap_or_default())
        .unwrap_or_default();
    if let Some(ix) = new.index {
        annotations.insert(COMPLETION_INDEX.into(), ix.to_string());
        labels.insert(COMPLETION_INDEX.into(), ix.to_string());
        if let Some((counted, ignored)) = new.failures {
            annotations.insert(INDEX_FAILURE_COUNT.into(), counted.to_string());
            if ignored > 0 {
                annotations.insert(INDEX_IGNORED_FAILURE_COUNT.into(), ignored.to_string());
            }
        }
        spec["hostname"] = json!(format!("{}-{ix}", job.name));
        add_index_env(spec.get_mut("initContainers"));
        add_index_env(spec.get_mut("containers"));
    }
    let mut m = Map::new();
    m.insert(
        "generateName".into(),
        json!(generate_name(&job.name, new.index)),
    );
    m.insert("namespace".into(), json!(job.namespace));
    if !labels.is_empty() {
        m.insert("labels".into(), json!(labels));
    }
    if !annotations.is_empty() {
        m.insert("annotations".into(), json!(annotations));
    }
    m.insert("finalizers".into(), json!(finalizers));
    m.insert("ownerReferences".into(), json!([controller_ref(job)]));
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": m, "spec": spec})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(indexed: bool) -> Job {
        let mut spec = json!({"completions": 3, "parallelism": 3,
            "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": "u"}},
            "template": {"metadata": {"labels": {"batch.kubernetes.io/controller-uid": "u",
                "batch.kubernetes.io/job-name": "sq"}, "finalizers": ["example.com/keep"]},
                "spec": {"restartPolicy": "Never", "subdomain": "workers",
                    "initContainers": [{"name": "setup", "image": "x"}],
                    "containers": [{"name": "main", "image": "x",
                        "env": [{"name": "A", "value": "1"}]}]}}});
        if indexed {
            spec["completionMode"] = json!("Indexed");
        }
        Job::from_value(
            &json!({"metadata": {"name": "sq", "namespace": "ns", "uid": "u"},
            "spec": spec}),
        )
        .unwrap()
    }

    #[test]
    fn a_pod_carries_the_template_the_tracking_finalizer_and_the_owner() {
        let p = new_pod(
            &job(false),
            &NewPod {
                index: None,
                failures: None,
            },
        );
        assert_eq!(p["metadata"]["generateName"], "sq-");
        assert_eq!(p["metadata"]["namespace"], "ns");
        assert_eq!(
            p["metadata"]["finalizers"],
            json!(["example.com/keep", TRACKING_FINALIZER])
        );
        assert_eq!(
            p["metadata"]["labels"]["batch.kubernetes.io/job-name"],
            "sq"
        );
        assert_eq!(p["metadata"]["ownerReferences"][0]["kind"], "Job");
        assert_eq!(
            p["metadata"]["ownerReferences"][0]["blockOwnerDeletion"],
            true
        );
        assert!(p["spec"]["hostname"].is_null());
        assert!(p["metadata"]["annotations"].is_null());
    }

    #[test]
    fn an_indexed_pod_carries_its_index_everywhere_upstream_puts_it() {
        let p = new_pod(
            &job(true),
            &NewPod {
                index: Some(2),
                failures: Some((1, 0)),
            },
        );
        assert_eq!(p["metadata"]["generateName"], "sq-2-");
        assert_eq!(p["metadata"]["annotations"][COMPLETION_INDEX], "2");
        assert_eq!(p["metadata"]["labels"][COMPLETION_INDEX], "2");
        assert_eq!(p["metadata"]["annotations"][INDEX_FAILURE_COUNT], "1");
        assert!(p["metadata"]["annotations"][INDEX_IGNORED_FAILURE_COUNT].is_null());
        assert_eq!(p["spec"]["hostname"], "sq-2");
        assert_eq!(p["spec"]["subdomain"], "workers");
        let env = |list: &str| p["spec"][list][0]["env"].clone();
        let index = json!({"name": INDEX_ENV, "valueFrom": {"fieldRef":
            {"fieldPath": "metadata.labels['batch.kubernetes.io/job-completion-index']"}}});
        assert_eq!(
            env("containers"),
            json!([{"name": "A", "value": "1"}, index.clone()])
        );
        assert_eq!(env("initContainers"), json!([index]));
    }

    #[test]
    fn generated_names_leave_room_for_the_index() {
        assert_eq!(generate_name("pi", None), "pi-");
        assert_eq!(generate_name("pi", Some(12)), "pi-12-");
        let long = "a".repeat(63);
        let n = generate_name(&long, Some(7));
        assert_eq!(n.len(), MAX_GENERATED_NAME);
        assert!(n.ends_with("a-7-"));
    }
}
