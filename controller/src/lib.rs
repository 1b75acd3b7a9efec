//! Berth control plane.
