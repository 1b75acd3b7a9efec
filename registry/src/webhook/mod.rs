//! Admission webhooks in the write path: the stored Validating- and
//! MutatingWebhookConfigurations, compiled ([`Webhooks`], fed by the API server from its
//! informers), and the calls every create, update and delete makes, as kube-apiserver's
//! admission chain: mutating webhooks after the object's own defaulting and admission, then
//! the object admitted again (a patch cannot store what validation refuses), validating
//! webhooks after the validating admission policies, all before storage.
//!
//! The registry's methods block (they run on the API server's blocking threads), so a call
//! blocks too: the HTTPS client is a [`dispatch::Transport`] installed by the API server,
//! which runs each call on its tokio runtime and waits for the answer with the webhook's
//! timeout. Without a transport (unit tests of other parts), a matching webhook fails its
//! call and its failure policy decides.
//!
//! CustomResourceDefinition conversion webhooks go through the same transport ([`conversion`]).

pub mod compiled;
pub mod conversion;
pub mod dispatch;
pub mod endpoint;
pub mod review;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, RwLock};

use berth_shared::resource::{self, ResourceType};
use serde_json::Value;

use crate::admission_policy::matching::{Attributes, Operation, labels_of};
use crate::admission_policy::request::{self, Requester};
use crate::{Part, Registry, RegistryError, Warnings, WriteOptions};
use compiled::Hook;
use dispatch::{Lookup, Refusal, Request, Transport};

/// The webhooks in force, compiled; shared by every clone of a [`Registry`].
#[derive(Default)]
pub struct Webhooks {
    installed: RwLock<Arc<Installed>>,
    /// Compiled configurations by uid and resourceVersion, so an unchanged one is not
    /// compiled again.
    compiled: Mutex<HashMap<VersionKey, Arc<Vec<Hook>>>>,
    transport: RwLock<Option<Arc<dyn Transport>>>,
}

impl std::fmt::Debug for Webhooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let installed = self.installed();
        f.debug_struct("Webhooks")
            .field("mutating", &installed.mutating.len())
            .field("validating", &installed.validating.len())
            .finish()
    }
}

/// The configurations in force, each sorted by name as upstream orders them.
#[derive(Debug, Default)]
struct Installed {
    mutating: Vec<Arc<Vec<Hook>>>,
    validating: Vec<Arc<Vec<Hook>>>,
}

/// A stored object's kind and uid, and its resourceVersion.
type VersionKey = (String, String);

fn version_key(obj: &Value) -> VersionKey {
    let field = |p: &str| {
        obj.pointer(p)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    (
        format!("{}/{}", field("/kind"), field("/metadata/uid")),
        field("/metadata/resourceVersion"),
    )
}

fn name_of(obj: &Value) -> &str {
    obj.pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

impl Webhooks {
    /// Replaces what is in force with `validating` and `mutating` (every stored
    /// ValidatingWebhookConfiguration and MutatingWebhookConfiguration).
    pub fn install(&self, validating: &[Value], mutating: &[Value]) {
        let mut cache = self.compiled.lock().unwrap_or_else(|e| e.into_inner());
        let mut next = HashMap::new();
        let mut compile = |objects: &[Value], f: fn(&Value) -> Vec<Hook>| {
            let mut sorted: Vec<&Value> = objects.iter().collect();
            sorted.sort_by(|a, b| name_of(a).cmp(name_of(b)));
            sorted
                .into_iter()
                .map(|o| {
                    let key = version_key(o);
                    let hooks = cache.remove(&key).unwrap_or_else(|| Arc::new(f(o)));
                    next.insert(key, hooks.clone());
                    hooks
                })
                .collect::<Vec<_>>()
        };
        let installed = Installed {
            validating: compile(validating, Hook::validating),
            mutating: compile(mutating, Hook::mutating),
        };
        *cache = next;
        *self.installed.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(installed);
    }

    /// Sets the HTTPS client the calls go through.
    pub fn set_transport(&self, transport: Arc<dyn Transport>) {
        *self.transport.write().unwrap_or_else(|e| e.into_inner()) = Some(transport);
    }

    fn installed(&self) -> Arc<Installed> {
        self.installed
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn transport(&self) -> Arc<dyn Transport> {
        self.transport
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
            .unwrap_or_else(|| Arc::new(NoTransport))
    }
}

/// The transport before the API server installs one: every call fails.
struct NoTransport;

impl Transport for NoTransport {
    fn post(&self, _: &dispatch::Call<'_>) -> Result<Vec<u8>, String> {
        Err("no webhook client in this process".to_string())
    }
}

/// One write as the webhooks see it.
pub(crate) struct Attempt<'a> {
    pub(crate) rt: &'a ResourceType,
    pub(crate) ns: Option<&'a str>,
    pub(crate) name: &'a str,
    pub(crate) op: Operation,
    pub(crate) part: Part,
    pub(crate) old: Option<&'a Value>,
    pub(crate) dry_run: bool,
    pub(crate) user: Requester<'a>,
    pub(crate) warnings: Option<&'a Warnings>,
}

impl<'a> Attempt<'a> {
    pub(crate) fn write(
        rt: &'a ResourceType,
        ns: Option<&'a str>,
        name: &'a str,
        part: Part,
        old: Option<&'a Value>,
        opts: &'a WriteOptions,
    ) -> Attempt<'a> {
        Attempt {
            rt,
            ns,
            name,
            op: if old.is_some() {
                Operation::Update
            } else {
                Operation::Create
            },
            part,
            old,
            dry_run: opts.dry_run,
            user: opts
                .requestor
                .as_ref()
                .map_or(Requester::Controller, Requester::User),
            warnings: Some(&opts.warnings),
        }
    }

    /// A delete: `old` is the object deleted (the review's `object` is absent).
    pub(crate) fn delete(
        rt: &'a ResourceType,
        ns: Option<&'a str>,
        name: &'a str,
        old: &'a Value,
        dry_run: bool,
        requestor: Option<&'a crate::identity::Identity>,
    ) -> Attempt<'a> {
        Attempt {
            rt,
            ns,
            name,
            op: Operation::Delete,
            part: Part::Main,
            old: Some(old),
            dry_run,
            user: requestor.map_or(Requester::Controller, Requester::User),
            warnings: None,
        }
    }
}

fn refusal(r: Refusal) -> RegistryError {
    match r {
        Refusal::Denied(d) => RegistryError::WebhookDenied {
            code: d.code,
            reason: known_reason(&d.reason),
            message: d.message,
        },
        Refusal::Failed(m) => RegistryError::Internal(m),
        r @ Refusal::DryRunUnsupported(_) => RegistryError::BadRequest(r.to_string()),
    }
}

/// A webhook's status reason, as one of the reasons the API answers with (an unknown one is
/// left out, as a client would not know it either).
fn known_reason(reason: &str) -> &'static str {
    const REASONS: &[&str] = &[
        "Unauthorized",
        "Forbidden",
        "NotFound",
        "AlreadyExists",
        "Conflict",
        "Gone",
        "Invalid",
        "ServerTimeout",
        "Timeout",
        "TooManyRequests",
        "BadRequest",
        "MethodNotAllowed",
        "NotAcceptable",
        "RequestEntityTooLarge",
        "UnsupportedMediaType",
        "InternalError",
        "Expired",
        "ServiceUnavailable",
    ];
    REASONS
        .iter()
        .find(|r| **r == reason)
        .copied()
        .unwrap_or("")
}

impl Registry {
    /// The webhooks in force in this registry (and every clone of it).
    pub fn admission_webhooks(&self) -> &Webhooks {
        &self.admission_webhooks
    }

    /// Runs the matching webhooks of one kind. `object` is changed by mutating webhooks.
    fn run_webhooks(
        &self,
        w: &Attempt<'_>,
        object: &mut Option<Value>,
        mutating: bool,
    ) -> Result<(), RegistryError> {
        let installed = self.admission_webhooks.installed();
        let configurations = if mutating {
            &installed.mutating
        } else {
            &installed.validating
        };
        let hooks: Vec<&Hook> = configurations.iter().flat_map(|c| c.iter()).collect();
        let rt = w.rt;
        // Upstream never sends the webhook configurations themselves to webhooks, so a
        // broken webhook can always be removed.
        if hooks.is_empty()
            || rt == resource::VALIDATING_WEBHOOK_CONFIGURATIONS
            || rt == resource::MUTATING_WEBHOOK_CONFIGURATIONS
        {
            return Ok(());
        }
        let equivalents: Vec<&str> = resource::RESOURCES
            .iter()
            .filter(|r| r.group == rt.group && r.plural == rt.plural && r.version != rt.version)
            .map(|r| r.version)
            .collect();
        let namespace = if rt == resource::NAMESPACES {
            w.name
        } else {
            w.ns.unwrap_or_default()
        };
        let attributes = Attributes {
            group: rt.group,
            version: rt.version,
            resource: rt.plural,
            subresource: w.part.subresource().unwrap_or_default(),
            kind: rt.kind,
            namespace,
            name: w.name,
            operation: w.op,
            object: None,
            old_object: w.old,
        };
        let request = request::request(&attributes, w.user, w.dry_run);
        let req = Request {
            attributes,
            equivalents: &equivalents,
            request: &request,
            dry_run: w.dry_run,
        };
        let transport = self.admission_webhooks.transport();
        let outcome = if mutating {
            dispatch::mutate(&hooks, &req, object, transport.as_ref(), self)
        } else {
            dispatch::validate(&hooks, &req, object.as_ref(), transport.as_ref(), self)
        }
        .map_err(refusal)?;
        if let Some(warnings) = w.warnings {
            warnings.extend(outcome.warnings);
        }
        Ok(())
    }

    /// The mutating webhooks' turn on a create or update: `obj` as they patch it. Returns
    /// whether it changed (the caller admits it again).
    pub(crate) fn mutate_by_webhooks(
        &self,
        w: &Attempt<'_>,
        obj: &mut Value,
    ) -> Result<bool, RegistryError> {
        if self.admission_webhooks.installed().mutating.is_empty() {
            return Ok(false);
        }
        let before = obj.clone();
        let mut object = Some(std::mem::take(obj));
        let result = self.run_webhooks(w, &mut object, true);
        *obj = object.unwrap_or(before.clone());
        result.map(|()| *obj != before)
    }

    /// The validating webhooks' verdict on a create or update about to be stored.
    pub(crate) fn validate_by_webhooks(
        &self,
        w: &Attempt<'_>,
        obj: &Value,
    ) -> Result<(), RegistryError> {
        if self.admission_webhooks.installed().validating.is_empty() {
            return Ok(());
        }
        self.run_webhooks(w, &mut Some(obj.clone()), false)
    }

    /// A delete's turn: mutating webhooks then validating ones, asked about the object
    /// deleted (`oldObject`; there is no `object` to patch).
    pub(crate) fn admit_delete_by_webhooks(&self, w: &Attempt<'_>) -> Result<(), RegistryError> {
        self.run_webhooks(w, &mut None, true)?;
        self.run_webhooks(w, &mut None, false)
    }
}

impl Lookup for Registry {
    fn namespace_labels(&self, name: &str) -> Result<BTreeMap<String, String>, String> {
        Registry::get(self, resource::NAMESPACES, None, name)
            .and_then(|o| o.value().map_err(RegistryError::from))
            .map(|v| labels_of(Some(&v)))
            .map_err(|e| e.to_string())
    }

    fn service_endpoint(
        &self,
        namespace: &str,
        name: &str,
        port: u16,
    ) -> Result<(String, u16), String> {
        let service = Registry::get(self, resource::SERVICES, Some(namespace), name)
            .and_then(|o| o.value().map_err(RegistryError::from))
            .map_err(|e| e.to_string())?;
        let slices: Vec<Value> = self
            .list_values(resource::ENDPOINT_SLICES, Some(namespace))
            .map_err(|e| e.to_string())?
            .into_iter()
            .filter(|s| {
                labels_of(Some(s))
                    .get(endpoint::SERVICE_NAME_LABEL)
                    .is_some_and(|n| n == name)
            })
            .collect();
        endpoint::resolve(&service, &slices, port)
    }
}
