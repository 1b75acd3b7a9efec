//! Fuzz target: `?labelSelector=` and `?fieldSelector=` strings. A selector that parses must
//! print in a form that parses back to the same requirements, and matching must not panic.
#![no_main]

use std::collections::BTreeMap;

use berth_shared::selector::{FieldSelector, LabelSelector};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(sel) = LabelSelector::parse(s) {
        let printed = sel.to_string();
        let reparsed = LabelSelector::parse(&printed)
            .unwrap_or_else(|e| panic!("{s:?} printed as {printed:?}, which fails: {e}"));
        assert_eq!(reparsed, sel, "{s:?} printed as {printed:?}");
        let mut labels = BTreeMap::new();
        for r in sel.requirements() {
            let _ = sel.matches(&labels);
            if let Some(v) = r.values().first() {
                labels.insert(r.key().to_string(), v.clone());
            }
        }
        let _ = sel.matches(&labels);
    }
    if let Ok(sel) = FieldSelector::parse(s) {
        let printed = sel.to_string();
        let reparsed = FieldSelector::parse(&printed)
            .unwrap_or_else(|e| panic!("{s:?} printed as {printed:?}, which fails: {e}"));
        // Terms are ordered by their raw text, as upstream orders them, and `==` prints as `=`:
        // the same terms may come back in another order.
        let terms = |sel: &FieldSelector| {
            let mut t: Vec<String> = sel
                .requirements()
                .iter()
                .map(|r| format!("{r:?}"))
                .collect();
            t.sort();
            t
        };
        assert_eq!(
            terms(&reparsed),
            terms(&sel),
            "{s:?} printed as {printed:?}"
        );
        let _ = sel.validate_fields(&["metadata.name", "spec.nodeName"]);
        let _ = sel.matches(|f| (f == "metadata.name").then(|| s.to_string()));
        let _ = sel.single_value("metadata.name");
    }
});
