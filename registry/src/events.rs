//! The event recorder controllers use: writes core/v1 Events about an object, folding repeats
//! (same object, type, reason, message and source) into one Event with a growing `count`, so
//! `kubectl describe` shows them as upstream does.

use crate::RegistryError;
use crate::{Part, Registry, WriteOptions};
use berth_shared::resource;
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

/// Records events on behalf of one component.
#[derive(Clone)]
pub struct Recorder {
    registry: Registry,
    component: String,
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
        let name = event_name(
            &s("/metadata/name"),
            &s("/metadata/uid"),
            event_type,
            reason,
            message,
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
