//! Pod networking: a network namespace per pod, wired up by the CNI `loopback` and `bridge`
//! (+ `host-local`, optionally `portmap`) plugins, torn down again without leftovers.
//!
//! Layout on the host, for network `berth-n1`, agent instance `I` and pod uid `U`:
//! * netns `/var/run/netns/berth-n1-I-U` (the instance id makes the name this agent's alone:
//!   an agent lists, repairs and deletes only namespaces named with its own id or recorded in
//!   its own state dir, never another agent's, whatever its node name);
//! * `<state_dir>/pods/U.json`: the plugin configs and results (written *before* the netns
//!   exists, so every netns of ours has a state file unless someone deleted the state dir);
//! * `<state_dir>/ipam/berth-n1/<ip>`: host-local's allocation;
//! * once per agent: chains `BERTH-FWD-<h>` (FORWARD accepts for the bridge) and
//!   `BERTH-MASQ-<h>` (one masquerade rule for pod traffic leaving the cluster CIDR), written
//!   in one `iptables-restore`, and `net.ipv4.ip_forward=1`;
//! * routes to the other nodes' pod subnets ([`peers`]);
//! * NetworkPolicy's filter chains `BERTH-NP…-<h>` ([`policy`]), removed with the host rules;
//! * load-balancer addresses this node announces ([`announce`]), removed with them too.

pub mod announce;
mod chain_names;
pub mod cluster_dns;
mod cni;
mod command;
mod config;
pub mod dns;
mod error;
mod fib_trie;
pub mod files;
mod instance;
mod iptables;
mod netns;
mod observe;
pub mod peers;
mod plugins;
mod pod_locks;
pub mod policy;
pub mod proxy;
pub mod service_state;
mod state;
pub(crate) mod watch_cache;

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

pub use config::{Ipv4Cidr, NetworkConfig, network_name, state_dir};
pub use error::NetworkError;
pub use instance::instance_id;
pub use netns::{NetnsId, NetnsPresence};
pub use observe::{NetworkFacts, ProcessNetwork, Record, RecordedNetwork, observe_process};
pub use plugins::{HostPort, PortProtocol, host_ports};

use config::Validated;
use plugins::Attachment;
use pod_locks::PodLocks;
use state::PodState;

/// The pod a network is set up for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodRef {
    pub uid: String,
    pub namespace: String,
    pub name: String,
    /// Container ports with a `hostPort` (see [`host_ports`]); empty for most pods.
    pub host_ports: Vec<HostPort>,
}

impl PodRef {
    pub fn new(
        uid: impl Into<String>,
        namespace: impl Into<String>,
        name: impl Into<String>,
    ) -> PodRef {
        PodRef {
            uid: uid.into(),
            namespace: namespace.into(),
            name: name.into(),
            host_ports: Vec::new(),
        }
    }
}

/// A pod's network as the containers see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodNetwork {
    /// The netns every container of the pod joins (`linux.namespaces` `network` path).
    pub netns_path: PathBuf,
    pub ip: Ipv4Addr,
    pub gateway: Ipv4Addr,
}

/// One agent's pod network. Several may share a host if their bridges, CIDRs, state dirs and
/// network names differ.
pub struct Network {
    cfg: NetworkConfig,
    /// Whether the host rules were ensured by this process (see [`Network::ensure_host`]).
    host_ready: tokio::sync::Mutex<bool>,
    /// One lock per pod uid, so setup and teardown of one pod never interleave.
    locks: PodLocks,
}

impl NetworkConfig {
    /// The pod network of node `node` on `host` with pod subnet `pod_cidr`: named
    /// [`network_name`], its state (and [`instance_id`]) in [`state_dir`], the MTU left to the
    /// bridge. The agent and `berth-agent uninstall` both derive it here, so that uninstall
    /// finds exactly the namespaces, bridge and rules the agent made.
    pub async fn for_node(
        host: &crate::config::HostSetup,
        node: &str,
        pod_cidr: String,
    ) -> Result<NetworkConfig, NetworkError> {
        let state_dir = state_dir(&host.root_dir);
        Ok(NetworkConfig {
            cni_bin_dir: host.cni_bin_dir.clone(),
            bridge: host.cni_bridge.clone(),
            pod_cidr,
            cluster_cidr: host.cluster_cidr.clone(),
            instance: instance_id(&state_dir).await?,
            state_dir,
            network_name: network_name(node),
            mtu: None,
        })
    }
}

impl Network {
    pub fn new(cfg: NetworkConfig) -> Network {
        Network {
            cfg,
            host_ready: tokio::sync::Mutex::new(false),
            locks: PodLocks::default(),
        }
    }

    pub fn config(&self) -> &NetworkConfig {
        &self.cfg
    }

    /// The netns path a pod set up by this agent has (or will have).
    pub fn netns_path(&self, pod_uid: &str) -> PathBuf {
        netns::path(&self.netns_name(pod_uid))
    }

    /// The name of the netns this agent makes for a pod.
    fn netns_name(&self, pod_uid: &str) -> String {
        config::netns_name(&self.cfg.network_name, &self.cfg.instance, pod_uid)
    }

    /// The netns name a state file records (a setup by an earlier version may have named it
    /// otherwise), or ours when the record's is unusable.
    fn recorded_netns_name(&self, st: &PodState, pod_uid: &str) -> String {
        if config::is_netns_name(&st.netns) {
            st.netns.clone()
        } else {
            self.netns_name(pod_uid)
        }
    }

    /// Creates the pod's netns and attaches it (loopback, then bridge + host-local [+ portmap]).
    ///
    /// Idempotent: a pod that is already set up (also by an earlier agent process) gets its
    /// existing netns and IP back. A half-done earlier attempt is undone first; a failed
    /// attempt is undone before the error is returned.
    pub async fn setup(&self, pod: &PodRef) -> Result<PodNetwork, NetworkError> {
        let v = config::validate(&self.cfg)?;
        validate_pod(pod)?;
        self.ensure_host_with(&v).await?;
        let _lock = self.locks.lock(&pod.uid).await;
        if let Some(existing) = self.existing(&pod.uid).await? {
            tracing::debug!(pod = %pod.uid, ip = %existing.ip, "pod network already set up");
            return Ok(existing);
        }
        self.detach(&pod.uid).await?;
        match self.attach(pod).await {
            Ok(net) => Ok(net),
            Err(err) => {
                if let Err(undo) = self.detach(&pod.uid).await {
                    tracing::warn!(pod = %pod.uid, error = %undo, "undoing a failed setup failed");
                }
                Err(err)
            }
        }
    }

    /// CNI DEL (in reverse, with the ADD results as `prevResult`), then removes whatever CNI
    /// left (nat chains), the netns and the state. Idempotent; releases the pod's IP.
    pub async fn teardown(&self, pod_uid: &str) -> Result<(), NetworkError> {
        config::validate_uid(pod_uid)?;
        let _lock = self.locks.lock(pod_uid).await;
        self.detach(pod_uid).await
    }

    /// Uids of the pods that have a netns or state of this agent's (to clean up after
    /// crashes). Namespaces of other agents, even of the same network name, are not listed.
    pub async fn list(&self) -> Result<Vec<String>, NetworkError> {
        let mut uids = state::list(&self.cfg.state_dir).await?;
        for name in netns::list().await? {
            if let Some(uid) =
                config::uid_from_netns_name(&self.cfg.network_name, &self.cfg.instance, &name)
            {
                uids.push(uid.to_string());
            }
        }
        uids.sort();
        uids.dedup();
        Ok(uids)
    }

    /// Makes sure forwarding is on and this agent's host rules exist (setup does this once
    /// per process; call it again after something may have flushed iptables).
    pub async fn ensure_host(&self) -> Result<(), NetworkError> {
        let v = config::validate(&self.cfg)?;
        *self.host_ready.lock().await = false;
        self.ensure_host_with(&v).await
    }

    /// Removes the bridge, this agent's host rules, any CNI rules of its network, and portmap's
    /// shared chains if no pod on the host forwards a port any more (for tests and uninstall;
    /// tear pods down first). `net.ipv4.ip_forward` is left on: other networks on the host
    /// may rely on it.
    pub async fn cleanup_host(&self) -> Result<(), NetworkError> {
        let v = config::validate(&self.cfg)?;
        let mut ready = self.host_ready.lock().await;
        iptables::remove_host(&self.host_rules(&v)).await?;
        policy::remove(&self.cfg.network_name).await?;
        for rule in self.legacy_host_rules(&v) {
            iptables::remove(&rule).await?;
        }
        iptables::sweep(&self.cfg.network_name, iptables::Owner::AllPods).await?;
        iptables::remove_idle_portmap().await?;
        let handle = peers::netlink::connect().map_err(netlink_failed)?;
        announce::remove_all(&handle)
            .await
            .map_err(netlink_failed)?;
        if link_exists(&self.cfg.bridge).await {
            command::tool(
                "ip",
                &["link", "delete", &self.cfg.bridge, "type", "bridge"],
            )
            .await?;
        }
        *ready = false;
        Ok(())
    }

    fn host_rules(&self, v: &Validated) -> iptables::HostRules {
        iptables::host_rules(
            &self.cfg.network_name,
            &self.cfg.bridge,
            v.pod_cidr,
            v.cluster_cidr,
        )
    }

    fn legacy_host_rules(&self, v: &Validated) -> Vec<iptables::Rule> {
        iptables::legacy_host_rules(
            &self.cfg.network_name,
            &self.cfg.bridge,
            v.pod_cidr,
            v.cluster_cidr,
        )
    }

    async fn ensure_host_with(&self, v: &Validated) -> Result<(), NetworkError> {
        let mut ready = self.host_ready.lock().await;
        if *ready {
            return Ok(());
        }
        let forward = Path::new("/proc/sys/net/ipv4/ip_forward");
        tokio::fs::write(forward, "1")
            .await
            .map_err(|e| NetworkError::io(forward, e))?;
        // Service traffic between two pods of one bridge must pass the nat table both ways
        // (the reply is bridged, not routed): bridged IPv4 goes through iptables.
        let bridged = Path::new("/proc/sys/net/bridge/bridge-nf-call-iptables");
        if let Err(e) = tokio::fs::write(bridged, "1").await {
            tracing::warn!(error = %e, "cannot send bridged traffic through iptables (br_netfilter); service traffic between pods of this node may fail");
        }
        iptables::ensure_host(&self.host_rules(v)).await?;
        // What an earlier version left: its host rules, and the bridge plugin's per-pod
        // masquerade chains (pods now go through the node's one masquerade rule).
        for rule in self.legacy_host_rules(v) {
            iptables::remove(&rule).await?;
        }
        let swept = iptables::sweep_legacy_masquerade(&self.cfg.network_name).await?;
        if swept > 0 {
            tracing::info!(
                swept,
                "removed per-pod masquerade chains of an earlier version"
            );
        }
        *ready = true;
        Ok(())
    }

    /// The pod's network if a complete setup is recorded and its netns and veth still exist.
    async fn existing(&self, uid: &str) -> Result<Option<PodNetwork>, NetworkError> {
        let st = match state::read(&self.cfg.state_dir, uid).await {
            Ok(Some(st)) if st.complete => st,
            Ok(_) | Err(NetworkError::State { .. }) => return Ok(None),
            Err(e) => return Err(e),
        };
        let name = self.recorded_netns_name(&st, uid);
        if !matches!(netns::presence(&name).await?, NetnsPresence::Mounted(_)) {
            return Ok(None);
        }
        let Some(addr) = self.eth0_address(&st) else {
            return Ok(None);
        };
        if let Some(veth) = &addr.host_veth
            && !link_exists(veth).await
        {
            return Ok(None);
        }
        Ok(Some(PodNetwork {
            netns_path: netns::path(&name),
            ip: addr.ip,
            gateway: addr.gateway,
        }))
    }

    fn eth0_address(&self, st: &PodState) -> Option<cni::PodAddress> {
        let i = st.attachments.iter().position(|a| a.if_name == "eth0")?;
        let result = st.results.get(i)?.as_ref()?;
        cni::pod_address(
            result,
            "eth0",
            bridge_of(&st.attachments[i]).unwrap_or(&self.cfg.bridge),
        )
        .ok()
    }

    async fn attach(&self, pod: &PodRef) -> Result<PodNetwork, NetworkError> {
        let started = std::time::Instant::now();
        let attachments = plugins::attachments(&self.cfg, &pod.host_ports);
        let mut st = PodState {
            uid: pod.uid.clone(),
            namespace: pod.namespace.clone(),
            name: pod.name.clone(),
            netns: self.netns_name(&pod.uid),
            results: vec![None; attachments.len()],
            attachments,
            complete: false,
        };
        state::write(&self.cfg.state_dir, &st).await?;
        let netns_path = netns::add(&st.netns).await?;
        let args = plugins::cni_args(&pod.namespace, &pod.name, &pod.uid);
        for i in 0..st.attachments.len() {
            let att = &st.attachments[i];
            let call = cni::Call {
                bin_dir: &self.cfg.cni_bin_dir,
                container_id: &pod.uid,
                netns: Some(&netns_path),
                if_name: &att.if_name,
                args: &args,
            };
            let mut prev: Option<serde_json::Value> = None;
            for conf in &att.plugins {
                let conf = plugins::with_prev_result(conf, prev.as_ref());
                prev = cni::exec(cni::Op::Add, &conf, call).await?;
            }
            st.results[i] = prev;
            state::write(&self.cfg.state_dir, &st).await?;
        }
        let addr = self
            .eth0_address(&st)
            .ok_or_else(|| NetworkError::PluginOutput {
                plugin: "bridge".into(),
                command: "ADD",
                reason: "no IPv4 address and gateway for eth0 in the result".into(),
            })?;
        st.complete = true;
        state::write(&self.cfg.state_dir, &st).await?;
        tracing::info!(pod = %pod.uid, ip = %addr.ip, elapsed_ms = started.elapsed().as_millis() as u64, "pod network set up");
        Ok(PodNetwork {
            netns_path,
            ip: addr.ip,
            gateway: addr.gateway,
        })
    }

    /// Undoes whatever exists of a pod's network; a pod with nothing left is a no-op. Only the
    /// netns its state records, or the one this agent would make for it, is touched.
    async fn detach(&self, uid: &str) -> Result<(), NetworkError> {
        let recorded = match state::read(&self.cfg.state_dir, uid).await {
            Ok(st) => st,
            Err(NetworkError::State { path, source }) => {
                tracing::warn!(path = %path.display(), error = %source, "corrupt pod network state; tearing down with the current config");
                None
            }
            Err(e) => return Err(e),
        };
        let name = match &recorded {
            Some(st) => self.recorded_netns_name(st, uid),
            None => self.netns_name(uid),
        };
        let presence = netns::presence(&name).await?;
        // Plugins can only enter a mounted namespace; for a bare file they get none (DEL then
        // releases the address and leaves the interfaces, which died with the namespace).
        let has_netns = matches!(presence, NetnsPresence::Mounted(_));
        let (attachments, results, args) = match recorded {
            Some(st) => {
                let args = plugins::cni_args(&st.namespace, &st.name, uid);
                (st.attachments, st.results, args)
            }
            // A netns without state (state dir lost): DEL with today's configuration.
            None if presence != NetnsPresence::Absent => {
                let att = plugins::attachments(&self.cfg, &[]);
                let n = att.len();
                (att, vec![None; n], plugins::cni_args("", "", uid))
            }
            // Nothing of ours: no record, no netns of our name. In particular no sweep, which
            // goes by network name and uid and could hit another agent's pod of that uid.
            None => return Ok(()),
        };
        let netns_path = netns::path(&name);
        for (att, result) in attachments.iter().zip(results.iter()).rev() {
            let call = cni::Call {
                bin_dir: &self.cfg.cni_bin_dir,
                container_id: uid,
                netns: has_netns.then_some(netns_path.as_path()),
                if_name: &att.if_name,
                args: &args,
            };
            for conf in att.plugins.iter().rev() {
                let conf = plugins::with_prev_result(conf, result.as_ref());
                cni::exec(cni::Op::Del, &conf, call).await?;
            }
        }
        self.forget(uid, &name).await
    }

    /// The steps after CNI DEL: leftover nat rules, the netns, the state file.
    async fn forget(&self, uid: &str, netns_name: &str) -> Result<(), NetworkError> {
        // The bridge plugin (1.1) removes its masquerade chain only when it still finds the
        // pod's eth0; a DEL after the netns vanished leaves the chain behind.
        let swept = iptables::sweep(&self.cfg.network_name, iptables::Owner::Pod(uid)).await?;
        if swept > 0 {
            tracing::info!(pod = %uid, swept, "removed CNI iptables leftovers");
        }
        netns::delete(netns_name).await?;
        state::remove(&self.cfg.state_dir, uid).await
    }
}

fn validate_pod(pod: &PodRef) -> Result<(), NetworkError> {
    config::validate_uid(&pod.uid)?;
    // Both travel in CNI_ARGS, whose separators are ';' and '='.
    for (field, value) in [("namespace", &pod.namespace), ("name", &pod.name)] {
        if value.is_empty() || value.contains([';', '=']) || value.len() > 253 {
            return Err(NetworkError::InvalidPod {
                field,
                value: value.clone(),
                reason: "must be 1 to 253 bytes without ';' or '='",
            });
        }
    }
    Ok(())
}

fn bridge_of(att: &Attachment) -> Option<&str> {
    att.plugins
        .iter()
        .find(|p| plugins::plugin_type(p) == "bridge")
        .and_then(|p| p.get("bridge"))
        .and_then(serde_json::Value::as_str)
}

async fn link_exists(name: &str) -> bool {
    // /proc/sys/net answers for the reader's network namespace; /sys/class/net for the one
    // /sys was mounted in (the host's, for an agent started with `nsenter --net`).
    tokio::fs::try_exists(Path::new("/proc/sys/net/ipv4/conf").join(name))
        .await
        .unwrap_or(false)
}

/// A netlink failure in a teardown, as the network's error.
fn netlink_failed(e: peers::netlink::NetlinkError) -> NetworkError {
    NetworkError::Command {
        command: "netlink".into(),
        status: "failed".into(),
        stderr: e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pods_need_names_safe_for_cni_args() {
        let ok = PodRef::new("3f2a9c1e-0b7d-4a51-9c3e-1d2f3a4b5c6d", "default", "web");
        assert!(validate_pod(&ok).is_ok());
        for bad in [
            PodRef::new("u", "de;fault", "web"),
            PodRef::new("u", "default", "a=b"),
            PodRef::new("u", "", "web"),
            PodRef::new("../u", "default", "web"),
        ] {
            assert!(validate_pod(&bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_netns_path_names_network_instance_and_pod() {
        let net = Network::new(NetworkConfig {
            cni_bin_dir: "/usr/lib/cni".into(),
            bridge: "berth0".into(),
            pod_cidr: "10.42.1.0/24".into(),
            cluster_cidr: "10.42.0.0/16".into(),
            state_dir: "/tmp/x".into(),
            network_name: "berth-n1".into(),
            instance: "k3x9q2m7ab".into(),
            mtu: None,
        });
        assert_eq!(
            net.netns_path("u1"),
            PathBuf::from("/var/run/netns/berth-n1-k3x9q2m7ab-u1")
        );
    }
}
