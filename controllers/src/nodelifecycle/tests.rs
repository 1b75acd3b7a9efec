//! The controller in process over a real store, with a grace period of a fraction of a second:
//! fake agents renew their Leases (or stop), and the tests read what the controller wrote.

use super::*;
use berth_runtime::testing::ControlPlane;
use berth_runtime::testing::edit_status;
use berth_shared::resource::NAMESPACES;

const GRACE: Duration = Duration::from_millis(600);

fn now_micro() -> String {
    Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%S%.6fZ")
        .to_string()
}

struct Cluster {
    cp: ControlPlane,
}

impl Cluster {
    fn start() -> Cluster {
        let cp = ControlPlane::start();
        cp.registry()
            .create(
                NAMESPACES,
                None,
                json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": LEASE_NAMESPACE}}),
                &WriteOptions::default(),
            )
            .unwrap();
        let config = Config {
            grace: Grace {
                monitor: GRACE,
                startup: GRACE,
            },
        };
        cp.run(|ctx, stop| run(ctx, config, stop));
        Cluster { cp }
    }

    fn registry(&self) -> &Registry {
        self.cp.registry()
    }

    /// A Ready node in `zone` with its Lease.
    fn node(&self, name: &str, zone: &str) {
        let node = json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"topology.kubernetes.io/zone": zone}},
            "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                "lastHeartbeatTime": berth_registry::meta::now_rfc3339()}]}});
        self.registry()
            .create(NODES, None, node, &WriteOptions::default())
            .unwrap();
        self.renew(name);
    }

    /// Creates or renews node `name`'s Lease.
    fn renew(&self, name: &str) {
        let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": name, "namespace": LEASE_NAMESPACE},
            "spec": {"holderIdentity": name, "leaseDurationSeconds": 40, "renewTime": now_micro()}});
        let r = self.registry().update_with(
            LEASES,
            Some(LEASE_NAMESPACE),
            name,
            Part::Main,
            &WriteOptions::default(),
            |mut l| {
                l["spec"]["renewTime"] = json!(now_micro());
                Ok::<_, RegistryError>(l)
            },
        );
        if let Err(RegistryError::NotFound { .. }) = r {
            self.registry()
                .create(
                    LEASES,
                    Some(LEASE_NAMESPACE),
                    lease,
                    &WriteOptions::default(),
                )
                .unwrap();
        }
    }

    /// Keeps renewing the Leases of `nodes` (a fake agent each) until the test ends.
    fn keep_alive(&self, nodes: &[&str]) {
        let registry = self.registry().clone();
        let nodes: Vec<String> = nodes.iter().map(|n| n.to_string()).collect();
        let stop = self.cp.stop.clone();
        self.cp.keep(tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(100));
            loop {
                tokio::select! {
                    _ = tick.tick() => {}
                    _ = stop.cancelled() => return,
                }
                for n in &nodes {
                    let (r, n) = (registry.clone(), n.clone());
                    let _ = tokio::task::spawn_blocking(move || {
                        r.update_with(
                            LEASES,
                            Some(LEASE_NAMESPACE),
                            &n,
                            Part::Main,
                            &WriteOptions::default(),
                            |mut l| {
                                l["spec"]["renewTime"] = json!(now_micro());
                                Ok::<_, RegistryError>(l)
                            },
                        )
                    })
                    .await;
                }
            }
        }));
    }

    /// A Ready pod bound to `node`.
    fn pod(&self, name: &str, node: &str) {
        let pod = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "busybox:1.28"}]}});
        self.registry()
            .create(PODS, Some("default"), pod, &WriteOptions::default())
            .unwrap();
        edit_status(self.registry(), PODS, name, |p| {
            p["status"]["phase"] = json!("Running");
            p["status"]["conditions"] = json!([{"type": "Ready", "status": "True"}]);
        });
    }

    fn get(
        &self,
        rt: &'static berth_shared::resource::ResourceType,
        ns: Option<&str>,
        name: &str,
    ) -> Value {
        self.registry().get(rt, ns, name).unwrap().value().unwrap()
    }

    fn taints(&self, node: &str) -> Vec<String> {
        self.get(NODES, None, node)["spec"]["taints"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|t| {
                format!(
                    "{}:{}",
                    t["key"].as_str().unwrap_or(""),
                    t["effect"].as_str().unwrap_or("")
                )
            })
            .collect()
    }

    fn ready(&self, node: &str) -> String {
        self.get(NODES, None, node)["status"]["conditions"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["type"] == "Ready"))
            .and_then(|c| c["status"].as_str())
            .unwrap_or("")
            .to_string()
    }

    async fn stop(self) {
        self.cp.shut_down().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_node_goes_unknown_is_tainted_its_pods_unready_and_recovers_when_it_posts() {
    let c = Cluster::start();
    for n in ["n1", "n2", "n3"] {
        c.node(n, "z");
    }
    c.keep_alive(&["n1", "n2"]);
    c.pod("web", "n3");
    let both = vec![
        "node.kubernetes.io/unreachable:NoSchedule".to_string(),
        "node.kubernetes.io/unreachable:NoExecute".to_string(),
    ];
    c.cp.wait_until(
        "n3 Unknown with both unreachable taints, its pod not Ready",
        || {
            let pod = c.get(PODS, Some("default"), "web");
            c.ready("n3") == "Unknown"
                && c.taints("n3") == both
                && pod["status"]["conditions"][0]["status"] == "False"
        },
        || format!("{} {:?}", c.ready("n3"), c.taints("n3")),
    )
    .await;
    assert_eq!(c.ready("n1"), "True", "a renewing node stays Ready");
    assert!(c.taints("n1").is_empty());
    // The agent is back and posts Ready. Its heartbeat has second resolution, and with a 0.6 s
    // grace period it is often the very time the Unknown status carries: turning Ready is
    // what tells the controller it posted.
    edit_status(c.registry(), NODES, "n3", |n| {
        n["status"]["conditions"] = json!([{"type": "Ready", "status": "True",
            "lastHeartbeatTime": berth_registry::meta::now_rfc3339()}]);
    });
    // and renews its Lease from then on, as an agent does (the grace period here is 0.6 s).
    c.keep_alive(&["n3"]);
    c.cp.wait_until(
        "n3's taints gone",
        || c.taints("n3").is_empty(),
        || format!("{}", c.get(NODES, None, "n3")["status"]),
    )
    .await;
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn when_every_node_is_silent_none_gets_a_no_execute_taint() {
    let c = Cluster::start();
    for n in ["n1", "n2"] {
        c.node(n, "z");
    }
    c.cp.wait_until(
        "both Unknown and tainted NoSchedule",
        || {
            ["n1", "n2"].iter().all(|n| {
                c.ready(n) == "Unknown"
                    && c.taints(n) == ["node.kubernetes.io/unreachable:NoSchedule"]
            })
        },
        || format!("{:?} {:?}", c.taints("n1"), c.taints("n2")),
    )
    .await;
    c.stop().await;
}
