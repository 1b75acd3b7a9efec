//! Issue 12, the Service API (the proxy and DNS come later): the `kubernetes` Service with its
//! endpoints and `kubectl cluster-info`; `kubectl expose` (ClusterIP and NodePort) with real
//! kubectl binaries, including 1.33 (expose sends JSON); `kubectl get svc` columns; cluster
//! IPs and node ports allocated from their ranges, requested ones honoured or refused with
//! upstream's 422, freed when the Service goes, and immutable.

use std::path::Path;

use berth_tests::objects::deployment;
use berth_tests::{Controller, Req, Table};
use serde_json::{Value, json};

const SERVICES: &str = "/api/v1/namespaces/default/services";
const KUBECTLS: [&str; 3] = [
    "/usr/lib/google-cloud-sdk/bin/kubectl.1.33",
    "/usr/lib/google-cloud-sdk/bin/kubectl.1.31",
    "/usr/lib/google-cloud-sdk/bin/kubectl.1.27",
];

fn cluster_ip(svc: &Value) -> std::net::Ipv4Addr {
    svc["spec"]["clusterIP"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no cluster IP: {svc}"))
}

fn in_service_range(ip: std::net::Ipv4Addr) -> bool {
    ip.octets()[..2] == [10, 43]
}

#[test]
fn the_kubernetes_service_points_at_the_controller_and_cluster_info_shows_it() {
    let c = Controller::start();
    let out = c.kubectl_ok(&["get", "svc", "kubernetes"]);
    let table = Table::parse(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(
        table.headers,
        [
            "NAME",
            "TYPE",
            "CLUSTER-IP",
            "EXTERNAL-IP",
            "PORT(S)",
            "AGE"
        ]
    );
    assert_eq!(table.values("TYPE"), ["ClusterIP"]);
    assert_eq!(table.values("CLUSTER-IP"), ["10.43.0.1"]);
    assert_eq!(table.values("EXTERNAL-IP"), ["<none>"]);
    assert_eq!(table.values("PORT(S)"), ["443/TCP"]);

    let port = c
        .url()
        .rsplit(':')
        .next()
        .and_then(|p| p.parse::<u16>().ok())
        .expect("the controller's port");
    let api = c.admin_api();
    let svc = api.get_ok(&format!("{SERVICES}/kubernetes"));
    assert_eq!(svc["spec"]["ports"][0]["targetPort"], port);
    assert_eq!(svc["metadata"]["labels"]["provider"], "kubernetes");
    let ep = api.get_ok("/api/v1/namespaces/default/endpoints/kubernetes");
    assert_eq!(ep["subsets"][0]["ports"][0]["port"], port);
    let slice =
        api.get_ok("/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/kubernetes");
    assert_eq!(slice["addressType"], "IPv4");
    assert_eq!(
        slice["metadata"]["labels"]["kubernetes.io/service-name"],
        "kubernetes"
    );
    assert_eq!(
        slice["endpoints"][0]["addresses"][0],
        ep["subsets"][0]["addresses"][0]["ip"]
    );
    let out = c.kubectl_ok(&["get", "endpoints", "kubernetes"]);
    let table = Table::parse(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(table.headers, ["NAME", "ENDPOINTS", "AGE"]);
    assert!(
        table.values("ENDPOINTS")[0].ends_with(&format!(":{port}")),
        "{out}"
    );

    // kubectl colours the words (ANSI escapes) even into a pipe.
    let out = c.kubectl_ok(&["cluster-info"]);
    let first = out.lines().next().unwrap_or_default();
    assert!(
        first.contains("Kubernetes control plane") && first.contains(c.url()),
        "{out}"
    );
}

#[test]
fn kubectl_expose_makes_cluster_ip_and_node_port_services_for_a_deployment() {
    let c = Controller::start();
    let api = c.admin_api();
    let mut web = deployment(
        "web",
        1,
        json!({"containers": [{"name": "main", "image": "busybox:1.28",
            "ports": [{"containerPort": 8080, "name": "http"}]}]}),
    );
    web["metadata"]["labels"] = json!({"app": "web"});
    api.create("/apis/apps/v1/namespaces/default/deployments", &web);
    let mut node_ports = Vec::new();
    for (i, bin) in KUBECTLS.iter().enumerate() {
        let k = c.kubectl().with_binary(Path::new(bin));
        let (name, np) = (format!("web{i}"), format!("web{i}-np"));
        let out = k.ok(&[
            "expose",
            "deployment",
            "web",
            "--name",
            &name,
            "--port=80",
            "--target-port=8080",
        ]);
        assert_eq!(out.trim(), format!("service/{name} exposed"), "{bin}");
        let svc = api.get_ok(&format!("{SERVICES}/{name}"));
        assert_eq!(svc["spec"]["selector"], json!({"app": "web"}), "{bin}");
        assert_eq!(
            svc["spec"]["ports"][0],
            json!({"port": 80, "protocol": "TCP", "targetPort": 8080}),
            "{bin}"
        );
        assert!(in_service_range(cluster_ip(&svc)), "{bin}: {svc}");
        let out = k.ok(&["get", "svc", &name, "-o", "wide"]);
        let table = Table::parse(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
        assert_eq!(table.values("PORT(S)"), ["80/TCP"], "{bin}");
        assert_eq!(table.values("SELECTOR"), ["app=web"], "{bin}");
        assert_eq!(
            table.values("CLUSTER-IP"),
            [cluster_ip(&svc).to_string()],
            "{bin}"
        );

        k.ok(&[
            "expose",
            "deployment",
            "web",
            "--name",
            &np,
            "--type=NodePort",
            "--port=80",
            "--target-port=http",
        ]);
        let svc = api.get_ok(&format!("{SERVICES}/{np}"));
        let node_port = svc["spec"]["ports"][0]["nodePort"]
            .as_i64()
            .unwrap_or_else(|| panic!("{bin}: no node port: {svc}"));
        assert!((30000..=32767).contains(&node_port), "{bin}: {node_port}");
        assert_eq!(svc["spec"]["externalTrafficPolicy"], "Cluster", "{bin}");
        assert_eq!(svc["spec"]["ports"][0]["targetPort"], "http", "{bin}");
        let out = k.ok(&["get", "svc", &np]);
        let table = Table::parse(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
        assert_eq!(table.values("TYPE"), ["NodePort"], "{bin}");
        assert_eq!(
            table.values("PORT(S)"),
            [format!("80:{node_port}/TCP")],
            "{bin}"
        );
        node_ports.push(node_port);
    }
    // Every Service got its own address and node port.
    let list = api.get_ok(SERVICES);
    let mut ips: Vec<_> = list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(cluster_ip)
        .collect();
    let count = ips.len();
    ips.sort();
    ips.dedup();
    assert_eq!(ips.len(), count, "{ips:?}");
    assert_eq!(count, 1 + 2 * KUBECTLS.len());
    node_ports.sort();
    node_ports.dedup();
    assert_eq!(node_ports.len(), KUBECTLS.len());
}

#[test]
fn addresses_and_ports_are_honoured_when_free_refused_when_taken_and_freed_with_the_service() {
    let c = Controller::start();
    let api = c.admin_api();
    let svc = |name: &str, spec: Value| {
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
               "spec": spec})
    };
    let post = |body: &Value| api.send(Req::post(SERVICES, body));

    let r = post(&svc(
        "fixed",
        json!({"clusterIP": "10.43.7.7", "type": "NodePort",
        "ports": [{"port": 80, "nodePort": 30777}]}),
    ));
    assert_eq!(r.status, 201, "{}", r.describe());
    assert_eq!(r.json()["spec"]["clusterIPs"], json!(["10.43.7.7"]));

    // Taken (by `fixed`, and 10.43.0.1 by `kubernetes`), outside the range, a used node port.
    for (body, field, message) in [
        (
            svc(
                "again",
                json!({"clusterIP": "10.43.7.7", "ports": [{"port": 80}]}),
            ),
            "spec.clusterIPs",
            "failed to allocate IP 10.43.7.7: provided IP is already allocated",
        ),
        (
            svc(
                "api",
                json!({"clusterIP": "10.43.0.1", "ports": [{"port": 80}]}),
            ),
            "spec.clusterIPs",
            "provided IP is already allocated",
        ),
        (
            svc(
                "outside",
                json!({"clusterIP": "10.0.0.5", "ports": [{"port": 80}]}),
            ),
            "spec.clusterIPs",
            "The range of valid IPs is 10.43.0.0/16",
        ),
        (
            svc(
                "np",
                json!({"type": "NodePort", "ports": [{"port": 80, "nodePort": 30777}]}),
            ),
            "spec.ports[0].nodePort",
            "provided port is already allocated",
        ),
        (
            svc(
                "low",
                json!({"type": "NodePort", "ports": [{"port": 80, "nodePort": 8080}]}),
            ),
            "spec.ports[0].nodePort",
            "The range of valid ports is 30000-32767",
        ),
        (
            svc("1bad", json!({"ports": [{"port": 80}]})),
            "metadata.name",
            "a DNS-1035 label",
        ),
    ] {
        let r = post(&body);
        assert_eq!(r.status, 422, "{}", r.describe());
        let status = r.json();
        assert_eq!(status["reason"], "Invalid", "{}", r.body);
        assert_eq!(status["details"]["causes"][0]["field"], field, "{}", r.body);
        assert!(r.body.contains(message), "{}", r.body);
    }
    // Nothing half-written: only `kubernetes` and `fixed` exist.
    let names: Vec<String> = api.get_ok(SERVICES)["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s["metadata"]["name"].as_str().map(str::to_string))
        .collect();
    assert_eq!(names, ["fixed", "kubernetes"]);

    // The cluster IP is immutable; an update that leaves it out keeps it, and the node port.
    let r = api.send(Req::patch(
        format!("{SERVICES}/fixed"),
        "application/merge-patch+json",
        &json!({"spec": {"clusterIP": "10.43.7.8", "clusterIPs": ["10.43.7.8"]}}),
    ));
    assert_eq!(r.status, 422, "{}", r.describe());
    assert!(r.body.contains("may not change once set"), "{}", r.body);
    let mut replaced = svc(
        "fixed",
        json!({"type": "NodePort", "ports": [{"port": 80}]}),
    );
    replaced["metadata"]["resourceVersion"] =
        api.get_ok(&format!("{SERVICES}/fixed"))["metadata"]["resourceVersion"].clone();
    let r = api.send(Req::put(format!("{SERVICES}/fixed"), &replaced));
    assert_eq!(r.status, 200, "{}", r.describe());
    assert_eq!(r.json()["spec"]["clusterIP"], "10.43.7.7");
    assert_eq!(r.json()["spec"]["ports"][0]["nodePort"], 30777);

    // Deleting the Service frees its address and node port.
    let r = api.send(Req::delete(format!("{SERVICES}/fixed")));
    assert_eq!(r.status, 200, "{}", r.describe());
    let r = post(&svc(
        "second",
        json!({"clusterIP": "10.43.7.7", "type": "NodePort",
        "ports": [{"port": 80, "nodePort": 30777}]}),
    ));
    assert_eq!(r.status, 201, "{}", r.describe());

    // The StatefulSet page's headless Service gets no address.
    let headless = berth_tests::seeds::seed("nginx.service");
    let r = api.send(Req::post(SERVICES, &headless.object));
    assert_eq!(r.status, 201, "{}", r.describe());
    assert_eq!(r.json()["spec"]["clusterIP"], "None");
    let out = c.kubectl_ok(&["get", "svc", "nginx"]);
    let table = Table::parse(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(table.values("CLUSTER-IP"), ["None"]);
    assert_eq!(table.values("PORT(S)"), ["80/TCP"]);
}
