//! Issue 15, the HorizontalPodAutoscaler API: autoscaling/v2 (stored) and autoscaling/v1
//! (converted) served side by side, as kube-apiserver serves them. The seed's autoscaling/v1
//! manifest is accepted and read back in both versions; `kubectl autoscale` (which writes v1)
//! creates an autoscaler; a v1 merge patch keeps what only v2 can say; `kubectl get hpa` prints
//! upstream's columns; invalid autoscalers get 422 with the field. Real kubectl binaries.

use std::path::Path;

use berth_tests::kinds::HPA_COLUMNS;
use berth_tests::objects::deployment;
use berth_tests::seeds::SEED_HPA;
use berth_tests::{Api, Controller, Reply, Req, Table};
use serde_json::{Value, json};

/// kubectl 1.32 and later send `autoscale`'s body as protobuf; 1.31 and earlier as JSON.
const KUBECTLS: [&str; 4] = [
    "/usr/lib/google-cloud-sdk/bin/kubectl.1.33",
    "/usr/lib/google-cloud-sdk/bin/kubectl.1.32",
    "/usr/lib/google-cloud-sdk/bin/kubectl.1.31",
    "/usr/lib/google-cloud-sdk/bin/kubectl.1.27",
];
const V1: &str = "/apis/autoscaling/v1/namespaces/default/horizontalpodautoscalers";
const V2: &str = "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers";

#[test]
fn the_seed_v1_autoscaler_is_stored_once_and_read_in_both_versions() {
    let c = Controller::start();
    let api = c.admin_api();
    c.kubectl().ok_stdin(&["apply", "-f", "-"], SEED_HPA);
    let v2 = api.get_ok(&format!("{V2}/frontend-scaler"));
    assert_eq!(v2["apiVersion"], "autoscaling/v2");
    assert_eq!(
        v2["spec"]["metrics"],
        json!([{"type": "Resource", "resource": {"name": "cpu",
                "target": {"type": "Utilization", "averageUtilization": 50}}}])
    );
    let v1 = api.get_ok(&format!("{V1}/frontend-scaler"));
    assert_eq!(v1["apiVersion"], "autoscaling/v1");
    assert_eq!(v1["spec"]["targetCPUUtilizationPercentage"], 50);
    assert_eq!(v1["spec"]["minReplicas"], 3);
    assert_eq!(v1["metadata"]["uid"], v2["metadata"]["uid"]);
    // One object, listed in each version's own list kind.
    let list = api.get_ok(V1);
    assert_eq!(list["apiVersion"], "autoscaling/v1");
    assert_eq!(
        list["items"][0]["spec"]["targetCPUUtilizationPercentage"],
        50
    );
    assert_eq!(api.get_ok(V2)["items"].as_array().map(Vec::len), Some(1));
    // Re-applying the same v1 manifest (a strategic merge patch in v1) changes nothing.
    c.kubectl().ok_stdin(&["apply", "-f", "-"], SEED_HPA);
    let again = api.get_ok(&format!("{V2}/frontend-scaler"));
    assert_eq!(again["spec"], v2["spec"]);

    // A v2 behaviour survives a v1 merge patch of the CPU target.
    let behavior = json!({"spec": {"behavior": {"scaleDown": {"stabilizationWindowSeconds": 30}}}});
    let r = api.send(Req::patch(
        format!("{V2}/frontend-scaler"),
        "application/merge-patch+json",
        &behavior,
    ));
    assert_eq!(r.status, 200, "{}", r.describe());
    let r = api.send(Req::patch(
        format!("{V1}/frontend-scaler"),
        "application/merge-patch+json",
        &json!({"spec": {"targetCPUUtilizationPercentage": 70}}),
    ));
    assert_eq!(r.status, 200, "{}", r.describe());
    assert_eq!(r.json()["apiVersion"], "autoscaling/v1");
    let after = api.get_ok(&format!("{V2}/frontend-scaler"));
    assert_eq!(
        after["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"],
        70
    );
    assert_eq!(
        after["spec"]["behavior"]["scaleDown"]["stabilizationWindowSeconds"],
        30
    );

    // A v2 body sent to the v1 endpoint is refused, not silently taken for v1.
    let mut wrong = v2.clone();
    wrong["metadata"] = json!({"name": "other"});
    let r = api.send(Req::post(V1, &wrong));
    assert_eq!(r.status, 400, "{}", r.describe());
    assert!(
        r.body.contains("does not match the expected API version"),
        "{}",
        r.body
    );
}

#[test]
fn kubectl_autoscale_creates_an_autoscaler_and_get_prints_upstreams_columns() {
    let c = Controller::start();
    let api = c.admin_api();
    for (i, bin) in KUBECTLS.iter().enumerate() {
        let k = c.kubectl().with_binary(Path::new(bin));
        let name = format!("web{i}");
        let spec = json!({"containers": [{"name": "main", "image": "busybox:1.28"}]});
        api.create(
            "/apis/apps/v1/namespaces/default/deployments",
            &deployment(&name, 1, spec),
        );
        k.ok(&[
            "autoscale",
            &format!("deployment/{name}"),
            "--min=2",
            "--max=5",
            "--cpu-percent=50",
        ]);
        let hpa = api.get_ok(&format!("{V2}/{name}"));
        assert_eq!(hpa["spec"]["minReplicas"], 2, "{bin}");
        assert_eq!(hpa["spec"]["maxReplicas"], 5, "{bin}");
        assert_eq!(hpa["spec"]["scaleTargetRef"]["kind"], "Deployment", "{bin}");
        let out = k.ok(&["get", "hpa", &name]);
        let table = Table::parse(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
        assert_eq!(table.headers, HPA_COLUMNS, "{bin}");
        assert_eq!(
            table.values("REFERENCE"),
            [format!("Deployment/{name}")],
            "{bin}"
        );
        assert_eq!(table.values("TARGETS"), ["cpu: <unknown>/50%"], "{bin}");
        assert_eq!(table.values("MINPODS"), ["2"], "{bin}");
        assert_eq!(table.values("MAXPODS"), ["5"], "{bin}");
        // `hpa` is a short name, and the kind is in the `all` category.
        let all = k.ok(&["get", "all"]);
        assert!(
            all.contains(&format!("horizontalpodautoscaler.autoscaling/{name}")),
            "{bin}: {all}"
        );
    }
}

/// POSTs an autoscaler `bad` with `spec` to `collection` (of `autoscaling/v1` or `v2`), which
/// must answer 422.
#[track_caller]
fn refused(api: &Api, collection: &str, spec: Value) -> Reply {
    let version = if collection == V1 { "v1" } else { "v2" };
    let hpa = json!({"apiVersion": format!("autoscaling/{version}"),
        "kind": "HorizontalPodAutoscaler", "metadata": {"name": "bad"}, "spec": spec});
    let r = api.send(Req::post(collection, &hpa));
    assert_eq!(r.status, 422, "{}", r.describe());
    r
}

#[test]
fn invalid_autoscalers_are_refused_with_the_field() {
    let c = Controller::start();
    let api = c.admin_api();
    let r = refused(
        &api,
        V2,
        json!({"scaleTargetRef": {"kind": "Deployment", "name": "web"},
               "minReplicas": 6, "maxReplicas": 5}),
    );
    assert_eq!(
        r.json()["details"]["causes"][0]["field"],
        "spec.maxReplicas",
        "{}",
        r.body
    );
    let r = refused(
        &api,
        V1,
        json!({"scaleTargetRef": {"kind": "Deployment", "name": "web"},
               "maxReplicas": 5, "targetCPUUtilizationPercentage": 0}),
    );
    assert!(r.body.contains("averageUtilization"), "{}", r.body);
    assert_eq!(api.get_ok(V2)["items"].as_array().map(Vec::len), Some(0));
}
