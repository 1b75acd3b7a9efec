//! The object service every write goes through, whether it comes over HTTP or from a
//! controller in this process: server-set metadata, defaulting and validation (admission),
//! status/spec separation, generation, finalizers and graceful deletion, then the store.
//! All methods block on the store's fsync: call them from a blocking context.
//!
//! The crate also holds what the write path calls into and so must sit below everything that
//! writes: admission that needs the registry ([`priority`], [`serviceaccount`], the X.509 side
//! of [`certificates`]), [`events`], the default [`local_path_class`] and
//! [`ingress_class`].

pub mod admission_policy;
mod binding;
pub mod certificates;
pub mod conditions;
mod delete;
pub mod events;
pub mod eviction;
pub mod identity;
pub mod ingress_class;
mod keys;
pub mod local_path_class;
pub mod meta;
pub mod node_restriction;
mod pod_security;
pub mod priority;
pub mod service_ips;
pub mod serviceaccount;
pub mod storage_classes;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
#[cfg(test)]
mod tests;
pub mod webhook;

pub use delete::{DeleteOptions, DeleteOutcome, DeletePreconditions, Propagation};
pub use keys::{key_of_value, names_builtin_kind, object_key, parse_key, prefix};
pub use pod_security::Warnings;

pub mod error;
use berth_shared::admission::service_allocation::ServiceRanges;
use berth_shared::admission::{self, AdmissionError, Operation};
use berth_shared::managed_fields;
use berth_shared::resource::{self, ResourceType};
use berth_store::{Precondition, Store, StoreError, StoredObject};
pub use error::RegistryError;
use serde_json::{Map, Value, json};

pub use berth_shared::query::FieldValidation;

/// Options common to create and update.
#[derive(Debug, Clone, Default)]
pub struct WriteOptions {
    pub dry_run: bool,
    pub field_validation: FieldValidation,
    /// The node whose credential makes the write, if a node's: its writes of Node objects go
    /// through [`node_restriction`].
    pub node: Option<String>,
    /// A check of the object about to be written that depends on who writes it (RBAC's
    /// escalation prevention); runs after admission, on creates and updates.
    pub guard: Option<WriteGuard>,
    /// The field manager recorded in `managedFields` (the request's `fieldManager`, else its
    /// user-agent's); the controller's own writes are `berth-controller`'s.
    pub manager: Option<String>,
    /// A server-side apply (operation `Apply`) rather than an update.
    pub apply: bool,
    /// The requesting user's name, for Pod Security's exempt usernames.
    pub user: Option<String>,
    /// Where admission leaves warnings for the answer's `Warning` headers.
    pub warnings: Warnings,
    /// Who makes the write, for what records its requestor (a CertificateSigningRequest's
    /// `spec.username`, `uid`, `groups` and `extra`, filled at create: clients cannot choose
    /// them).
    pub requestor: Option<crate::identity::Identity>,
}

impl WriteOptions {
    /// The same options with warnings going nowhere: for a check made a second time.
    fn without_warnings(&self) -> WriteOptions {
        WriteOptions {
            warnings: Warnings::default(),
            ..self.clone()
        }
    }
}

/// The manager of writes made inside the controller process.
pub const OWN_MANAGER: &str = "berth-controller";

/// Records the write in `obj`'s managedFields. A server-side apply's object arrives with the
/// entries its apply made (`managed_fields::apply`, before defaulting): they stand.
fn record_managers(
    rt: &ResourceType,
    old: Option<&Value>,
    obj: &mut Value,
    part: Part,
    opts: &WriteOptions,
) {
    if opts.apply {
        return;
    }
    let api_version = obj
        .get("apiVersion")
        .and_then(Value::as_str)
        .map(String::from)
        .unwrap_or_else(|| rt.api_version());
    let time = meta::now_rfc3339();
    let writer = managed_fields::Writer {
        manager: opts.manager.as_deref().unwrap_or(OWN_MANAGER),
        operation: if opts.apply { "Apply" } else { "Update" },
        subresource: part.subresource(),
        api_version: &api_version,
        time: &time,
        status_subresource: rt.has_status,
    };
    managed_fields::record_with(managed_fields::schema_for(rt).as_ref(), old, obj, &writer);
}

/// The managedFields a server-side apply made, which its object carries past the steps that
/// reset server-set metadata (see [`record_managers`]).
fn applied_fields(opts: &WriteOptions, obj: &Value) -> Option<Value> {
    opts.apply
        .then(|| obj.pointer("/metadata/managedFields").cloned())
        .flatten()
}

fn restore_applied_fields(fields: Option<Value>, obj: &mut Value) {
    if let (Some(fields), Some(m)) = (
        fields,
        obj.get_mut("metadata").and_then(Value::as_object_mut),
    ) {
        m.insert("managedFields".into(), fields);
    }
}

/// The check a [`WriteGuard`] runs.
pub type GuardFn = dyn Fn(&ResourceType, &Value) -> Result<(), RegistryError> + Send + Sync;

/// A requester-dependent check of an object about to be written.
#[derive(Clone)]
pub struct WriteGuard(pub std::sync::Arc<GuardFn>);

impl std::fmt::Debug for WriteGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WriteGuard")
    }
}

fn guard(rt: &ResourceType, opts: &WriteOptions, obj: &Value) -> Result<(), RegistryError> {
    match &opts.guard {
        Some(g) => (g.0)(rt, obj),
        None => Ok(()),
    }
}

/// NodeRestriction: a node's write of a Node (the authorizer has made sure it is its own).
fn restrict_node(
    rt: &ResourceType,
    opts: &WriteOptions,
    name: &str,
    new: &Value,
    old: Option<&Value>,
) -> Result<(), RegistryError> {
    match &opts.node {
        Some(node) if rt.group.is_empty() && rt.plural == "nodes" => {
            node_restriction::admit_node(node, new, old).map_err(|reason| {
                RegistryError::Forbidden(format!("nodes \"{name}\" is forbidden: {reason}"))
            })
        }
        _ => Ok(()),
    }
}

/// [`restrict_node`] on what an update would write, ahead of the write's own checks (only
/// node credentials pay for preparing it twice).
fn restrict_node_early(
    rt: &ResourceType,
    opts: &WriteOptions,
    name: &str,
    old: &Value,
    new: &Value,
    part: Part,
) -> Result<(), RegistryError> {
    if opts.node.is_none() {
        return Ok(());
    }
    let prepared = meta::prepare_for_update(rt, old, new.clone(), part);
    restrict_node(rt, opts, name, &prepared, Some(old))
}

/// Which part of an object an update may change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// The main resource: everything but `status` (for kinds with a status subresource).
    Main,
    /// The `status` subresource: only `status`.
    Status,
    /// A pod's `ephemeralcontainers` subresource: only `spec.ephemeralContainers`.
    EphemeralContainers,
    /// A CertificateSigningRequest's `approval` subresource: only its Approved/Denied
    /// conditions ([`crate::certificates::strategy`]).
    Approval,
}

impl Part {
    /// The subresource's name in the API (`status` …), `None` for the main resource.
    pub fn subresource(self) -> Option<&'static str> {
        match self {
            Part::Main => None,
            Part::Status => Some("status"),
            Part::EphemeralContainers => Some("ephemeralcontainers"),
            Part::Approval => Some("approval"),
        }
    }
}

/// The object service. Cheap to clone.
#[derive(Clone)]
pub struct Registry {
    store: Store,
    service_ips: std::sync::Arc<service_ips::ServiceIps>,
    pod_security: std::sync::Arc<admission::pod_security::Config>,
    admission_policies: std::sync::Arc<admission_policy::Policies>,
    admission_webhooks: std::sync::Arc<webhook::Webhooks>,
}

fn store_error(rt: &ResourceType, name: &str, e: StoreError) -> RegistryError {
    match e {
        StoreError::AlreadyExists => RegistryError::already_exists(rt, name),
        StoreError::NotFound => RegistryError::not_found(rt, name),
        StoreError::Conflict => RegistryError::conflict(rt, name),
        other => other.into(),
    }
}

fn admission_error(rt: &ResourceType, name: &str, e: AdmissionError) -> RegistryError {
    match e {
        AdmissionError::Decode(msg) => RegistryError::BadRequest(msg),
        AdmissionError::Invalid(causes) => RegistryError::invalid(rt, name, causes),
    }
}

/// The kind's own admission of an object about to be written: a built-in kind's, or a custom
/// resource's schema (its pruned fields refused under `fieldValidation=Strict`, warned of
/// under `Warn`).
fn admit_object(
    rt: &ResourceType,
    op: Operation,
    obj: &mut Value,
    old: Option<&Value>,
    name: &str,
    opts: &WriteOptions,
) -> Result<(), RegistryError> {
    if !rt.custom {
        admission::admit(rt.kind, op, obj, old).map_err(|e| admission_error(rt, name, e))?;
        if rt == resource::CUSTOM_RESOURCE_DEFINITIONS {
            opts.warnings.extend(crd_format_warnings(obj));
        }
        return Ok(());
    }
    let served =
        berth_shared::custom::served(rt).ok_or_else(|| RegistryError::not_found(rt, name))?;
    let strict = opts.field_validation == FieldValidation::Strict;
    let unknown = admission::admit_custom(&served, op, obj, old, strict)
        .map_err(|e| admission_error(rt, name, e))?;
    if opts.field_validation == FieldValidation::Warn {
        opts.warnings.extend(unknown);
    }
    Ok(())
}

/// Upstream's warnings on a definition whose string schemas name formats nothing validates
/// (`unrecognized format "quantity"`), over every version.
fn crd_format_warnings(crd: &Value) -> Vec<String> {
    crd.pointer("/spec/versions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|v| v.pointer("/schema/openAPIV3Schema"))
        .flat_map(berth_shared::schema::unrecognized_format_warnings)
        .collect()
}

/// Kinds whose `metadata.generation` tracks changes of their spec.
fn has_generation(rt: &ResourceType) -> bool {
    !matches!(
        rt.kind,
        "Pod"
            | "Node"
            | "Namespace"
            | "Event"
            | "ConfigMap"
            | "Secret"
            | "Lease"
            | "PersistentVolume"
            | "PersistentVolumeClaim"
            | "StorageClass"
            | "RuntimeClass"
            | "CSINode"
            | "VolumeAttachment"
    )
}

impl Registry {
    pub fn new(store: Store) -> Registry {
        Registry {
            store,
            service_ips: Default::default(),
            pod_security: Default::default(),
            admission_policies: Default::default(),
            admission_webhooks: Default::default(),
        }
    }

    /// Pod Security admission's defaults and exemptions (`--pod-security-*`).
    pub fn with_pod_security(self, config: admission::pod_security::Config) -> Registry {
        Registry {
            pod_security: std::sync::Arc::new(config),
            ..self
        }
    }

    /// Services get their cluster IPs and node ports from `ranges` (`--service-cidr`).
    pub fn with_service_ranges(self, ranges: ServiceRanges) -> Registry {
        Registry {
            service_ips: std::sync::Arc::new(service_ips::ServiceIps::new(ranges)),
            ..self
        }
    }

    /// The ranges Services get their cluster IPs and node ports from.
    pub fn service_ranges(&self) -> &ServiceRanges {
        self.service_ips.ranges()
    }

    /// Gives a Service its cluster IP and node ports (see [`service_ips`]); other kinds need
    /// nothing. Keep the answer until the object is stored.
    fn allocate<'a>(
        &'a self,
        rt: &ResourceType,
        name: &str,
        obj: &mut Value,
        updating: Option<&str>,
    ) -> Result<Option<service_ips::Allocation<'a>>, RegistryError> {
        if rt != resource::SERVICES {
            return Ok(None);
        }
        match self.service_ips.allocate(self, obj, updating) {
            Ok(a) => Ok(Some(a)),
            Err(service_ips::AllocationError::Invalid(e)) => Err(admission_error(rt, name, e)),
            Err(service_ips::AllocationError::Registry(e)) => Err(e),
        }
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    pub fn get(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        name: &str,
    ) -> Result<StoredObject, RegistryError> {
        self.store
            .get(&object_key(rt, ns, name))
            .ok_or_else(|| RegistryError::not_found(rt, name))
    }

    /// Whether the controller object `name` (of uid `uid`) still exists as that object and is
    /// not being deleted, read from the store: a controller re-checks this before adopting
    /// orphans (upstream's `RecheckDeletionTimestamp`).
    pub fn is_live_owner(
        &self,
        rt: &ResourceType,
        ns: &str,
        name: &str,
        uid: &str,
    ) -> Result<bool, RegistryError> {
        match self.get(rt, Some(ns), name) {
            Ok(o) => {
                let v = o.value()?;
                Ok(
                    v.pointer("/metadata/uid").and_then(Value::as_str) == Some(uid)
                        && v.pointer("/metadata/deletionTimestamp").is_none(),
                )
            }
            Err(RegistryError::NotFound { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Every object of `rt` in `ns` (all namespaces when `None`), as JSON: a consistent read
    /// of the store, for the rare pass that must not act on a cache (namespace deletion).
    pub fn list_values(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
    ) -> Result<Vec<Value>, RegistryError> {
        let (_, items, _) = self.store.list(&prefix(rt, ns), None, None, |_| true);
        items
            .iter()
            .map(|i| i.value().map_err(RegistryError::from))
            .collect()
    }

    /// The store's newest revision.
    pub fn revision(&self) -> u64 {
        self.store.current_revision()
    }

    /// The object's newest version, a write still waiting for durability included
    /// ([`berth_store::Store::latest`]): the start of every read-modify-write.
    pub fn current(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        name: &str,
    ) -> Result<StoredObject, RegistryError> {
        self.store
            .latest(&object_key(rt, ns, name))
            .ok_or_else(|| RegistryError::not_found(rt, name))
    }

    /// Checks that `ns` exists and is not terminating, for creating content in it.
    fn check_namespace(&self, ns: &str) -> Result<(), RegistryError> {
        let Some(rt) = resource::by_plural("", "v1", "namespaces") else {
            return Ok(());
        };
        let obj = self.get(rt, None, ns)?;
        let v = obj.value()?;
        if v.pointer("/metadata/deletionTimestamp").is_some() {
            return Err(RegistryError::Forbidden(format!(
                "unable to create new content in namespace {ns} because it is being terminated"
            )));
        }
        Ok(())
    }

    /// Creates a bootstrap object unless one of its name exists: what the server ships at start
    /// (a default class, a role), never overwriting what someone changed.
    pub fn create_if_missing(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        name: &str,
        obj: Value,
    ) -> Result<(), RegistryError> {
        match self.get(rt, ns, name) {
            Ok(_) => return Ok(()),
            Err(RegistryError::NotFound { .. }) => {}
            Err(e) => return Err(e),
        }
        match self.create(rt, ns, obj, &WriteOptions::default()) {
            Ok(_) | Err(RegistryError::AlreadyExists { .. }) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Creates an object. `ns` is the namespace from the request path.
    pub fn create(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        mut obj: Value,
        opts: &WriteOptions,
    ) -> Result<Value, RegistryError> {
        meta::check_type(rt, &mut obj)?;
        let resource_version_set = meta::carries_resource_version(&obj);
        let unknown = if opts.field_validation == FieldValidation::Strict && !rt.custom {
            admission::unknown_fields(rt.kind, &obj)
        } else {
            Vec::new()
        };
        meta::set_namespace(rt, ns, &mut obj)?;
        let name = meta::assign_name(rt, &mut obj)?;
        if !unknown.is_empty() {
            return Err(RegistryError::BadRequest(format!(
                "strict decoding error: {}",
                unknown.join(", ")
            )));
        }
        if rt.namespaced
            && let Some(ns) = ns
        {
            self.check_namespace(ns)?;
        }
        let applied = applied_fields(opts, &obj);
        meta::prepare_for_create(rt, &mut obj, has_generation(rt));
        restore_applied_fields(applied, &mut obj);
        restrict_node(rt, opts, &name, &obj, None)?;
        if !rt.custom {
            admission::check_decodes(rt.kind, &obj).map_err(|e| admission_error(rt, &name, e))?;
        }
        if rt.group.is_empty()
            && rt.plural == "pods"
            && let Some(ns) = ns
        {
            crate::serviceaccount::admit_pod(self, ns, &mut obj, opts.dry_run)?;
            crate::priority::admit_pod(self, &mut obj)?;
        }
        if rt == resource::PERSISTENT_VOLUME_CLAIMS {
            storage_classes::admit_new_claim(self, &mut obj)?;
        }
        admit_object(rt, Operation::Create, &mut obj, None, &name, opts)?;
        let write = pod_security::Write {
            rt,
            ns,
            name: &name,
            op: Operation::Create,
            part: Part::Main,
            obj: &obj,
            old: None,
        };
        self.admit_pod_security(&write, opts)?;
        if rt == resource::PRIORITY_CLASSES {
            crate::priority::admit_class(self, &obj)?;
        }
        if rt == resource::CERTIFICATE_SIGNING_REQUESTS {
            crate::certificates::admission::admit_create(&name, &mut obj, opts.requestor.as_ref())?;
        }
        guard(rt, opts, &obj)?;
        let _allocation = self.allocate(rt, &name, &mut obj, None)?;
        record_managers(rt, None, &mut obj, Part::Main, opts);
        let hooked = webhook::Attempt::write(rt, ns, &name, Part::Main, None, opts);
        if self.mutate_by_webhooks(&hooked, &mut obj)? {
            // What the webhooks changed is judged as the object was: upstream validates,
            // checks Pod Security and RBAC escalation after mutating admission. Pod
            // Security's warnings were given for the object already.
            admit_object(rt, Operation::Create, &mut obj, None, &name, opts)?;
            self.admit_pod_security(
                &pod_security::Write {
                    rt,
                    ns,
                    name: &name,
                    op: Operation::Create,
                    part: Part::Main,
                    obj: &obj,
                    old: None,
                },
                &opts.without_warnings(),
            )?;
            guard(rt, opts, &obj)?;
        }
        self.admit_policies(admission_policy::Attempt::create(rt, ns, &name, &obj, opts))?;
        self.validate_by_webhooks(&hooked, &obj)?;
        if opts.dry_run {
            return Ok(obj);
        }
        // Upstream's storage refuses it after validation, before it looks for the name; a dry
        // run never reaches the storage.
        if resource_version_set {
            return Err(RegistryError::ResourceVersionOnCreate);
        }
        let key = object_key(rt, ns, &name);
        let (_, written) = self
            .store
            .put_returning(&key, obj, Precondition::Absent)
            .map_err(|e| store_error(rt, &name, e))?;
        Ok(written)
    }

    /// Replaces an object (PUT). A `metadata.resourceVersion` in the body must match the stored
    /// one; without it the update is unconditional.
    pub fn update(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        name: &str,
        mut obj: Value,
        part: Part,
        opts: &WriteOptions,
    ) -> Result<Value, RegistryError> {
        meta::check_type(rt, &mut obj)?;
        if opts.field_validation == FieldValidation::Strict && !rt.custom {
            let unknown = admission::unknown_fields(rt.kind, &obj);
            if !unknown.is_empty() {
                return Err(RegistryError::BadRequest(format!(
                    "strict decoding error: {}",
                    unknown.join(", ")
                )));
            }
        }
        meta::set_namespace(rt, ns, &mut obj)?;
        meta::check_name(&obj, name)?;
        let current = self.current(rt, ns, name)?;
        let old = current.value()?;
        meta::check_uid_precondition(rt, name, &obj, &old)?;
        // NodeRestriction is admission upstream: it refuses before the resourceVersion is
        // compared, so a node's forbidden write is 403 even when it is also stale.
        restrict_node_early(rt, opts, name, &old, &obj, part)?;
        let expected = match obj
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
        {
            // "0" is no precondition, as upstream's versioner reads it.
            Some(rv) if !rv.is_empty() && rv != "0" => {
                let rv: u64 = rv.parse().map_err(|_| {
                    RegistryError::BadRequest(format!("invalid resourceVersion {rv:?}"))
                })?;
                if rv != current.revision {
                    return Err(RegistryError::conflict(rt, name));
                }
                rv
            }
            _ => current.revision,
        };
        self.write_update(rt, ns, name, old, obj, expected, part, opts)
    }

    /// Reads, changes with `f` and writes back, retrying on conflicts: the path of PATCH and
    /// of controllers' read-modify-write. `f` gets the stored object and returns the new one.
    pub fn update_with<E>(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        name: &str,
        part: Part,
        opts: &WriteOptions,
        mut f: impl FnMut(Value) -> Result<Value, E>,
    ) -> Result<Value, E>
    where
        E: From<RegistryError>,
    {
        let mut attempts = 0;
        loop {
            let current = self.current(rt, ns, name)?;
            let old = current.value().map_err(RegistryError::from)?;
            let mut new = f(old.clone())?;
            meta::check_type(rt, &mut new)?;
            meta::set_namespace(rt, ns, &mut new)?;
            meta::check_name(&new, name)?;
            restrict_node_early(rt, opts, name, &old, &new, part)?;
            // A resourceVersion written by the patch itself is a precondition.
            let expected = match new
                .pointer("/metadata/resourceVersion")
                .and_then(Value::as_str)
            {
                Some(rv) if !rv.is_empty() && rv != "0" && rv != current.revision.to_string() => {
                    return Err(RegistryError::conflict(rt, name).into());
                }
                _ => current.revision,
            };
            match self.write_update(rt, ns, name, old, new, expected, part, opts) {
                Err(RegistryError::Conflict { .. }) if attempts < 8 => attempts += 1,
                other => return other.map_err(E::from),
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn write_update(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        name: &str,
        old: Value,
        new: Value,
        expected: u64,
        part: Part,
        opts: &WriteOptions,
    ) -> Result<Value, RegistryError> {
        meta::check_uid_unchanged(rt, name, &old, &new)?;
        let applied = applied_fields(opts, &new);
        let mut obj = meta::prepare_for_update(rt, &old, new, part);
        restore_applied_fields(applied, &mut obj);
        restrict_node(rt, opts, name, &obj, Some(&old))?;
        admit_object(rt, Operation::Update, &mut obj, Some(&old), name, opts)?;
        let write = pod_security::Write {
            rt,
            ns,
            name,
            op: Operation::Update,
            part,
            obj: &obj,
            old: Some(&old),
        };
        self.admit_pod_security(&write, opts)?;
        if has_generation(rt) {
            meta::advance_generation(&old, &mut obj);
        }
        if rt == resource::PERSISTENT_VOLUME_CLAIMS && part == Part::Main {
            storage_classes::admit_claim_update(self, &obj, &old)?;
        }
        if rt == resource::PRIORITY_CLASSES {
            crate::priority::admit_class(self, &obj)?;
        }
        if rt == resource::CERTIFICATE_SIGNING_REQUESTS {
            crate::certificates::admission::admit_update(name, &obj, &old)?;
        }
        guard(rt, opts, &obj)?;
        let uid = old.pointer("/metadata/uid").and_then(Value::as_str);
        let _allocation = self.allocate(rt, name, &mut obj, uid)?;
        record_managers(rt, Some(&old), &mut obj, part, opts);
        let hooked = webhook::Attempt::write(rt, ns, name, part, Some(&old), opts);
        if self.mutate_by_webhooks(&hooked, &mut obj)? {
            admit_object(rt, Operation::Update, &mut obj, Some(&old), name, opts)?;
            self.admit_pod_security(
                &pod_security::Write {
                    rt,
                    ns,
                    name,
                    op: Operation::Update,
                    part,
                    obj: &obj,
                    old: Some(&old),
                },
                &opts.without_warnings(),
            )?;
            guard(rt, opts, &obj)?;
        }
        self.admit_policies(admission_policy::Attempt::update(
            rt, ns, name, part, &obj, &old, opts,
        ))?;
        self.validate_by_webhooks(&hooked, &obj)?;
        if meta::same_ignoring_version(&obj, &old) {
            return Ok(old);
        }
        if opts.dry_run {
            // As upstream's dry run answers: what would be stored, at the stored version.
            if let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
                m.insert("resourceVersion".into(), json!(expected.to_string()));
            }
            return Ok(obj);
        }
        let key = object_key(rt, ns, name);
        if meta::is_finalized(rt, &obj) {
            let stored = self
                .store
                .delete(&key, Precondition::Revision(expected), Some(obj))
                .map_err(|e| store_error(rt, name, e))?;
            return Ok(stored.value()?);
        }
        let (_, written) = self
            .store
            .put_returning(&key, obj, Precondition::Revision(expected))
            .map_err(|e| store_error(rt, name, e))?;
        Ok(written)
    }

    /// The `Status` body of a successful deletion, as upstream answers it.
    pub fn deleted_status(rt: &ResourceType, obj: &Value) -> Value {
        let mut details = Map::new();
        details.insert(
            "name".into(),
            obj.pointer("/metadata/name")
                .cloned()
                .unwrap_or(Value::Null),
        );
        details.insert("group".into(), json!(rt.group));
        details.insert("kind".into(), json!(rt.plural));
        details.insert(
            "uid".into(),
            obj.pointer("/metadata/uid").cloned().unwrap_or(Value::Null),
        );
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details})
    }
}
