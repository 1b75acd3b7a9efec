//! The service proxy: keeps this node's nat table in step with every Service and EndpointSlice
//! (as [`ServiceState`] publishes them), rewriting its chains whole in one
//! `iptables-restore --noflush` whenever the computed ruleset changes (see [`plan`] for the
//! chains). Only the chains that changed are written; every [`RESYNC`] the top chain is checked
//! and, if someone flushed or changed it, everything is written again. Each full write also
//! sets up (or takes down) the host side of localhost NodePorts ([`localnet`]). Load-balancer
//! and external addresses are proxied as NodePorts are; what `loadBalancerSourceRanges` refuse
//! is marked in nat and dropped by the proxy's filter chain; the health check node ports of
//! Local LoadBalancers are served beside ([`health_check`]).

pub mod health_check;
mod health_server;
pub mod localnet;
pub mod plan;

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::command;
use super::iptables::{self, Rule};
use super::service_state::ServiceState;
use super::{Ipv4Cidr, NetworkError};
use plan::TopChains;

/// Rules are rewritten at least this often.
const RESYNC: Duration = Duration::from_secs(30);

/// Whether the table still holds what was written last (its top chain, rule for rule): a
/// cheap check of one chain instead of rewriting thousands.
async fn still_applied(network: &str, applied: &plan::Ruleset) -> bool {
    let top = TopChains::of(network);
    let Some(expected) = applied.chains.get(&top.services) else {
        return false;
    };
    match command::tool("iptables", &["-w", "5", "-t", "nat", "-S", &top.services]).await {
        Ok(out) => {
            let listed = String::from_utf8_lossy(&out.stdout);
            listed.lines().filter(|l| l.starts_with("-A ")).count() == expected.len()
        }
        Err(_) => false,
    }
}

/// What the proxy is told at start.
#[derive(Debug, Clone)]
pub struct ProxyConfig {
    /// The agent's network name (`berth-<node>`): it names and tags the chains.
    pub network: String,
    pub node: String,
    pub cluster_cidr: Ipv4Cidr,
    /// NodePorts answer on 127.0.0.0/8 (`--iptables-localhost-nodeports`).
    pub localhost_node_ports: bool,
    /// The agent's network state directory (`<root>/network`): where the `route_localnet`
    /// value from before the agent set it is kept.
    pub state_dir: std::path::PathBuf,
}

/// Sets up or takes down what localhost NodePorts need on the host, as configured.
async fn apply_localnet(cfg: &ProxyConfig) -> Result<(), NetworkError> {
    if cfg.localhost_node_ports {
        localnet::enable(&cfg.state_dir, &cfg.network).await
    } else {
        if localnet::disable(&cfg.state_dir, &cfg.network).await? {
            tracing::info!("route_localnet written back: localhost node ports are off");
        }
        Ok(())
    }
}

/// The jumps from the built-in chains into the proxy's chains.
fn jumps(network: &str) -> Vec<Rule> {
    let top = TopChains::of(network);
    let jump = |chain, target: &str, what: &str| Rule::jump("nat", chain, network, what, target);
    vec![
        jump("PREROUTING", &top.services, "service portals"),
        jump("OUTPUT", &top.services, "service portals"),
        jump("POSTROUTING", &top.postrouting, "service masquerade"),
    ]
}

/// The jumps into the proxy's filter chain, which drops what its nat chains marked.
fn firewall_jumps(network: &str) -> Vec<Rule> {
    let chain = plan::proxy_firewall(network).chain;
    ["INPUT", "FORWARD"]
        .into_iter()
        .map(|from| Rule::jump("filter", from, network, "service proxy firewall", &chain))
        .collect()
}

/// The nat table's chain names (`iptables-save -t nat`).
async fn nat_chains() -> Result<Vec<String>, NetworkError> {
    let out = command::tool("iptables-save", &["-t", "nat"]).await?;
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.strip_prefix(':'))
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect())
}

/// Writes `ruleset` (removing our chains it no longer has) and makes sure the jumps exist.
/// Writes `ruleset`: the chains that changed since `applied`, or (with no `applied`, after a
/// failure or at a resync) every chain, removing our chains it no longer has, and the jumps.
async fn apply(
    network: &str,
    ruleset: &plan::Ruleset,
    applied: Option<&plan::Ruleset>,
) -> Result<(), NetworkError> {
    if let Some(applied) = applied {
        if let Some(input) = ruleset.changes_from(applied) {
            iptables::restore(&input).await?;
        }
        return Ok(());
    }
    let existing = nat_chains().await?;
    iptables::restore(&plan::proxy_firewall(network).restore).await?;
    for jump in firewall_jumps(network) {
        iptables::ensure(&jump).await?;
    }
    iptables::restore(&ruleset.restore_input(&existing, network)).await?;
    for jump in jumps(network) {
        iptables::ensure(&jump).await?;
    }
    Ok(())
}

/// Removes the jumps and every proxy chain of `network`, the localnet firewall included
/// (uninstall, tests).
pub async fn remove(network: &str) -> Result<(), NetworkError> {
    for jump in jumps(network) {
        iptables::remove(&jump).await?;
    }
    localnet::remove_firewall(network).await?;
    for jump in firewall_jumps(network) {
        iptables::remove(&jump).await?;
    }
    let chain = plan::proxy_firewall(network).chain;
    for op in ["-F", "-X"] {
        // An absent chain fails both: nothing to remove.
        let _ = command::run(
            std::path::Path::new("iptables"),
            &["-w", "5", "-t", "filter", op, &chain],
            &[],
            None,
            command::TOOL_DEADLINE,
        )
        .await?;
    }
    let existing = nat_chains().await?;
    if existing.iter().any(|c| plan::is_proxy_chain(network, c)) {
        iptables::restore(&plan::Ruleset::default().restore_input(&existing, network)).await?;
    }
    Ok(())
}

/// Runs until `shutdown`, rewriting the rules whenever `state` changes.
pub async fn run(
    mut state: watch::Receiver<Arc<ServiceState>>,
    cfg: ProxyConfig,
    shutdown: CancellationToken,
) {
    tokio::spawn(health_server::run(
        state.clone(),
        cfg.node.clone(),
        shutdown.clone(),
    ));
    let mut applied: Option<plan::Ruleset> = None;
    let mut applied_at = Instant::now();
    loop {
        let current = state.borrow_and_update().clone();
        if current.synced {
            let scope = plan::ProxyScope {
                network: &cfg.network,
                node: &cfg.node,
                cluster_cidr: cfg.cluster_cidr,
                localhost_node_ports: cfg.localhost_node_ports,
            };
            let svcs: Vec<Service> = current.services.values().cloned().collect();
            let eps: Vec<EndpointSlice> = current.slices.values().cloned().collect();
            let ruleset = plan::ruleset(&scope, &svcs, &eps);
            let resync = applied_at.elapsed() >= RESYNC
                && !matches!(&applied, Some(a) if still_applied(&cfg.network, a).await);
            if !resync && applied_at.elapsed() >= RESYNC {
                applied_at = Instant::now();
            }
            if applied.as_ref() != Some(&ruleset) || resync {
                let started = Instant::now();
                let base = if resync { None } else { applied.as_ref() };
                let written = match base {
                    Some(_) => apply(&cfg.network, &ruleset, base).await,
                    None => match apply_localnet(&cfg).await {
                        Ok(()) => apply(&cfg.network, &ruleset, base).await,
                        Err(e) => Err(e),
                    },
                };
                match written {
                    Ok(()) => {
                        tracing::debug!(
                            rules = ruleset.rule_count(),
                            elapsed_ms = started.elapsed().as_millis() as u64,
                            "service rules written"
                        );
                        applied = Some(ruleset);
                        applied_at = Instant::now();
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "service proxy: writing the rules failed");
                        applied = None;
                    }
                }
            }
        }
        let until = tokio::time::Instant::now() + RESYNC.saturating_sub(applied_at.elapsed());
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep_until(until) => {}
            changed = state.changed() => if changed.is_err() { return },
        }
    }
}
