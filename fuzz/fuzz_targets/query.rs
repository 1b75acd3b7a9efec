//! Fuzz target: a request's query string, with every parameter the API reads: selectors,
//! `limit`, `continue`, `resourceVersion`, `timeoutSeconds`, `watch`, write and delete options.
#![no_main]

use berth_shared::query::{Query, encode_continue};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    let q = Query::parse(Some(s));
    let _ = q.label_selector();
    let _ = q.field_selector();
    let _ = (
        q.limit(),
        q.timeout_seconds(),
        q.flag("watch"),
        q.all("dryRun"),
    );
    let _ = q.resource_version();
    let _ = q.continue_key("/core/pods/default/");
    if let Ok(Some(key)) = q.continue_key("") {
        let token = encode_continue(&key);
        let again = Query::parse(Some(&format!("continue={token}")));
        assert_eq!(again.continue_key(""), Ok(Some(key)));
    }
    let _ = (q.field_validation(), q.dry_run(), q.grace_period_seconds());
    let _ = (q.propagation_policy(), q.orphan_dependents());
});
