//! Objects of one kind from the whole cluster by `namespace/name`, fed by a list and then its
//! watch: what the service state, the network policy state and the ingress state each keep of
//! their kinds; and the relisting, with back-off, that each of their loops starts with.

use std::collections::BTreeMap;
use std::time::Duration;

use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use berth_api::client::{Client, ClientError, ListParams, ResumingWatch, WatchEvent};
use berth_api::k8s_openapi::Metadata;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::de::DeserializeOwned;

fn key_of(meta: &ObjectMeta) -> String {
    format!(
        "{}/{}",
        meta.namespace.as_deref().unwrap_or(""),
        meta.name.as_deref().unwrap_or("")
    )
}

pub(crate) struct WatchCache<T> {
    group: &'static str,
    version: &'static str,
    plural: &'static str,
    pub(crate) objects: BTreeMap<String, T>,
    watch: Option<ResumingWatch<T>>,
}

impl<T> WatchCache<T>
where
    T: DeserializeOwned + Metadata<Ty = ObjectMeta> + Send + 'static,
{
    pub(crate) fn new(
        group: &'static str,
        version: &'static str,
        plural: &'static str,
    ) -> WatchCache<T> {
        WatchCache {
            group,
            version,
            plural,
            objects: BTreeMap::new(),
            watch: None,
        }
    }

    /// Whether it must be listed (first, or after its watch could not resume).
    pub(crate) fn needs_list(&self) -> bool {
        self.watch.is_none()
    }

    /// Lists afresh and opens a watch from the list.
    pub(crate) async fn relist(&mut self, client: &Client) -> Result<(), ClientError> {
        let rt = crate::node::rt(self.plural, self.group, self.version);
        let list = client.list::<T>(rt, None, &ListParams::default()).await?;
        self.objects = list
            .items
            .into_iter()
            .map(|o| (key_of(o.metadata()), o))
            .collect();
        self.watch = Some(ResumingWatch::new(
            client.clone(),
            rt,
            None,
            ListParams::default(),
            &list.resource_version,
        ));
        Ok(())
    }

    /// The next event applied to the cache; `false` when the watch cannot resume (relist). A
    /// watch that breaks (its server died) resumes from its last resourceVersion on its own.
    pub(crate) async fn next(&mut self) -> bool {
        let Some(watch) = self.watch.as_mut() else {
            return std::future::pending().await;
        };
        match watch.next().await {
            Ok(WatchEvent::Added(o) | WatchEvent::Modified(o)) => {
                self.objects.insert(key_of(o.metadata()), o);
                true
            }
            Ok(WatchEvent::Deleted(o)) => {
                self.objects.remove(&key_of(o.metadata()));
                true
            }
            Ok(WatchEvent::Bookmark(_)) => true,
            Err(_) => {
                self.watch = None;
                false
            }
        }
    }
}

/// A [`WatchCache`] of any kind, for relisting several together.
pub(crate) trait Relist: Send {
    fn needs_list(&self) -> bool;
    fn relist_boxed<'a>(&'a mut self, client: &'a Client)
    -> BoxFuture<'a, Result<(), ClientError>>;
}

impl<T> Relist for WatchCache<T>
where
    T: DeserializeOwned + Metadata<Ty = ObjectMeta> + Send + 'static,
{
    fn needs_list(&self) -> bool {
        WatchCache::needs_list(self)
    }

    fn relist_boxed<'a>(
        &'a mut self,
        client: &'a Client,
    ) -> BoxFuture<'a, Result<(), ClientError>> {
        Box::pin(self.relist(client))
    }
}

/// What [`Relister::relist`] left.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Listed {
    /// Every cache is listed and watching: publish.
    Ready,
    /// A list failed and the back-off has passed: try again.
    Retry,
    Shutdown,
}

/// Lists the caches that need it, backing off (200 ms doubling to 10 s) while lists fail.
pub(crate) struct Relister {
    what: &'static str,
    backoff: Duration,
}

impl Relister {
    const FIRST: Duration = Duration::from_millis(200);
    const LONGEST: Duration = Duration::from_secs(10);

    /// `what` names the loop in its warnings.
    pub(crate) fn new(what: &'static str) -> Relister {
        Relister {
            what,
            backoff: Self::FIRST,
        }
    }

    pub(crate) async fn relist(
        &mut self,
        client: &Client,
        caches: &mut [&mut dyn Relist],
        shutdown: &CancellationToken,
    ) -> Listed {
        let mut failed = None;
        for cache in caches.iter_mut().filter(|c| c.needs_list()) {
            if let Err(e) = cache.relist_boxed(client).await {
                failed = Some(e);
                break;
            }
        }
        let Some(e) = failed else {
            self.backoff = Self::FIRST;
            return Listed::Ready;
        };
        tracing::warn!(error = %e, "{}: listing failed; retrying", self.what);
        tokio::select! {
            _ = shutdown.cancelled() => return Listed::Shutdown,
            _ = tokio::time::sleep(self.backoff) => {}
        }
        self.backoff = (self.backoff * 2).min(Self::LONGEST);
        Listed::Retry
    }
}
