//! The pod's ServiceAccount tokens: asked for (bound to the pod) when a container starts, kept,
//! and renewed once most of their lifetime has passed, as the kubelet does (each pass's refresh
//! of the config volumes writes a renewed one), so a long-running pod never holds an expired
//! token.

use super::PodWorker;
use crate::pod::api_access::{self, TokenNeed};
use crate::pod::ports::IssuedToken;
use berth_api::k8s_openapi::api::core::v1::Pod;
use std::collections::BTreeMap;
use std::sync::Mutex;

/// Tokens held for one pod, by need.
#[derive(Default)]
pub struct Tokens(Mutex<BTreeMap<TokenNeed, IssuedToken>>);

impl Tokens {
    fn get(&self) -> BTreeMap<TokenNeed, IssuedToken> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn put(&self, need: TokenNeed, token: IssuedToken) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(need, token);
    }
}

impl PodWorker {
    /// A valid token for `need`: the one held, or a new one.
    async fn token(&self, pod: &Pod, need: &TokenNeed) -> Option<IssuedToken> {
        if let Some(t) = self.tokens.get().get(need)
            && !api_access::needs_renewal(t.issued_at, t.expires_at, self.now().as_second())
        {
            return Some(t.clone());
        }
        match self.cx.api.service_account_token(pod, need).await {
            Ok(t) => {
                self.tokens.put(need.clone(), t.clone());
                Some(t)
            }
            Err(e) => {
                tracing::warn!(pod = ?pod.metadata.name, error = %e, "cannot get a service account token");
                None
            }
        }
    }

    /// The tokens the pod's projected volumes need, by key (those that could not be had are
    /// left out: the volume reports it).
    pub(super) async fn tokens_for(&self, pod: &Pod) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        for need in api_access::token_needs(pod) {
            if let Some(t) = self.token(pod, &need).await {
                out.insert(need.key(), t.token);
            }
        }
        out
    }
}
