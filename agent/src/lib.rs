//! Berth's node agent: registers its host as a Node and runs the pods bound to it as real
//! containers through containerd, with CNI networking, probes and restart policy.

pub mod pod;
pub mod probe;
