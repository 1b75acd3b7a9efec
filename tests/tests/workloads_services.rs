//! Issue 12, endpoints and the service proxy on one host: a Deployment behind a Service on a
//! real agent. The Service's EndpointSlice and Endpoints list the ready pods' IPs with the
//! named target port resolved from the pods' container ports, and the cluster IP answers from
//! a pod with every ready endpoint in turn (the agent's DNAT rules); a pod failing readiness
//! stays in the slice as not ready, moves to the Endpoints' `notReadyAddresses` and stops
//! answering; scaling down leaves one ready endpoint, the only one that answers;
//! `kubectl get endpointslices` / `get ep` print upstream's columns. A pod started after the
//! Service exists gets the kubelet's service variables.

use berth_tests::pod_specs::{SLEEP_FOREVER, sh_container, sh_pod};
use berth_tests::wait::ok_if;
use berth_tests::{Cluster, Table, secs};
use serde_json::{Value, json};

const SLICES: &str = "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices";

fn deployment(replicas: u32) -> Value {
    let mut main = sh_container(
        "main",
        "mkdir -p /www && hostname > /www/index.html && httpd -p 8080 -h /www; \
         touch /tmp/ready; trap 'exit 0' TERM; while true; do sleep 1; done",
    );
    main["ports"] = json!([{"containerPort": 8080, "name": "http"}]);
    main["readinessProbe"] = json!({"exec": {"command": ["test", "-f", "/tmp/ready"]},
                                     "periodSeconds": 1, "failureThreshold": 1});
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"terminationGracePeriodSeconds": 1,
                                       "containers": [main]}}}})
}

/// The `web` Service's one managed slice.
fn slice(c: &Cluster) -> Result<Value, String> {
    let list = c
        .get(&format!(
            "{SLICES}?labelSelector=kubernetes.io/service-name%3Dweb"
        ))
        .ok_or("no list")?;
    match list["items"].as_array().map(Vec::as_slice) {
        Some([one]) => Ok(one.clone()),
        other => Err(format!("slices: {other:?}")),
    }
}

/// Each endpoint's address and whether it is ready, sorted.
fn endpoints(slice: &Value) -> Vec<(String, bool)> {
    let mut out: Vec<(String, bool)> = slice["endpoints"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| {
            (
                e["addresses"][0].as_str().unwrap_or_default().to_string(),
                e["conditions"]["ready"] == true,
            )
        })
        .collect();
    out.sort();
    out
}

/// The pod names that answer 20 requests to `http://<ip>/` from pod `client`, sorted, unique.
fn answering(c: &Cluster, ip: &str) -> Vec<String> {
    // Not `wget -T`: Debian's busybox-static wget segfaults with it.
    let script = format!("for i in $(seq 20); do timeout 2 wget -qO- http://{ip}/; done; true");
    let out = c.exec_ok("default", "client", None, &["sh", "-c", &script]);
    let mut names: Vec<String> = out.lines().map(|l| l.trim().to_string()).collect();
    names.sort();
    names.dedup();
    names
}

/// The running `web` pods' names and IPs, sorted by IP.
fn web_pods(c: &Cluster) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = c
        .live_pods("default", "app%3Dweb")
        .iter()
        .filter_map(|p| {
            Some((
                p["metadata"]["name"].as_str()?.to_string(),
                p["status"]["podIP"].as_str()?.to_string(),
            ))
        })
        .collect();
    out.sort_by(|a, b| a.1.cmp(&b.1));
    out
}

#[test]
fn a_services_endpoints_follow_its_pods_readiness_and_scale() {
    let c = Cluster::start(1);
    c.apply(&deployment(2));
    c.apply(&json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "web"},
        "spec": {"selector": {"app": "web"},
                 "ports": [{"name": "web", "port": 80, "targetPort": "http"}]}}));
    let ready = c.wait_for(secs(90), "two ready endpoints", || {
        let s = slice(&c)?;
        let pods = web_pods(&c);
        let want: Vec<(String, bool)> = pods.iter().map(|(_, ip)| (ip.clone(), true)).collect();
        if pods.len() == 2 && endpoints(&s) == want {
            Ok((s, pods))
        } else {
            Err(format!("{:?} vs pods {pods:?}", endpoints(&s)))
        }
    });
    let (s, pods) = ready;
    assert_eq!(s["addressType"], "IPv4");
    assert_eq!(
        s["ports"],
        json!([{"name": "web", "port": 8080, "protocol": "TCP"}])
    );
    assert_eq!(
        s["metadata"]["labels"]["endpointslice.kubernetes.io/managed-by"],
        "endpointslice-controller.k8s.io"
    );
    assert_eq!(s["metadata"]["ownerReferences"][0]["kind"], "Service");
    assert_eq!(s["endpoints"][0]["targetRef"]["kind"], "Pod");
    assert!(s["endpoints"][0]["nodeName"].is_string(), "{s}");

    let out = c.kubectl().ok(&[
        "get",
        "endpointslices",
        "-l",
        "kubernetes.io/service-name=web",
    ]);
    let table = Table::parse(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(
        table.headers,
        ["NAME", "ADDRESSTYPE", "PORTS", "ENDPOINTS", "AGE"]
    );
    assert_eq!(table.values("PORTS"), ["8080"]);
    let ips: Vec<&str> = pods.iter().map(|(_, ip)| ip.as_str()).collect();
    // The column lists the slice's endpoints in the slice's order (the order the pods were
    // seen ready in, which timing decides), as upstream's kubectl prints them.
    let column = table.values("ENDPOINTS");
    assert_eq!(column.len(), 1, "{out}");
    let mut listed: Vec<&str> = column[0].split(',').collect();
    listed.sort();
    assert_eq!(listed, ips, "{out}");
    let out = c.kubectl().ok(&["get", "ep", "web"]);
    let table = Table::parse(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    let mut shown: Vec<String> = table.values("ENDPOINTS")[0]
        .split(',')
        .map(str::to_string)
        .collect();
    shown.sort();
    let mut want: Vec<String> = ips.iter().map(|ip| format!("{ip}:8080")).collect();
    want.sort();
    assert_eq!(shown, want, "{out}");

    // A pod started now gets the Service's variables, as the kubelet writes them.
    let node = c.node_name(0).to_string();
    c.apply(&sh_pod("client", &node, SLEEP_FOREVER));
    c.wait_for_pod_phase("default", "client", "Running", secs(60));
    let ip = c
        .get("/api/v1/namespaces/default/services/web")
        .and_then(|s| s["spec"]["clusterIP"].as_str().map(str::to_string))
        .expect("the Service's cluster IP");
    let env = c.exec_ok("default", "client", None, &["env"]);
    // The cluster IP answers with both pods (random choice: 20 tries miss one with p = 2^-19).
    let names: Vec<String> = pods.iter().map(|(n, _)| n.clone()).collect();
    let mut sorted_names = names.clone();
    sorted_names.sort();
    c.wait_for(secs(10), "both pods answering on the cluster IP", || {
        let seen = answering(&c, &ip);
        ok_if(seen == sorted_names, format!("{seen:?}"))
    });
    for line in [
        format!("WEB_SERVICE_HOST={ip}"),
        "WEB_SERVICE_PORT=80".to_string(),
        "WEB_SERVICE_PORT_WEB=80".to_string(),
        format!("WEB_PORT=tcp://{ip}:80"),
        format!("WEB_PORT_80_TCP_ADDR={ip}"),
    ] {
        assert!(env.lines().any(|l| l == line), "{line} not in:\n{env}");
    }

    // One pod fails its readiness probe: not ready in the slice, not ready in the Endpoints.
    let (unready, unready_ip) = pods[0].clone();
    let r = c.exec("default", &unready, None, &["rm", "/tmp/ready"]);
    assert!(r.success(), "{}", r.describe());
    c.wait_for(secs(30), "the unready pod's endpoint not ready", || {
        let s = slice(&c)?;
        let ep = c
            .get("/api/v1/namespaces/default/endpoints/web")
            .ok_or("no Endpoints")?;
        let not_ready: Vec<&str> = ep["subsets"][0]["notReadyAddresses"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|a| a["ip"].as_str())
            .collect();
        let ready_in_slice = endpoints(&s).iter().filter(|(_, r)| *r).count();
        if ready_in_slice == 1 && not_ready == [unready_ip.as_str()] {
            Ok(())
        } else {
            Err(format!(
                "slice {:?}, not ready {not_ready:?}",
                endpoints(&s)
            ))
        }
    });
    let still_ready = pods[1].0.clone();
    c.wait_for(secs(5), "only the ready pod answering", || {
        let seen = answering(&c, &ip);
        ok_if(seen == [still_ready.clone()], format!("{seen:?}"))
    });

    // Scaled to one: one ready endpoint is left.
    c.kubectl()
        .ok(&["scale", "deployment", "web", "--replicas=1"]);
    c.wait_for(secs(60), "one endpoint left", || {
        let s = slice(&c)?;
        let left = endpoints(&s);
        ok_if(left.len() == 1 && left[0].1, format!("{left:?}"))
    });
    c.wait_for(secs(5), "only the remaining pod answering", || {
        let remaining: Vec<String> = web_pods(&c).into_iter().map(|(n, _)| n).collect();
        let seen = answering(&c, &ip);
        ok_if(
            seen.len() == 1 && remaining.contains(&seen[0]),
            format!("{seen:?} of {remaining:?}"),
        )
    });
}
