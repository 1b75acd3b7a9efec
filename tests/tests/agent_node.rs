//! Agent acceptance 9: the Node. An agent registers its Node with the standard and its own
//! labels, its taints, capacity and allocatable (cpu, memory, pods, ephemeral-storage), an
//! InternalIP, nodeInfo, the four conditions and a podCIDR from the cluster CIDR, and renews its
//! Lease in `kube-node-lease`. With its own credentials a node may not write another node's
//! Node or Lease, nor the status of a pod bound to another node (403). Issue 9: a node's name is
//! bound to its agent's secret (a restarted agent rejoins with it, anyone else with the join
//! token is refused), and the agent's root dir and keys are private.

use berth_tests::client::Req;
use berth_tests::host::file_mode as mode;
use berth_tests::pod_reading::{ipv4_in_cidr, time};
use berth_tests::pod_specs::{SLEEP_FOREVER, sh_pod};
use berth_tests::wait::ok_if;
use berth_tests::{AgentOptions, Cluster, ClusterConfig, Table, secs};
use serde_json::{Value, json};

const LEASES: &str = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases";
const WRITTEN: &str = "written with another node's credentials";

fn condition<'a>(node: &'a Value, kind: &str) -> Option<&'a str> {
    node["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)?["status"]
        .as_str()
}

#[test]
fn a_node_registers_with_labels_taints_capacity_and_a_renewed_lease() {
    let c = Cluster::start_with(ClusterConfig {
        agents: vec![AgentOptions {
            labels: "berth.test/role=web,tier=front".into(),
            taints: "dedicated=web:NoSchedule".into(),
            max_pods: 42,
            ..AgentOptions::default()
        }],
        ..ClusterConfig::default()
    });
    let name = c.node_name(0).to_string();
    let node = c.get(&format!("/api/v1/nodes/{name}")).unwrap();
    let labels = &node["metadata"]["labels"];
    assert_eq!(
        labels["kubernetes.io/hostname"],
        name.as_str(),
        "{labels:#}"
    );
    assert_eq!(labels["kubernetes.io/os"], "linux", "{labels:#}");
    let arch = berth_tests::fixtures::layout::host_architecture();
    assert_eq!(labels["kubernetes.io/arch"], arch, "{labels:#}");
    assert_eq!(labels["berth.test/role"], "web", "{labels:#}");
    assert_eq!(labels["tier"], "front", "{labels:#}");
    let taints = node["spec"]["taints"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        taints
            .iter()
            .any(|t| t["key"] == "dedicated" && t["value"] == "web" && t["effect"] == "NoSchedule"),
        "{taints:#?}"
    );

    let pod_cidr = node["spec"]["podCIDR"].as_str().unwrap();
    assert!(pod_cidr.ends_with("/24"), "{pod_cidr}");
    let net = pod_cidr.split('/').next().unwrap();
    assert!(
        ipv4_in_cidr(net, c.cluster_cidr()),
        "{pod_cidr} not in {}",
        c.cluster_cidr()
    );

    let status = &node["status"];
    for list in ["capacity", "allocatable"] {
        let r = &status[list];
        for key in ["cpu", "memory", "pods", "ephemeral-storage"] {
            assert!(r[key].is_string(), "{list}.{key} missing: {r:#}");
        }
        assert_eq!(r["pods"], "42", "{list}: {r:#}");
    }
    let cpus: u64 = status["capacity"]["cpu"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    assert!(cpus >= 1, "capacity.cpu: {status:#}");
    assert!(
        status["capacity"]["memory"]
            .as_str()
            .is_some_and(|m| m.ends_with("Ki") && m.len() > 3),
        "{status:#}"
    );
    let addresses = status["addresses"].as_array().cloned().unwrap_or_default();
    assert!(
        addresses
            .iter()
            .any(|a| a["type"] == "InternalIP" && a["address"] == "127.0.0.1"),
        "{addresses:#?}"
    );
    assert!(
        addresses.iter().any(
            |a| a["type"] == "Hostname" && a["address"].as_str().is_some_and(|h| !h.is_empty())
        ),
        "{addresses:#?}"
    );
    let runtime = status["nodeInfo"]["containerRuntimeVersion"]
        .as_str()
        .unwrap_or("");
    assert!(
        runtime.starts_with("containerd://"),
        "{:#}",
        status["nodeInfo"]
    );
    assert_eq!(status["nodeInfo"]["operatingSystem"], "linux");
    assert_eq!(condition(&node, "Ready"), Some("True"));
    for pressure in ["MemoryPressure", "DiskPressure", "PIDPressure"] {
        assert_eq!(condition(&node, pressure), Some("False"), "{pressure}");
    }

    let wide = c.kubectl().ok(&["get", "nodes", "-o", "wide"]);
    let table = Table::parse(&wide).unwrap();
    assert_eq!(table.cell(&name, "STATUS"), Some("Ready"), "{wide}");
    assert_eq!(
        table.cell(&name, "INTERNAL-IP"),
        Some("127.0.0.1"),
        "{wide}"
    );

    let lease_path = format!("{LEASES}/{name}");
    let lease = c.get(&lease_path).expect("the node's Lease");
    assert_eq!(lease["spec"]["holderIdentity"], name.as_str());
    let first = time(&lease["spec"]["renewTime"]).expect("renewTime");
    c.wait_for(secs(30), "the Lease renewed", || {
        let lease = c.get(&lease_path).ok_or("lease gone")?;
        match time(&lease["spec"]["renewTime"]) {
            Some(t) if t > first => Ok(()),
            _ => Err("renewTime unchanged"),
        }
    });
}

#[test]
fn node_credentials_reach_only_their_own_objects() {
    let c = Cluster::start(2);
    let (a, b) = (c.node_name(0).to_string(), c.node_name(1).to_string());
    c.apply(&sh_pod("on-b", &b, SLEEP_FOREVER));
    let pod = c.wait_for_pod_ready("default", "on-b", secs(90));
    let node_a = c.node_api(0);

    // Its own Node and Lease: allowed.
    assert_eq!(node_a.get(&format!("/api/v1/nodes/{a}")).status, 200);
    assert_eq!(node_a.get(&format!("{LEASES}/{a}")).status, 200);

    let forbidden = |req: Req| {
        let reply = node_a.send(req);
        assert_eq!(reply.status, 403, "{}", reply.describe());
    };
    let mut updated = pod.clone();
    updated["status"]["message"] = json!(WRITTEN);
    forbidden(Req::put(
        "/api/v1/namespaces/default/pods/on-b/status",
        &updated,
    ));
    forbidden(Req::patch(
        "/api/v1/namespaces/default/pods/on-b/status",
        "application/merge-patch+json",
        &json!({"status": {"message": WRITTEN}}),
    ));
    forbidden(Req::patch(
        format!("/api/v1/nodes/{b}"),
        "application/merge-patch+json",
        &json!({"metadata": {"labels": {"owned-by": "a"}}}),
    ));
    forbidden(Req::patch(
        format!("/api/v1/nodes/{b}/status"),
        "application/merge-patch+json",
        &json!({"status": {"conditions": [{"type": "Ready", "status": "False"}]}}),
    ));
    forbidden(Req::patch(
        format!("{LEASES}/{b}"),
        "application/merge-patch+json",
        &json!({"spec": {"holderIdentity": a}}),
    ));

    // The same through kubectl with a kubeconfig built from the node's pki directory.
    let kubeconfig = c.node_kubeconfig(0);
    let as_node = c.kubectl().with_kubeconfig(&kubeconfig);
    let r = as_node.fails(&["label", "node", &b, "owned-by=a"]);
    assert!(
        r.stderr.contains("Forbidden") || r.stderr.contains("forbidden"),
        "{}",
        r.describe()
    );
    let r = as_node.fails(&["delete", "pod", "on-b", "--wait=false"]);
    assert!(
        r.stderr.to_lowercase().contains("forbidden"),
        "{}",
        r.describe()
    );

    let after = c.pod("default", "on-b").unwrap();
    assert_ne!(after["status"]["message"], WRITTEN);
    let node_b = c.get(&format!("/api/v1/nodes/{b}")).unwrap();
    assert!(
        node_b["metadata"]["labels"].get("owned-by").is_none(),
        "{node_b:#}"
    );
    assert_eq!(condition(&node_b, "Ready"), Some("True"));
}

/// The agent's root dir, its pki dir and its key, certificate, CA and node secret, with the
/// modes they must have.
fn agent_private_paths(c: &Cluster) -> Vec<(std::path::PathBuf, u32)> {
    let agent = c.agent(0);
    let mut out = vec![
        (agent.root_dir(), 0o700),
        (agent.root_dir().join("pki"), 0o700),
    ];
    for f in ["node.key", "node.crt", "ca.crt", "node-secret"] {
        out.push((agent.pki(f), 0o600));
    }
    out
}

fn wrong_modes(paths: &[(std::path::PathBuf, u32)]) -> Vec<String> {
    paths
        .iter()
        .filter(|(p, want)| mode(p) != *want)
        .map(|(p, want)| format!("{} is {:04o}, want {want:04o}", p.display(), mode(p)))
        .collect()
}

#[test]
fn a_restarted_agent_rejoins_with_its_own_secret_and_its_files_stay_private() {
    use std::os::unix::fs::PermissionsExt;
    let mut c = Cluster::start(1);
    let name = c.node_name(0).to_string();
    let paths = agent_private_paths(&c);
    let wrong = wrong_modes(&paths);
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));

    // Someone else with the join token cannot get a certificate for this node's name.
    let token = berth_tests::join::token_secret(c.token());
    let anonymous = c.controller().anonymous_api();
    let takeover = berth_tests::join::request(
        &anonymous,
        &token,
        &name,
        Some("another-hosts-secret"),
        &["127.0.0.1"],
    );
    assert_eq!(takeover.reply.status, 403, "{}", takeover.reply.describe());

    // The agent restarts without its certificate (so it must join again), with its files
    // loosened: it tightens them and rejoins with the secret it kept.
    c.kill9_agent(0);
    let old_cert = std::fs::read_to_string(c.agent(0).pki("node.crt")).unwrap_or_default();
    std::fs::remove_file(c.agent(0).pki("node.crt"))
        .unwrap_or_else(|e| panic!("removing node.crt: {e}"));
    // The client pair the certificate manager keeps (key and certificate in one file).
    match std::fs::remove_file(c.agent(0).pki("kubelet-client-current.pem")) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => panic!("removing kubelet-client-current.pem: {e}"),
    }
    for (path, want) in &paths {
        let loose = if *want == 0o700 { 0o755 } else { 0o644 };
        if path.exists() {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(loose))
                .unwrap_or_else(|e| panic!("chmod {}: {e}", path.display()));
        }
    }
    c.restart_agent(0);
    let cert_path = c.agent(0).pki("node.crt");
    c.wait_for(
        secs(30),
        "a new node certificate, and private files",
        || {
            let cert = std::fs::read_to_string(&cert_path).map_err(|e| e.to_string())?;
            if cert.is_empty() || cert == old_cert {
                return Err("no new certificate yet".to_string());
            }
            let wrong = wrong_modes(&paths);
            ok_if(wrong.is_empty(), wrong.join("; "))
        },
    );
    // The new credentials work, and the node keeps posting its status with them.
    assert_eq!(
        c.node_api(0).get(&format!("/api/v1/nodes/{name}")).status,
        200
    );
    c.wait_node_ready(0);
    let log = std::fs::read_to_string(c.agent(0).stderr_log()).unwrap_or_default();
    let second = log.rsplit("agent start #2").next().unwrap_or_default();
    assert!(
        second.contains("tightened"),
        "no warning about the loosened modes in the agent's log:\n{second}"
    );
}
