//! Pod Security admission in the write path: looks up the namespace of a pod or workload
//! write (and the pods of a namespace whose `enforce` label is raised), lets
//! `berth_shared::admission::pod_security` decide, and turns the decision into a 403, warnings
//! for the answer, or an audit line. Berth has no audit log: what upstream would record there
//! is logged at info level (target `pod_security_audit`).

use super::{Part, Registry, RegistryError, WriteOptions};
use berth_shared::admission::Operation;
use berth_shared::admission::pod_security::{self as psa, Config, Decision};
use berth_shared::resource::{self, ResourceType};
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// Warnings a write collects for its answer (the `Warning` headers), shared with the caller
/// through [`WriteOptions`]. Identical texts are kept once, as upstream's recorder does, and
/// at most [`Warnings::MAX`]: options a controller keeps and reuses never grow without bound.
#[derive(Debug, Clone, Default)]
pub struct Warnings(Arc<Mutex<Vec<String>>>);

impl Warnings {
    pub const MAX: usize = 64;

    pub fn extend(&self, texts: impl IntoIterator<Item = String>) {
        let mut all = self.0.lock().unwrap_or_else(|e| e.into_inner());
        for t in texts {
            if all.len() < Self::MAX && !all.contains(&t) {
                all.push(t);
            }
        }
    }

    /// The warnings so far, emptied.
    pub fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

/// One write as Pod Security sees it.
pub(super) struct Write<'a> {
    pub rt: &'a ResourceType,
    pub ns: Option<&'a str>,
    pub name: &'a str,
    pub op: Operation,
    pub part: Part,
    pub obj: &'a Value,
    pub old: Option<&'a Value>,
}

impl Registry {
    /// Pod Security's verdict on a write about to be stored: `Err` refuses it; warnings go to
    /// `opts.warnings`.
    pub(super) fn admit_pod_security(
        &self,
        w: &Write<'_>,
        opts: &WriteOptions,
    ) -> Result<(), RegistryError> {
        let config = &*self.pod_security;
        let core = w.rt.group.is_empty();
        if w.rt == resource::NAMESPACES {
            if w.part == Part::Main {
                opts.warnings.extend(self.admit_namespace(config, w)?);
            }
            return Ok(());
        }
        let pod = core && w.rt.plural == "pods";
        let template = psa::has_template(w.rt.group, w.rt.kind);
        // Status writes are never checked; pods' ephemeralcontainers are.
        let checked_part = w.part == Part::Main || (pod && w.part == Part::EphemeralContainers);
        let Some(ns) = w.ns else { return Ok(()) };
        if !(pod || template) || !checked_part || config.exempt(ns, opts.user.as_deref()) {
            return Ok(());
        }
        let labels = match self.namespace_labels(ns) {
            Ok(l) => l,
            // Upstream refuses a pod it cannot check, and lets a workload through.
            Err(e) if pod => {
                tracing::warn!(namespace = ns, error = %e, "pod security: namespace lookup failed");
                return Err(RegistryError::Internal(format!(
                    "failed to lookup namespace {ns:?}"
                )));
            }
            Err(_) => return Ok(()),
        };
        let decision = if pod {
            psa::admit_pod(config, &labels, w.op, w.obj, w.old)
        } else {
            match psa::template_of(w.rt.group, w.rt.kind, w.obj) {
                Some(t) => psa::admit_template(config, &labels, t),
                None => Decision::default(),
            }
        };
        if let Some(audit) = &decision.audit {
            tracing::info!(
                target: "pod_security_audit",
                namespace = ns,
                resource = w.rt.plural,
                name = w.name,
                "{audit}"
            );
        }
        if let Some(why) = decision.forbidden {
            return Err(RegistryError::Forbidden(format!(
                "{} {:?} is forbidden: {why}",
                w.rt.group_resource(),
                w.name
            )));
        }
        opts.warnings.extend(decision.warnings);
        Ok(())
    }

    fn namespace_labels(&self, ns: &str) -> Result<BTreeMap<String, String>, RegistryError> {
        let obj = self.get(resource::NAMESPACES, None, ns)?;
        Ok(psa::labels_of(&obj.value()?))
    }

    /// A namespace's labels are checked; raising `enforce` reports the pods it would refuse.
    fn admit_namespace(
        &self,
        config: &Config,
        w: &Write<'_>,
    ) -> Result<Vec<String>, RegistryError> {
        let labels = psa::labels_of(w.obj);
        let old = w.old.map(psa::labels_of);
        let decision = psa::admit_namespace(config, w.op, w.name, &labels, old.as_ref())
            .map_err(|errs| RegistryError::invalid(w.rt, w.name, errs))?;
        let mut warnings = decision.warnings;
        if let Some(enforce) = decision.check_pods {
            match self.list_values(resource::PODS, Some(w.name)) {
                Ok(pods) => {
                    warnings.extend(psa::existing_pods_warnings(config, w.name, enforce, &pods))
                }
                Err(_) => warnings.push(
                    "failed to list pods while checking new PodSecurity enforce level".into(),
                ),
            }
        }
        Ok(warnings)
    }
}

#[cfg(test)]
mod tests {
    use super::Warnings;

    #[test]
    fn warnings_are_kept_once_and_capped() {
        let w = Warnings::default();
        w.extend(["a".to_string(), "a".to_string(), "b".to_string()]);
        assert_eq!(w.take(), ["a", "b"]);
        w.extend((0..100).map(|i| i.to_string()));
        assert_eq!(w.take().len(), Warnings::MAX);
        assert!(w.take().is_empty());
    }
}
