//! Which nodes a scrape tick leaves out: a node whose scrapes keep failing is tried again after
//! 1, 2, 4, … ticks, at most [`MAX_BACKOFF`] apart; one answer, or a new agent address, resets it.
//!
//! Upstream's metrics-server scrapes every node every `--metric-resolution` and only logs a
//! failure more quietly when the node is not Ready. Here an unreachable agent would cost a full
//! TCP and TLS handshake per tick forever (1,000 such nodes at 15 s: 67 handshakes/s), so a
//! failing node is backed off like a failing key in the reconcile runtime: capped exponential,
//! per node, reset on success. Worked example at the default 15 s resolution (cap 8 ticks =
//! 2 min): failures 1, 2, 3, 4, 5, … are followed by tries 1, 2, 4, 8, 8, … ticks later, i.e.
//! after 15 s, 30 s, 1 min, 2 min, 2 min; a node that comes back shows in `kubectl top` at most
//! two minutes (and one more tick for a CPU rate) later.

use std::time::Duration;

use berth_shared::reconcile::doubling_factor;

/// The longest a failing node goes unscraped.
pub const MAX_BACKOFF: Duration = Duration::from_secs(120);

/// Where a node's agent listens: its InternalIP and port.
pub type Endpoint = (String, u16);

/// A node whose last scrapes failed in a row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failing {
    /// The agent those scrapes went to; a node posting another one is tried at once.
    pub endpoint: Endpoint,
    /// How many scrapes in a row failed (≥ 1).
    pub failures: u32,
    /// The first tick the node is tried again.
    pub retry_at: u64,
}

/// The most ticks between two tries of a failing node: [`MAX_BACKOFF`] in ticks of
/// `resolution`, at least one (a resolution over two minutes backs nothing off).
pub fn max_skip(resolution: Duration) -> u64 {
    let ticks = MAX_BACKOFF.as_millis() / resolution.as_millis().max(1);
    u64::try_from(ticks).unwrap_or(u64::MAX).max(1)
}

/// Whether a node whose agent is at `endpoint` is scraped at `tick`.
pub fn plan_scrape(failing: Option<&Failing>, endpoint: &Endpoint, tick: u64) -> bool {
    match failing {
        None => true,
        Some(f) => f.endpoint != *endpoint || tick >= f.retry_at,
    }
}

/// What is left of a node's back-off after its scrape at `tick` answered (`ok`) or failed:
/// nothing after an answer; after the `n`th failure in a row at the same endpoint, the next try
/// 2^(n-1) ticks later, at most `max_skip`.
pub fn plan_after_scrape(
    failing: Option<&Failing>,
    endpoint: &Endpoint,
    tick: u64,
    ok: bool,
    max_skip: u64,
) -> Option<Failing> {
    if ok {
        return None;
    }
    let failures = match failing {
        Some(f) if f.endpoint == *endpoint => f.failures.saturating_add(1),
        _ => 1,
    };
    // 2^(failures-1) ticks, as the reconcile runtime doubles its per-key back-off.
    let skip = u64::from(doubling_factor(failures)).min(max_skip.max(1));
    Some(Failing {
        endpoint: endpoint.clone(),
        failures,
        retry_at: tick.saturating_add(skip),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ep(addr: &str, port: u16) -> Endpoint {
        (addr.to_string(), port)
    }

    /// Failing at 10.0.0.1:10250 `(failures, retry_at)`.
    fn failing(state: Option<(u32, u64)>) -> Option<Failing> {
        state.map(|(failures, retry_at)| Failing {
            endpoint: ep("10.0.0.1", 10250),
            failures,
            retry_at,
        })
    }

    #[test]
    fn a_node_is_scraped_unless_it_is_failing_and_not_yet_due() {
        // (case, failing (failures, retry at), the node's address now, tick, scraped)
        #[rustfmt::skip]
        let cases = [
            ("a node never failed", None, "10.0.0.1", 5, true),
            ("a failing node before its retry", Some((2, 7)), "10.0.0.1", 6, false),
            ("a failing node at its retry", Some((2, 7)), "10.0.0.1", 7, true),
            ("a failing node past its retry", Some((2, 7)), "10.0.0.1", 9, true),
            ("a failing node at a new address", Some((4, 20)), "10.0.0.2", 6, true),
        ];
        for (case, state, addr, tick, want) in cases {
            let got = plan_scrape(failing(state).as_ref(), &ep(addr, 10250), tick);
            assert_eq!(got, want, "{case}");
        }
    }

    #[test]
    fn a_new_port_is_a_new_endpoint() {
        let state = failing(Some((3, 12)));
        assert!(plan_scrape(state.as_ref(), &ep("10.0.0.1", 10251), 10));
        assert!(!plan_scrape(state.as_ref(), &ep("10.0.0.1", 10250), 10));
    }

    #[test]
    fn failures_in_a_row_double_the_ticks_to_the_next_try_up_to_the_cap() {
        // (case, before, tick, answered, cap, after), states as (failures, retry at)
        #[rustfmt::skip]
        let cases = [
            ("an answer leaves no back-off", None, 3, true, 8, None),
            ("an answer ends a back-off", Some((5, 10)), 10, true, 8, None),
            ("a first failure retries next tick", None, 3, false, 8, Some((1, 4))),
            ("a second waits two ticks", Some((1, 4)), 4, false, 8, Some((2, 6))),
            ("a third waits four", Some((2, 6)), 6, false, 8, Some((3, 10))),
            ("a fourth waits eight", Some((3, 10)), 10, false, 8, Some((4, 18))),
            ("a fifth is capped at eight", Some((4, 18)), 18, false, 8, Some((5, 26))),
            ("a long run stays capped", Some((90, 100)), 100, false, 8, Some((91, 108))),
            ("a cap of one retries every tick", Some((6, 7)), 7, false, 1, Some((7, 8))),
            ("a cap of zero counts as one", Some((6, 7)), 7, false, 0, Some((7, 8))),
        ];
        for (case, before, tick, ok, cap, after) in cases {
            let got = plan_after_scrape(
                failing(before).as_ref(),
                &ep("10.0.0.1", 10250),
                tick,
                ok,
                cap,
            );
            assert_eq!(got, failing(after), "{case}");
        }
    }

    #[test]
    fn a_failure_at_a_new_address_counts_from_one() {
        let before = failing(Some((6, 20)));
        let after = plan_after_scrape(before.as_ref(), &ep("10.0.0.2", 10250), 21, false, 8);
        let want = Failing {
            endpoint: ep("10.0.0.2", 10250),
            failures: 1,
            retry_at: 22,
        };
        assert_eq!(after, Some(want));
    }

    #[test]
    fn the_cap_is_two_minutes_in_ticks_and_at_least_one() {
        let cases = [
            (Duration::from_secs(15), 8),
            (Duration::from_secs(10), 12),
            (Duration::from_secs(60), 2),
            (Duration::from_secs(50), 2),
            (Duration::from_secs(120), 1),
            (Duration::from_secs(300), 1),
            (Duration::ZERO, 120_000),
        ];
        for (resolution, want) in cases {
            assert_eq!(max_skip(resolution), want, "{resolution:?}");
        }
    }
}
