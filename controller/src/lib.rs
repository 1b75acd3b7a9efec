//! Berth's control plane, wired: the API server over the registry and store, and the
//! controllers and scheduler beside it ([`server`]), plus snapshots of the store ([`backup`]).
//! The parts live in their own crates (berth-store, berth-registry, berth-runtime,
//! berth-scheduler, berth-controllers, berth-apiserver), along the architecture's seams.

pub mod backup;
pub mod server;
