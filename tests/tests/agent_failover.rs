//! Agents with several `--server` URLs (issue 16): the agent joins and registers through the
//! first server that answers (a dead first one is skipped), sticks with it, and when it dies
//! moves on to the next — its watches resume there from their last resourceVersion, so a pod
//! created afterwards starts — while the pods it runs keep running untouched (same container,
//! same task, no restart).
//!
//! One controller stands for a cluster of several: the "servers" are a dead port, a TCP relay
//! in front of the controller (cut to kill that server) and the controller itself.

use std::net::SocketAddr;
use std::time::Duration;

use berth_tests::host::free_port;
use berth_tests::pod_reading::container_identity;
use berth_tests::pod_specs::{SLEEP_FOREVER, sh_pod};
use berth_tests::relay::TcpRelay;
use berth_tests::wait::ok_if;
use berth_tests::{AgentOptions, Cluster, ClusterConfig, secs};

const START: Duration = secs(90);

fn agent_log(c: &Cluster, i: usize) -> String {
    std::fs::read_to_string(c.agent(i).stderr_log()).unwrap_or_default()
}

#[test]
fn an_agent_fails_over_to_the_next_server_without_restarting_its_pods() {
    let mut c = Cluster::start_with(ClusterConfig::agents(0));
    let controller: SocketAddr = format!("127.0.0.1:{}", c.controller().port())
        .parse()
        .unwrap_or_else(|e| panic!("controller address: {e}"));
    // Nothing listens there (bound a moment ago, then closed).
    let dead = format!("https://127.0.0.1:{}", free_port());
    let mut relay = TcpRelay::start(controller);
    // Both forms of the flag: a comma-separated list, then one more `--server`.
    let i = c.add_agent(&AgentOptions {
        server: Some(format!("{dead},{}", relay.url())),
        extra_args: vec!["--server".into(), c.controller().url().to_string()],
        ..AgentOptions::default()
    });
    let node = c.node_name(i).to_string();
    let log = agent_log(&c, i);
    assert!(
        log.contains("switching API server") && log.contains(&relay.url()),
        "the agent should have moved from the dead first server to the relay:\n{log}"
    );

    c.apply(&sh_pod("steady", &node, SLEEP_FOREVER));
    let before = container_identity(&c.wait_for_pod_ready("default", "steady", START), "main");
    let pids_before = c.running_tasks(i);
    assert!(pids_before.contains_key(&before.0), "{pids_before:?}");

    // The server the agent uses dies.
    relay.cut();
    let relay_url = relay.url();
    let real = c.controller().url().to_string();
    c.wait_for(secs(60), "the agent to switch to the controller", || {
        let log = agent_log(&c, i);
        let switched = log
            .lines()
            .any(|l| l.contains("switching API server") && l.contains(&real));
        ok_if(switched, relay_url.clone())
    });
    // Its pod watch resumed on the new server: a pod created now starts.
    c.apply(&sh_pod("newcomer", &node, SLEEP_FOREVER));
    c.wait_for_pod_ready("default", "newcomer", START);

    // The first pod ran through it all: same container, same task, no restart.
    c.assert_pod_untouched(i, ("default", "steady"), START, &before, &pids_before);
    // The Node stays Ready through the switch (heartbeats go to the new server).
    c.wait_node_ready(i);
    let log = agent_log(&c, i);
    assert!(
        !log.contains("pod watch cannot resume"),
        "the pod watch relisted instead of resuming:\n{log}"
    );
}
