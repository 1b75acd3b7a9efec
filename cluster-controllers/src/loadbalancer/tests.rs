//! The controller in process over a real store: a one-address pool, two LoadBalancers — the
//! first gets the address, the second waits with a warning; the first deleted, the second
//! gets it at once (no resync); the second turned into a ClusterIP Service, its ingress is
//! cleared; a Service of another class is never touched.

use berth_registry::WriteOptions;
use berth_runtime::testing::{ControlPlane, edit_object};
use berth_shared::resource::SERVICES;
use serde_json::{Value, json};

use super::pool::Pool;

fn lb(name: &str, class: Option<&str>) -> Value {
    json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"type": "LoadBalancer", "loadBalancerClass": class,
                 "ports": [{"port": 80}]}})
}

fn ingress_of(cp: &ControlPlane, name: &str) -> Vec<String> {
    cp.get(SERVICES, name)
        .and_then(|s| s["status"]["loadBalancer"]["ingress"].as_array().cloned())
        .into_iter()
        .flatten()
        .filter_map(|i| i["ip"].as_str().map(str::to_string))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_freed_address_goes_to_the_service_waiting_for_one() {
    let cp = ControlPlane::start();
    let pools = vec![Pool::parse("192.0.2.10/32").expect("pool")];
    cp.run(move |ctx, stop| super::run(ctx, pools, stop));
    let create = |v: Value| {
        cp.registry()
            .create(SERVICES, Some("default"), v, &WriteOptions::default())
            .expect("create");
    };
    let dump = || format!("{:#?}", cp.list(SERVICES));
    create(lb("first", None));
    cp.wait_until(
        "the first gets the address",
        || ingress_of(&cp, "first") == ["192.0.2.10"],
        dump,
    )
    .await;
    create(lb("second", Some(super::plan::CLASS)));
    create(lb("foreign", Some("example.com/other")));
    cp.wait_until(
        "the second waits with a warning",
        || !cp.events("AllocationFailed").is_empty(),
        dump,
    )
    .await;
    assert!(ingress_of(&cp, "second").is_empty());

    cp.delete(SERVICES, "first", None);
    cp.wait_until(
        "the second gets the freed address",
        || ingress_of(&cp, "second") == ["192.0.2.10"],
        dump,
    )
    .await;
    let second = cp.get(SERVICES, "second").expect("second");
    assert_eq!(
        second["status"]["loadBalancer"]["ingress"][0]["ipMode"],
        "VIP"
    );

    edit_object(cp.registry(), SERVICES, "second", |s| {
        s["spec"]["type"] = json!("ClusterIP");
        // The fields only a LoadBalancer may carry go with the type (as a client sends it:
        // the registry does not drop them itself, unlike upstream's dropTypeDependentFields).
        if let Some(spec) = s["spec"].as_object_mut() {
            for f in [
                "loadBalancerClass",
                "externalTrafficPolicy",
                "allocateLoadBalancerNodePorts",
            ] {
                spec.remove(f);
            }
        }
        for p in s["spec"]["ports"].as_array_mut().into_iter().flatten() {
            if let Some(p) = p.as_object_mut() {
                p.remove("nodePort");
            }
        }
    });
    cp.wait_until(
        "a ClusterIP Service has no ingress",
        || ingress_of(&cp, "second").is_empty() && !cp.events("IPReleased").is_empty(),
        dump,
    )
    .await;
    cp.caught_up().await;
    assert!(ingress_of(&cp, "foreign").is_empty());
    cp.shut_down().await;
}
