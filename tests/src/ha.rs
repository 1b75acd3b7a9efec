//! The HA suites' setup: a cluster whose first controller runs on an etcd, two more
//! controllers of the same cluster on it (started as the documented copy of `pki/` and
//! `token`), the first one leading, and agents given all three as `--server`, the leader first.

use crate::etcd::EtcdCluster;
use crate::wait::ok_if;
use crate::{AgentOptions, Cluster, ClusterConfig, Controller, secs};

/// A cluster on `etcd` with `agents` agents and three controllers: the cluster's own (the
/// leader, every agent's first server) and the two returned. `extra` goes to every controller.
pub fn three_controllers(
    etcd: &EtcdCluster,
    extra: &[&str],
    agents: usize,
) -> (Cluster, Controller, Controller) {
    let endpoints = etcd.endpoints();
    let mut controller_args = vec!["--datastore-endpoint".to_string(), endpoints.clone()];
    controller_args.extend(extra.iter().map(|s| s.to_string()));
    let mut c = Cluster::start_with(ClusterConfig {
        controller_args,
        ..ClusterConfig::agents(0)
    });
    let cidr = c.cluster_cidr().to_string();
    let services = c.service_cidr().to_string();
    let mut args = vec![
        "--datastore-endpoint",
        &endpoints,
        "--cluster-cidr",
        &cidr,
        "--service-cidr",
        &services,
    ];
    args.extend_from_slice(extra);
    let second = Controller::start_joining(c.controller(), &args);
    let third = Controller::start_joining(c.controller(), &args);
    // The first controller took the Lease before the others started.
    c.wait_for(secs(30), "the first controller to lead", || {
        ok_if(
            c.controller().leads() && !second.leads() && !third.leads(),
            "not (yet) the only leader",
        )
    });
    let servers = [c.controller().url(), second.url(), third.url()].join(",");
    for _ in 0..agents {
        c.add_agent(&AgentOptions {
            server: Some(servers.clone()),
            ..AgentOptions::default()
        });
    }
    (c, second, third)
}
