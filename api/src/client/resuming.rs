//! A watch that outlives its streams, as client-go's reflector re-watches: when a stream ends
//! (the server's timeout) or breaks (its server died, and the client moves on to the next), it
//! is opened again from the last resourceVersion delivered — on whichever server answers — so
//! no event is lost or repeated and nothing is relisted. Only `410 Gone` (the revision is
//! compacted away) and other non-transient errors reach the caller, who then relists.

use super::{Client, ClientError, ListParams, WatchEvent, WatchStream};
use crate::resource::ResourceType;
use k8s_openapi::Metadata;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::de::DeserializeOwned;
use std::time::Duration;

/// How long a stream may deliver nothing — no event and no bookmark — before it is taken for
/// stalled and reopened: servers send a bookmark every minute to watchers that allow them (as
/// upstream's watch cache does), so two missed bookmarks mean the stream is dead even when
/// its connection looks open (a half-open TCP connection to a host that vanished).
pub const IDLE_LIMIT: Duration = Duration::from_secs(135);

/// The first wait after a failed reopen (every server was tried); doubled to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(200);
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// A watch resumed from its last resourceVersion across stream ends and server changes.
/// [`ResumingWatch::next`] is cancel-safe: dropped mid-reopen, the next call reopens.
pub struct ResumingWatch<T> {
    client: Client,
    rt: &'static ResourceType,
    namespace: Option<String>,
    params: ListParams,
    resource_version: String,
    stream: Option<WatchStream<T>>,
    /// Events the current stream delivered: a stream that ends without any counts as a failed
    /// reopen (backs off), so a server that ends every watch at once is not hammered.
    delivered: usize,
    backoff: Duration,
    idle_limit: Duration,
}

impl<T> ResumingWatch<T>
where
    T: DeserializeOwned + Metadata<Ty = ObjectMeta> + Send + 'static,
{
    /// A watch of `rt` from `resource_version` (a list's); opened on the first `next`.
    pub fn new(
        client: Client,
        rt: &'static ResourceType,
        namespace: Option<&str>,
        params: ListParams,
        resource_version: &str,
    ) -> ResumingWatch<T> {
        ResumingWatch {
            client,
            rt,
            namespace: namespace.map(str::to_string),
            params,
            resource_version: resource_version.to_string(),
            stream: None,
            delivered: 0,
            backoff: FIRST_BACKOFF,
            idle_limit: IDLE_LIMIT,
        }
    }

    /// Sets how long a stream may stay silent before it is reopened (default [`IDLE_LIMIT`]).
    pub fn with_idle_limit(mut self, limit: Duration) -> ResumingWatch<T> {
        self.idle_limit = limit;
        self
    }

    /// The resourceVersion of the last event (or bookmark) delivered.
    pub fn resource_version(&self) -> &str {
        &self.resource_version
    }

    /// The next event. An error means the watch cannot resume (`410 Gone`: relist; or a
    /// non-transient refusal); transient failures are retried here with a capped back-off.
    pub async fn next(&mut self) -> Result<WatchEvent<T>, ClientError> {
        loop {
            let Some(stream) = self.stream.as_mut() else {
                match self
                    .client
                    .watch::<T>(
                        self.rt,
                        self.namespace.as_deref(),
                        &self.params,
                        &self.resource_version,
                    )
                    .await
                {
                    Ok(s) => {
                        self.stream = Some(s);
                        self.delivered = 0;
                    }
                    Err(e) if e.is_transient() && !e.is_gone() => {
                        tracing::debug!(
                            resource = self.rt.plural,
                            resource_version = %self.resource_version,
                            error = %e,
                            "reopening a watch failed; retrying"
                        );
                        self.back_off().await;
                    }
                    Err(e) => return Err(e),
                }
                continue;
            };
            let Ok(next) = tokio::time::timeout(self.idle_limit, stream.next()).await else {
                tracing::warn!(
                    resource = self.rt.plural,
                    resource_version = %self.resource_version,
                    silent = ?self.idle_limit,
                    "watch delivered nothing, not even a bookmark; reopening it"
                );
                self.stream = None;
                continue;
            };
            match next {
                Some(Ok(event)) => {
                    if let Some(rv) = resource_version_of(&event) {
                        self.resource_version = rv;
                    }
                    self.delivered += 1;
                    self.backoff = FIRST_BACKOFF;
                    return Ok(event);
                }
                Some(Err(e)) if e.is_gone() || !e.is_transient() => {
                    self.stream = None;
                    return Err(e);
                }
                ended => {
                    if let Some(Err(e)) = &ended {
                        tracing::info!(
                            resource = self.rt.plural,
                            resource_version = %self.resource_version,
                            error = %e,
                            "watch broke; resuming from the last resourceVersion"
                        );
                    }
                    self.stream = None;
                    if self.delivered == 0 {
                        self.back_off().await;
                    }
                }
            }
        }
    }

    async fn back_off(&mut self) {
        tokio::time::sleep(self.backoff).await;
        self.backoff = (self.backoff * 2).min(MAX_BACKOFF);
    }
}

fn resource_version_of<T: Metadata<Ty = ObjectMeta>>(event: &WatchEvent<T>) -> Option<String> {
    match event {
        WatchEvent::Added(o) | WatchEvent::Modified(o) | WatchEvent::Deleted(o) => {
            o.metadata().resource_version.clone()
        }
        WatchEvent::Bookmark(rv) => Some(rv.clone()),
    }
    .filter(|rv| !rv.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Pod;

    fn pod(rv: &str) -> Pod {
        Pod {
            metadata: ObjectMeta {
                resource_version: Some(rv.to_string()),
                ..ObjectMeta::default()
            },
            ..Pod::default()
        }
    }

    #[test]
    fn every_event_and_bookmark_advances_the_resume_point() {
        assert_eq!(
            resource_version_of(&WatchEvent::Added(pod("7"))).as_deref(),
            Some("7")
        );
        assert_eq!(
            resource_version_of(&WatchEvent::Deleted(pod("9"))).as_deref(),
            Some("9")
        );
        assert_eq!(
            resource_version_of::<Pod>(&WatchEvent::Bookmark("12".into())).as_deref(),
            Some("12")
        );
        // A bookmark without a version leaves the point where it was.
        assert_eq!(
            resource_version_of::<Pod>(&WatchEvent::Bookmark(String::new())),
            None
        );
    }
}
