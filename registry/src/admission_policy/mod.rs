//! ValidatingAdmissionPolicies in the write path: the compiled policies and bindings
//! ([`Policies`], fed by the API server from its informers), and the check every create,
//! update and delete makes after the object's own admission and before storage, as
//! upstream's admission chain runs its `ValidatingAdmissionPolicy` plugin. A denial answers
//! as kube-apiserver does (422 `Invalid` unless the validation names another reason, with its
//! message); Warn actions become `Warning` headers. Berth keeps no audit log: what upstream
//! would record there (Audit actions, audit annotations) is logged at info level (target
//! `admission_policy_audit`). The `authorizer` variable is not provided: an expression that
//! uses it fails, under the policy's failure policy.

pub mod compiled;
pub mod dispatch;
pub mod evaluate;
pub mod matching;
pub mod params;
pub mod request;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};

use berth_shared::resource::{self, ResourceType};
use berth_shared::selector::LabelSelector;
use serde_json::Value;

use crate::identity::Identity;
use crate::{Part, Registry, RegistryError, Warnings, WriteOptions};
use compiled::{Binding, Policy};
use dispatch::{Hook, Lookup, Request};
use matching::{Attributes, Operation};
use params::ParamSource;
use request::Requester;

/// The policies and bindings in force, compiled; shared by every clone of a [`Registry`].
#[derive(Debug, Default)]
pub struct Policies {
    hooks: RwLock<Arc<Vec<Hook>>>,
    /// Compiled objects by uid and resourceVersion, so an unchanged object is not compiled again.
    compiled: Mutex<Compiled>,
}

#[derive(Debug, Default)]
struct Compiled {
    policies: HashMap<(String, String), Arc<Policy>>,
    bindings: HashMap<(String, String), Arc<Binding>>,
}

fn version_key(obj: &Value) -> (String, String) {
    let field = |p: &str| {
        obj.pointer(p)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    (field("/metadata/uid"), field("/metadata/resourceVersion"))
}

/// Compiles each object, reusing what `cache` has for the same version; `cache` keeps only
/// the objects given.
fn compile_all<T>(
    objects: &[Value],
    cache: &mut HashMap<(String, String), Arc<T>>,
    compile: impl Fn(&Value) -> T,
) -> Vec<Arc<T>> {
    let mut next = HashMap::new();
    let out = objects
        .iter()
        .map(|o| {
            let key = version_key(o);
            let compiled = cache.remove(&key).unwrap_or_else(|| Arc::new(compile(o)));
            next.insert(key, compiled.clone());
            compiled
        })
        .collect();
    *cache = next;
    out
}

impl Policies {
    /// Replaces what is in force with `policies` and `bindings` (every stored
    /// ValidatingAdmissionPolicy and ValidatingAdmissionPolicyBinding).
    pub fn install(&self, policies: &[Value], bindings: &[Value]) {
        let mut compiled = self.compiled.lock().unwrap_or_else(|e| e.into_inner());
        let compiled = &mut *compiled;
        let mut policies = compile_all(policies, &mut compiled.policies, Policy::compile);
        let bindings = compile_all(bindings, &mut compiled.bindings, Binding::compile);
        policies.sort_by(|a, b| a.name.cmp(&b.name));
        let hooks: Vec<Hook> = policies
            .into_iter()
            .filter_map(|policy| {
                let mut bound: Vec<Arc<Binding>> = bindings
                    .iter()
                    .filter(|b| b.policy_name == policy.name)
                    .cloned()
                    .collect();
                bound.sort_by(|a, b| a.name.cmp(&b.name));
                (!bound.is_empty()).then_some(Hook {
                    policy,
                    bindings: bound,
                })
            })
            .collect();
        *self.hooks.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(hooks);
    }

    /// The policies in force that have at least one binding.
    pub fn hooks(&self) -> Arc<Vec<Hook>> {
        self.hooks.read().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// One write as the policies see it.
pub(crate) struct Attempt<'a> {
    rt: &'a ResourceType,
    ns: Option<&'a str>,
    name: &'a str,
    op: Operation,
    part: Part,
    obj: Option<&'a Value>,
    old: Option<&'a Value>,
    dry_run: bool,
    user: Requester<'a>,
    warnings: Option<&'a Warnings>,
}

impl<'a> Attempt<'a> {
    pub(crate) fn create(
        rt: &'a ResourceType,
        ns: Option<&'a str>,
        name: &'a str,
        obj: &'a Value,
        opts: &'a WriteOptions,
    ) -> Attempt<'a> {
        Attempt {
            rt,
            ns,
            name,
            op: Operation::Create,
            part: Part::Main,
            obj: Some(obj),
            old: None,
            dry_run: opts.dry_run,
            user: opts
                .requestor
                .as_ref()
                .map_or(Requester::Controller, Requester::User),
            warnings: Some(&opts.warnings),
        }
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn update(
        rt: &'a ResourceType,
        ns: Option<&'a str>,
        name: &'a str,
        part: Part,
        obj: &'a Value,
        old: &'a Value,
        opts: &'a WriteOptions,
    ) -> Attempt<'a> {
        Attempt {
            op: Operation::Update,
            part,
            old: Some(old),
            ..Attempt::create(rt, ns, name, obj, opts)
        }
    }

    /// A delete by `requestor` (`None`: the controller): `old` is the object deleted
    /// (`object` is null, as upstream).
    pub(crate) fn delete(
        rt: &'a ResourceType,
        ns: Option<&'a str>,
        name: &'a str,
        old: &'a Value,
        dry_run: bool,
        requestor: Option<&'a Identity>,
    ) -> Attempt<'a> {
        Attempt {
            rt,
            ns,
            name,
            op: Operation::Delete,
            part: Part::Main,
            obj: None,
            old: Some(old),
            dry_run,
            user: requestor.map_or(Requester::Controller, Requester::User),
            warnings: None,
        }
    }
}

impl Registry {
    /// The policies in force in this registry (and every clone of it).
    pub fn admission_policies(&self) -> &Policies {
        &self.admission_policies
    }

    /// The policies' verdict on a write about to be stored: `Err` refuses it; warnings go to
    /// the write's options.
    pub(crate) fn admit_policies(&self, w: Attempt<'_>) -> Result<(), RegistryError> {
        let hooks = self.admission_policies.hooks();
        if hooks.is_empty() {
            return Ok(());
        }
        let rt = w.rt;
        let is_namespace = rt == resource::NAMESPACES;
        let equivalents: Vec<&str> = resource::RESOURCES
            .iter()
            .filter(|r| r.group == rt.group && r.plural == rt.plural && r.version != rt.version)
            .map(|r| r.version)
            .collect();
        let req = Request {
            attributes: Attributes {
                group: rt.group,
                version: rt.version,
                resource: rt.plural,
                subresource: w.part.subresource().unwrap_or_default(),
                kind: rt.kind,
                namespace: if is_namespace {
                    w.name
                } else {
                    w.ns.unwrap_or_default()
                },
                name: w.name,
                operation: w.op,
                object: w.obj,
                old_object: w.old,
            },
            equivalents: &equivalents,
            user: w.user,
            dry_run: w.dry_run,
        };
        let verdict = dispatch::dispatch(&hooks, &req, self);
        for (key, value) in &verdict.audit {
            tracing::info!(
                target: "admission_policy_audit",
                resource = rt.plural,
                namespace = w.ns.unwrap_or_default(),
                name = w.name,
                key = %key,
                "{value}"
            );
        }
        if let Some(warnings) = w.warnings {
            warnings.extend(verdict.warnings);
        }
        match verdict.denial {
            None => Ok(()),
            Some(denial) => Err(RegistryError::PolicyDenied {
                resource: rt.group_resource(),
                group: rt.group.to_string(),
                name: w.name.to_string(),
                reason: denial.reason.as_str(),
                code: denial.reason.code(),
                detail: denial.text(),
            }),
        }
    }
}

impl ParamSource for Registry {
    fn get(
        &self,
        rt: &ResourceType,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<Value>, String> {
        match Registry::get(self, rt, namespace, name) {
            Ok(o) => o.value().map(Some).map_err(|e| e.to_string()),
            Err(RegistryError::NotFound { .. }) => Ok(None),
            Err(e) => Err(e.to_string()),
        }
    }

    fn select(
        &self,
        rt: &ResourceType,
        namespace: Option<&str>,
        selector: &LabelSelector,
    ) -> Result<Vec<Value>, String> {
        let all = self.list_values(rt, namespace).map_err(|e| e.to_string())?;
        Ok(all
            .into_iter()
            .filter(|o| selector.matches(&matching::labels_of(Some(o))))
            .collect())
    }
}

impl Lookup for Registry {
    fn namespace(&self, name: &str) -> Result<Value, String> {
        Registry::get(self, resource::NAMESPACES, None, name)
            .and_then(|o| o.value().map_err(RegistryError::from))
            .map_err(|e| e.to_string())
    }
}
