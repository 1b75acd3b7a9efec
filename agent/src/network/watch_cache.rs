//! Objects of one kind from the whole cluster by `namespace/name`, fed by a list and then its
//! watch: what the service state and the network policy state each keep of their kinds.

use std::collections::BTreeMap;

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
