//! The ClusterRole aggregation controller: keeps the rules of every ClusterRole with an
//! `aggregationRule` equal to the union of the ClusterRoles its selectors match (so `admin`,
//! `edit` and `view` grow when a role labelled `aggregate-to-view` appears).

pub mod plan;

use berth_registry::{Part, Registry, RegistryError, WriteOptions};
use berth_runtime::informer::{Informer, ObjectKey};
use berth_runtime::{Context, Controller, Reconciler};
use berth_shared::reconcile::Outcome;
use berth_shared::resource::CLUSTER_ROLES;
use berth_shared::selector::LabelSelector;
use k8s_openapi::api::rbac::v1::ClusterRole;
use serde_json::json;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

struct Aggregation {
    registry: Registry,
    roles: Arc<Informer>,
}

impl Reconciler for Aggregation {
    type Key = ObjectKey;
    type Error = RegistryError;

    fn reconcile(&self, key: &ObjectKey) -> Result<Outcome, RegistryError> {
        self.roles.reconcile_cached(key, |obj| {
            let Ok(target) = obj.decode::<ClusterRole>() else {
                return Ok(Outcome::Done);
            };
            let Some(rule) = &target.aggregation_rule else {
                return Ok(Outcome::Done);
            };
            // A selector that does not parse matches nothing (admission refuses such roles).
            let selectors: Vec<LabelSelector> = rule
                .cluster_role_selectors
                .iter()
                .flatten()
                .filter_map(|s| LabelSelector::from_k8s(s).ok())
                .collect();
            let roles: Vec<plan::Role> = self
                .roles
                .list()
                .iter()
                .filter_map(|o| {
                    let r = o.decode::<ClusterRole>().ok()?;
                    Some(plan::Role {
                        name: o.name().to_string(),
                        labels: o.labels().clone(),
                        rules: r.rules.unwrap_or_default(),
                    })
                })
                .collect();
            let current = target.rules.clone().unwrap_or_default();
            let Some(rules) = plan::aggregate(key.name(), &selectors, &current, &roles) else {
                return Ok(Outcome::Done);
            };
            self.registry.update_with(
                CLUSTER_ROLES,
                None,
                key.name(),
                Part::Main,
                &WriteOptions::default(),
                |mut cur| {
                    cur["rules"] = json!(rules);
                    Ok::<_, RegistryError>(cur)
                },
            )?;
            tracing::info!(
                role = key.name(),
                rules = rules.len(),
                "aggregated cluster role"
            );
            Ok(Outcome::Done)
        })
    }
}

/// Runs the aggregation controller until `shutdown`.
pub async fn run(ctx: Context, shutdown: CancellationToken) {
    let roles = ctx.informer(CLUSTER_ROLES);
    let reconciler = Arc::new(Aggregation {
        registry: ctx.registry.clone(),
        roles: roles.clone(),
    });
    // Any role's change may change what an aggregated role gathers: requeue them all.
    let all = roles.clone();
    Controller::new("clusterrole-aggregation", &ctx, CLUSTER_ROLES)
        .watches(CLUSTER_ROLES, move |_| {
            all.list()
                .iter()
                .filter(|o| {
                    o.decode::<AggregationHead>()
                        .is_ok_and(|h| h.aggregation_rule.is_some())
                })
                .map(|o| o.key().clone())
                .collect()
        })
        .workers(1)
        .run(reconciler, shutdown)
        .await;
}

/// Just enough of a ClusterRole to tell whether it aggregates.
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct AggregationHead {
    aggregation_rule: Option<serde_json::Value>,
}
