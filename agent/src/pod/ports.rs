//! The pod worker's ports: the narrow slices of containerd, the pod network, the image store,
//! the API and the event recorder that a worker pass uses, each implemented here for the real
//! adapter by plain delegation. Unit tests put the recording fakes of `fake.rs` in their place.
//!
//! The methods return boxed futures so the ports can be shared as `Arc<dyn …>` by the worker,
//! its probers and its lifecycle hooks without type parameters spreading through the agent.

use super::api_access::TokenNeed;
use super::cache::PodCache;
use super::events::Recorder;
use super::labels;
use crate::image::{ImageService, Keyring, PullError, PullPolicy, PulledImage};
use crate::network::{Network, NetworkError, NetworkFacts, PodNetwork, PodRef, ProcessNetwork};
use crate::runtime::{
    ContainerConfig, ContainerId, ContainerInfo, ExitInfo, Runtime, RuntimeError,
};
use berth_api::client::{Client, ClientError};
use berth_api::k8s_openapi::api::core::v1::{
    ConfigMap, PersistentVolume, PersistentVolumeClaim, Pod, Secret, Service,
};
use berth_api::resource::{
    PERSISTENT_VOLUME_CLAIMS, PERSISTENT_VOLUMES, PODS, SERVICE_ACCOUNTS, SERVICES,
};
use futures::future::BoxFuture;
use std::sync::Arc;
use std::time::Duration;

/// The container runtime, as a worker uses it (see [`Runtime`] for each method's contract).
pub trait ContainerRuntime: Send + Sync {
    fn list(&self) -> BoxFuture<'_, Result<Vec<ContainerInfo>, RuntimeError>>;
    /// One pod's containers (those labelled with its uid).
    fn list_pod<'a>(
        &'a self,
        uid: &'a str,
    ) -> BoxFuture<'a, Result<Vec<ContainerInfo>, RuntimeError>>;
    fn create<'a>(
        &'a self,
        config: &'a ContainerConfig,
    ) -> BoxFuture<'a, Result<ContainerId, RuntimeError>>;
    fn start<'a>(&'a self, id: &'a ContainerId) -> BoxFuture<'a, Result<u32, RuntimeError>>;
    fn kill<'a>(
        &'a self,
        id: &'a ContainerId,
        signal: i32,
    ) -> BoxFuture<'a, Result<(), RuntimeError>>;
    fn wait_exit<'a>(
        &'a self,
        id: &'a ContainerId,
    ) -> BoxFuture<'a, Result<ExitInfo, RuntimeError>>;
    fn remove<'a>(&'a self, id: &'a ContainerId) -> BoxFuture<'a, Result<(), RuntimeError>>;
    /// For exec probes and exec lifecycle hooks.
    fn exec_output<'a>(
        &'a self,
        id: &'a ContainerId,
        cmd: &'a [String],
        timeout: Duration,
    ) -> BoxFuture<'a, Result<(i32, Vec<u8>), RuntimeError>>;
}

impl ContainerRuntime for Runtime {
    fn list(&self) -> BoxFuture<'_, Result<Vec<ContainerInfo>, RuntimeError>> {
        Box::pin(Runtime::list(self))
    }
    fn list_pod<'a>(
        &'a self,
        uid: &'a str,
    ) -> BoxFuture<'a, Result<Vec<ContainerInfo>, RuntimeError>> {
        Box::pin(Runtime::list_labelled(self, labels::LABEL_POD_UID, uid))
    }
    fn create<'a>(
        &'a self,
        config: &'a ContainerConfig,
    ) -> BoxFuture<'a, Result<ContainerId, RuntimeError>> {
        Box::pin(Runtime::create(self, config))
    }
    fn start<'a>(&'a self, id: &'a ContainerId) -> BoxFuture<'a, Result<u32, RuntimeError>> {
        Box::pin(Runtime::start(self, id))
    }
    fn kill<'a>(
        &'a self,
        id: &'a ContainerId,
        signal: i32,
    ) -> BoxFuture<'a, Result<(), RuntimeError>> {
        Box::pin(Runtime::kill(self, id, signal))
    }
    fn wait_exit<'a>(
        &'a self,
        id: &'a ContainerId,
    ) -> BoxFuture<'a, Result<ExitInfo, RuntimeError>> {
        Box::pin(Runtime::wait_exit(self, id))
    }
    fn remove<'a>(&'a self, id: &'a ContainerId) -> BoxFuture<'a, Result<(), RuntimeError>> {
        Box::pin(Runtime::remove(self, id))
    }
    fn exec_output<'a>(
        &'a self,
        id: &'a ContainerId,
        cmd: &'a [String],
        timeout: Duration,
    ) -> BoxFuture<'a, Result<(i32, Vec<u8>), RuntimeError>> {
        Box::pin(Runtime::exec_output(self, id, cmd, timeout))
    }
}

/// The pod network (the sandbox's netns, CNI attachment and IP), as a worker uses it.
pub trait SandboxNetwork: Send + Sync {
    /// What exists of the pod's network now; changes nothing.
    fn observe<'a>(&'a self, pod_uid: &'a str)
    -> BoxFuture<'a, Result<NetworkFacts, NetworkError>>;
    /// The netns a (container's) process is in and its addresses there.
    fn observe_process(&self, pid: u32) -> BoxFuture<'_, ProcessNetwork>;
    /// Idempotent: an existing pod network is returned as it is.
    fn setup<'a>(&'a self, pod: &'a PodRef) -> BoxFuture<'a, Result<PodNetwork, NetworkError>>;
    /// Idempotent.
    fn teardown<'a>(&'a self, pod_uid: &'a str) -> BoxFuture<'a, Result<(), NetworkError>>;
}

impl SandboxNetwork for Network {
    fn observe<'a>(
        &'a self,
        pod_uid: &'a str,
    ) -> BoxFuture<'a, Result<NetworkFacts, NetworkError>> {
        Box::pin(Network::observe(self, pod_uid))
    }
    fn observe_process(&self, pid: u32) -> BoxFuture<'_, ProcessNetwork> {
        Box::pin(crate::network::observe_process(pid))
    }
    fn setup<'a>(&'a self, pod: &'a PodRef) -> BoxFuture<'a, Result<PodNetwork, NetworkError>> {
        Box::pin(Network::setup(self, pod))
    }
    fn teardown<'a>(&'a self, pod_uid: &'a str) -> BoxFuture<'a, Result<(), NetworkError>> {
        Box::pin(Network::teardown(self, pod_uid))
    }
}

/// The image store, as a worker uses it.
pub trait ImagePuller: Send + Sync {
    /// The image if it is present.
    fn get<'a>(
        &'a self,
        reference: &'a str,
    ) -> BoxFuture<'a, Result<Option<PulledImage>, PullError>>;
    /// Makes the image present according to `policy`.
    fn pull<'a>(
        &'a self,
        reference: &'a str,
        policy: PullPolicy,
    ) -> BoxFuture<'a, Result<PulledImage, PullError>>;
    /// [`pull`](Self::pull) for a pod whose pull secrets are `keyring` (a fake that ignores
    /// credentials keeps this default).
    fn pull_with<'a>(
        &'a self,
        reference: &'a str,
        policy: PullPolicy,
        keyring: &'a Keyring,
    ) -> BoxFuture<'a, Result<PulledImage, PullError>> {
        let _ = keyring;
        self.pull(reference, policy)
    }
    /// Whether a pod whose pull secrets are `keyring` may use the present image: an image
    /// pulled with credentials needs the same ones, or the registry's consent to this pod's.
    fn check_present<'a>(
        &'a self,
        reference: &'a str,
        policy: PullPolicy,
        keyring: &'a Keyring,
    ) -> BoxFuture<'a, Result<(), PullError>> {
        let _ = (reference, policy, keyring);
        Box::pin(async { Ok(()) })
    }
}

impl ImagePuller for ImageService {
    fn get<'a>(
        &'a self,
        reference: &'a str,
    ) -> BoxFuture<'a, Result<Option<PulledImage>, PullError>> {
        Box::pin(ImageService::get(self, reference))
    }
    fn pull<'a>(
        &'a self,
        reference: &'a str,
        policy: PullPolicy,
    ) -> BoxFuture<'a, Result<PulledImage, PullError>> {
        Box::pin(ImageService::pull(self, reference, policy))
    }
    fn pull_with<'a>(
        &'a self,
        reference: &'a str,
        policy: PullPolicy,
        keyring: &'a Keyring,
    ) -> BoxFuture<'a, Result<PulledImage, PullError>> {
        Box::pin(ImageService::pull_with(self, reference, policy, keyring))
    }
    fn check_present<'a>(
        &'a self,
        reference: &'a str,
        policy: PullPolicy,
        keyring: &'a Keyring,
    ) -> BoxFuture<'a, Result<(), PullError>> {
        Box::pin(async move {
            ImageService::pull_with(self, reference, policy, keyring)
                .await
                .map(drop)
        })
    }
}

/// The API, as a worker uses it: its pod's status and deletion, the ConfigMaps and Secrets
/// its containers read, and the claims and volumes it mounts.
pub trait PodApi: Send + Sync {
    /// Replaces the pod's status (conditional on the `resourceVersion` it carries); the answer
    /// is the pod as written, `None` when the API has no pods resource.
    fn write_status<'a>(&'a self, pod: &'a Pod) -> BoxFuture<'a, Result<Option<Pod>, ClientError>>;
    /// Deletes the pod object with grace period 0, on condition that its uid is still `uid`.
    fn delete_pod<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
        uid: &'a str,
    ) -> BoxFuture<'a, Result<(), ClientError>>;
    fn config_map<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<ConfigMap>, ClientError>>;
    fn secret<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<Secret>, ClientError>>;
    /// The Services of a namespace (for the service environment variables).
    fn services<'a>(
        &'a self,
        namespace: &'a str,
    ) -> BoxFuture<'a, Result<Vec<Service>, ClientError>>;
    fn claim<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<PersistentVolumeClaim>, ClientError>>;
    fn persistent_volume<'a>(
        &'a self,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<PersistentVolume>, ClientError>>;
    /// A token of the pod's ServiceAccount bound to the pod (TokenRequest).
    fn service_account_token<'a>(
        &'a self,
        pod: &'a Pod,
        need: &'a TokenNeed,
    ) -> BoxFuture<'a, Result<IssuedToken, ClientError>>;
}

/// A token the API issued, with its validity in Unix seconds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IssuedToken {
    pub token: String,
    pub issued_at: i64,
    pub expires_at: i64,
}

/// Asks for a token of `pod`'s account bound to `pod`.
async fn request_token(
    client: &Client,
    pod: &Pod,
    need: &TokenNeed,
) -> Result<IssuedToken, ClientError> {
    let ns = pod.metadata.namespace.clone().unwrap_or_default();
    let account = pod
        .spec
        .as_ref()
        .and_then(|s| s.service_account_name.clone())
        .filter(|a| !a.is_empty())
        .unwrap_or_else(|| "default".to_string());
    let mut spec = serde_json::json!({
        "expirationSeconds": need.expiration_seconds,
        "boundObjectRef": {"kind": "Pod", "apiVersion": "v1",
                           "name": pod.metadata.name, "uid": pod.metadata.uid},
    });
    if let Some(a) = &need.audience {
        spec["audiences"] = serde_json::json!([a]);
    }
    let body = serde_json::json!({"apiVersion": "authentication.k8s.io/v1",
                                  "kind": "TokenRequest", "spec": spec});
    let issued_at = jiff::Timestamp::now().as_second();
    let answer: serde_json::Value = client
        .create_subresource(SERVICE_ACCOUNTS, Some(&ns), &account, "token", &body)
        .await?;
    let token = answer
        .pointer("/status/token")
        .and_then(serde_json::Value::as_str)
        .unwrap_or_default()
        .to_string();
    let expires_at = answer
        .pointer("/status/expirationTimestamp")
        .and_then(serde_json::Value::as_str)
        .and_then(|t| t.parse::<jiff::Timestamp>().ok())
        .map_or(issued_at + need.expiration_seconds, |t| t.as_second());
    Ok(IssuedToken {
        token,
        issued_at,
        expires_at,
    })
}

/// The real [`PodApi`]: the agent's client; the answers to status writes go into the pod
/// cache, so the next pass starts from what was written.
pub struct ApiClient {
    pub client: Client,
    pub pods: Arc<PodCache>,
    /// The ConfigMaps and Secrets of this node's pods, watched.
    pub config_maps: super::config_objects::Watched<ConfigMap>,
    pub secrets: super::config_objects::Watched<Secret>,
}

impl PodApi for ApiClient {
    fn write_status<'a>(&'a self, pod: &'a Pod) -> BoxFuture<'a, Result<Option<Pod>, ClientError>> {
        Box::pin(async move {
            let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
            let name = pod.metadata.name.as_deref().unwrap_or_default();
            let written = self.client.replace(PODS, Some(ns), name, pod, true).await?;
            self.pods.remember(written.clone());
            Ok(Some(written))
        })
    }

    fn delete_pod<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
        uid: &'a str,
    ) -> BoxFuture<'a, Result<(), ClientError>> {
        Box::pin(async move {
            let opts = serde_json::json!({"gracePeriodSeconds": 0, "preconditions": {"uid": uid}});
            self.client.delete(PODS, Some(namespace), name, &opts).await
        })
    }

    fn config_map<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<ConfigMap>, ClientError>> {
        Box::pin(self.config_maps.get(namespace, name))
    }

    fn secret<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<Secret>, ClientError>> {
        Box::pin(self.secrets.get(namespace, name))
    }

    fn services<'a>(
        &'a self,
        namespace: &'a str,
    ) -> BoxFuture<'a, Result<Vec<Service>, ClientError>> {
        Box::pin(async move {
            let list = self
                .client
                .list(SERVICES, Some(namespace), &Default::default())
                .await?;
            Ok(list.items)
        })
    }

    fn claim<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<PersistentVolumeClaim>, ClientError>> {
        Box::pin(
            self.client
                .get(PERSISTENT_VOLUME_CLAIMS, Some(namespace), name),
        )
    }

    fn persistent_volume<'a>(
        &'a self,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<PersistentVolume>, ClientError>> {
        Box::pin(self.client.get(PERSISTENT_VOLUMES, None, name))
    }

    fn service_account_token<'a>(
        &'a self,
        pod: &'a Pod,
        need: &'a TokenNeed,
    ) -> BoxFuture<'a, Result<IssuedToken, ClientError>> {
        Box::pin(request_token(&self.client, pod, need))
    }
}

/// Kubernetes Events about a pod (see [`Recorder`]); recording never fails a pass.
pub trait EventSink: Send + Sync {
    fn record<'a>(
        &'a self,
        pod: &'a Pod,
        warning: bool,
        reason: &'a str,
        message: &'a str,
        field_path: Option<&'a str>,
    ) -> BoxFuture<'a, ()>;
    /// Drops what is kept about a pod that is gone.
    fn forget(&self, uid: &str);
}

impl EventSink for Recorder {
    fn record<'a>(
        &'a self,
        pod: &'a Pod,
        warning: bool,
        reason: &'a str,
        message: &'a str,
        field_path: Option<&'a str>,
    ) -> BoxFuture<'a, ()> {
        Box::pin(Recorder::record(
            self, pod, warning, reason, message, field_path,
        ))
    }
    fn forget(&self, uid: &str) {
        Recorder::forget(self, uid)
    }
}
