//! The collector's pure decisions: which images, containers, log directories and rotated log
//! files go.
//!
//! Planner: pure, no I/O.

pub mod containers;
pub mod images;
pub mod logs;
