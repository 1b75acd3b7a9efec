//! Berth's integration harness: starts the real binaries on temporary directories, drives the
//! stock kubectl and raw HTTPS against them, and waits on conditions with deadlines, so that a
//! failing test prints what it expected, what it saw and the components' logs.

pub mod agent;
pub mod api;
pub mod bench;
pub mod client;
pub mod cluster;
pub mod containerd;
pub mod controller;
pub mod etcd;
pub mod fixtures;
pub mod ha;
pub mod host;
pub mod http;
pub mod join;
pub mod kinds;
pub mod kubectl;
pub mod objects;
pub mod pki;
pub mod pod_netns;
pub mod pod_reading;
pub mod pod_specs;
pub mod process;
pub mod raw_tls;
pub mod registry;
pub mod relay;
pub mod rollout;
pub mod seeds;
pub mod stamped;
pub mod stats;
pub mod sweep;
pub mod table;
pub mod testbed;
pub mod tls_server;
pub mod wait;
pub mod watch_delivery;

pub use api::{Api, Next, Watch};
pub use client::{Credentials, Reply, Req};
pub use cluster::{AgentOptions, Cluster, ClusterConfig};
pub use containerd::Containerd;
pub use controller::Controller;
pub use http::http_get;
pub use kubectl::Kubectl;
pub use process::Run;
pub use raw_tls::RawTls;
pub use registry::Registry;
pub use table::Table;
pub use testbed::{Segment, TestBed, TestBedLayout};
pub use wait::{ensure_for, secs, wait_for};
