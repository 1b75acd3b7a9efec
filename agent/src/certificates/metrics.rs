//! The certificate managers' metrics, under the kubelet's names: the client and serving
//! certificates' time to live (`kubelet_certificate_manager_{client,server}_ttl_seconds`:
//! seconds until expiry, negative once expired, +Inf without a certificate), the renewal
//! error counters (`kubelet_certificate_manager_client_expiration_renew_errors`,
//! `kubelet_server_expiration_renew_errors`), and Berth's count of renewals by kind.

use super::Kind;
use super::plan::Validity;
use crate::metrics::exposition::Text;
use jiff::Timestamp;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// What the managers report; one per agent, shared with the metrics endpoint.
#[derive(Default)]
pub struct CertificateMetrics {
    client: Mutex<Option<Validity>>,
    serving: Mutex<Option<Validity>>,
    client_errors: AtomicU64,
    serving_errors: AtomicU64,
    client_renewals: AtomicU64,
    serving_renewals: AtomicU64,
}

impl CertificateMetrics {
    fn validity(&self, kind: Kind) -> &Mutex<Option<Validity>> {
        match kind {
            Kind::Client => &self.client,
            Kind::Serving => &self.serving,
        }
    }

    /// The certificate of `kind` now in use.
    pub fn set_current(&self, kind: Kind, v: Validity) {
        *self
            .validity(kind)
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some(v);
    }

    /// A renewal of `kind` failed.
    pub fn renew_failed(&self, kind: Kind) {
        match kind {
            Kind::Client => &self.client_errors,
            Kind::Serving => &self.serving_errors,
        }
        .fetch_add(1, Ordering::Relaxed);
    }

    /// A certificate of `kind` was issued and taken into use.
    pub fn renewed(&self, kind: Kind) {
        match kind {
            Kind::Client => &self.client_renewals,
            Kind::Serving => &self.serving_renewals,
        }
        .fetch_add(1, Ordering::Relaxed);
    }

    fn ttl(&self, kind: Kind, now: Timestamp) -> f64 {
        self.validity(kind)
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .map_or(f64::INFINITY, |v| v.ttl_seconds(now))
    }

    /// The text exposition at `now`.
    pub fn render(&self, now: Timestamp) -> String {
        let mut t = Text::default();
        let gauges = [
            (
                "kubelet_certificate_manager_client_ttl_seconds",
                "[ALPHA] Gauge of the TTL (time-to-live) of the Kubelet's client certificate. The value is in seconds until certificate expiry (negative if already expired). If client certificate is invalid or unused, the value will be +INF.",
                Kind::Client,
            ),
            (
                "kubelet_certificate_manager_server_ttl_seconds",
                "[ALPHA] Gauge of the shortest TTL (time-to-live) of the Kubelet's serving certificate. The value is in seconds until certificate expiry (negative if already expired). If serving certificate is invalid or unused, the value will be +INF.",
                Kind::Serving,
            ),
        ];
        for (name, help, kind) in gauges {
            t.family(name, "gauge", help);
            t.sample(name, &[], &[], self.ttl(kind, now), None);
        }
        let counters = [
            (
                "kubelet_certificate_manager_client_expiration_renew_errors",
                "[ALPHA] Counter of certificate renewal errors.",
                &self.client_errors,
            ),
            (
                "kubelet_server_expiration_renew_errors",
                "[ALPHA] Counter of certificate renewal errors.",
                &self.serving_errors,
            ),
        ];
        for (name, help, n) in counters {
            t.family(name, "counter", help);
            t.sample(name, &[], &[], n.load(Ordering::Relaxed) as f64, None);
        }
        let name = "berth_agent_certificate_renewals_total";
        t.family(
            name,
            "counter",
            "Certificates the agent had issued through CertificateSigningRequests and took into use, by kind (client, serving).",
        );
        for (kind, n) in [
            (Kind::Client, &self.client_renewals),
            (Kind::Serving, &self.serving_renewals),
        ] {
            t.sample(
                name,
                &["kind"],
                &[kind.label().to_string()],
                n.load(Ordering::Relaxed) as f64,
                None,
            );
        }
        t.finish()
    }
}

impl crate::server::MetricsSection for CertificateMetrics {
    fn render(self: std::sync::Arc<Self>) -> futures::future::BoxFuture<'static, String> {
        let text = CertificateMetrics::render(&self, Timestamp::now());
        Box::pin(std::future::ready(text))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ttls_are_infinite_until_a_certificate_is_known_then_count_down() {
        let m = CertificateMetrics::default();
        let now = Timestamp::from_second(1_000_000).unwrap();
        let text = m.render(now);
        assert!(text.contains("kubelet_certificate_manager_client_ttl_seconds +Inf\n"));
        assert!(text.contains("kubelet_certificate_manager_client_expiration_renew_errors 0\n"));
        m.set_current(
            Kind::Serving,
            Validity {
                not_before: now,
                not_after: Timestamp::from_second(1_000_120).unwrap(),
            },
        );
        m.renew_failed(Kind::Serving);
        m.renewed(Kind::Client);
        let text = m.render(Timestamp::from_second(1_000_020).unwrap());
        assert!(text.contains("kubelet_certificate_manager_server_ttl_seconds 100\n"));
        assert!(text.contains("kubelet_server_expiration_renew_errors 1\n"));
        assert!(text.contains("berth_agent_certificate_renewals_total{kind=\"client\"} 1\n"));
        assert!(text.contains("berth_agent_certificate_renewals_total{kind=\"serving\"} 0\n"));
    }
}
