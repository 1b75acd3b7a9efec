//! Berth's API server: the Kubernetes REST API over the registry ([`api`]: authentication,
//! authorization, discovery, OpenAPI, CRUD, watch, tables, subresources, proxying), and what only
//! it needs: RBAC ([`rbac`]), node joining ([`join`]), the cluster CA and its certificates
//! ([`pki`], [`certificates`]), ServiceAccount tokens ([`serviceaccount`]) and the `kubernetes`
//! Service ([`kubernetes_service`]), and API aggregation ([`aggregation`]). It depends on the runtime, never on the controllers.

pub mod admission_policies;
pub mod admission_webhooks;
pub mod aggregation;
pub mod api;
pub mod certificates;
pub mod custom_resources;
mod following;
pub mod join;
pub mod kubernetes_service;
pub mod pki;
pub mod rbac;
pub mod serviceaccount;
