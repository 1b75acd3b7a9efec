//! NetworkPolicy enforcement on this node: keeps the filter table's policy chains (see
//! [`plan`]) in step with every NetworkPolicy, Pod and Namespace (as [`state`] publishes
//! them), rewriting only the chains that changed in one `iptables-restore --noflush` whenever
//! the computed ruleset changes, and making sure FORWARD jumps into them first. Every
//! [`RESYNC`] the top chain is checked and, if someone flushed or changed it, everything is
//! written again. Each write starts a new [`Generation`], so established connections are
//! judged again by the new rules at their next packet. What policy refused is counted
//! ([`metrics`]).
//!
//! A rule's peer pods are a kernel ipset ([`sets`]), made before the `iptables-restore` that
//! names it and destroyed after the one that stops naming it; a node's chains hold only its
//! own pods' allowances, and the rules a change touches are rewritten per pod chain, never the
//! table.

pub mod blocks;
pub mod metrics;
pub mod plan;
pub mod select;
pub mod sets;
pub mod state;

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::NetworkError;
use super::command;
use super::iptables::{self, Rule};
use metrics::PolicyCounters;
use plan::{Chains, Generation};
use state::PolicyState;

/// Rules are checked (and rewritten if someone changed them) at least this often.
const RESYNC: Duration = Duration::from_secs(30);

/// What the enforcer is told at start.
#[derive(Debug, Clone)]
pub struct PolicyConfig {
    /// The agent's network name (`berth-<node>`): it names and tags the chains.
    pub network: String,
    pub node: String,
}

/// The jump from FORWARD into the policy chains.
fn jump(network: &str) -> Rule {
    Rule::jump(
        "filter",
        "FORWARD",
        network,
        "network policy",
        &Chains::of(network).top,
    )
}

/// Makes sure FORWARD's first rule is the jump into policy: it must come before the host
/// rules' accepts for the bridge (inserted first themselves when the first pod is set up).
async fn ensure_jump_first(network: &str) -> Result<(), NetworkError> {
    let top = Chains::of(network).top;
    let first = command::tool(
        "iptables",
        &["-w", "5", "-t", "filter", "-S", "FORWARD", "1"],
    )
    .await
    .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
    .unwrap_or_default();
    if first.contains(&format!("-j {top}")) {
        return Ok(());
    }
    let jump = jump(network);
    iptables::remove(&jump).await?;
    iptables::ensure(&jump).await
}

/// The filter table's chain names.
async fn filter_chains() -> Result<Vec<String>, NetworkError> {
    let out = command::tool("iptables-save", &["-t", "filter"]).await?;
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.strip_prefix(':'))
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect())
}

/// `ipset restore` of `input` (commands one a line; with `-exist`, making a set or adding a
/// member that is there already is no error).
async fn ipset_restore(input: &str, exist: bool) -> Result<(), NetworkError> {
    let args: &[&str] = if exist {
        &["restore", "-exist"]
    } else {
        &["restore"]
    };
    let out = command::run(
        std::path::Path::new("ipset"),
        args,
        &[],
        Some(input.as_bytes()),
        command::TOOL_DEADLINE,
    )
    .await?;
    if out.success {
        Ok(())
    } else {
        Err(NetworkError::Command {
            command: format!("ipset {}", args.join(" ")),
            status: out.status,
            stderr: out.stderr,
        })
    }
}

/// The names of the ipsets in this network namespace; none when the `ipset` tool is not
/// installed (then no set of ours can exist either: only this tool makes them).
async fn ipset_names() -> Result<Vec<String>, NetworkError> {
    match command::tool("ipset", &["list", "-n"]).await {
        Ok(out) => Ok(String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(str::to_string)
            .collect()),
        Err(NetworkError::Spawn { source, .. })
            if source.kind() == std::io::ErrorKind::NotFound =>
        {
            Ok(Vec::new())
        }
        Err(e) => Err(e),
    }
}

/// Destroys `network`'s peer sets that `wanted` does not name, among `existing`.
async fn destroy_stale_sets(
    network: &str,
    wanted: &sets::PeerSets,
    existing: &[String],
) -> Result<(), NetworkError> {
    if let Some(input) = sets::destroy_input(&sets::stale(network, wanted, existing)) {
        ipset_restore(&input, false).await?;
    }
    Ok(())
}

/// Whether the table still holds the top chain as written last (rule count).
async fn still_applied(network: &str, applied: &plan::Ruleset) -> bool {
    let top = Chains::of(network).top;
    let Some(expected) = applied.chains.get(&top) else {
        return false;
    };
    match command::tool("iptables", &["-w", "5", "-t", "filter", "-S", &top]).await {
        Ok(out) => {
            let listed = String::from_utf8_lossy(&out.stdout);
            listed.lines().filter(|l| l.starts_with("-A ")).count() == expected.len()
        }
        Err(_) => false,
    }
}

/// Writes `ruleset`: the peer sets it names that `applied` does not have (all of them with no
/// `applied`), then the chains that changed since `applied`, or (with no `applied`) every
/// chain, removing our chains it no longer has; then the jump, first in FORWARD; last, the
/// sets no rule names any more.
async fn apply(
    network: &str,
    ruleset: &plan::Ruleset,
    applied: Option<&plan::Ruleset>,
    counters: &PolicyCounters,
) -> Result<(), NetworkError> {
    if let Some(input) = sets::create_input(&ruleset.sets, applied.map(|a| &a.sets)) {
        ipset_restore(&input, true).await?;
    }
    match applied {
        Some(applied) => {
            if let Some(input) = ruleset.changes_from(applied) {
                iptables::restore(&input).await?;
            }
            ensure_jump_first(network).await?;
            let dropped: Vec<String> = applied.sets.keys().cloned().collect();
            destroy_stale_sets(network, &ruleset.sets, &dropped).await
        }
        None => {
            counters.fold().await;
            let existing = filter_chains().await?;
            iptables::restore(&ruleset.restore_input(&existing, network)).await?;
            ensure_jump_first(network).await?;
            destroy_stale_sets(network, &ruleset.sets, &ipset_names().await?).await
        }
    }
}

/// Removes the jump, every policy chain of `network` and then its peer sets (uninstall,
/// network teardown).
pub async fn remove(network: &str) -> Result<(), NetworkError> {
    iptables::remove(&jump(network)).await?;
    let existing = filter_chains().await?;
    if existing.iter().any(|c| plan::is_policy_chain(network, c)) {
        iptables::restore(&plan::Ruleset::default().restore_input(&existing, network)).await?;
    }
    destroy_stale_sets(network, &sets::PeerSets::new(), &ipset_names().await?).await
}

/// The ruleset for the current state, judging under generation `g`.
fn plan_state(cfg: &PolicyConfig, state: &PolicyState, g: Generation) -> plan::Ruleset {
    let scope = plan::PolicyScope {
        network: &cfg.network,
        node: &cfg.node,
    };
    // Borrowed, not copied: a cluster's every Pod, on every change.
    plan::ruleset(
        &scope,
        state.pods.values(),
        state.namespaces.values(),
        state.policies.values(),
        g,
    )
}

/// A generation this run of the agent starts from: the clock's nanoseconds, so a restarted
/// agent does not take connections marked by its previous run as judged by its own rules.
fn first_generation() -> Generation {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::from(d.subsec_nanos()) ^ d.as_secs())
        .unwrap_or(0);
    Generation::first(nanos)
}

/// Runs until `shutdown`, rewriting the rules whenever `state` changes.
pub async fn run(
    mut state: watch::Receiver<Arc<PolicyState>>,
    cfg: PolicyConfig,
    counters: Arc<PolicyCounters>,
    shutdown: CancellationToken,
) {
    let mut applied: Option<plan::Ruleset> = None;
    let mut applied_at = Instant::now();
    let mut generation = first_generation();
    loop {
        let current = state.borrow_and_update().clone();
        if current.synced {
            let planning = Instant::now();
            let ruleset = plan_state(&cfg, &current, generation);
            let planned_ms = planning.elapsed().as_millis() as u64;
            let due = applied_at.elapsed() >= RESYNC;
            let resync =
                due && !matches!(&applied, Some(a) if still_applied(&cfg.network, a).await);
            if due && !resync {
                applied_at = Instant::now();
                if let Err(e) = ensure_jump_first(&cfg.network).await {
                    tracing::warn!(error = %e, "network policy: the FORWARD jump cannot be put first");
                }
            }
            if applied.as_ref() != Some(&ruleset) || resync {
                // New rules: every established connection is judged again at its next packet.
                generation = generation.next();
                let ruleset = ruleset.with_generation(&cfg.network, generation);
                let started = Instant::now();
                let base = if resync { None } else { applied.as_ref() };
                match apply(&cfg.network, &ruleset, base, &counters).await {
                    Ok(()) => {
                        tracing::debug!(
                            rules = ruleset.rule_count(),
                            planned_ms,
                            elapsed_ms = started.elapsed().as_millis() as u64,
                            "network policy rules written"
                        );
                        applied = Some(ruleset);
                        applied_at = Instant::now();
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "network policy: writing the rules failed");
                        applied = None;
                    }
                }
            }
        }
        // After a failed write, retry soon rather than at the next change.
        let wait = if applied.is_none() && current.synced {
            Duration::from_secs(1)
        } else {
            RESYNC.saturating_sub(applied_at.elapsed())
        };
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(wait) => {}
            changed = state.changed() => if changed.is_err() { return },
        }
    }
}
