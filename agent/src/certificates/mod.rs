//! Certificates that renew themselves, as the kubelet's certificate managers keep them: the
//! node's client certificate (signer `kubernetes.io/kube-apiserver-client-kubelet`) and the
//! agent server's serving certificate (`kubernetes.io/kubelet-serving`, SANs: the node's name
//! and address) are renewed through CertificateSigningRequests at a jittered 70–90 % of their
//! life, kept under `pki/`, and swapped in without a restart: the API client opens new
//! connections with the new client certificate while open watches keep theirs, the server's
//! next handshakes present the new serving certificate. A client certificate that expired
//! while the agent was down is replaced through the join token at start ([`crate::join`]).
//!
//! Parts: [`plan`] (when to renew, pure), [`request`] (what to ask for, what the answer
//! means), [`identity`] (a checked key and certificate), [`signing`] (the CSR API),
//! [`files`] (on disk), [`serving`] (the server's resolver), [`metrics`], [`manager`] (the
//! loop).

pub mod files;
pub mod identity;
pub mod manager;
pub mod metrics;
pub mod plan;
pub mod request;
pub mod serving;
pub mod signing;

use berth_api::client::Client;
use identity::Identity;
use metrics::CertificateMetrics;
use request::Template;
use serving::ServingCertificate;
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// Which of the node's certificates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// The node's identity towards the API server.
    Client,
    /// The agent server's (port 10250) identity towards the controller.
    Serving,
}

impl Kind {
    /// The signer that issues it.
    pub fn signer(self) -> &'static str {
        match self {
            Kind::Client => "kubernetes.io/kube-apiserver-client-kubelet",
            Kind::Serving => "kubernetes.io/kubelet-serving",
        }
    }

    /// The key usages it is asked with (an ECDSA key: no key encipherment).
    pub fn usages(self) -> &'static [&'static str] {
        match self {
            Kind::Client => &["digital signature", "client auth"],
            Kind::Serving => &["digital signature", "server auth"],
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Kind::Client => "client",
            Kind::Serving => "serving",
        }
    }
}

/// The node's certificates, as the agent starts them.
pub struct Certificates {
    pub metrics: Arc<CertificateMetrics>,
    /// What the agent server presents.
    pub serving: Arc<ServingCertificate>,
    /// The serving pair kept from an earlier run, if still usable.
    serving_first: Option<Identity>,
    client_first: Option<Identity>,
    node: String,
    addresses: Vec<IpAddr>,
    pki_dir: PathBuf,
}

impl Certificates {
    /// Loads what is there: `client` is the pair the agent authenticates with now (joined or
    /// renewed); the server presents the kept serving certificate if it is still valid and
    /// names this node and `addresses`, else the client pair (a joined node's certificate
    /// serves too) until a serving certificate is issued.
    pub fn load(
        node: &str,
        addresses: &[IpAddr],
        pki_dir: PathBuf,
        client: Identity,
    ) -> Certificates {
        let now = jiff::Timestamp::now();
        let metrics = Arc::new(CertificateMetrics::default());
        let template = Template::serving(node, addresses);
        let serving_first = files::load(&pki_dir, Kind::Serving)
            .filter(|id| id.validity.not_after > now && id.matches(&template));
        let first = serving_first
            .as_ref()
            .map_or_else(|| client.certified.clone(), |id| id.certified.clone());
        metrics.set_current(Kind::Client, client.validity);
        if let Some(s) = &serving_first {
            metrics.set_current(Kind::Serving, s.validity);
        }
        Certificates {
            metrics,
            serving: Arc::new(ServingCertificate::new(first)),
            serving_first,
            client_first: Some(client),
            node: node.to_string(),
            addresses: addresses.to_vec(),
            pki_dir,
        }
    }

    /// Starts the client manager (renewing what `api` presents) and the serving manager.
    pub fn spawn(&mut self, api: &Client, shutdown: &CancellationToken) {
        let client = manager::Manager {
            template: Template::client(&self.node),
            client: api.clone(),
            pki_dir: self.pki_dir.clone(),
            metrics: self.metrics.clone(),
            install: manager::install_client(api.clone()),
        };
        tokio::spawn(client.run(self.client_first.take(), shutdown.clone()));
        let serving = manager::Manager {
            template: Template::serving(&self.node, &self.addresses),
            client: api.clone(),
            pki_dir: self.pki_dir.clone(),
            metrics: self.metrics.clone(),
            install: manager::install_serving(self.serving.clone()),
        };
        tokio::spawn(serving.run(self.serving_first.take(), shutdown.clone()));
    }
}
