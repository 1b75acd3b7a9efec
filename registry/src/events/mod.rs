//! The event recorder controllers use: writes core/v1 Events about an object, folding repeats
//! (same object, type, reason, message and source) into one Event with a growing `count`, so
//! `kubectl describe` shows them as upstream does; similar events are combined and a source's
//! events about one object rate-limited as client-go's correlator does ([`correlate`]).

pub mod correlate;

use std::sync::{Arc, Mutex, PoisonError};

use jiff::Timestamp;

use crate::RegistryError;
use crate::{Part, Registry, WriteOptions};
use berth_shared::resource;
use correlate::{Correlated, Correlator, EventKeys};
use serde_json::{Value, json};

/// Normal or Warning.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    Normal,
    Warning,
}

impl EventType {
    fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

/// Records events on behalf of one component. Clones share the correlation state.
#[derive(Clone)]
pub struct Recorder {
    registry: Registry,
    component: String,
    correlator: Arc<Mutex<Correlator>>,
    /// The clock the correlation reads (a controller's, so tests can move it).
    clock: Arc<dyn Fn() -> Timestamp + Send + Sync>,
}

/// A deterministic event name per (object, type, reason, message), so repeats find each other
/// without any state outside the store.
fn event_name(obj_name: &str, uid: &str, t: EventType, reason: &str, message: &str) -> String {
    use sha2::Digest;
    let mut h = sha2::Sha256::new();
    h.update(uid.as_bytes());
    h.update(t.as_str().as_bytes());
    h.update(reason.as_bytes());
    h.update(message.as_bytes());
    let digest = h.finalize();
    let hex: String = digest.iter().take(8).map(|b| format!("{b:02x}")).collect();
    format!("{obj_name}.{hex}")
}

impl Recorder {
    pub fn new(registry: Registry, component: impl Into<String>) -> Recorder {
        Recorder {
            registry,
            component: component.into(),
            correlator: Arc::default(),
            clock: Arc::new(Timestamp::now),
        }
    }

    /// [`Recorder::new`] with the clock correlation reads `now` from.
    pub fn with_clock(
        registry: Registry,
        component: impl Into<String>,
        clock: impl Fn() -> Timestamp + Send + Sync + 'static,
    ) -> Recorder {
        Recorder {
            clock: Arc::new(clock),
            ..Recorder::new(registry, component)
        }
    }

    /// Records an event about `obj` (a full object with apiVersion, kind and metadata).
    /// Blocking: call from a blocking context.
    pub fn record(
        &self,
        obj: &Value,
        event_type: EventType,
        reason: &str,
        message: &str,
    ) -> Result<(), RegistryError> {
        let Some(rt) = resource::by_plural("", "v1", "events") else {
            return Ok(());
        };
        let s = |p: &str| {
            obj.pointer(p)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        let ns = match s("/metadata/namespace") {
            n if n.is_empty() => "default".to_string(),
            n => n,
        };
        // Each event is also a log line: what a controller did, to which object, and why.
        let object = format!("{}/{}", s("/kind"), s("/metadata/name"));
        match event_type {
            EventType::Warning => tracing::warn!(
                component = %self.component, namespace = %ns, %object, reason, "{message}"
            ),
            EventType::Normal => tracing::info!(
                component = %self.component, namespace = %ns, %object, reason, "{message}"
            ),
        }
        let keys = EventKeys::new(
            &self.component,
            [
                &s("/apiVersion"),
                &s("/kind"),
                &s("/metadata/namespace"),
                &s("/metadata/name"),
                &s("/metadata/uid"),
            ],
            event_type.as_str(),
            reason,
        );
        let decision = self
            .correlator
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .correlate(&keys, message, (self.clock)());
        // A combined event is one Event per aggregate key: named after the prefix alone, its
        // message the latest one.
        let (name_message, message) = match &decision {
            Correlated::Skip => {
                tracing::debug!(component = %self.component, %object, reason, "event rate-limited");
                return Ok(());
            }
            Correlated::Record => (message, message),
            Correlated::Combined { message } => (correlate::COMBINED_PREFIX, message.as_str()),
        };
        let name = event_name(
            &s("/metadata/name"),
            &s("/metadata/uid"),
            event_type,
            reason,
            name_message,
        );
        let now = crate::meta::now_rfc3339();
        if self.registry.get(rt, Some(&ns), &name).is_ok() {
            let r = self.registry.update_with(
                rt,
                Some(&ns),
                &name,
                Part::Main,
                &WriteOptions::default(),
                |mut ev| {
                    let count = ev.get("count").and_then(Value::as_i64).unwrap_or(1);
                    ev["count"] = json!(count + 1);
                    ev["lastTimestamp"] = json!(now);
                    ev["message"] = json!(message);
                    Ok(ev)
                },
            );
            return match r {
                Ok(_) | Err(RegistryError::NotFound { .. }) => Ok(()),
                Err(e) => Err(e),
            };
        }
        let event = json!({
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": ns},
            "involvedObject": {
                "apiVersion": s("/apiVersion"),
                "kind": s("/kind"),
                "name": s("/metadata/name"),
                "namespace": s("/metadata/namespace"),
                "uid": s("/metadata/uid"),
                "resourceVersion": s("/metadata/resourceVersion"),
            },
            "reason": reason,
            "message": message,
            "type": event_type.as_str(),
            "source": {"component": self.component},
            "reportingComponent": self.component,
            "reportingInstance": "",
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        });
        match self
            .registry
            .create(rt, Some(&ns), event, &WriteOptions::default())
        {
            Ok(_) | Err(RegistryError::AlreadyExists { .. }) => Ok(()),
            Err(e) => Err(e),
        }
    }
}

/// Records an event about `obj`; a failure to record is logged, never a pass's failure.
pub fn record(recorder: &Recorder, obj: &Value, t: EventType, reason: &str, message: &str) {
    if let Err(e) = recorder.record(obj, t, reason, message) {
        tracing::debug!(error = %e, reason, "recording event");
    }
}

/// Warning or Normal.
pub fn event_type(warning: bool) -> EventType {
    if warning {
        EventType::Warning
    } else {
        EventType::Normal
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicI64, Ordering};

    fn replicaset() -> Value {
        json!({
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {"name": "web", "namespace": "default", "uid": "u-1"},
        })
    }

    fn events(registry: &Registry) -> Vec<Value> {
        let rt = resource::by_plural("", "v1", "events").expect("events");
        registry.list_values(rt, Some("default")).expect("list")
    }

    #[test]
    fn a_replicaset_creating_many_pods_leaves_nine_events_and_one_combined() {
        let dir = tempfile::tempdir().expect("dir");
        let registry = crate::testing::registry(dir.path());
        let seconds = Arc::new(AtomicI64::new(1_800_000_000));
        let now = seconds.clone();
        let recorder = Recorder::with_clock(registry.clone(), "replicaset-controller", move || {
            Timestamp::from_second(now.load(Ordering::Relaxed)).expect("a valid time")
        });
        let created = |pods: std::ops::Range<u32>| {
            for i in pods {
                let message = format!("Created pod: web-{i}");
                record(
                    &recorder,
                    &replicaset(),
                    EventType::Normal,
                    "SuccessfulCreate",
                    &message,
                );
            }
        };
        created(0..20);
        let evs = events(&registry);
        assert_eq!(evs.len(), 10, "{evs:#?}");
        let combined: Vec<&Value> = evs
            .iter()
            .filter(|e| {
                e["message"]
                    .as_str()
                    .is_some_and(|m| m.starts_with(correlate::COMBINED_PREFIX))
            })
            .collect();
        assert_eq!(combined.len(), 1, "{evs:#?}");
        assert_eq!(combined[0]["count"], 11);
        assert_eq!(
            combined[0]["message"],
            "(combined from similar events): Created pod: web-19"
        );
        // 20 events about the ReplicaSet so far: five more pass, then the spam filter drops
        // them until five minutes have passed on the recorder's clock.
        created(20..30);
        let count = |evs: &[Value]| {
            evs.iter()
                .map(|e| e["count"].as_i64().unwrap_or(0))
                .sum::<i64>()
        };
        assert_eq!(count(&events(&registry)), 25);
        seconds.fetch_add(300, Ordering::Relaxed);
        created(30..31);
        assert_eq!(count(&events(&registry)), 26);
    }
}
