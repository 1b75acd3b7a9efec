//! The ConfigMaps and Secrets this node's pods refer to, kept current by one watch per object (a
//! `metadata.name` field selector, as the kubelet's watch-based manager does): reads after the
//! first are served from memory, and a change wakes the pods that refer to the object, so their
//! volumes are rewritten within a second instead of at the next resync (upstream: up to a
//! minute). An object no pod has asked for in [`UNUSED_FOR`] loses its watch. A controller that
//! refuses the watch is polled every [`POLL_EVERY`] instead.

use berth_api::client::{Client, ClientError, ListParams, ResumingWatch, WatchEvent};
use berth_api::k8s_openapi::Metadata;
use berth_api::k8s_openapi::api::core::v1::Pod;
use berth_api::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use berth_api::resource::ResourceType;
use serde::de::DeserializeOwned;
use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// An object no pod has read for this long is forgotten and its watch stopped (running pods
/// read theirs at every pass, at least every resync).
pub const UNUSED_FOR: Duration = Duration::from_secs(120);
/// How often an object is read when its watch is refused.
pub const POLL_EVERY: Duration = Duration::from_secs(1);

/// Called with the namespace and name of an object that changed.
pub type OnChange = Arc<dyn Fn(&str, &str) + Send + Sync>;

type Key = (String, String);

struct Entry<T> {
    /// The object as last seen: `None` until the watch has listed it, `Some(None)` when it
    /// does not exist.
    value: Option<Option<T>>,
    task: tokio::task::JoinHandle<()>,
    used: Instant,
}

struct Inner<T> {
    client: Client,
    rt: &'static ResourceType,
    entries: Mutex<HashMap<Key, Entry<T>>>,
    on_change: OnChange,
}

/// The watched objects of one kind.
pub struct Watched<T> {
    inner: Arc<Inner<T>>,
}

fn resource_version<T: Metadata<Ty = ObjectMeta>>(o: &Option<T>) -> Option<String> {
    o.as_ref()
        .and_then(|o| o.metadata().resource_version.clone())
}

impl<T> Inner<T>
where
    T: DeserializeOwned + Metadata<Ty = ObjectMeta> + Clone + Send + Sync + 'static,
{
    fn lock(&self) -> MutexGuard<'_, HashMap<Key, Entry<T>>> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Keeps what the watch saw; a change of a known object wakes its pods.
    fn set(&self, key: &Key, value: Option<T>) {
        let changed = {
            let mut entries = self.lock();
            let Some(e) = entries.get_mut(key) else {
                return;
            };
            let changed = e
                .value
                .as_ref()
                .is_some_and(|old| resource_version(old) != resource_version(&value));
            e.value = Some(value);
            changed
        };
        if changed {
            (self.on_change)(&key.0, &key.1);
        }
    }

    async fn run(self: Arc<Self>, key: Key) {
        let params = ListParams {
            field_selector: Some(format!("metadata.name={}", key.1)),
            ..ListParams::default()
        };
        loop {
            let list = match self.client.list::<T>(self.rt, Some(&key.0), &params).await {
                Ok(l) => l,
                Err(e) if e.code() == Some(403) => return self.poll(key).await,
                Err(e) => {
                    tracing::debug!(resource = self.rt.plural, name = %key.1, error = %e, "listing failed");
                    tokio::time::sleep(POLL_EVERY).await;
                    continue;
                }
            };
            self.set(&key, list.items.into_iter().next());
            let mut watch = ResumingWatch::<T>::new(
                self.client.clone(),
                self.rt,
                Some(&key.0),
                params.clone(),
                &list.resource_version,
            );
            loop {
                match watch.next().await {
                    Ok(WatchEvent::Added(o) | WatchEvent::Modified(o)) => self.set(&key, Some(o)),
                    Ok(WatchEvent::Deleted(_)) => self.set(&key, None),
                    Ok(WatchEvent::Bookmark(_)) => {}
                    Err(e) if e.code() == Some(403) => return self.poll(key).await,
                    Err(e) => {
                        tracing::debug!(resource = self.rt.plural, name = %key.1, error = %e, "watch ended; relisting");
                        break;
                    }
                }
            }
        }
    }

    /// For a controller that lets a node only get its objects.
    async fn poll(self: Arc<Self>, key: Key) {
        loop {
            match self.client.get::<T>(self.rt, Some(&key.0), &key.1).await {
                Ok(o) => self.set(&key, o),
                Err(e) => {
                    tracing::debug!(resource = self.rt.plural, name = %key.1, error = %e, "reading failed")
                }
            }
            tokio::time::sleep(POLL_EVERY).await;
        }
    }
}

impl<T> Watched<T>
where
    T: DeserializeOwned + Metadata<Ty = ObjectMeta> + Clone + Send + Sync + 'static,
{
    pub fn new(client: Client, rt: &'static ResourceType, on_change: OnChange) -> Watched<T> {
        Watched {
            inner: Arc::new(Inner {
                client,
                rt,
                entries: Mutex::new(HashMap::new()),
                on_change,
            }),
        }
    }

    /// The object `ns/name`: from memory once its watch has listed it; read from the API (and
    /// watched from then on) the first time.
    pub async fn get(&self, ns: &str, name: &str) -> Result<Option<T>, ClientError> {
        let key = (ns.to_string(), name.to_string());
        {
            let mut entries = self.inner.lock();
            let now = Instant::now();
            entries.retain(|_, e| {
                let keep = now.duration_since(e.used) < UNUSED_FOR;
                if !keep {
                    e.task.abort();
                }
                keep
            });
            match entries.get_mut(&key) {
                Some(e) => {
                    e.used = now;
                    if let Some(v) = &e.value {
                        return Ok(v.clone());
                    }
                }
                None => {
                    let task = tokio::spawn(self.inner.clone().run(key.clone()));
                    entries.insert(
                        key,
                        Entry {
                            value: None,
                            task,
                            used: now,
                        },
                    );
                }
            }
        }
        self.inner.client.get(self.inner.rt, Some(ns), name).await
    }
}

impl<T> Drop for Watched<T> {
    fn drop(&mut self) {
        let entries = self.inner.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries.values().for_each(|e| e.task.abort());
    }
}

/// The names of the ConfigMaps and Secrets referred to anywhere in a pod's spec: volumes
/// (also projected), `env`/`envFrom` of every container.
pub fn referenced(pod: &Pod) -> (BTreeSet<String>, BTreeSet<String>) {
    let v = serde_json::to_value(&pod.spec).unwrap_or_default();
    let (mut cms, mut secrets) = (BTreeSet::new(), BTreeSet::new());
    collect_refs(&v, &mut cms, &mut secrets);
    (cms, secrets)
}

fn collect_refs(v: &serde_json::Value, cms: &mut BTreeSet<String>, secrets: &mut BTreeSet<String>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, child) in m {
                let name = child.get("name").and_then(|n| n.as_str());
                match k.as_str() {
                    "configMapKeyRef" | "configMapRef" | "configMap" => {
                        if let Some(n) = name {
                            cms.insert(n.to_string());
                        }
                    }
                    "secretKeyRef" | "secretRef" => {
                        if let Some(n) = name {
                            secrets.insert(n.to_string());
                        }
                    }
                    "secret" => {
                        if let Some(n) = child.get("secretName").and_then(|n| n.as_str()).or(name) {
                            secrets.insert(n.to_string());
                        }
                    }
                    _ => {}
                }
                collect_refs(child, cms, secrets);
            }
        }
        serde_json::Value::Array(a) => a.iter().for_each(|x| collect_refs(x, cms, secrets)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn referenced_configmaps_and_secrets_are_collected() {
        let pod: Pod = serde_json::from_value(serde_json::json!({"spec": {
            "volumes": [{"name": "v", "configMap": {"name": "cm"}},
                {"name": "s", "secret": {"secretName": "sec"}},
                {"name": "p", "projected": {"sources": [{"secret": {"name": "s3"}}]}}],
            "containers": [{"name": "c", "env": [{"name": "A", "valueFrom": {"secretKeyRef": {"name": "s2", "key": "k"}}}]}]}}))
        .unwrap();
        let (c, s) = referenced(&pod);
        assert_eq!(c, BTreeSet::from(["cm".to_string()]));
        assert_eq!(
            s,
            BTreeSet::from(["s2".to_string(), "s3".to_string(), "sec".to_string()])
        );
    }
}
