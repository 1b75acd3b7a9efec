//! Issue 28, acceptance 1: one unauthenticated client holding 200 join requests whose bodies
//! never finish does not take the cluster down. Requests are served at priority levels with
//! their own shares (API Priority and Fairness' split): the joins fill the `join` level only,
//! and its body deadline answers the ones it let in. Meanwhile the node stays Ready, its Lease
//! keeps being renewed, a Service keeps answering through its cluster IP, and a user with
//! `edit` keeps creating objects.
//!
//! The attack lasts 120 s, three times the default `--node-monitor-grace-period` (40 s) after
//! which a node whose heartbeats were refused would go Unknown.

use std::time::{Duration, Instant};

use berth_tests::objects::configmap;
use berth_tests::pod_specs::{SLEEP_FOREVER, sh_container, sh_pod};
use berth_tests::wait::ok_if;
use berth_tests::{Cluster, ClusterConfig, Credentials, RawTls, Req, secs};
use serde_json::json;

const ATTACK: Duration = Duration::from_secs(120);
const SLOW_CLIENTS: usize = 200;

/// A join request whose body stops after its first bytes.
fn slow_join(port: u16, ca: &[u8]) -> Option<RawTls> {
    let mut conn = RawTls::connect(port, ca, secs(10)).ok()?;
    let head = b"POST /v1-berth/node-certificate HTTP/1.1\r\nHost: localhost\r\n\
        Content-Type: application/json\r\nContent-Length: 4096\r\n\r\n{\"nodeName\":";
    conn.send(head).ok()?;
    Some(conn)
}

#[test]
fn two_hundred_unfinished_joins_leave_nodes_services_and_users_working() {
    let tokens = tempfile::tempdir().expect("temp dir");
    let token_file = tokens.path().join("tokens.csv");
    std::fs::write(&token_file, "bob-token,bob,1001\n").expect("token file");
    let c = Cluster::start_with(ClusterConfig {
        controller_args: vec![
            "--token-auth-file".into(),
            token_file.to_string_lossy().into_owned(),
        ],
        ..ClusterConfig::agents(1)
    });
    let admin = c.controller().admin_api();
    let grant = admin.send(Req::post(
        "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings",
        &json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": "bob-edits"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "bob"}]}),
    ));
    assert_eq!(grant.status, 201, "{}", grant.describe());
    let bob = c
        .controller()
        .api_with(Credentials::Bearer("bob-token".into()));

    // A web server behind a Service, and a client pod that asks it through the cluster IP.
    let node = c.node_name(0).to_string();
    let mut web = sh_container(
        "main",
        "mkdir -p /www && echo up > /www/index.html && httpd -p 8080 -h /www; \
         trap 'exit 0' TERM; while true; do sleep 1; done",
    );
    web["ports"] = json!([{"containerPort": 8080}]);
    let mut web_pod = sh_pod("web", &node, SLEEP_FOREVER);
    web_pod["metadata"]["labels"] = json!({"app": "web"});
    web_pod["spec"]["containers"] = json!([web]);
    c.apply(&web_pod);
    c.apply(
        &json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
        "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080}]}}),
    );
    c.apply(&sh_pod("client", &node, SLEEP_FOREVER));
    c.wait_for_pod_ready("default", "web", secs(90));
    c.wait_for_pod_ready("default", "client", secs(90));
    let ip = c
        .get("/api/v1/namespaces/default/services/web")
        .and_then(|s| s["spec"]["clusterIP"].as_str().map(str::to_string))
        .expect("the Service's cluster IP");
    let service_answers = |c: &Cluster| {
        let script = format!("timeout 3 wget -qO- http://{ip}/");
        c.exec("default", "client", None, &["sh", "-c", &script])
            .stdout
            .contains("up")
    };
    c.wait_for(secs(30), "the Service to answer", || {
        ok_if(service_answers(&c), "no answer")
    });
    let lease_path =
        format!("/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{node}");
    let renew_time = |c: &Cluster| {
        c.get(&lease_path)
            .and_then(|l| l["spec"]["renewTime"].as_str().map(str::to_string))
            .unwrap_or_default()
    };

    // The attack: 200 joins whose bodies never finish, all from one address.
    let (port, ca) = (c.controller().port(), c.controller().ca_pem());
    let mut slow: Vec<RawTls> = (0..SLOW_CLIENTS)
        .filter_map(|_| slow_join(port, &ca))
        .collect();
    assert_eq!(slow.len(), SLOW_CLIENTS, "not every slow join connected");
    let started = Instant::now();
    let mut renewals = std::collections::BTreeSet::new();
    let mut created = 0;
    while started.elapsed() < ATTACK {
        let node_obj = c.get(&format!("/api/v1/nodes/{node}")).expect("the node");
        let ready = node_obj["status"]["conditions"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["type"] == "Ready"))
            .map(|c| c["status"].clone());
        assert_eq!(
            ready,
            Some(json!("True")),
            "the node left Ready {:?} into the attack: {node_obj}",
            started.elapsed()
        );
        renewals.insert(renew_time(&c));
        let name = format!("during-{created}");
        let reply = bob.send(Req::post(
            "/api/v1/namespaces/default/configmaps",
            &configmap(&name, &[("k", "v")]),
        ));
        assert_eq!(
            reply.status,
            201,
            "bob's create during the attack: {}",
            reply.describe()
        );
        created += 1;
        assert!(
            service_answers(&c),
            "the Service stopped answering {:?} into the attack",
            started.elapsed()
        );
        std::thread::sleep(Duration::from_secs(2)); // not ordering: the attack's duration
    }
    // The Lease was renewed throughout (every 10 s: at least 10 times in 120 s).
    assert!(renewals.len() >= 10, "Lease renewals seen: {renewals:?}");
    // Every slow join was answered (429 at once over the join level's share, 408 at its body
    // deadline) or closed.
    let mut answers = std::collections::BTreeMap::new();
    for conn in &mut slow {
        let code = conn
            .read_answer(secs(5))
            .map(|(status, _, _)| status)
            .unwrap_or(0);
        *answers.entry(code).or_insert(0) += 1;
    }
    assert!(
        answers.keys().all(|code| matches!(code, 0 | 408 | 429)),
        "answers to the slow joins: {answers:?}"
    );
    assert!(
        answers.get(&0).copied().unwrap_or(0) < SLOW_CLIENTS,
        "{answers:?}"
    );
    eprintln!(
        "slow joins answered {answers:?}; {created} creates by bob, {} Lease renewals seen",
        renewals.len()
    );
    let metrics = admin.get("/metrics").body;
    assert!(
        metrics.contains("apiserver_flowcontrol_rejected_requests_total{priority_level=\"join\""),
        "{metrics}"
    );
}
