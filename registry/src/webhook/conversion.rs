//! Conversion webhooks of CustomResourceDefinitions, called through the same HTTPS client as
//! admission webhooks (the `caBundle` as the only roots, keep-alive) and reaching a
//! `clientConfig.service` the same way (its port, then a ready endpoint of its
//! EndpointSlices, the certificate checked for `<name>.<namespace>.svc`). What is sent and
//! how the answer is checked is [`berth_shared::conversion::webhook`]'s; this only places the
//! call, which blocks for at most upstream's 30 seconds.

use berth_shared::conversion::webhook::{
    Conversion, ConversionWebhook, TIMEOUT, WebhookClient, WebhookError,
};
use serde_json::Value;

use super::dispatch::{Call, Lookup, split_url};
use crate::Registry;

/// What one conversion converts.
#[derive(Debug, Clone, Copy)]
pub struct Converting<'a> {
    pub webhook: &'a ConversionWebhook,
    /// `group/version` wanted.
    pub desired: &'a str,
    /// The input's group, version and kind as Go prints them, for errors.
    pub gvk: &'a str,
    /// Whether the objects are a list's items (errors then name their index).
    pub list: bool,
}

impl Registry {
    /// Converts `objects` (custom resources) in place as `c` says, by one call to the
    /// definition's webhook carrying those not already in the desired version. Blocks: call it
    /// from a blocking thread.
    pub fn convert_by_webhook(
        &self,
        c: Converting<'_>,
        objects: &mut [Value],
    ) -> Result<(), WebhookError> {
        let uid = uuid::Uuid::new_v4().to_string();
        let conversion = Conversion {
            webhook: c.webhook,
            desired: c.desired,
            gvk: c.gvk,
            list: c.list,
            uid: &uid,
        };
        let count = objects.len();
        let start = std::time::Instant::now();
        let result = conversion.run(objects, |body| self.post_conversion(c.webhook, body));
        tracing::debug!(
            desired = c.desired,
            objects = count,
            ok = result.is_ok(),
            elapsed_us = start.elapsed().as_micros() as u64,
            "conversion webhook called"
        );
        result
    }

    /// One POST of a review to `webhook`; errors read as Go's REST client words them
    /// (`Post "https://conv.ops.svc:443/convert?timeout=30s": …`).
    fn post_conversion(
        &self,
        webhook: &ConversionWebhook,
        body: Vec<u8>,
    ) -> Result<Vec<u8>, String> {
        let query = format!("?timeout={}s", TIMEOUT.as_secs());
        let (shown, target) = match &webhook.client {
            WebhookClient::Url(url) => (
                format!("{url}{query}"),
                split_url(url).map(|(host, port, path)| (host.clone(), port, path, host)),
            ),
            WebhookClient::Service {
                namespace,
                name,
                path,
                port,
            } => {
                let path = if path.is_empty() { "/" } else { path.as_str() };
                let server_name = format!("{name}.{namespace}.svc");
                (
                    format!("https://{server_name}:{port}{path}{query}"),
                    self.service_endpoint(namespace, name, *port)
                        .map(|(ip, target)| (ip, target, path.to_string(), server_name)),
                )
            }
        };
        let post_error = |e: String| format!("Post \"{shown}\": {e}");
        let (host, port, path, server_name) = target.map_err(post_error)?;
        let call = Call {
            host,
            port,
            server_name,
            path: format!("{path}{query}"),
            ca_bundle: webhook.ca_bundle.as_deref(),
            body,
            timeout: TIMEOUT,
        };
        self.admission_webhooks
            .transport()
            .post(&call)
            .map_err(post_error)
    }
}
