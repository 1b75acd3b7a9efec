//! Both controllers in process over a real store: a Service and two pods with IPs get one
//! EndpointSlice and one Endpoints listing both; a pod going away is dropped from both.

use berth_registry::{DeleteOptions, WriteOptions};
use berth_runtime::testing::ControlPlane;
use berth_runtime::testing::edit_status;
use berth_shared::resource::{ENDPOINT_SLICES, ENDPOINTS, PODS, SERVICES};
use serde_json::{Value, json};

fn create(cp: &ControlPlane, rt: &'static berth_shared::resource::ResourceType, obj: Value) {
    cp.registry()
        .create(rt, Some("default"), obj, &WriteOptions::default())
        .unwrap();
}

/// A pod with an IP and a Ready condition, as the agent would have written its status.
fn running_pod(cp: &ControlPlane, name: &str, ip: &str) {
    create(
        cp,
        PODS,
        json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "labels": {"app": "web"}},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "nginx",
                "ports": [{"name": "http", "containerPort": 8080}]}]}}),
    );
    edit_status(cp.registry(), PODS, name, |p| {
        p["status"] = json!({"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}],
                    "conditions": [{"type": "Ready", "status": "True"}]});
    });
}

fn slice_ips(cp: &ControlPlane) -> Vec<Vec<String>> {
    cp.list(ENDPOINT_SLICES)
        .iter()
        .filter(|s| s["metadata"]["labels"]["kubernetes.io/service-name"] == "web")
        .map(|s| {
            let mut ips: Vec<String> = s["endpoints"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|e| e["addresses"][0].as_str().map(String::from))
                .collect();
            ips.sort();
            ips
        })
        .collect()
}

fn endpoints_ips(cp: &ControlPlane) -> Option<Vec<String>> {
    let ep = cp.registry().get(ENDPOINTS, Some("default"), "web").ok()?;
    let v = ep.value().ok()?;
    let mut ips: Vec<String> = v["subsets"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|s| s["addresses"].as_array().cloned().unwrap_or_default())
        .filter_map(|a| a["ip"].as_str().map(String::from))
        .collect();
    ips.sort();
    Some(ips)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_and_two_running_pods_get_one_slice_and_one_endpoints_with_both() {
    let cp = ControlPlane::start();
    let handles = vec![
        tokio::spawn(super::run(cp.ctx.clone(), cp.stop.clone())),
        tokio::spawn(crate::endpoints::run(cp.ctx.clone(), cp.stop.clone())),
    ];
    create(
        &cp,
        SERVICES,
        json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"selector": {"app": "web"},
                "ports": [{"name": "http", "port": 80, "targetPort": "http"}]}}),
    );
    running_pod(&cp, "web-0", "10.42.0.2");
    running_pod(&cp, "web-1", "10.42.0.3");
    let both = vec!["10.42.0.2".to_string(), "10.42.0.3".to_string()];
    let dump = || format!("{:#?}\n{:#?}", cp.list(ENDPOINT_SLICES), cp.list(ENDPOINTS));
    cp.wait_until(
        "one slice and one Endpoints with both pods",
        || slice_ips(&cp) == vec![both.clone()] && endpoints_ips(&cp) == Some(both.clone()),
        dump,
    )
    .await;
    let slice = cp
        .list(ENDPOINT_SLICES)
        .into_iter()
        .find(|s| s["metadata"]["labels"]["kubernetes.io/service-name"] == "web")
        .unwrap();
    assert_eq!(slice["ports"][0]["port"], 8080);
    assert_eq!(slice["metadata"]["ownerReferences"][0]["kind"], "Service");

    // Forced: no agent runs here to finish a graceful deletion.
    let force = DeleteOptions {
        grace_period_seconds: Some(0),
        ..DeleteOptions::default()
    };
    cp.registry()
        .delete(PODS, Some("default"), "web-1", &force)
        .unwrap();
    let one = vec!["10.42.0.2".to_string()];
    cp.wait_until(
        "the pod gone from both",
        || slice_ips(&cp) == vec![one.clone()] && endpoints_ips(&cp) == Some(one.clone()),
        dump,
    )
    .await;
    cp.stop.cancel();
    for h in handles {
        let _ = h.await;
    }
}
