//! Kubernetes API admission for the kinds Berth serves: decode a request body into its typed
//! struct, apply upstream's defaults (`SetDefaults_*`, create/update strategies and the default
//! admission plugins), validate with upstream's field paths and messages, and hand back the
//! defaulted object. Also the strict-decoding check for unknown fields.
//!
//! ```
//! use berth_shared::admission::{admit, Operation};
//! let mut obj = serde_json::json!({
//!     "apiVersion": "apps/v1", "kind": "Deployment",
//!     "metadata": {"name": "web", "namespace": "default", "uid": "u1"},
//!     "spec": {"selector": {"matchLabels": {"app": "web"}},
//!              "template": {"metadata": {"labels": {"app": "web"}},
//!                           "spec": {"containers": [{"name": "nginx", "image": "nginx"}]}}}});
//! admit("Deployment", Operation::Create, &mut obj, None).unwrap();
//! assert_eq!(obj["spec"]["replicas"], 1);
//! ```

mod admission_policy;
mod admission_rules;
mod admission_webhook;
mod affinity;
mod api_service;
mod apps;
pub mod autoscaling;
mod batch;
pub mod certificates;
mod cluster;
mod codec;
mod config;
mod container;

mod crd_conversion;
mod cron_job;
mod csi;
mod custom_resource;
mod custom_resource_definition;
mod defaults;
mod disabled_fields;
mod ephemeral;
mod field;
mod ingress;
mod meta;
mod names;
mod network_policy;
mod pod;
pub mod pod_security;
mod pod_spec;
mod policy;
pub mod priority_class;
mod probe;
mod rbac;
mod resources;
mod runtime_class;
mod scheduling;
mod selector;
pub mod service;
pub mod service_allocation;
mod sets;
pub mod storage;
mod volume;
mod workload;

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
    ValidatingWebhookConfiguration,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService as ApiService;
use k8s_openapi::{Metadata, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

pub use berth_api::qos::qos_class;
pub use custom_resource::admit_custom;
pub use custom_resource_definition::CLEANUP_FINALIZER;
pub use field::{FieldError, FieldErrorType};
pub use names::validate_name;
pub use sets::TEMPLATE_GENERATION;

/// The write being admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    Create,
    Update,
}

/// Why a body was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AdmissionError {
    /// The body does not fit the kind's type (HTTP 400). The text is upstream's sentence:
    /// `Deployment in version "v1" cannot be handled as a Deployment: spec.replicas: invalid type: …`.
    #[error("{0}")]
    Decode(String),
    /// The object is well-formed but invalid (HTTP 422); one entry per Status cause.
    #[error("{}", aggregate(.0))]
    Invalid(Vec<FieldError>),
}

impl AdmissionError {
    /// Admission is deterministic: resubmitting the same body fails the same way.
    pub fn is_transient(&self) -> bool {
        false
    }
}

/// Upstream's aggregate text: one message alone, several as `[a, b]`, duplicates once.
fn aggregate(errs: &[FieldError]) -> String {
    let mut seen = std::collections::HashSet::new();
    let mut msgs: Vec<String> = Vec::new();
    for m in errs.iter().map(FieldError::message) {
        if seen.insert(m.clone()) {
            msgs.push(m);
        }
    }
    if msgs.len() == 1 {
        msgs.remove(0)
    } else {
        format!("[{}]", msgs.join(", "))
    }
}

/// The Status message for an Invalid error: `Deployment.apps "web" is invalid: <errors>`.
/// `group_kind` is `Deployment.apps`, or just `Pod` for the core group.
pub fn invalid_message(group_kind: &str, name: &str, errs: &[FieldError]) -> String {
    if errs.is_empty() {
        format!("{group_kind} {} is invalid", field::quote(name))
    } else {
        format!(
            "{group_kind} {} is invalid: {}",
            field::quote(name),
            aggregate(errs)
        )
    }
}

/// Applies Kubernetes defaults then validates. `obj` is the full object (apiVersion, kind,
/// metadata incl. uid/name/namespace already set by the server on create). On Update, `old` is
/// the stored object and immutability rules apply (without `old`, an update is checked like a
/// create). On success `obj` holds the defaulted object, serialised from the typed struct (so
/// unknown fields are pruned like upstream); on failure it is left untouched.
///
/// Status is not reset or carried over here (except the Pod phase and QoS class and the
/// Namespace phase that upstream computes): that is the server's generic status rule.
pub fn admit(
    kind: &str,
    op: Operation,
    obj: &mut Value,
    old: Option<&Value>,
) -> Result<(), AdmissionError> {
    use k8s_openapi::api::{
        apps::v1 as apps_v1, batch::v1 as batch_v1, core::v1 as core_v1,
        networking::v1 as networking_v1, rbac::v1 as rbac_v1, storage::v1 as storage_v1,
    };
    disabled_fields::drop(kind, obj);
    match kind {
        "Namespace" => run::<core_v1::Namespace>(
            obj,
            op,
            old,
            |n, op, _| cluster::default_namespace(n, op),
            |n, _, _| cluster::validate_namespace(n),
        ),
        "Node" => run::<core_v1::Node>(
            obj,
            op,
            old,
            |n, _, _| cluster::default_node(n),
            |n, o, _| cluster::validate_node(n, o),
        ),
        "Pod" => run_own_meta::<core_v1::Pod>(
            obj,
            op,
            old,
            |p, op, _| pod::default_pod(p, op),
            |p, o, _| match o {
                None => pod::validate_pod_create(p),
                Some(o) => pod::validate_pod_update(p, o),
            },
        ),
        "Event" => {
            run_own_meta::<core_v1::Event>(obj, op, old, |_, _, _| {}, cluster::validate_event)
        }
        "ConfigMap" => run::<core_v1::ConfigMap>(
            obj,
            op,
            old,
            |_, _, _| {},
            |c, o, _| config::validate_config_map(c, o),
        ),
        "Secret" => run::<core_v1::Secret>(
            obj,
            op,
            old,
            |s, _, _| config::default_secret(s),
            |s, o, _| config::validate_secret(s, o),
        ),
        "ReplicationController" => run::<core_v1::ReplicationController>(
            obj,
            op,
            old,
            |r, _, _| policy::default_replication_controller(r),
            |r, _, _| policy::validate_replication_controller(r),
        ),
        "Deployment" => run::<apps_v1::Deployment>(
            obj,
            op,
            old,
            |d, _, _| apps::default_deployment(d),
            apps::validate_deployment,
        ),
        "ReplicaSet" => run::<apps_v1::ReplicaSet>(
            obj,
            op,
            old,
            |r, _, _| apps::default_replica_set(r),
            apps::validate_replica_set,
        ),
        "StatefulSet" => run::<apps_v1::StatefulSet>(
            obj,
            op,
            old,
            |s, _, _| sets::default_stateful_set(s),
            sets::validate_stateful_set,
        ),
        "DaemonSet" => run::<apps_v1::DaemonSet>(
            obj,
            op,
            old,
            |d, _, old| sets::default_daemon_set(d, old),
            sets::validate_daemon_set,
        ),
        "ControllerRevision" => run::<apps_v1::ControllerRevision>(
            obj,
            op,
            old,
            |_, _, _| {},
            |r, o, _| sets::validate_controller_revision(r, o),
        ),
        "Job" => run::<batch_v1::Job>(
            obj,
            op,
            old,
            |j, op, _| batch::default_job(j, op),
            |j, o, _| batch::validate_job(j, o),
        ),
        "CronJob" => run::<batch_v1::CronJob>(
            obj,
            op,
            old,
            |c, _, _| cron_job::default_cron_job(c),
            |c, o, _| cron_job::validate_cron_job(c, o),
        ),
        "PodDisruptionBudget" => run::<k8s_openapi::api::policy::v1::PodDisruptionBudget>(
            obj,
            op,
            old,
            |_, _, _| {},
            |p, _, _| policy::validate_pdb(p),
        ),
        "PriorityClass" => run_own_meta::<k8s_openapi::api::scheduling::v1::PriorityClass>(
            obj,
            op,
            old,
            |p, _, _| priority_class::default_priority_class(p),
            |p, o, _| priority_class::validate_priority_class(p, o),
        ),
        "Lease" => run::<k8s_openapi::api::coordination::v1::Lease>(
            obj,
            op,
            old,
            |_, _, _| {},
            |l, _, _| policy::validate_lease(l),
        ),
        "ServiceAccount" => run::<core_v1::ServiceAccount>(
            obj,
            op,
            old,
            |_, _, _| {},
            // Upstream `ValidateServiceAccount`: the object meta alone.
            |_, _, _| Vec::new(),
        ),
        "Role" => {
            run::<rbac_v1::Role>(obj, op, old, |_, _, _| {}, |r, _, _| rbac::validate_role(r))
        }
        "ClusterRole" => run::<rbac_v1::ClusterRole>(
            obj,
            op,
            old,
            |_, _, _| {},
            |r, _, _| rbac::validate_role(r),
        ),
        "RoleBinding" => run::<rbac_v1::RoleBinding>(
            obj,
            op,
            old,
            |b, _, _| rbac::default_subjects(b.subjects.as_mut()),
            |b, o, _| rbac::validate_binding(b, o),
        ),
        "ClusterRoleBinding" => run::<rbac_v1::ClusterRoleBinding>(
            obj,
            op,
            old,
            |b, _, _| rbac::default_subjects(b.subjects.as_mut()),
            |b, o, _| rbac::validate_binding(b, o),
        ),
        "HorizontalPodAutoscaler" => {
            run::<k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler>(
                obj,
                op,
                old,
                |h, _, _| autoscaling::default_hpa(h),
                |h, _, _| autoscaling::validate_hpa(h),
            )
        }
        "Service" => run::<core_v1::Service>(
            obj,
            op,
            old,
            |s, _, old| service::default_service(s, old),
            |s, o, _| service::validate_service(s, o),
        ),
        "Endpoints" => run::<core_v1::Endpoints>(
            obj,
            op,
            old,
            |_, _, _| {},
            |e, _, _| service::validate_endpoints(e),
        ),
        "EndpointSlice" => run::<k8s_openapi::api::discovery::v1::EndpointSlice>(
            obj,
            op,
            old,
            |_, _, _| {},
            |e, o, _| service::validate_endpoint_slice(e, o),
        ),
        "PersistentVolume" => run::<core_v1::PersistentVolume>(
            obj,
            op,
            old,
            |pv, op, _| storage::default_persistent_volume(pv, op),
            |pv, o, _| storage::validate_persistent_volume(pv, o),
        ),
        "PersistentVolumeClaim" => run::<core_v1::PersistentVolumeClaim>(
            obj,
            op,
            old,
            |pvc, op, _| storage::default_persistent_volume_claim(pvc, op),
            |pvc, o, _| storage::validate_persistent_volume_claim(pvc, o),
        ),
        "StorageClass" => run::<k8s_openapi::api::storage::v1::StorageClass>(
            obj,
            op,
            old,
            |sc, _, _| storage::default_storage_class(sc),
            |sc, o, _| storage::validate_storage_class(sc, o),
        ),
        "Ingress" => run::<networking_v1::Ingress>(
            obj,
            op,
            old,
            |_, _, _| {},
            |i, o, _| ingress::validate_ingress(i, o),
        ),
        "IngressClass" => run::<networking_v1::IngressClass>(
            obj,
            op,
            old,
            |c, _, _| ingress::default_ingress_class(c),
            |c, o, _| ingress::validate_ingress_class(c, o),
        ),
        "NetworkPolicy" => run::<networking_v1::NetworkPolicy>(
            obj,
            op,
            old,
            |n, _, _| network_policy::default_network_policy(n),
            |n, o, _| network_policy::validate_network_policy(n, o),
        ),
        "RuntimeClass" => run::<k8s_openapi::api::node::v1::RuntimeClass>(
            obj,
            op,
            old,
            |_, _, _| {},
            |r, o, _| runtime_class::validate_runtime_class(r, o),
        ),
        "CSIDriver" => run::<storage_v1::CSIDriver>(
            obj,
            op,
            old,
            |d, _, _| csi::default_csi_driver(d),
            |d, o, _| csi::validate_csi_driver(d, o),
        ),
        "CSINode" => run::<storage_v1::CSINode>(
            obj,
            op,
            old,
            |_, _, _| {},
            |n, o, _| csi::validate_csi_node(n, o),
        ),
        "VolumeAttachment" => run::<storage_v1::VolumeAttachment>(
            obj,
            op,
            old,
            |_, _, _| {},
            |v, o, _| csi::validate_volume_attachment(v, o),
        ),
        "CertificateSigningRequest" => {
            run_own_meta::<k8s_openapi::api::certificates::v1::CertificateSigningRequest>(
                obj,
                op,
                old,
                |_, _, _| {},
                |c, o, _| certificates::validate_csr(c, o),
            )
        }
        "ValidatingAdmissionPolicy" => run::<ValidatingAdmissionPolicy>(
            obj,
            op,
            old,
            |p, _, _| admission_policy::default_policy(p),
            |p, _, _| admission_policy::validate_policy(p),
        ),
        "ValidatingWebhookConfiguration" => {
            admission_webhook::fill_required(obj);
            run::<ValidatingWebhookConfiguration>(
                obj,
                op,
                old,
                |c, _, _| admission_webhook::default_validating(c),
                |c, _, _| admission_webhook::validate_validating(c),
            )
        }
        "APIService" => run_own_meta::<ApiService>(
            obj,
            op,
            old,
            |s, _, _| api_service::default_api_service(s),
            |s, o, _| api_service::validate_api_service(s, o),
        ),
        "MutatingWebhookConfiguration" => {
            admission_webhook::fill_required(obj);
            run::<MutatingWebhookConfiguration>(
                obj,
                op,
                old,
                |c, _, _| admission_webhook::default_mutating(c),
                |c, _, _| admission_webhook::validate_mutating(c),
            )
        }
        "ValidatingAdmissionPolicyBinding" => run::<ValidatingAdmissionPolicyBinding>(
            obj,
            op,
            old,
            |b, _, _| admission_policy::default_binding(b),
            |b, _, _| admission_policy::validate_binding(b),
        ),
        "CustomResourceDefinition" => run::<CustomResourceDefinition>(
            obj,
            op,
            old,
            |c, op, _| {
                custom_resource_definition::default_crd(c, op);
                crd_conversion::default_conversion(c);
            },
            |c, o, _| {
                let mut errs = custom_resource_definition::validate_crd(c, o);
                errs.extend(crd_conversion::validate_conversion(c));
                errs
            },
        ),
        other => Err(AdmissionError::Decode(format!(
            "no kind {} is registered",
            field::quote(other)
        ))),
    }
}

/// Upstream's `ValidateLabels` (`which` is "labels") or `ValidateAnnotations` (else) of a map an
/// object's metadata got from elsewhere (a conversion webhook's answer): the messages, with
/// upstream's paths (`metadata.labels`, `metadata.annotation`), none when valid.
pub fn metadata_map_errors(
    which: &str,
    map: &std::collections::BTreeMap<String, String>,
) -> Vec<String> {
    let errs = if which == "labels" {
        meta::validate_labels(map, &field::Path::new("metadata").child("labels"))
    } else {
        meta::validate_annotations(map, &field::Path::new("metadata").child("annotation"))
    };
    errs.iter().map(FieldError::message).collect()
}

/// The warnings upstream returns with a successful write of `obj` (a `Warning` header each),
/// such as a CronJob schedule's unsupported `TZ=` prefix. `obj` is the admitted object.
pub fn warnings(kind: &str, obj: &Value) -> Vec<String> {
    match kind {
        "CronJob" => codec::decode::<k8s_openapi::api::batch::v1::CronJob>(obj)
            .map(|c| cron_job::warnings(&c))
            .unwrap_or_default(),
        _ => Vec::new(),
    }
}

/// fieldValidation=Strict: the fields in `raw` the kind's schema does not have, as upstream
/// words them (`unknown field "spec.template.spec.containers[0].imagePullPolicyy"`). Empty when
/// all are known, and also when the body does not decode (admission reports that).
pub fn unknown_fields(kind: &str, raw: &Value) -> Vec<String> {
    decode_error_and_unknown_fields(kind, raw).1
}

/// Why `raw` does not decode as `kind`'s type (`metadata.labels: invalid type: string "x",
/// expected a map`; `None` when it does, or for a kind without a typed schema here) and
/// [`unknown_fields`], from one typed decode: a strategic merge patch's result needs both.
pub fn decode_error_and_unknown_fields(kind: &str, raw: &Value) -> (Option<String>, Vec<String>) {
    let (error, unknown) = match decode_as(kind, raw) {
        Some(Ok(paths)) => (None, paths),
        Some(Err(e)) => (Some(e), Vec::new()),
        None => (None, Vec::new()),
    };
    let unknown = unknown
        .into_iter()
        .chain(disabled_fields::paths(kind, raw))
        .map(|p| format!("unknown field {}", field::quote(&p)))
        .collect();
    (error, unknown)
}

/// Decodes `raw` as `kind`'s type: the paths of the fields it does not have, or the decoder's
/// error; `None` for a kind without a typed schema here.
fn decode_as(kind: &str, raw: &Value) -> Option<Result<Vec<String>, String>> {
    use k8s_openapi::api::{
        apps::v1 as apps_v1, batch::v1 as batch_v1, core::v1 as core_v1,
        networking::v1 as networking_v1, storage::v1 as storage_v1,
    };
    Some(match kind {
        "Namespace" => round_trip_unknown::<core_v1::Namespace>(raw),
        "Node" => round_trip_unknown::<core_v1::Node>(raw),
        "Pod" => round_trip_unknown::<core_v1::Pod>(raw),
        "Event" => round_trip_unknown::<core_v1::Event>(raw),
        "ConfigMap" => round_trip_unknown::<core_v1::ConfigMap>(raw),
        "Secret" => round_trip_unknown::<core_v1::Secret>(raw),
        "ReplicationController" => round_trip_unknown::<core_v1::ReplicationController>(raw),
        "Deployment" => round_trip_unknown::<apps_v1::Deployment>(raw),
        "ReplicaSet" => round_trip_unknown::<apps_v1::ReplicaSet>(raw),
        "StatefulSet" => round_trip_unknown::<apps_v1::StatefulSet>(raw),
        "DaemonSet" => round_trip_unknown::<apps_v1::DaemonSet>(raw),
        "ControllerRevision" => round_trip_unknown::<apps_v1::ControllerRevision>(raw),
        "Job" => round_trip_unknown::<batch_v1::Job>(raw),
        "CronJob" => round_trip_unknown::<batch_v1::CronJob>(raw),
        "PodDisruptionBudget" => {
            round_trip_unknown::<k8s_openapi::api::policy::v1::PodDisruptionBudget>(raw)
        }
        "Lease" => round_trip_unknown::<k8s_openapi::api::coordination::v1::Lease>(raw),
        "PriorityClass" => {
            round_trip_unknown::<k8s_openapi::api::scheduling::v1::PriorityClass>(raw)
        }
        "ServiceAccount" => round_trip_unknown::<core_v1::ServiceAccount>(raw),
        "HorizontalPodAutoscaler" => {
            round_trip_unknown::<k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler>(raw)
        }
        "Service" => round_trip_unknown::<core_v1::Service>(raw),
        "Endpoints" => round_trip_unknown::<core_v1::Endpoints>(raw),
        "EndpointSlice" => {
            round_trip_unknown::<k8s_openapi::api::discovery::v1::EndpointSlice>(raw)
        }
        "PersistentVolume" => round_trip_unknown::<core_v1::PersistentVolume>(raw),
        "PersistentVolumeClaim" => round_trip_unknown::<core_v1::PersistentVolumeClaim>(raw),
        "StorageClass" => round_trip_unknown::<k8s_openapi::api::storage::v1::StorageClass>(raw),
        "CertificateSigningRequest" => {
            round_trip_unknown::<k8s_openapi::api::certificates::v1::CertificateSigningRequest>(raw)
        }
        "Ingress" => round_trip_unknown::<networking_v1::Ingress>(raw),
        "IngressClass" => round_trip_unknown::<networking_v1::IngressClass>(raw),
        "NetworkPolicy" => round_trip_unknown::<networking_v1::NetworkPolicy>(raw),
        "RuntimeClass" => round_trip_unknown::<k8s_openapi::api::node::v1::RuntimeClass>(raw),
        "CSIDriver" => round_trip_unknown::<storage_v1::CSIDriver>(raw),
        "CSINode" => round_trip_unknown::<storage_v1::CSINode>(raw),
        "VolumeAttachment" => round_trip_unknown::<storage_v1::VolumeAttachment>(raw),
        "Role" => round_trip_unknown::<k8s_openapi::api::rbac::v1::Role>(raw),
        "ClusterRole" => round_trip_unknown::<k8s_openapi::api::rbac::v1::ClusterRole>(raw),
        "RoleBinding" => round_trip_unknown::<k8s_openapi::api::rbac::v1::RoleBinding>(raw),
        "ClusterRoleBinding" => {
            round_trip_unknown::<k8s_openapi::api::rbac::v1::ClusterRoleBinding>(raw)
        }
        "CustomResourceDefinition" => round_trip_unknown::<CustomResourceDefinition>(raw),
        "ValidatingAdmissionPolicy" => round_trip_unknown::<ValidatingAdmissionPolicy>(raw),
        "ValidatingWebhookConfiguration" => {
            round_trip_unknown::<ValidatingWebhookConfiguration>(raw)
        }
        "MutatingWebhookConfiguration" => round_trip_unknown::<MutatingWebhookConfiguration>(raw),
        "APIService" => round_trip_unknown::<ApiService>(raw),
        "ValidatingAdmissionPolicyBinding" => {
            round_trip_unknown::<ValidatingAdmissionPolicyBinding>(raw)
        }
        _ => return None,
    })
}

fn round_trip_unknown<T: DeserializeOwned + Serialize>(raw: &Value) -> Result<Vec<String>, String> {
    codec::decode::<T>(raw).map(|typed| codec::unknown_paths(raw, &codec::encode(&typed)))
}

/// Whether `obj` decodes as `kind`'s type: the check upstream's decoder makes before any
/// admission plugin sees an object, so the plugins the registry runs ahead of [`admit`]
/// (ServiceAccount, priority, default storage class) only ever see well-typed objects.
pub fn check_decodes(kind: &str, obj: &Value) -> Result<(), AdmissionError> {
    use k8s_openapi::api::core::v1 as core_v1;
    match kind {
        "Pod" => decode_kind::<core_v1::Pod>(obj).map(drop),
        "PersistentVolumeClaim" => decode_kind::<core_v1::PersistentVolumeClaim>(obj).map(drop),
        _ => Ok(()),
    }
}

fn decode_kind<T: DeserializeOwned + Resource>(raw: &Value) -> Result<T, AdmissionError> {
    codec::decode::<T>(raw).map_err(|e| {
        AdmissionError::Decode(format!(
            "{kind} in version {} cannot be handled as a {kind}: {e}",
            field::quote(T::VERSION),
            kind = T::KIND
        ))
    })
}

/// [`run_own_meta`] for a kind whose validation starts, as upstream's `Validate<Kind>` does,
/// with the standard object-meta checks ([`meta::validate_meta`]): they run here, once for
/// every such kind, and `validate` adds the kind's own rules after them.
fn run<T>(
    obj: &mut Value,
    op: Operation,
    old: Option<&Value>,
    default: impl Fn(&mut T, Operation, Option<&T>),
    validate: impl Fn(&T, Option<&T>, &Value) -> Vec<FieldError>,
) -> Result<(), AdmissionError>
where
    T: DeserializeOwned + Serialize + Resource + Metadata<Ty = ObjectMeta>,
    T::Scope: 'static,
{
    run_own_meta(obj, op, old, default, |typed: &T, old_typed, raw| {
        let mut errs = meta::validate_meta(typed, old_typed);
        errs.extend(validate(typed, old_typed, raw));
        errs
    })
}

/// Decode, carry identity from the stored object, default, validate, encode. `validate`
/// checks the metadata too (the kinds whose metadata rules are not the standard ones).
fn run_own_meta<T>(
    obj: &mut Value,
    op: Operation,
    old: Option<&Value>,
    default: impl Fn(&mut T, Operation, Option<&T>),
    validate: impl Fn(&T, Option<&T>, &Value) -> Vec<FieldError>,
) -> Result<(), AdmissionError>
where
    T: DeserializeOwned + Serialize + Metadata<Ty = ObjectMeta>,
{
    let mut typed: T = decode_kind(obj)?;
    let old_typed: Option<T> = match (op, old) {
        (Operation::Update, Some(o)) => Some(decode_kind(o)?),
        _ => None,
    };
    if let Some(o) = &old_typed {
        meta::carry_identity(typed.metadata_mut(), o.metadata());
    }
    default(&mut typed, op, old_typed.as_ref());
    let errs = validate(&typed, old_typed.as_ref(), obj);
    if !errs.is_empty() {
        return Err(AdmissionError::Invalid(errs));
    }
    *obj = codec::encode(&typed);
    Ok(())
}

#[cfg(test)]
mod tests;
