//! The StatefulSet controller (placeholder while being written).
pub mod identity;
pub mod plan;
pub mod retention;
pub mod view;
