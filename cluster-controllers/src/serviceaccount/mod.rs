//! The ServiceAccount controller and the root-CA publisher: every active namespace keeps a
//! `default` ServiceAccount and the `kube-root-ca.crt` ConfigMap (the CA pods use to trust the
//! API), recreated or restored when someone deletes or edits them.

pub mod plan;

use berth_registry::serviceaccount::ROOT_CA_CONFIG_MAP;
use berth_registry::{Part, Registry, RegistryError, WriteOptions};
use berth_runtime::informer::{Informer, ObjectKey};
use berth_runtime::{Context, Controller, Reconciler};
use berth_shared::reconcile::Outcome;
use berth_shared::resource::{CONFIG_MAPS, NAMESPACES, SERVICE_ACCOUNTS};
use serde_json::{Value, json};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

const DEFAULT: &str = "default";

struct Accounts {
    registry: Registry,
    namespaces: Arc<Informer>,
    accounts: Arc<Informer>,
    config_maps: Arc<Informer>,
    ca: String,
}

impl Reconciler for Accounts {
    type Key = ObjectKey;
    type Error = RegistryError;

    fn reconcile(&self, key: &ObjectKey) -> Result<Outcome, RegistryError> {
        let ns = key.name();
        let active = self
            .namespaces
            .get(None, ns)
            .is_some_and(|n| !n.is_deleting());
        let cm = self
            .config_maps
            .get(Some(ns), ROOT_CA_CONFIG_MAP)
            .map(|o| o.value())
            .transpose()?;
        let observed = plan::Observed {
            active,
            has_default_account: self.accounts.get(Some(ns), DEFAULT).is_some(),
            root_ca: cm
                .as_ref()
                .map(|cm| cm.pointer("/data/ca.crt").and_then(Value::as_str)),
        };
        let opts = WriteOptions::default();
        for action in plan::plan(&observed, &self.ca) {
            let result = match action {
                plan::Action::CreateDefaultAccount => self.registry.create(
                    SERVICE_ACCOUNTS,
                    Some(ns),
                    json!({"apiVersion": "v1", "kind": "ServiceAccount",
                           "metadata": {"name": DEFAULT, "namespace": ns}}),
                    &opts,
                ),
                plan::Action::CreateRootCa => self.registry.create(
                    CONFIG_MAPS,
                    Some(ns),
                    json!({"apiVersion": "v1", "kind": "ConfigMap",
                           "metadata": {"name": ROOT_CA_CONFIG_MAP, "namespace": ns,
                                        "annotations": {"kubernetes.io/description":
                                            "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters."}},
                           "data": {"ca.crt": self.ca}}),
                    &opts,
                ),
                plan::Action::UpdateRootCa => self.registry.update_with(
                    CONFIG_MAPS,
                    Some(ns),
                    ROOT_CA_CONFIG_MAP,
                    Part::Main,
                    &opts,
                    |mut cm| {
                        cm["data"] = json!({"ca.crt": self.ca});
                        Ok::<_, RegistryError>(cm)
                    },
                ),
            };
            match result {
                // Written meanwhile (pod admission makes `default` when it is missing), or the
                // namespace began terminating: the next pass sees it.
                Ok(_)
                | Err(RegistryError::AlreadyExists { .. })
                | Err(RegistryError::Forbidden(_)) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(Outcome::Done)
    }
}

/// The namespace an account or ConfigMap change concerns, when it is one this controller keeps.
fn namespace_of(name: &str, keep: &str, obj: &berth_runtime::informer::Object) -> Vec<ObjectKey> {
    match obj.namespace() {
        Some(ns) if name == keep => vec![ObjectKey::new(None, ns)],
        _ => Vec::new(),
    }
}

/// Runs the controller until `shutdown`; `ca` is the PEM bundle published to every namespace.
pub async fn run(ctx: Context, ca: String, shutdown: CancellationToken) {
    let reconciler = Arc::new(Accounts {
        registry: ctx.registry.clone(),
        namespaces: ctx.informer(NAMESPACES),
        accounts: ctx.informer(SERVICE_ACCOUNTS),
        config_maps: ctx.informer(CONFIG_MAPS),
        ca,
    });
    Controller::new("serviceaccount", &ctx, NAMESPACES)
        .watches(SERVICE_ACCOUNTS, |d| {
            namespace_of(d.object.name(), DEFAULT, &d.object)
        })
        .watches(CONFIG_MAPS, |d| {
            namespace_of(d.object.name(), ROOT_CA_CONFIG_MAP, &d.object)
        })
        .workers(2)
        .run(reconciler, shutdown)
        .await;
}
