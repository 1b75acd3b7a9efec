//! The service proxy: keeps this node's nat table in step with every Service and EndpointSlice
//! (watched, cached here), rewriting its chains whole in one `iptables-restore --noflush`
//! whenever the computed ruleset changes (see [`plan`] for the chains), and at least every
//! [`RESYNC`] in case something flushed them.

pub mod plan;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use berth_shared::client::{Client, ClientError, ListParams, WatchEvent, WatchStream};
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;

use super::command;
use super::iptables::{self, Rule};
use super::{Ipv4Cidr, NetworkError};
use plan::TopChains;

/// Rules are rewritten at least this often.
const RESYNC: Duration = Duration::from_secs(30);
/// Changes arriving this close together are applied together.
const BATCH: Duration = Duration::from_millis(50);

/// What the proxy is told at start.
#[derive(Debug, Clone)]
pub struct ProxyConfig {
    /// The agent's network name (`berth-<node>`): it names and tags the chains.
    pub network: String,
    pub node: String,
    pub cluster_cidr: Ipv4Cidr,
}

fn resource(
    group: &str,
    version: &str,
    plural: &str,
) -> &'static berth_shared::resource::ResourceType {
    match berth_shared::resource::by_plural(group, version, plural) {
        Some(rt) => rt,
        None => unreachable!("{plural} are in the resource table"),
    }
}

/// Objects of one kind by `namespace/name`, fed by a list and then its watch.
struct Cache<T> {
    group: &'static str,
    version: &'static str,
    plural: &'static str,
    objects: BTreeMap<String, T>,
    resource_version: String,
    watch: Option<WatchStream<T>>,
}

fn key_of(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> String {
    format!(
        "{}/{}",
        meta.namespace.as_deref().unwrap_or(""),
        meta.name.as_deref().unwrap_or("")
    )
}

trait Meta {
    fn meta(&self) -> &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
}
impl Meta for Service {
    fn meta(&self) -> &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
        &self.metadata
    }
}
impl Meta for EndpointSlice {
    fn meta(&self) -> &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
        &self.metadata
    }
}

impl<T: DeserializeOwned + Send + Meta + 'static> Cache<T> {
    fn new(group: &'static str, version: &'static str, plural: &'static str) -> Cache<T> {
        Cache {
            group,
            version,
            plural,
            objects: BTreeMap::new(),
            resource_version: String::new(),
            watch: None,
        }
    }

    /// Lists afresh and opens a watch from the list.
    async fn relist(&mut self, client: &Client) -> Result<(), ClientError> {
        let rt = resource(self.group, self.version, self.plural);
        let list = client.list::<T>(rt, None, &ListParams::default()).await?;
        self.objects = list
            .items
            .into_iter()
            .map(|o| (key_of(o.meta()), o))
            .collect();
        self.resource_version = list.resource_version;
        self.watch = Some(
            client
                .watch::<T>(rt, None, &ListParams::default(), &self.resource_version)
                .await?,
        );
        Ok(())
    }

    /// The next event applied to the cache; `false` when the watch ended or failed (relist).
    async fn next(&mut self) -> bool {
        let Some(watch) = self.watch.as_mut() else {
            return std::future::pending().await;
        };
        match watch.next().await {
            Some(Ok(WatchEvent::Added(o) | WatchEvent::Modified(o))) => {
                self.objects.insert(key_of(o.meta()), o);
                true
            }
            Some(Ok(WatchEvent::Deleted(o))) => {
                self.objects.remove(&key_of(o.meta()));
                true
            }
            Some(Ok(WatchEvent::Bookmark(rv))) => {
                self.resource_version = rv;
                true
            }
            Some(Err(_)) | None => {
                self.watch = None;
                false
            }
        }
    }
}

/// The jumps from the built-in chains into the proxy's chains.
fn jumps(network: &str) -> Vec<Rule> {
    let top = TopChains::of(network);
    let jump = |chain, target: &str, what: &str| Rule {
        table: "nat",
        chain,
        spec: [
            "-m",
            "comment",
            "--comment",
            &format!("berth:{network} {what}"),
            "-j",
            target,
        ]
        .map(str::to_string)
        .to_vec(),
    };
    vec![
        jump("PREROUTING", &top.services, "service portals"),
        jump("OUTPUT", &top.services, "service portals"),
        jump("POSTROUTING", &top.postrouting, "service masquerade"),
    ]
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

async fn restore(input: &str) -> Result<(), NetworkError> {
    let out = command::run(
        std::path::Path::new("iptables-restore"),
        &["-w", "5", "--noflush"],
        &[],
        Some(input.as_bytes()),
        command::TOOL_DEADLINE,
    )
    .await?;
    if out.success {
        Ok(())
    } else {
        Err(NetworkError::Command {
            command: "iptables-restore -w 5 --noflush (service rules)".into(),
            status: out.status,
            stderr: out.stderr,
        })
    }
}

/// Writes `ruleset` (removing our chains it no longer has) and makes sure the jumps exist.
async fn apply(network: &str, ruleset: &plan::Ruleset) -> Result<(), NetworkError> {
    let existing = nat_chains().await?;
    restore(&ruleset.restore_input(&existing, network)).await?;
    for jump in jumps(network) {
        iptables::ensure(&jump).await?;
    }
    Ok(())
}

/// Removes the jumps and every proxy chain of `network` (uninstall, tests).
pub async fn remove(network: &str) -> Result<(), NetworkError> {
    for jump in jumps(network) {
        iptables::remove(&jump).await?;
    }
    let existing = nat_chains().await?;
    if existing.iter().any(|c| plan::is_proxy_chain(network, c)) {
        restore(&plan::Ruleset::default().restore_input(&existing, network)).await?;
    }
    Ok(())
}

/// Runs until `shutdown`.
pub async fn run(client: Client, cfg: ProxyConfig, shutdown: CancellationToken) {
    let mut services = Cache::<Service>::new("", "v1", "services");
    let mut slices = Cache::<EndpointSlice>::new("discovery.k8s.io", "v1", "endpointslices");
    let mut applied: Option<plan::Ruleset> = None;
    let mut applied_at = Instant::now();
    let mut backoff = Duration::from_millis(200);
    loop {
        if services.watch.is_none() || slices.watch.is_none() {
            let listed = async {
                if services.watch.is_none() {
                    services.relist(&client).await?;
                }
                if slices.watch.is_none() {
                    slices.relist(&client).await?;
                }
                Ok::<(), ClientError>(())
            };
            if let Err(e) = listed.await {
                tracing::warn!(error = %e, "service proxy: listing failed; retrying");
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = tokio::time::sleep(backoff) => {}
                }
                backoff = (backoff * 2).min(Duration::from_secs(10));
                continue;
            }
            backoff = Duration::from_millis(200);
        }
        let scope = plan::ProxyScope {
            network: &cfg.network,
            node: &cfg.node,
            cluster_cidr: cfg.cluster_cidr,
        };
        let svcs: Vec<Service> = services.objects.values().cloned().collect();
        let eps: Vec<EndpointSlice> = slices.objects.values().cloned().collect();
        let ruleset = plan::ruleset(&scope, &svcs, &eps);
        if applied.as_ref() != Some(&ruleset) || applied_at.elapsed() >= RESYNC {
            let started = Instant::now();
            match apply(&cfg.network, &ruleset).await {
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
        // Wait for a change (or the resync), then gather what follows it closely.
        let until = tokio::time::Instant::now() + RESYNC.saturating_sub(applied_at.elapsed());
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep_until(until) => continue,
            _ = services.next() => {}
            _ = slices.next() => {}
        }
        let batch_end = tokio::time::Instant::now() + BATCH;
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep_until(batch_end) => break,
                ok = services.next() => if !ok { break },
                ok = slices.next() => if !ok { break },
            }
        }
    }
}
