//! The APIServices' `Available` condition, as kube-aggregator's availability controller
//! keeps it: a local APIService is always available; a remote one is available when its
//! Service, port and endpoints exist and its server answers discovery for its group-version
//! (`GET /apis/<group>/<version>`) with 200 within five seconds. That answer is also what
//! the aggregated discovery documents list for it. Checked whenever the APIServices change
//! and every [`PERIOD`]; the condition is written only when it changes.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use berth_registry::{Part, Registry, RegistryError, WriteOptions};
use berth_shared::resource::API_SERVICES;
use http_body_util::{BodyExt, Limited};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::Aggregator;
use super::backend::{self, Unreachable};
use super::front_proxy::FrontProxy;
use super::registration::Registration;

/// How often every APIService is checked again.
pub const PERIOD: Duration = Duration::from_secs(10);

/// How long a discovery check may take.
const CHECK_TIMEOUT: Duration = Duration::from_secs(5);

/// Upstream's cap on a discovery answer is the general response limit; this one is ample.
const MAX_DISCOVERY_BYTES: usize = 8 * 1024 * 1024;

/// The condition one check found: status, reason, message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Condition {
    pub status: &'static str,
    pub reason: &'static str,
    pub message: String,
}

/// Checks every APIService now, then whenever they change and every [`PERIOD`].
pub async fn run(
    aggregator: Arc<Aggregator>,
    registry: Registry,
    front: Arc<FrontProxy>,
    shutdown: CancellationToken,
) {
    loop {
        for reg in aggregator.registrations().iter() {
            let condition = match &reg.service {
                None => Condition {
                    status: "True",
                    reason: "Local",
                    message: "Local APIServices are always available".into(),
                },
                Some(_) => {
                    let (condition, list) = check(&registry, &front, reg).await;
                    aggregator.set_discovered(&reg.group, &reg.version, list);
                    condition
                }
            };
            let (registry, name) = (registry.clone(), reg.name.clone());
            let written =
                tokio::task::spawn_blocking(move || write(&registry, &name, &condition)).await;
            if let Ok(Err(e)) = written {
                tracing::debug!(apiservice = %reg.name, error = %e, "availability not written");
            }
        }
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(PERIOD) => {}
            _ = aggregator.changed.notified() => {}
        }
    }
}

/// Reaches `reg`'s server and asks for its group-version's discovery document.
async fn check(
    registry: &Registry,
    front: &FrontProxy,
    reg: &Registration,
) -> (Condition, Option<Value>) {
    let unavailable = |u: Unreachable| {
        (
            Condition {
                status: "False",
                reason: u.reason(),
                message: u.message().to_string(),
            },
            None,
        )
    };
    let Some(svc) = &reg.service else {
        return unavailable(Unreachable::Failed("local".into()));
    };
    let endpoint = {
        let (registry, svc) = (registry.clone(), svc.clone());
        tokio::task::spawn_blocking(move || backend::endpoint(&registry, &svc)).await
    };
    let (host, port) = match endpoint {
        Ok(Ok(found)) => found,
        Ok(Err(u)) => return unavailable(u),
        Err(e) => return unavailable(Unreachable::Failed(e.to_string())),
    };
    let path = format!("/apis/{}/{}", reg.group, reg.version);
    let url = format!("{}{path}", backend::url(&host, port));
    let failing = |why: String| {
        unavailable(Unreachable::Failed(format!(
            "failing or missing response from {url}: {why}"
        )))
    };
    let asked = tokio::time::timeout(CHECK_TIMEOUT, async {
        let mut sender = backend::connect(front, reg, svc, &host, port)
            .await
            .map_err(|u| format!("Get {url:?}: {}", u.message()))?;
        let request = hyper::Request::get(path.as_str())
            .header(hyper::header::HOST, svc.server_name())
            .header(hyper::header::ACCEPT, "application/json")
            .header(super::front_proxy::USER_HEADER, "system:kube-aggregator")
            .header(super::front_proxy::GROUP_HEADER, "system:authenticated")
            .body(Body::empty())
            .map_err(|e| e.to_string())?;
        let response = sender
            .send_request(request)
            .await
            .map_err(|e| format!("Get {url:?}: {e}"))?;
        let status = response.status();
        if !status.is_success() {
            return Err(format!("bad status from {url}: {}", status.as_u16()));
        }
        let body = Limited::new(response.into_body(), MAX_DISCOVERY_BYTES)
            .collect()
            .await
            .map_err(|e| format!("Get {url:?}: {e}"))?
            .to_bytes();
        serde_json::from_slice::<Value>(&body).map_err(|e| format!("invalid discovery: {e}"))
    })
    .await;
    match asked {
        Ok(Ok(list)) => (
            Condition {
                status: "True",
                reason: "Passed",
                message: "all checks passed".into(),
            },
            Some(list),
        ),
        Ok(Err(why)) => failing(why),
        Err(_) => failing(format!("Get {url:?}: context deadline exceeded")),
    }
}

/// Writes `condition` as the APIService's `Available` condition unless it is already so.
fn write(registry: &Registry, name: &str, condition: &Condition) -> Result<(), RegistryError> {
    let stored = registry.get(API_SERVICES, None, name)?.value()?;
    let Some(updated) = with_condition(&stored, condition, &jiff::Timestamp::now().to_string())
    else {
        return Ok(());
    };
    registry.update_with(
        API_SERVICES,
        None,
        name,
        Part::Status,
        &WriteOptions::default(),
        move |mut current| {
            current["status"] = updated["status"].clone();
            Ok::<_, RegistryError>(current)
        },
    )?;
    Ok(())
}

/// `obj` with its `Available` condition set to `condition` (its transition time moved only when
/// the status changes), or `None` when nothing would change.
pub fn with_condition(obj: &Value, condition: &Condition, now: &str) -> Option<Value> {
    let mut conditions: Vec<Value> = obj
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let old = conditions
        .iter()
        .position(|c| c.get("type").and_then(Value::as_str) == Some("Available"));
    let field = |c: &Value, k: &str| c.get(k).and_then(Value::as_str).map(String::from);
    let transition = match old.map(|i| &conditions[i]) {
        Some(c)
            if field(c, "status").as_deref() == Some(condition.status)
                && field(c, "reason").as_deref() == Some(condition.reason)
                && field(c, "message").as_deref() == Some(condition.message.as_str()) =>
        {
            return None;
        }
        Some(c) if field(c, "status").as_deref() == Some(condition.status) => {
            field(c, "lastTransitionTime").unwrap_or_else(|| now.to_string())
        }
        _ => now.to_string(),
    };
    let new = json!({"type": "Available", "status": condition.status,
        "lastTransitionTime": transition, "reason": condition.reason,
        "message": condition.message});
    match old {
        Some(i) => conditions[i] = new,
        None => conditions.push(new),
    }
    let mut updated = obj.clone();
    updated["status"] = json!({"conditions": conditions});
    Some(updated)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_condition_moves_its_transition_time_only_when_its_status_changes() {
        let passed = Condition {
            status: "True",
            reason: "Passed",
            message: "all checks passed".into(),
        };
        let fresh = json!({"metadata": {"name": "v1.example.com"}});
        let first = with_condition(&fresh, &passed, "T1").unwrap();
        assert_eq!(
            first["status"]["conditions"][0],
            json!({"type": "Available", "status": "True", "lastTransitionTime": "T1",
                   "reason": "Passed", "message": "all checks passed"})
        );
        assert_eq!(with_condition(&first, &passed, "T2"), None);
        let missing = Condition {
            status: "False",
            reason: "MissingEndpoints",
            message: "none".into(),
        };
        let second = with_condition(&first, &missing, "T3").unwrap();
        assert_eq!(
            second["status"]["conditions"][0]["lastTransitionTime"],
            "T3"
        );
        let other = Condition {
            message: "still none".into(),
            ..missing
        };
        let third = with_condition(&second, &other, "T4").unwrap();
        assert_eq!(third["status"]["conditions"][0]["lastTransitionTime"], "T3");
        assert_eq!(third["status"]["conditions"][0]["message"], "still none");
    }
}
