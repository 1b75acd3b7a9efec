//! Issue 28, acceptance 4: a privileged pod on an agent whose capability bounding set lacks
//! `CAP_SYS_RESOURCE` (as in containers, VMs and nested setups) starts, with exactly the
//! agent's capabilities — as containerd's CRI grants a privileged container its own process's
//! capabilities, not every capability the kernel knows (runc cannot raise what the host lacks:
//! "unable to apply caps: operation not permitted").

use berth_tests::pod_specs::{SLEEP_FOREVER, sh_pod};
use berth_tests::{AgentOptions, Cluster, ClusterConfig, secs};

/// The `CapBnd` mask of a `/proc/PID/status`.
fn bounding(status: &str) -> String {
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapBnd:"))
        .map(|v| v.trim().to_string())
        .unwrap_or_else(|| panic!("no CapBnd in {status}"))
}

#[test]
fn a_privileged_pod_gets_exactly_the_capabilities_of_an_agent_lacking_sys_resource() {
    let c = Cluster::start_with(ClusterConfig {
        agents: vec![AgentOptions {
            bounding_drop: vec!["sys_resource".into()],
            ..AgentOptions::default()
        }],
        ..ClusterConfig::default()
    });
    let agent_pid = c.agent(0).pid().expect("the agent runs");
    let agent = bounding(
        &std::fs::read_to_string(format!("/proc/{agent_pid}/status")).expect("the agent's status"),
    );
    // CAP_SYS_RESOURCE is bit 24.
    let mask = u64::from_str_radix(&agent, 16).expect("a hex mask");
    assert_eq!(
        mask & (1 << 24),
        0,
        "the agent still holds CAP_SYS_RESOURCE: {agent}"
    );

    let mut pod = sh_pod("privileged", c.node_name(0), SLEEP_FOREVER);
    pod["spec"]["containers"][0]["securityContext"] = serde_json::json!({"privileged": true});
    c.apply(&pod);
    c.wait_for_pod_ready("default", "privileged", secs(90));
    let status = c.exec_ok("default", "privileged", None, &["cat", "/proc/self/status"]);
    assert_eq!(
        bounding(&status),
        agent,
        "the container's bounding set is not the agent's"
    );
    let effective = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .map(str::trim)
        .unwrap_or_default();
    assert_eq!(
        effective, agent,
        "the container's effective set is not the agent's"
    );
}
