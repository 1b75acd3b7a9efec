//! Berth's integration harness: starts the real binaries on temporary directories, drives the
//! stock kubectl and raw HTTPS against them, and waits on conditions with deadlines, so that a
//! failing test prints what it expected, what it saw and the components' logs.

pub mod api;
pub mod client;
pub mod controller;
pub mod kinds;
pub mod kubectl;
pub mod objects;
pub mod pki;
pub mod process;
pub mod seeds;
pub mod stats;
pub mod table;
pub mod wait;

pub use api::{Api, Next, Watch};
pub use client::{Credentials, Reply, Req};
pub use controller::Controller;
pub use kubectl::Kubectl;
pub use process::Run;
pub use table::Table;
pub use wait::{ensure_for, secs, wait_for};
