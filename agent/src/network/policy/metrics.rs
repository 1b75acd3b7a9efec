//! What policy refused, on the agent's `/metrics`:
//! `berth_network_policy_refused_packets_total{direction="ingress"|"egress"}`, the packet
//! counters of the two deny chains' `REJECT` rules (a packet counted once, by the first
//! direction that refuses it). Rewriting a deny chain restarts its counter from zero, so what
//! it had counted is folded into a base first and the metric never goes down.

use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;

use super::plan::Chains;
use crate::metrics::exposition::Text;
use crate::network::command;

const METRIC: &str = "berth_network_policy_refused_packets_total";

/// The refused-packet counts of one agent's network.
#[derive(Debug)]
pub struct PolicyCounters {
    network: String,
    /// Counted before the deny chains were last rewritten: `[ingress, egress]`.
    base: Mutex<[u64; 2]>,
}

/// The packet count of the first rule in `iptables -L CHAIN -n -v -x` output.
pub(crate) fn first_rule_packets(listing: &str) -> Option<u64> {
    listing
        .lines()
        .skip(2)
        .find_map(|l| l.split_whitespace().next()?.parse().ok())
}

async fn read_chain(chain: &str) -> u64 {
    match command::tool(
        "iptables",
        &["-w", "5", "-t", "filter", "-L", chain, "-n", "-v", "-x"],
    )
    .await
    {
        Ok(out) => first_rule_packets(&String::from_utf8_lossy(&out.stdout)).unwrap_or(0),
        // No chain yet (no pod CIDR yet, or removed): nothing counted in it.
        Err(_) => 0,
    }
}

impl PolicyCounters {
    pub fn new(network: &str) -> Arc<PolicyCounters> {
        Arc::new(PolicyCounters {
            network: network.to_string(),
            base: Mutex::new([0, 0]),
        })
    }

    /// The chains' counts now: `[ingress, egress]`.
    async fn current(&self) -> [u64; 2] {
        let c = Chains::of(&self.network);
        [
            read_chain(&c.deny_ingress).await,
            read_chain(&c.deny_egress).await,
        ]
    }

    fn base(&self) -> [u64; 2] {
        match self.base.lock() {
            Ok(b) => *b,
            Err(poisoned) => *poisoned.into_inner(),
        }
    }

    /// Adds what the chains counted to the base; call before rewriting them.
    pub async fn fold(&self) {
        let now = self.current().await;
        let mut base = match self.base.lock() {
            Ok(b) => b,
            Err(poisoned) => poisoned.into_inner(),
        };
        base[0] += now[0];
        base[1] += now[1];
    }

    /// The metric family in the text format.
    pub async fn render(&self) -> String {
        let now = self.current().await;
        let base = self.base();
        let mut t = Text::default();
        t.family(
            METRIC,
            "counter",
            "Packets of new connections refused by NetworkPolicy on this node, by the direction that refused them.",
        );
        for (i, direction) in ["ingress", "egress"].iter().enumerate() {
            t.sample(
                METRIC,
                &["direction"],
                &[direction.to_string()],
                (base[i] + now[i]) as f64,
                None,
            );
        }
        t.finish()
    }
}

impl crate::server::MetricsSection for PolicyCounters {
    fn render(self: Arc<Self>) -> BoxFuture<'static, String> {
        Box::pin(async move { PolicyCounters::render(&self).await })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_rules_packet_count_is_read_from_the_listing() {
        let listing = "Chain BERTH-NPDI-0123abcd (2 references)\n    pkts      bytes target     prot opt in     out     source               destination\n      17     1020 REJECT     all  --  *      *       0.0.0.0/0            0.0.0.0/0            /* berth:n ingress refused */ reject-with icmp-port-unreachable\n";
        assert_eq!(first_rule_packets(listing), Some(17));
        assert_eq!(
            first_rule_packets("Chain X (0 references)\n pkts bytes target\n"),
            None
        );
    }
}
