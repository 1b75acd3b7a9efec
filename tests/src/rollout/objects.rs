//! Reads of a Deployment and its ReplicaSets through the API, for assertions and failure
//! messages: revisions, template images and hashes, sizes, conditions, and waits on them.

use std::time::Duration;

use serde_json::Value;

use super::census::HASH_LABEL;
use crate::cluster::Cluster;

/// The annotation holding a Deployment's or ReplicaSet's revision.
pub const REVISION: &str = "deployment.kubernetes.io/revision";

/// `metadata.annotations[deployment.kubernetes.io/revision]` as a number.
pub fn revision(obj: &Value) -> Option<u64> {
    obj["metadata"]["annotations"][REVISION]
        .as_str()?
        .parse()
        .ok()
}

/// The first container image of the object's pod template.
pub fn image(obj: &Value) -> &str {
    obj["spec"]["template"]["spec"]["containers"][0]["image"]
        .as_str()
        .unwrap_or("")
}

/// A ReplicaSet's `pod-template-hash` label.
pub fn hash(rs: &Value) -> &str {
    rs["metadata"]["labels"][HASH_LABEL].as_str().unwrap_or("")
}

/// `metadata.name`.
pub fn name(obj: &Value) -> &str {
    obj["metadata"]["name"].as_str().unwrap_or("")
}

/// `spec.replicas` (absent means 0 for a ReplicaSet the controller wrote).
pub fn spec_replicas(obj: &Value) -> i64 {
    obj["spec"]["replicas"].as_i64().unwrap_or(0)
}

/// A `status` count field, 0 when absent (the API omits zeros).
pub fn status_count(obj: &Value, field: &str) -> i64 {
    obj["status"][field].as_i64().unwrap_or(0)
}

/// The condition of `kind` in `status.conditions`.
pub fn condition<'a>(obj: &'a Value, kind: &str) -> Option<&'a Value> {
    obj["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)
}

/// `type=status/reason` of a condition, or `-`.
pub fn condition_line(obj: &Value, kind: &str) -> String {
    condition(obj, kind).map_or_else(
        || format!("{kind}=-"),
        |c| {
            format!(
                "{kind}={}/{}",
                c["status"].as_str().unwrap_or("?"),
                c["reason"].as_str().unwrap_or("?")
            )
        },
    )
}

/// Whether the Deployment is rolled out as `kubectl rollout status` decides: the generation
/// observed, every replica updated and available, no old replica left.
pub fn rolled_out(d: &Value) -> bool {
    let generation = d["metadata"]["generation"].as_i64().unwrap_or(0);
    let want = spec_replicas(d);
    status_count(d, "observedGeneration") >= generation
        && status_count(d, "updatedReplicas") == want
        && status_count(d, "replicas") == want
        && status_count(d, "availableReplicas") == want
}

/// The Deployment `ns/name`; panics when it does not exist.
pub fn deployment(c: &Cluster, ns: &str, name: &str) -> Value {
    c.get(&format!("/apis/apps/v1/namespaces/{ns}/deployments/{name}"))
        .unwrap_or_else(|| panic!("deployment {ns}/{name} does not exist"))
}

/// The ReplicaSets of `ns` whose controller is the Deployment `d`, by revision (those
/// without one first).
pub fn replica_sets(c: &Cluster, d: &Value) -> Vec<Value> {
    let ns = d["metadata"]["namespace"].as_str().unwrap_or("default");
    let uid = &d["metadata"]["uid"];
    let mut owned: Vec<Value> = c
        .list(&format!("/apis/apps/v1/namespaces/{ns}/replicasets"))
        .into_iter()
        .filter(|rs| {
            rs["metadata"]["ownerReferences"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|r| r["controller"] == true && r["uid"] == *uid)
        })
        .collect();
    owned.sort_by_key(|rs| revision(rs).unwrap_or(0));
    owned
}

/// The Deployment's status and each of its ReplicaSets on a line, for failure messages.
pub fn state(c: &Cluster, ns: &str, name: &str) -> String {
    let d = deployment(c, ns, name);
    let mut out = format!(
        "deployment {ns}/{name} rev={:?} image={} gen={} status: replicas={} updated={} \
         ready={} available={} observedGeneration={} {} {}",
        revision(&d),
        image(&d),
        d["metadata"]["generation"],
        status_count(&d, "replicas"),
        status_count(&d, "updatedReplicas"),
        status_count(&d, "readyReplicas"),
        status_count(&d, "availableReplicas"),
        status_count(&d, "observedGeneration"),
        condition_line(&d, "Available"),
        condition_line(&d, "Progressing"),
    );
    for rs in replica_sets(c, &d) {
        out.push_str(&format!(
            "\n  rs {} rev={:?} image={} spec={} replicas={} ready={} available={}",
            self::name(&rs),
            revision(&rs),
            image(&rs),
            spec_replicas(&rs),
            status_count(&rs, "replicas"),
            status_count(&rs, "readyReplicas"),
            status_count(&rs, "availableReplicas"),
        ));
    }
    out
}

/// The ReplicaSet among `rss` with template hash `h`.
pub fn rs_of<'a>(rss: &'a [Value], h: &str) -> Result<&'a Value, String> {
    rss.iter()
        .find(|rs| hash(rs) == h)
        .ok_or_else(|| format!("no ReplicaSet with hash {h}"))
}

/// Polls until `check` accepts the Deployment; failures print [`state`].
pub fn wait_deployment<T>(
    c: &Cluster,
    ns: &str,
    name: &str,
    timeout: Duration,
    what: &str,
    mut check: impl FnMut(&Value, &[Value]) -> Result<T, String>,
) -> T {
    c.wait_for(timeout, &format!("deployment {ns}/{name}: {what}"), || {
        let d = deployment(c, ns, name);
        let rss = replica_sets(c, &d);
        check(&d, &rss).map_err(|e| format!("{e}\n{}", state(c, ns, name)))
    })
}

/// Waits until the Deployment is rolled out (see [`rolled_out`]) with `image`.
pub fn wait_rolled_out(c: &Cluster, ns: &str, name: &str, want: &str, timeout: Duration) -> Value {
    wait_deployment(
        c,
        ns,
        name,
        timeout,
        &format!("rolled out {want}"),
        |d, _| {
            if rolled_out(d) && image(d) == want {
                Ok(d.clone())
            } else {
                Err("not rolled out".into())
            }
        },
    )
}
