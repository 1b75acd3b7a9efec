//! One certificate manager (client or serving): observe the certificate in use, plan
//! ([`plan`](super::plan)), and when a renewal is due, ask the signer for a new one, keep it on
//! disk and hand it to whatever uses it (the API client, the agent server) — then look again.
//! Failures are counted and retried after a back-off; the old certificate stays in use.

use super::identity::Identity;
use super::metrics::CertificateMetrics;
use super::plan::{self, Current, Observed, Plan};
use super::request::Template;
use super::{files, signing};
use berth_api::client::Client;
use jiff::Timestamp;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Takes a new pair into use (swaps it into the API client or the TLS server).
pub type Install = Box<dyn Fn(&Identity) -> Result<(), String> + Send + Sync>;

/// A manager's fixed parts.
pub struct Manager {
    pub template: Template,
    pub client: Client,
    pub pki_dir: PathBuf,
    pub metrics: Arc<CertificateMetrics>,
    pub install: Install,
}

/// The certificate in use and when it is to be renewed.
struct InUse {
    id: Identity,
    deadline: Timestamp,
}

impl InUse {
    fn new(id: Identity) -> InUse {
        let deadline = plan::rotation_deadline(&id.validity, rand::random::<f64>());
        InUse { id, deadline }
    }
}

/// How long to wait for a request to be signed: a tenth of the certificate's life, at least
/// 30 s and at most client-go's 15 minutes.
fn signing_wait(current: Option<&InUse>) -> Duration {
    let life = current.map_or(Duration::from_secs(900), |c| {
        let v = c.id.validity;
        v.not_after
            .duration_since(v.not_before)
            .try_into()
            .unwrap_or(Duration::ZERO)
    });
    (life / 10).clamp(Duration::from_secs(30), Duration::from_secs(900))
}

impl Manager {
    /// Runs until `shutdown`, starting from `first` (the pair in use now, if any).
    pub async fn run(self, first: Option<Identity>, shutdown: CancellationToken) {
        let kind = self.template.kind;
        let mut current = first.map(InUse::new);
        if let Some(c) = &current {
            self.metrics.set_current(kind, c.id.validity);
            tracing::info!(
                kind = kind.label(),
                serial = %c.id.serial,
                expires = %c.id.validity.not_after,
                renew_at = %c.deadline,
                "certificate in use"
            );
        }
        let (mut failures, mut last_failure) = (0u32, None);
        loop {
            let now = Timestamp::now();
            let observed = Observed {
                current: current.as_ref().map(|c| Current {
                    validity: c.id.validity,
                    deadline: c.deadline,
                    matches_template: c.id.matches(&self.template),
                }),
                failures,
                last_failure,
            };
            let until = match plan::plan(&observed, now) {
                Plan::Keep { until } | Plan::BackOff { until, .. } => until,
                Plan::Renew { why } => {
                    tracing::info!(kind = kind.label(), %why, "renewing the certificate");
                    let wait = signing_wait(current.as_ref());
                    let renewed = tokio::select! {
                        r = signing::request(&self.client, &self.template, wait) => r,
                        _ = shutdown.cancelled() => return,
                    };
                    match renewed.map_err(|e| e.to_string()).and_then(|(csr, id)| {
                        self.take_into_use(&id)?;
                        Ok((csr, id))
                    }) {
                        Ok((csr, id)) => {
                            let next = InUse::new(id);
                            tracing::info!(
                                kind = kind.label(),
                                %csr,
                                serial = %next.id.serial,
                                expires = %next.id.validity.not_after,
                                renew_at = %next.deadline,
                                "certificate renewed"
                            );
                            self.metrics.renewed(kind);
                            self.metrics.set_current(kind, next.id.validity);
                            current = Some(next);
                            (failures, last_failure) = (0, None);
                        }
                        Err(e) => {
                            failures = failures.saturating_add(1);
                            last_failure = Some(Timestamp::now());
                            self.metrics.renew_failed(kind);
                            tracing::warn!(
                                kind = kind.label(),
                                failures,
                                retry_in = ?plan::backoff(failures),
                                error = %e,
                                "renewing the certificate failed; the current one stays in use"
                            );
                        }
                    }
                    continue;
                }
            };
            let sleep: Duration = until
                .duration_since(Timestamp::now())
                .try_into()
                .unwrap_or(Duration::ZERO);
            tokio::select! {
                _ = tokio::time::sleep(sleep) => {}
                _ = shutdown.cancelled() => return,
            }
        }
    }

    /// Keeps `id` on disk, then swaps it in: a crash in between restarts with the new pair.
    fn take_into_use(&self, id: &Identity) -> Result<(), String> {
        files::store(&self.pki_dir, self.template.kind, id).map_err(|e| e.to_string())?;
        (self.install)(id)
    }
}

/// The install step of a client certificate: the API client presents it from its next
/// connection on.
pub fn install_client(client: Client) -> Install {
    Box::new(move |id: &Identity| {
        client
            .set_client_certificate(&id.cert_pem, &id.key_pem)
            .map_err(|e| e.to_string())
    })
}

/// The install step of a serving certificate: the server's next handshakes use it.
pub fn install_serving(serving: Arc<super::serving::ServingCertificate>) -> Install {
    Box::new(move |id: &Identity| {
        serving.set(id.certified.clone());
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::certificates::identity::tests::self_signed;

    #[test]
    fn the_signing_wait_is_a_tenth_of_the_life_within_bounds() {
        let with = |secs| {
            let (c, k) = self_signed("x", &[], secs);
            Some(InUse::new(Identity::parse(&c, &k).unwrap()))
        };
        assert_eq!(signing_wait(None), Duration::from_secs(90));
        assert_eq!(
            signing_wait(with(119).as_ref()),
            Duration::from_secs(30),
            "a 2-minute certificate"
        );
        assert_eq!(signing_wait(with(999).as_ref()), Duration::from_secs(100));
        assert_eq!(
            signing_wait(with(365 * 86_400).as_ref()),
            Duration::from_secs(900)
        );
    }

    #[test]
    fn a_certificate_taken_into_use_gets_its_deadline_in_the_window() {
        let (c, k) = self_signed("x", &[], 999);
        let in_use = InUse::new(Identity::parse(&c, &k).unwrap());
        let v = in_use.id.validity;
        let into = in_use.deadline.duration_since(v.not_before).as_secs_f64();
        let life = v.not_after.duration_since(v.not_before).as_secs_f64();
        assert!((0.7..=0.9).contains(&(into / life)), "{into} of {life}");
    }
}
