//! Leader election among controllers sharing one store, through the `coordination.k8s.io/v1`
//! Lease `kube-system/berth-controller` with client-go's rules and upstream's timings (lease
//! 15 s, renew deadline 10 s, retry 2 s): a candidate takes the lease once its holder has not
//! renewed it for a lease duration *as this candidate observed* (no clock comparison between
//! machines), the leader renews it every retry period, and a leader that cannot renew within
//! the renew deadline stops acting at once — before anyone else may take the lease.
//!
//! The controllers and the scheduler run only while this process leads ([`run`] starts and
//! stops them); every process serves the API. Changes of leader are events on the Lease
//! (reason `LeaderElection`) and the `leader_election_master_status` gauge.

use berth_registry::events::{EventType, Recorder};
use berth_registry::{Part, Registry, RegistryError, WriteOptions};
use berth_shared::resource::{self, ResourceType};
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// The Lease's namespace and name (kube-controller-manager's is `kube-controller-manager`).
pub const NAMESPACE: &str = "kube-system";
pub const LEASE: &str = "berth-controller";

/// Upstream's leader-election durations.
#[derive(Debug, Clone, Copy)]
pub struct Timings {
    pub lease_duration: Duration,
    pub renew_deadline: Duration,
    pub retry_period: Duration,
}

impl Timings {
    /// client-go's rules: the lease outlasts the renew deadline, which outlasts the retry
    /// period (with its jitter), so a leader stops acting before anyone may take over.
    pub fn check(&self) -> Result<(), String> {
        if self.lease_duration <= self.renew_deadline {
            return Err(
                "--leader-elect-lease-duration must be greater than --leader-elect-renew-deadline"
                    .into(),
            );
        }
        if self.renew_deadline <= self.retry_period.mul_f64(1.2) {
            return Err("--leader-elect-renew-deadline must be greater than 1.2 × --leader-elect-retry-period".into());
        }
        if self.retry_period.is_zero() {
            return Err("--leader-elect-retry-period must be greater than zero".into());
        }
        Ok(())
    }
}

impl Default for Timings {
    fn default() -> Timings {
        Timings {
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }
}

/// A Lease's leader-election fields.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Record {
    pub holder: String,
    pub lease_duration_seconds: u64,
    pub acquire_time: Option<String>,
    pub renew_time: Option<String>,
    pub transitions: i64,
}

impl Record {
    pub fn of(lease: &Value) -> Record {
        let spec = &lease["spec"];
        let text = |k: &str| spec[k].as_str().map(str::to_string);
        Record {
            holder: text("holderIdentity").unwrap_or_default(),
            lease_duration_seconds: spec["leaseDurationSeconds"].as_u64().unwrap_or(0),
            acquire_time: text("acquireTime"),
            renew_time: text("renewTime"),
            transitions: spec["leaseTransitions"].as_i64().unwrap_or(0),
        }
    }

    fn spec(&self) -> Value {
        json!({
            "holderIdentity": self.holder,
            "leaseDurationSeconds": self.lease_duration_seconds,
            "acquireTime": self.acquire_time,
            "renewTime": self.renew_time,
            "leaseTransitions": self.transitions,
        })
    }
}

/// What a candidate does with the Lease it read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// There is none: create it, holding it.
    Create,
    /// Ours: renew it.
    Renew,
    /// Free, or its holder stopped renewing a lease duration ago: take it.
    Take,
    /// Someone else holds it.
    Wait,
}

/// Decides from the Lease read (`None`: absent) and when this candidate last saw its record
/// change.
pub fn decide(
    identity: &str,
    current: Option<&Record>,
    observed_at: Instant,
    now: Instant,
) -> Decision {
    match current {
        None => Decision::Create,
        Some(r) if r.holder == identity => Decision::Renew,
        Some(r) if r.holder.is_empty() => Decision::Take,
        Some(r) if now >= observed_at + Duration::from_secs(r.lease_duration_seconds) => {
            Decision::Take
        }
        Some(_) => Decision::Wait,
    }
}

/// The record a candidate writes when it creates, takes or renews the Lease at `now`.
pub fn next_record(
    identity: &str,
    current: Option<&Record>,
    timings: &Timings,
    now: &str,
) -> Record {
    let lease_duration_seconds = timings.lease_duration.as_secs();
    match current {
        Some(r) if r.holder == identity => Record {
            renew_time: Some(now.to_string()),
            lease_duration_seconds,
            ..r.clone()
        },
        _ => Record {
            holder: identity.to_string(),
            lease_duration_seconds,
            acquire_time: Some(now.to_string()),
            renew_time: Some(now.to_string()),
            transitions: current.map(|r| r.transitions + 1).unwrap_or(0),
        },
    }
}

/// Whether this process leads, and how often that changed (`/metrics`).
#[derive(Debug, Default)]
pub struct LeaderStatus {
    leading: AtomicBool,
    changes: AtomicU64,
    /// Set when leader election runs at all (a shared store).
    elected: AtomicBool,
}

impl LeaderStatus {
    pub fn is_leader(&self) -> bool {
        self.leading.load(Ordering::Relaxed)
    }

    fn set(&self, leading: bool) {
        if self.leading.swap(leading, Ordering::Relaxed) != leading {
            self.changes.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The Prometheus lines (upstream's gauge name and label).
    pub fn render(&self) -> String {
        if !self.elected.load(Ordering::Relaxed) {
            return String::new();
        }
        format!(
            "# HELP leader_election_master_status Whether this process leads (1) or not (0).\n\
             # TYPE leader_election_master_status gauge\n\
             leader_election_master_status{{name=\"{LEASE}\"}} {}\n\
             # HELP berth_leader_changes_total Times this process started or stopped leading.\n\
             # TYPE berth_leader_changes_total counter\n\
             berth_leader_changes_total {}\n",
            u8::from(self.is_leader()),
            self.changes.load(Ordering::Relaxed)
        )
    }
}

fn leases() -> Option<&'static ResourceType> {
    resource::by_plural("coordination.k8s.io", "v1", "leases")
}

fn options() -> WriteOptions {
    WriteOptions {
        manager: Some(LEASE.to_string()),
        ..WriteOptions::default()
    }
}

/// One candidate: its identity and the last Lease record it saw change, and when.
struct Elector {
    registry: Registry,
    identity: String,
    timings: Timings,
    observed: Option<(Record, Instant)>,
}

impl Elector {
    /// Reads the Lease and creates, takes or renews it if the rules allow; `Ok(true)` when
    /// this process holds it afterwards. Blocking.
    fn try_acquire_or_renew(&mut self) -> Result<bool, RegistryError> {
        let Some(rt) = leases() else {
            return Ok(false);
        };
        let now = Instant::now();
        let stamp = jiff::Timestamp::now()
            .strftime("%Y-%m-%dT%H:%M:%S%.6fZ")
            .to_string();
        let current = match self.registry.current(rt, Some(NAMESPACE), LEASE) {
            Ok(obj) => Some(obj.value()?),
            Err(RegistryError::NotFound { .. }) => None,
            Err(e) => return Err(e),
        };
        let record = current.as_ref().map(Record::of);
        if let Some(r) = &record
            && self.observed.as_ref().is_none_or(|(seen, _)| seen != r)
        {
            self.observed = Some((r.clone(), now));
        }
        let observed_at = self.observed.as_ref().map(|(_, t)| *t).unwrap_or(now);
        let decision = decide(&self.identity, record.as_ref(), observed_at, now);
        let next = next_record(&self.identity, record.as_ref(), &self.timings, &stamp);
        let written = match (decision, current) {
            (Decision::Wait, _) => return Ok(false),
            (Decision::Create, _) | (_, None) => self.registry.create(
                rt,
                Some(NAMESPACE),
                json!({
                    "apiVersion": "coordination.k8s.io/v1",
                    "kind": "Lease",
                    "metadata": {"name": LEASE, "namespace": NAMESPACE},
                    "spec": next.spec(),
                }),
                &options(),
            ),
            (_, Some(mut lease)) => {
                // The read's resourceVersion stays in the body: a compare-and-swap.
                lease["spec"] = next.spec();
                self.registry
                    .update(rt, Some(NAMESPACE), LEASE, lease, Part::Main, &options())
            }
        };
        match written {
            Ok(_) => {
                self.observed = Some((next, now));
                Ok(true)
            }
            Err(RegistryError::Conflict { .. } | RegistryError::AlreadyExists { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Gives the Lease up on a graceful stop so another candidate need not wait it out.
    fn release(&mut self) -> Result<(), RegistryError> {
        let Some(rt) = leases() else { return Ok(()) };
        let mut lease = self.registry.current(rt, Some(NAMESPACE), LEASE)?.value()?;
        if Record::of(&lease).holder != self.identity {
            return Ok(());
        }
        lease["spec"]["holderIdentity"] = Value::Null;
        lease["spec"]["leaseDurationSeconds"] = json!(1);
        self.registry
            .update(rt, Some(NAMESPACE), LEASE, lease, Part::Main, &options())
            .map(|_| ())
    }
}

/// One attempt, off the async threads, bounded by `limit`: `false` on any failure.
async fn attempt(elector: &mut Option<Elector>, limit: Duration) -> bool {
    let Some(mut e) = elector.take() else {
        return false;
    };
    let task = tokio::task::spawn_blocking(move || {
        let held = e.try_acquire_or_renew();
        (e, held)
    });
    match tokio::time::timeout(limit, task).await {
        Ok(Ok((e, held))) => {
            *elector = Some(e);
            match held {
                Ok(held) => held,
                Err(err) => {
                    tracing::warn!(error = %err, "leader election: cannot read or write the lease");
                    false
                }
            }
        }
        // A hung attempt leaves the elector with its task; the next one starts afresh.
        _ => false,
    }
}

fn record_event(registry: &Registry, identity: &str, message: String) {
    let Some(rt) = leases() else { return };
    let Ok(lease) = registry
        .get(rt, Some(NAMESPACE), LEASE)
        .and_then(|o| o.value().map_err(Into::into))
    else {
        return;
    };
    let recorder = Recorder::new(registry.clone(), identity.to_string());
    if let Err(e) = recorder.record(&lease, EventType::Normal, "LeaderElection", &message) {
        tracing::debug!(error = %e, "cannot record the leader election event");
    }
}

/// Competes for the Lease until `shutdown`; while this process leads, `lead` runs the
/// controllers under a token that is cancelled the moment the lease is lost.
///
/// Before `lead` is called, the store's cache is brought up to every write acknowledged
/// anywhere (a consistent read of etcd): the old leader's last writes (a pod it created, a
/// ReplicaSet it resized) are in what the new leader's controllers first see, so they never
/// act on sizes from before them (which once let a rollout pass replicas + maxSurge).
pub async fn run<F>(
    registry: Registry,
    identity: String,
    timings: Timings,
    status: Arc<LeaderStatus>,
    shutdown: CancellationToken,
    lead: impl Fn(CancellationToken) -> F,
) where
    F: std::future::Future<Output = Vec<JoinHandle<()>>>,
{
    status.elected.store(true, Ordering::Relaxed);
    let fresh = || Elector {
        registry: registry.clone(),
        identity: identity.clone(),
        timings,
        observed: None,
    };
    let mut elector = Some(fresh());
    loop {
        // Candidate: try every retry period until the lease is ours.
        loop {
            if elector.is_none() {
                elector = Some(fresh());
            }
            if attempt(&mut elector, timings.renew_deadline).await {
                break;
            }
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(jittered(timings.retry_period)) => {}
            }
        }
        if let Err(e) = registry.store().sync().await {
            // Leading on a cache that may miss the old leader's writes is what must not
            // happen: give the Lease back to the candidates' rules and try again.
            tracing::warn!(error = %e, "became leader but cannot read the store's newest state");
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(jittered(timings.retry_period)) => {}
            }
            continue;
        }
        tracing::info!(%identity, "became leader");
        {
            let (r, id) = (registry.clone(), identity.clone());
            let _ = tokio::task::spawn_blocking(move || {
                record_event(&r, &id, format!("{id} became leader"))
            })
            .await;
        }
        status.set(true);
        let acting = shutdown.child_token();
        let handles = lead(acting.clone()).await;
        // Leader: renew every retry period; stop at once when the renew deadline passes.
        let mut renewed = Instant::now();
        let stopping = loop {
            tokio::select! {
                _ = shutdown.cancelled() => break true,
                _ = tokio::time::sleep(timings.retry_period) => {}
            }
            let left = timings.renew_deadline.saturating_sub(renewed.elapsed());
            if !left.is_zero() && attempt(&mut elector, left).await {
                renewed = Instant::now();
                continue;
            }
            if renewed.elapsed() >= timings.renew_deadline {
                break false;
            }
        };
        acting.cancel();
        status.set(false);
        if !stopping {
            tracing::warn!(%identity, "leader election lost: controllers stopped");
        }
        for h in handles {
            let _ = h.await;
        }
        if stopping {
            if let Some(mut e) = elector.take() {
                let _ = tokio::task::spawn_blocking(move || e.release()).await;
            }
            return;
        }
    }
}

/// `d` stretched by up to 20 % (client-go's jitter factor 1.2), so candidates spread out.
fn jittered(d: Duration) -> Duration {
    d.mul_f64(1.0 + rand::random::<f64>() * 0.2)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held_by(holder: &str) -> Record {
        Record {
            holder: holder.into(),
            lease_duration_seconds: 15,
            acquire_time: Some("t0".into()),
            renew_time: Some("t1".into()),
            transitions: 3,
        }
    }

    #[test]
    fn a_candidate_creates_a_missing_lease_and_renews_its_own() {
        let now = Instant::now();
        assert_eq!(decide("a", None, now, now), Decision::Create);
        assert_eq!(decide("a", Some(&held_by("a")), now, now), Decision::Renew);
    }

    #[test]
    fn another_holder_is_waited_out_for_a_lease_duration_from_the_last_change_seen() {
        let seen = Instant::now();
        let r = held_by("b");
        assert_eq!(decide("a", Some(&r), seen, seen), Decision::Wait);
        assert_eq!(
            decide("a", Some(&r), seen, seen + Duration::from_secs(14)),
            Decision::Wait
        );
        assert_eq!(
            decide("a", Some(&r), seen, seen + Duration::from_secs(15)),
            Decision::Take
        );
    }

    #[test]
    fn a_released_lease_is_taken_at_once() {
        let now = Instant::now();
        assert_eq!(decide("a", Some(&held_by("")), now, now), Decision::Take);
    }

    #[test]
    fn renewing_keeps_the_acquire_time_and_taking_counts_a_transition() {
        let t = Timings::default();
        let renewed = next_record("a", Some(&held_by("a")), &t, "t9");
        assert_eq!(renewed.acquire_time.as_deref(), Some("t0"));
        assert_eq!(renewed.renew_time.as_deref(), Some("t9"));
        assert_eq!(renewed.transitions, 3);
        let taken = next_record("a", Some(&held_by("b")), &t, "t9");
        assert_eq!(taken.holder, "a");
        assert_eq!(taken.acquire_time.as_deref(), Some("t9"));
        assert_eq!(taken.transitions, 4);
        assert_eq!(taken.lease_duration_seconds, 15);
        let created = next_record("a", None, &t, "t9");
        assert_eq!(created.transitions, 0);
    }

    #[test]
    fn the_record_round_trips_through_a_lease() {
        let r = held_by("a");
        let lease = json!({"spec": r.spec()});
        assert_eq!(Record::of(&lease), r);
    }
}
