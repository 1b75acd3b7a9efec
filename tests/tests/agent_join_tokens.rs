//! Issue 9, join tokens with the real agent: an agent given a per-node token
//! (`berth-controller token create --node NAME`) joins as NAME exactly as with the cluster's
//! token; after `berth-controller token rotate` an agent that joined with the old token keeps
//! working, restarts included, on the certificate it holds.

use berth_tests::join::{request, token_secret};
use berth_tests::pod_reading::time;
use berth_tests::{AgentOptions, Cluster, ClusterConfig, secs};

const LEASES: &str = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases";

#[test]
fn a_per_node_token_joins_an_agent_and_a_rotation_leaves_joined_agents_working() {
    let mut c = Cluster::start_with(ClusterConfig {
        agents: vec![AgentOptions::default()],
        skip_fixtures: true,
        ..ClusterConfig::default()
    });
    let old = c.token().to_string();

    // A second agent joins with a token made for its name only.
    let name_b = c.node_name_of(1);
    let made = c
        .controller()
        .subcommand(&["token", "create", "--node", &name_b]);
    assert!(made.success(), "{}", made.describe());
    let per_node = made.stdout.trim().to_string();
    let b = c.add_agent(&AgentOptions {
        token: Some(per_node.clone()),
        ..AgentOptions::default()
    });
    assert_eq!(c.node_name(b), name_b);
    // It joined with that token: the audit log names the token's id.
    let id = token_secret(&per_node)
        .split_once('.')
        .map(|(id, _)| id.to_string())
        .unwrap_or_else(|| panic!("not a per-node token: {per_node}"));
    let stderr = c.controller().stderr_log();
    c.wait_for(secs(10), "the audit line of the per-node join", || {
        let log = std::fs::read_to_string(&stderr).map_err(|e| e.to_string())?;
        log.lines()
            .find(|l| l.contains("issued") && l.contains(&name_b) && l.contains(&id))
            .map(|_| ())
            .ok_or_else(|| format!("no 'issued' line for {name_b} with token={id}"))
    });

    // The cluster's token is rotated while everything runs.
    let rotated = c.controller().subcommand(&["token", "rotate"]);
    assert!(rotated.success(), "{}", rotated.describe());
    let new = rotated.stdout.trim().to_string();
    assert_ne!(token_secret(&new), token_secret(&old));
    let a = c.node_name(0).to_string();
    let attempt = request(
        &c.controller().anonymous_api(),
        &token_secret(&old),
        "after-rotation",
        Some("s"),
        &["127.0.0.1"],
    );
    assert_eq!(attempt.reply.status, 401, "{}", attempt.reply.describe());

    // The agent that joined with the old token still has it in its flags: restarted, it keeps
    // its certificate (no new join) and goes on renewing its Lease and reporting Ready.
    let cert = std::fs::read_to_string(c.agent(0).pki("node.crt")).unwrap_or_default();
    assert!(!cert.is_empty(), "agent {a} has no certificate");
    let before_restart = jiff::Timestamp::now();
    c.restart_agent(0);
    let lease_path = format!("{LEASES}/{a}");
    c.wait_for(secs(30), "the Lease renewed after the restart", || {
        let lease = c.get(&lease_path).ok_or("no Lease")?;
        match time(&lease["spec"]["renewTime"]) {
            Some(t) if t > before_restart => Ok(()),
            other => Err(format!("renewTime {other:?}")),
        }
    });
    assert!(c.agent_mut(0).exited().is_none(), "agent {a} exited");
    c.wait_node_ready(0);
    let after = std::fs::read_to_string(c.agent(0).pki("node.crt")).unwrap_or_default();
    assert_eq!(
        after, cert,
        "agent {a} joined again instead of using its certificate"
    );
    // The per-node agent is unaffected too.
    c.wait_node_ready(b);
}
