//! Berth's node agent: registers its host as a Node and runs the pods bound to it as real
//! containers through containerd, with CNI networking, probes and restart policy.

pub mod agent;
pub mod certificates;
pub mod config;
pub mod dir_listing;
pub mod eviction;
pub mod gc;
pub mod image;
pub mod ingress;
pub mod join;
pub mod metrics;
pub mod mountinfo;
pub mod network;
pub mod node;
pub mod pod;
pub mod probe;
pub mod runtime;
pub mod server;
pub mod storage;
pub mod uninstall;
