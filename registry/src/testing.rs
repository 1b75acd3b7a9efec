//! Test support for the registry and the crates above it: a registry over a real store in a
//! directory the test owns (the `testing` feature, enabled from dev-dependencies).

use crate::{Registry, WriteOptions};
use berth_shared::resource::NAMESPACES;
use berth_store::{RedbBackend, Store};
use serde_json::json;

/// A registry over a fresh store in `dir`, with the `default` namespace.
pub fn registry(dir: &std::path::Path) -> Registry {
    let backend = RedbBackend::open(&dir.join("store.redb")).expect("open store");
    let registry = Registry::new(Store::open(Box::new(backend), 10_000).expect("store"));
    registry
        .create(
            NAMESPACES,
            None,
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}}),
            &WriteOptions::default(),
        )
        .expect("default namespace");
    registry
}
