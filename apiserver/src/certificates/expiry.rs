//! The CA's expiry warning: the CA is made for 10 years and nothing renews it; from one year
//! before it expires, a warning log line and a Warning event (`CACertificateExpiring`, on the
//! `kubernetes` Service in `default`, the object that stands for the API server) at start and
//! daily after. What to do then is in the README (rotating the CA).

use berth_registry::Registry;
use berth_registry::events::{EventType, Recorder};
use berth_shared::resource::SERVICES;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// From how long before the CA's expiry it is warned about.
pub const WARN_BEFORE: jiff::SignedDuration = jiff::SignedDuration::from_hours(365 * 24);
pub const REASON: &str = "CACertificateExpiring";

/// The warning for a CA valid until `not_after`, if `now` is within a year of it.
pub fn warning(not_after: jiff::Timestamp, now: jiff::Timestamp) -> Option<String> {
    let left = not_after.duration_since(now);
    if left > WARN_BEFORE {
        return None;
    }
    let days = left.as_secs() / 86_400;
    Some(if left.is_negative() {
        format!(
            "the cluster CA certificate expired at {not_after}: no certificate it signed is trusted any more; rotate the CA"
        )
    } else {
        format!(
            "the cluster CA certificate expires at {not_after} (in {days} days): rotate the CA before then"
        )
    })
}

fn warn(registry: &Registry, not_after: jiff::Timestamp) {
    let Some(message) = warning(not_after, jiff::Timestamp::now()) else {
        return;
    };
    tracing::warn!(reason = REASON, "{message}");
    let Ok(service) = registry
        .get(SERVICES, Some("default"), "kubernetes")
        .and_then(|o| o.value().map_err(Into::into))
    else {
        return;
    };
    let recorder = Recorder::new(registry.clone(), "berth-controller");
    if let Err(e) = recorder.record(&service, EventType::Warning, REASON, &message) {
        tracing::warn!(error = %e, "recording the CA expiry event failed");
    }
}

/// Warns about the CA's expiry at start and daily, until `shutdown`.
pub async fn run(registry: Registry, ca_pem: String, shutdown: CancellationToken) {
    let Some(not_after) = super::signer::not_after(&ca_pem) else {
        return;
    };
    loop {
        let r = registry.clone();
        let _ = tokio::task::spawn_blocking(move || warn(&r, not_after)).await;
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs(86_400)) => {}
            _ = shutdown.cancelled() => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ca_is_warned_about_from_a_year_before_it_expires() {
        let end: jiff::Timestamp = "2035-01-01T00:00:00Z".parse().unwrap();
        assert_eq!(warning(end, "2033-12-31T00:00:00Z".parse().unwrap()), None);
        let soon = warning(end, "2034-12-01T00:00:00Z".parse().unwrap()).unwrap();
        assert!(soon.contains("(in 31 days)"), "{soon}");
        let late = warning(end, "2035-02-01T00:00:00Z".parse().unwrap()).unwrap();
        assert!(late.contains("expired"), "{late}");
    }
}
