//! Fuzz target: a create body as the API decodes and admits it. The bytes are decoded as JSON
//! and as YAML (`berth_shared::body`); each document goes through admission for its kind (the
//! `kind` it names when Berth serves it, else one picked by the input's length): decode,
//! default, validate, the strict unknown-field check, and an update of the admitted object.
#![no_main]

use berth_shared::admission::{Operation, admit, unknown_fields};
use berth_shared::body::decode;
use berth_shared::resource::RESOURCES;
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let json = decode("application/json", data).ok();
    let yaml = decode("application/yaml", data).ok();
    if let Some(doc) = &json {
        create(doc, data.len());
    }
    if let Some(doc) = yaml.filter(|y| Some(y) != json.as_ref()) {
        create(&doc, data.len());
    }
});

fn create(doc: &Value, len: usize) {
    let kind = doc
        .get("kind")
        .and_then(Value::as_str)
        .and_then(|k| RESOURCES.iter().find(|rt| rt.kind == k))
        .unwrap_or(&RESOURCES[len % RESOURCES.len()])
        .kind;
    let _ = unknown_fields(kind, doc);
    let mut obj = doc.clone();
    if let Err(e) = admit(kind, Operation::Create, &mut obj, None) {
        // The API puts the message in the Status it answers with.
        let _ = e.to_string();
        return;
    }
    // Updating an object with itself and with the original body must not panic either; an
    // admitted object admitted again (defaults are idempotent) must still be valid.
    let mut again = obj.clone();
    if let Err(e) = admit(kind, Operation::Update, &mut again, Some(&obj)) {
        panic!("{kind}: an admitted object fails admission as its own update: {e}\n{obj}");
    }
    let mut changed = doc.clone();
    if let Err(e) = admit(kind, Operation::Update, &mut changed, Some(&obj)) {
        let _ = e.to_string();
    }
}
