//! Table tests of structural schemas: what a CRD's schema may say, and how custom resources
//! are pruned, defaulted and validated against it, with upstream's messages.

use serde_json::{Value, json};

use super::node::Node;
use super::{ListType, Structural};
use crate::admission::{FieldError, FieldErrorType};

const ROOT: &str = "spec.versions[0].schema.openAPIV3Schema";

fn messages(errs: &[FieldError]) -> Vec<String> {
    errs.iter().map(FieldError::message).collect()
}

/// A schema whose `spec` has the given properties, checked as a CRD would be.
fn crd(spec_props: Value) -> Structural {
    let schema = json!({"type": "object", "properties": {
        "spec": {"type": "object", "properties": spec_props}}});
    match Structural::from_schema(&schema, ROOT) {
        Ok(s) => s,
        Err(e) => panic!("schema refused: {:?}", messages(&e)),
    }
}

/// A schema with `spec.f` as given, read without the CRD's rules (some validations, such as
/// uniqueItems, only a schema the CRD rules refuse can have).
fn field(f: Value) -> Structural {
    let schema = json!({"type": "object", "properties": {
        "spec": {"type": "object", "properties": {"f": f}}}});
    Structural {
        root: Node::parse(&schema),
    }
}

fn schema_errors(schema: Value) -> Vec<String> {
    match Structural::from_schema(&schema, ROOT) {
        Ok(_) => Vec::new(),
        Err(e) => messages(&e),
    }
}

#[test]
fn values_are_validated_with_upstreams_messages() {
    // (schema of spec.f, value of spec.f, messages)
    let cases: Vec<(Value, Value, Vec<&str>)> = vec![
        (json!({"type": "integer"}), json!(3), vec![]),
        (json!({"type": "integer"}), json!(2.0), vec![]),
        (
            json!({"type": "integer"}),
            json!("3"),
            vec![
                r#"spec.f: Invalid value: "string": spec.f in body must be of type integer: "string""#,
            ],
        ),
        (
            json!({"type": "integer"}),
            json!(1.5),
            vec![
                r#"spec.f: Invalid value: "number": spec.f in body must be of type integer: "number""#,
                r#"<nil>: Invalid value: "": Checked value must be of type integer (default format) in spec.f"#,
            ],
        ),
        (json!({"type": "number"}), json!(3), vec![]),
        (
            json!({"type": "string"}),
            json!(5),
            vec![
                r#"spec.f: Invalid value: "integer": spec.f in body must be of type string: "integer""#,
            ],
        ),
        (
            json!({"type": "boolean"}),
            json!("true"),
            vec![
                r#"spec.f: Invalid value: "string": spec.f in body must be of type boolean: "string""#,
            ],
        ),
        (
            json!({"type": "object"}),
            json!([]),
            vec![
                r#"spec.f: Invalid value: "array": spec.f in body must be of type object: "array""#,
            ],
        ),
        (
            json!({"type": "string"}),
            json!(null),
            vec![r#"spec.f: Invalid value: "null": spec.f in body must be of type string: "null""#],
        ),
        (
            json!({"type": "string", "nullable": true}),
            json!(null),
            vec![],
        ),
        (
            json!({"x-kubernetes-int-or-string": true}),
            json!(5),
            vec![],
        ),
        (
            json!({"x-kubernetes-int-or-string": true}),
            json!("50%"),
            vec![],
        ),
        (
            json!({"x-kubernetes-int-or-string": true}),
            json!(true),
            vec![
                r#"spec.f: Invalid value: "boolean": spec.f in body must be of type integer,string: "boolean""#,
            ],
        ),
        (
            json!({"type": "string", "enum": ["a", "b"]}),
            json!("a"),
            vec![],
        ),
        (
            json!({"type": "string", "enum": ["a", "b"]}),
            json!("x"),
            vec![r#"spec.f: Unsupported value: "x": supported values: "a", "b""#],
        ),
        (
            json!({"type": "integer", "enum": [1, 2]}),
            json!(3),
            vec![r#"spec.f: Unsupported value: 3: supported values: "1", "2""#],
        ),
        (
            json!({"type": "string", "nullable": true, "enum": ["a"]}),
            json!(null),
            vec![r#"spec.f: Unsupported value: null: supported values: "a""#],
        ),
        (
            json!({"type": "string", "pattern": "^[a-z]+$"}),
            json!("abc"),
            vec![],
        ),
        (
            json!({"type": "string", "pattern": "^[a-z]+$"}),
            json!("A1"),
            vec![r#"spec.f: Invalid value: "A1": spec.f in body should match '^[a-z]+$'"#],
        ),
        (
            json!({"type": "string", "format": "uuid"}),
            json!("123e4567-e89b-12d3-a456-426614174000"),
            vec![],
        ),
        (
            json!({"type": "string", "format": "uuid"}),
            json!("x"),
            vec![r#"spec.f: Invalid value: "x": spec.f in body must be of type uuid: "x""#],
        ),
        (
            json!({"type": "string", "format": "date-time"}),
            json!("yesterday"),
            vec![
                r#"spec.f: Invalid value: "yesterday": spec.f in body must be of type date-time: "yesterday""#,
            ],
        ),
        (
            json!({"type": "string", "format": "uuid"}),
            json!(5),
            vec![r#"spec.f: Invalid value: "int64": spec.f in body must be of type uuid: "int64""#],
        ),
        // int32 is not a format validation checks (upstream strips it).
        (
            json!({"type": "integer", "format": "int32"}),
            json!(1_099_511_627_776_i64),
            vec![],
        ),
        (json!({"type": "integer", "minimum": 1}), json!(1), vec![]),
        (
            json!({"type": "integer", "minimum": 1}),
            json!(0),
            vec!["spec.f: Invalid value: 0: spec.f in body should be greater than or equal to 1"],
        ),
        (
            json!({"type": "integer", "minimum": 1, "exclusiveMinimum": true}),
            json!(1),
            vec!["spec.f: Invalid value: 1: spec.f in body should be greater than 1"],
        ),
        (
            json!({"type": "integer", "maximum": 10}),
            json!(11),
            vec!["spec.f: Invalid value: 11: spec.f in body should be less than or equal to 10"],
        ),
        (
            json!({"type": "integer", "maximum": 10, "exclusiveMaximum": true}),
            json!(10),
            vec!["spec.f: Invalid value: 10: spec.f in body should be less than 10"],
        ),
        (
            json!({"type": "number", "maximum": 1.5}),
            json!(2.5),
            vec!["spec.f: Invalid value: 2.5: spec.f in body should be less than or equal to 1.5"],
        ),
        (
            json!({"type": "integer", "multipleOf": 5}),
            json!(10),
            vec![],
        ),
        (
            json!({"type": "integer", "multipleOf": 5}),
            json!(7),
            vec!["spec.f: Invalid value: 7: spec.f in body should be a multiple of 5"],
        ),
        (
            json!({"type": "number", "multipleOf": 0.5}),
            json!(1.5),
            vec![],
        ),
        (
            json!({"type": "number", "multipleOf": 0.5}),
            json!(0.75),
            vec!["spec.f: Invalid value: 0.75: spec.f in body should be a multiple of 0.5"],
        ),
        (
            json!({"type": "string", "minLength": 2}),
            json!("ab"),
            vec![],
        ),
        (
            json!({"type": "string", "minLength": 3}),
            json!("ab"),
            vec![r#"spec.f: Invalid value: "ab": spec.f in body should be at least 3 chars long"#],
        ),
        (
            json!({"type": "string", "maxLength": 3}),
            json!("äöü"),
            vec![],
        ),
        (
            json!({"type": "string", "maxLength": 3}),
            json!("abcd"),
            vec!["spec.f: Too long: may not be more than 3 bytes"],
        ),
        (
            json!({"type": "array", "items": {"type": "integer"}, "minItems": 2}),
            json!([1]),
            vec!["spec.f: Invalid value: 1: spec.f in body should have at least 2 items"],
        ),
        (
            json!({"type": "array", "items": {"type": "integer"}, "maxItems": 1}),
            json!([1, 2]),
            vec!["spec.f: Too many: 2: must have at most 1 item"],
        ),
        (
            json!({"type": "array", "items": {"type": "integer"}}),
            json!([1, "2"]),
            vec![
                r#"spec.f[1]: Invalid value: "string": spec.f[1] in body must be of type integer: "string""#,
            ],
        ),
        (
            json!({"type": "array", "items": {"type": "integer"}, "uniqueItems": true}),
            json!([1, 2, 1]),
            vec![r#"spec.f: Invalid value: "": spec.f in body shouldn't contain duplicates"#],
        ),
        (
            json!({"type": "object", "additionalProperties": {"type": "string"}, "minProperties": 2}),
            json!({"a": "x"}),
            vec!["spec.f: Invalid value: 1: spec.f in body should have at least 2 properties"],
        ),
        (
            json!({"type": "object", "additionalProperties": {"type": "string"}, "maxProperties": 1}),
            json!({"a": "x", "b": "y"}),
            vec!["spec.f: Too many: 2: must have at most 1 item"],
        ),
        (
            json!({"type": "object", "additionalProperties": {"type": "integer"}}),
            json!({"a": "x"}),
            vec![
                r#"spec.f.a: Invalid value: "string": spec.f.a in body must be of type integer: "string""#,
            ],
        ),
        (
            json!({"type": "object", "required": ["a"], "properties": {"a": {"type": "string"}}}),
            json!({}),
            vec!["spec.f.a: Required value"],
        ),
        (
            json!({"type": "integer", "allOf": [{"minimum": 5}]}),
            json!(3),
            vec![
                "spec.f: Invalid value: 3: spec.f in body should be greater than or equal to 5",
                r#"<nil>: Invalid value: "": "spec.f" must validate all the schemas (allOf). None validated"#,
            ],
        ),
        (
            json!({"type": "integer", "anyOf": [{"maximum": 1}, {"minimum": 10}]}),
            json!(10),
            vec![],
        ),
        (
            json!({"type": "integer", "anyOf": [{"maximum": 1}, {"minimum": 10}]}),
            json!(5),
            vec![
                r#"<nil>: Invalid value: "": "spec.f" must validate at least one schema (anyOf)"#,
                "spec.f: Invalid value: 5: spec.f in body should be less than or equal to 1",
            ],
        ),
        (
            json!({"type": "integer", "oneOf": [{"minimum": 10}, {"maximum": 1}]}),
            json!(0),
            vec![],
        ),
        (
            json!({"type": "integer", "oneOf": [{"minimum": 0}, {"maximum": 10}]}),
            json!(5),
            vec![
                r#"<nil>: Invalid value: "": "spec.f" must validate one and only one schema (oneOf). Found 2 valid alternatives"#,
            ],
        ),
        (
            json!({"type": "integer", "oneOf": [{"minimum": 10}, {"maximum": 1}]}),
            json!(5),
            vec![
                r#"<nil>: Invalid value: "": "spec.f" must validate one and only one schema (oneOf). Found none valid"#,
                "spec.f: Invalid value: 5: spec.f in body should be greater than or equal to 10",
            ],
        ),
        (
            json!({"type": "string", "not": {"enum": ["x"]}}),
            json!("y"),
            vec![],
        ),
        (
            json!({"type": "string", "not": {"enum": ["x"]}}),
            json!("x"),
            vec![r#"<nil>: Invalid value: "": "spec.f" must not validate the schema (not)"#],
        ),
        // Upstream's own int-or-string case (validation_test.go): the anyOf's first branch is
        // the one reported.
        (
            json!({"x-kubernetes-int-or-string": true,
                   "anyOf": [{"type": "integer"}, {"type": "string"}]}),
            json!(true),
            vec![
                r#"spec.f: Invalid value: "boolean": spec.f in body must be of type integer,string: "boolean""#,
                r#"<nil>: Invalid value: "": "spec.f" must validate at least one schema (anyOf)"#,
                r#"spec.f: Invalid value: "boolean": spec.f in body must be of type integer: "boolean""#,
            ],
        ),
    ];
    for (schema, value, want) in cases {
        let s = field(schema.clone());
        let got = messages(&s.validate(&json!({"spec": {"f": value}})));
        assert_eq!(got, want, "schema {schema}, value {value}");
    }
}

#[test]
fn required_fields_are_reported_at_their_paths() {
    let s = Structural::from_schema(
        &json!({"type": "object", "required": ["spec"], "properties": {
            "spec": {"type": "object", "required": ["a", "b"], "properties": {
                "a": {"type": "string"}, "b": {"type": "string"}}}}}),
        ROOT,
    )
    .unwrap_or_else(|e| panic!("{:?}", messages(&e)));
    assert_eq!(messages(&s.validate(&json!({}))), ["spec: Required value"]);
    assert_eq!(
        messages(&s.validate(&json!({"spec": {"b": "x"}}))),
        ["spec.a: Required value"]
    );
    assert!(
        s.validate(&json!({"spec": {"a": "x", "b": "y"}}))
            .is_empty()
    );
}

#[test]
fn status_alone_is_validated_under_status() {
    let s = Structural::from_schema(
        &json!({"type": "object", "properties": {
            "status": {"type": "object", "properties": {"ready": {"type": "integer", "minimum": 0}}}}}),
        ROOT,
    )
    .unwrap_or_else(|e| panic!("{:?}", messages(&e)));
    assert_eq!(
        messages(&s.validate_status(&json!({"ready": -1}), None)),
        ["status.ready: Invalid value: -1: ready in body should be greater than or equal to 0"]
    );
    assert!(s.validate_status(&json!({"ready": 1}), None).is_empty());
}

#[test]
fn unknown_fields_are_pruned_and_reported() {
    let s = crd(json!({
        "name": {"type": "string"},
        "nested": {"type": "object", "properties": {"a": {"type": "string"}}},
        "items": {"type": "array", "items": {"type": "object", "properties": {"k": {"type": "string"}}}},
        "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                 "properties": {"known": {"type": "object", "properties": {"x": {"type": "string"}}}}},
        "labels": {"type": "object", "additionalProperties": {
            "type": "object", "properties": {"v": {"type": "string"}}}},
    }));
    let cases: Vec<(Value, Value, Vec<&str>)> = vec![
        (
            json!({"apiVersion": "x.io/v1", "kind": "W", "metadata": {"name": "w"}, "spec": {"name": "a"}}),
            json!({"apiVersion": "x.io/v1", "kind": "W", "metadata": {"name": "w"}, "spec": {"name": "a"}}),
            vec![],
        ),
        (
            json!({"spec": {"name": "a", "bogus": 1, "nested": {"a": "x", "b": "y"}}, "extra": true}),
            json!({"spec": {"name": "a", "nested": {"a": "x"}}}),
            vec!["extra", "spec.bogus", "spec.nested.b"],
        ),
        (
            json!({"spec": {"items": [{"k": "1"}, {"k": "2", "z": 0}]}}),
            json!({"spec": {"items": [{"k": "1"}, {"k": "2"}]}}),
            vec!["spec.items[1].z"],
        ),
        (
            json!({"spec": {"free": {"anything": {"goes": 1}, "known": {"x": "1", "y": "2"}}}}),
            json!({"spec": {"free": {"anything": {"goes": 1}, "known": {"x": "1"}}}}),
            vec!["spec.free.known.y"],
        ),
        (
            json!({"spec": {"labels": {"a": {"v": "1", "w": "2"}}}}),
            json!({"spec": {"labels": {"a": {"v": "1"}}}}),
            vec!["spec.labels.a.w"],
        ),
        (
            json!({"metadata": {"name": "w", "bogus": 1,
                                "ownerReferences": [{"name": "o", "kind": "K", "extra": 1}]}}),
            json!({"metadata": {"name": "w", "ownerReferences": [{"name": "o", "kind": "K"}]}}),
            vec!["metadata.bogus", "metadata.ownerReferences[0].extra"],
        ),
        // A null where the schema allows none (and has no default) goes, silently.
        (json!({"spec": {"name": null}}), json!({"spec": {}}), vec![]),
    ];
    for (mut obj, want, paths) in cases {
        let before = obj.clone();
        let got = s.prune(&mut obj);
        assert_eq!(got, paths, "pruning {before}");
        assert_eq!(obj, want, "pruning {before}");
    }
}

#[test]
fn embedded_resources_keep_their_type_and_metadata() {
    let s = crd(json!({
        "template": {"type": "object", "x-kubernetes-embedded-resource": true,
                     "properties": {"spec": {"type": "object", "properties": {"a": {"type": "string"}}}}},
    }));
    let mut obj = json!({"spec": {"template": {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "junk": 1},
        "spec": {"a": "x", "b": "y"}, "status": {}}}});
    let paths = s.prune(&mut obj);
    assert_eq!(
        paths,
        [
            "spec.template.spec.b",
            "spec.template.status",
            "spec.template.metadata.junk"
        ]
    );
    assert_eq!(
        obj,
        json!({"spec": {"template": {"apiVersion": "v1", "kind": "Pod",
                                     "metadata": {"name": "p"}, "spec": {"a": "x"}}}})
    );
}

#[test]
fn embedded_resources_are_validated() {
    let s = crd(json!({
        "template": {"type": "object", "x-kubernetes-embedded-resource": true,
                     "x-kubernetes-preserve-unknown-fields": true},
    }));
    let cases: Vec<(Value, Vec<&str>)> = vec![
        (
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}}),
            vec![],
        ),
        (
            json!({}),
            vec![
                "spec.template.apiVersion: Required value",
                "spec.template.kind: Required value",
            ],
        ),
        (
            json!({"apiVersion": "a/b/c", "kind": "K"}),
            vec![
                r#"spec.template.apiVersion: Invalid value: "a/b/c": unexpected GroupVersion string: a/b/c"#,
            ],
        ),
        (
            json!({"apiVersion": "v1", "kind": ""}),
            vec![r#"spec.template.kind: Invalid value: "": must not be empty"#],
        ),
        (
            json!({"apiVersion": 1, "kind": "K"}),
            vec!["spec.template.apiVersion: Invalid value: 1: must be a string"],
        ),
        (
            json!({"apiVersion": "v1", "kind": "my_kind"}),
            vec![
                r#"spec.template.kind: Invalid value: "my_kind": may have mixed case, but should otherwise match: a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"#,
            ],
        ),
        (
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a/b"}}),
            vec![r#"spec.template.metadata.name: Invalid value: "a/b": may not contain '/'"#],
        ),
    ];
    for (template, want) in cases {
        let obj = json!({"spec": {"template": template}});
        assert_eq!(messages(&s.validate(&obj)), want, "{obj}");
    }
    let obj = json!({"spec": {"template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}}});
    let metas = s.embedded_metadata(&obj);
    assert_eq!(metas.len(), 1);
    assert_eq!(metas[0].0, "spec.template.metadata");
    assert_eq!(metas[0].1, &json!({"name": "p"}));
}

#[test]
fn defaults_fill_what_is_absent_or_null() {
    let s = crd(json!({
        "replicas": {"type": "integer", "default": 1},
        "mode": {"type": "string", "default": "auto"},
        "maybe": {"type": "string", "nullable": true, "default": "d"},
        "inner": {"type": "object", "properties": {"x": {"type": "string", "default": "x"}}},
        "withDefault": {"type": "object", "default": {}, "properties": {
            "y": {"type": "integer", "default": 2}}},
        "list": {"type": "array", "items": {"type": "string", "default": "item"}},
        "map": {"type": "object", "additionalProperties": {"type": "string", "default": "m"}},
    }));
    let cases: Vec<(Value, Value)> = vec![
        (
            json!({"spec": {}}),
            json!({"spec": {"replicas": 1, "mode": "auto", "maybe": "d", "withDefault": {"y": 2}}}),
        ),
        (
            json!({"spec": {"replicas": 3, "mode": null, "maybe": null}}),
            json!({"spec": {"replicas": 3, "mode": "auto", "maybe": null, "withDefault": {"y": 2}}}),
        ),
        (
            json!({"spec": {"inner": {}, "list": ["a", null], "map": {"k": null}}}),
            json!({"spec": {"inner": {"x": "x"}, "list": ["a", "item"], "map": {"k": "m"},
                            "replicas": 1, "mode": "auto", "maybe": "d", "withDefault": {"y": 2}}}),
        ),
        // No spec: nothing under it is created.
        (
            json!({"metadata": {"name": "w"}}),
            json!({"metadata": {"name": "w"}}),
        ),
    ];
    for (mut obj, want) in cases {
        let before = obj.clone();
        s.apply_defaults(&mut obj);
        assert_eq!(obj, want, "defaulting {before}");
    }
}

#[test]
fn list_types_promise_unique_items_and_keys() {
    let s = crd(json!({
        "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
        "ports": {"type": "array", "x-kubernetes-list-type": "map",
                  "x-kubernetes-list-map-keys": ["protocol", "port"],
                  "items": {"type": "object", "required": ["port", "protocol"], "properties": {
                      "port": {"type": "integer"}, "protocol": {"type": "string"}}}},
        "byName": {"type": "array", "x-kubernetes-list-type": "map",
                   "x-kubernetes-list-map-keys": ["name"],
                   "items": {"type": "object", "required": ["name"], "properties": {
                       "name": {"type": "string"}}}},
        "plain": {"type": "array", "items": {"type": "string"}},
    }));
    assert!(
        s.validate(&json!({"spec": {"tags": ["a", "b"], "plain": ["a", "a"]}}))
            .is_empty()
    );
    assert_eq!(
        messages(&s.validate(&json!({"spec": {"tags": ["a", "b", "a", "a"]}}))),
        [r#"spec.tags[2]: Duplicate value: "a""#]
    );
    assert_eq!(
        messages(&s.validate(&json!({"spec": {"ports": [
            {"port": 80, "protocol": "TCP"}, {"port": 80, "protocol": "UDP"},
            {"protocol": "TCP", "port": 80}]}}))),
        [r#"spec.ports[2]: Duplicate value: {"port":80,"protocol":"TCP"}"#]
    );
    // A key of strings only: the value is the key map (its rendering is field.rs's).
    let errs = s.validate(&json!({"spec": {"byName": [{"name": "a"}, {"name": "a"}]}}));
    assert_eq!(errs.len(), 1);
    assert_eq!(errs[0].error_type, FieldErrorType::Duplicate);
    assert_eq!(errs[0].field, "spec.byName[1]");
    assert_eq!(errs[0].bad_value, Some(json!({"name": "a"})));
    assert_eq!(
        messages(&s.validate(&json!({"spec": {"byName": [1]}}))),
        [
            r#"spec.byName[0]: Invalid value: "integer": spec.byName[0] in body must be of type object: "integer""#,
            "spec.byName[0]: Invalid value: 1: must be an object for an array of list-type map",
        ]
    );
}

#[test]
fn list_types_are_found_by_field_path() {
    let s = crd(json!({
        "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
        "ports": {"type": "array", "x-kubernetes-list-type": "map",
                  "x-kubernetes-list-map-keys": ["name"],
                  "items": {"type": "object", "required": ["name"], "properties": {
                      "name": {"type": "string"},
                      "hosts": {"type": "array", "items": {"type": "string"}}}}},
        "byKey": {"type": "object", "additionalProperties": {
            "type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}}},
        "name": {"type": "string"},
    }));
    let cases: Vec<(Vec<&str>, Option<ListType>)> = vec![
        (vec!["spec", "tags"], Some(ListType::Set)),
        (
            vec!["spec", "ports"],
            Some(ListType::Map(vec!["name".into()])),
        ),
        (vec!["spec", "ports", "hosts"], Some(ListType::Atomic)),
        (vec!["spec", "byKey", "anything"], Some(ListType::Set)),
        (vec!["spec", "name"], None),
        (vec!["spec", "missing"], None),
    ];
    for (path, want) in cases {
        assert_eq!(s.list_type_at(&path), want, "{path:?}");
    }
}

#[test]
fn schemas_that_are_not_structural_are_refused_with_upstreams_messages() {
    let cases: Vec<(Value, Vec<String>)> = vec![
        (
            json!({"type": "object", "properties": {"spec": {"properties": {}}}}),
            vec![format!(
                "{ROOT}.properties[spec].type: Required value: must not be empty for specified object fields"
            )],
        ),
        (
            json!({"type": "object", "properties": {"list": {"type": "array"}}}),
            vec![format!(
                "{ROOT}.properties[list].items: Required value: must be specified"
            )],
        ),
        (
            json!({"type": "object", "properties": {"list": {"type": "array", "items": {}}}}),
            vec![format!(
                "{ROOT}.properties[list].items.type: Required value: must not be empty for specified array items"
            )],
        ),
        (
            json!({"properties": {}}),
            vec![format!(
                "{ROOT}.type: Required value: must not be empty at the root"
            )],
        ),
        (
            json!({"type": "string"}),
            vec![format!(
                r#"{ROOT}.type: Invalid value: "string": must be object at the root"#
            )],
        ),
        (
            json!({"type": "object", "additionalProperties": {"type": "string"}}),
            vec![format!(
                "{ROOT}.additionalProperties: Forbidden: must not be used at the root"
            )],
        ),
        (
            json!({"type": "object", "properties": {"metadata": {"type": "object", "properties": {
                "name": {"type": "string", "maxLength": 10}}}}}),
            vec![],
        ),
        (
            json!({"type": "object", "properties": {"metadata": {"type": "object", "properties": {
                "labels": {"type": "object"}}}}}),
            vec![format!(
                "{ROOT}.properties[metadata]: Forbidden: must not specify anything other than name and generateName, but metadata is implicitly specified"
            )],
        ),
        (
            json!({"type": "object", "properties": {"kind": {"type": "integer"}}}),
            vec![format!(
                r#"{ROOT}.properties[kind].type: Invalid value: "integer": must be string"#
            )],
        ),
        (
            json!({"type": "object", "properties": {"f": {"type": "string",
                "anyOf": [{"type": "string", "description": "d"}]}}}),
            vec![
                format!(
                    "{ROOT}.properties[f].anyOf[0].description: Forbidden: must be empty to be structural"
                ),
                format!(
                    "{ROOT}.properties[f].anyOf[0].type: Forbidden: must be empty to be structural"
                ),
            ],
        ),
        (
            json!({"type": "object", "properties": {"f": {"x-kubernetes-int-or-string": true,
                "anyOf": [{"type": "integer"}, {"type": "string"}]}}}),
            vec![],
        ),
        (
            json!({"type": "object", "anyOf": [{"properties": {"foo": {"minimum": 1}}}]}),
            vec![format!(
                "{ROOT}.properties[foo]: Required value: because it is defined in {ROOT}.anyOf[0].properties[foo]"
            )],
        ),
        (
            json!({"type": "object", "properties": {"t": {"type": "string",
                "x-kubernetes-embedded-resource": true}}}),
            vec![
                format!(
                    "{ROOT}.properties[t].properties: Required value: must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields"
                ),
                format!(
                    r#"{ROOT}.properties[t].type: Invalid value: "string": must be object if x-kubernetes-embedded-resource is true"#
                ),
            ],
        ),
        (
            json!({"type": "object", "properties": {"f": {"x-kubernetes-int-or-string": true,
                "x-kubernetes-preserve-unknown-fields": true}}}),
            vec![format!(
                "{ROOT}.properties[f].x-kubernetes-preserve-unknown-fields: Invalid value: true: must be false if x-kubernetes-int-or-string is true"
            )],
        ),
    ];
    for (schema, want) in cases {
        assert_eq!(schema_errors(schema.clone()), want, "{schema}");
    }
}

#[test]
fn a_pattern_that_does_not_compile_is_refused() {
    let errs = schema_errors(json!({"type": "object", "properties": {
        "f": {"type": "string", "pattern": "[a-"}}}));
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(
        errs[0].starts_with(&format!(
            r#"{ROOT}.properties[f].pattern: Invalid value: "[a-": must be a valid regular expression, but isn't: "#
        )),
        "{}",
        errs[0]
    );
}

#[test]
fn the_crd_rules_for_schemas_are_enforced() {
    let obj = |props: Value| json!({"type": "object", "properties": props});
    let cases: Vec<(Value, Vec<String>)> = vec![
        (
            json!({"type": "object", "nullable": true}),
            vec![format!(
                "{ROOT}.nullable: Forbidden: nullable cannot be true at the root"
            )],
        ),
        (
            obj(json!({"l": {"type": "array", "uniqueItems": true, "items": {"type": "string"}}})),
            vec![format!(
                "{ROOT}.properties[l].uniqueItems: Forbidden: uniqueItems cannot be set to true since the runtime complexity becomes quadratic"
            )],
        ),
        (
            obj(
                json!({"o": {"type": "object", "properties": {"a": {"type": "string"}},
                             "additionalProperties": {"type": "string"}}}),
            ),
            vec![format!(
                "{ROOT}.properties[o].additionalProperties: Forbidden: additionalProperties and properties are mutual exclusive"
            )],
        ),
        (
            obj(json!({"r": {"type": "object", "$ref": "#/definitions/x"}})),
            vec![format!(
                "{ROOT}.properties[r].$ref: Forbidden: $ref is not supported"
            )],
        ),
        (
            obj(json!({"p": {"type": "object", "x-kubernetes-preserve-unknown-fields": false}})),
            vec![format!(
                "{ROOT}.properties[p].x-kubernetes-preserve-unknown-fields: Invalid value: false: must be true or undefined"
            )],
        ),
        (
            obj(json!({"metadata": {"type": "object", "default": {"name": "x"}}})),
            vec![format!(
                "{ROOT}.properties[metadata].default: Forbidden: must not be set in top-level metadata"
            )],
        ),
        (
            obj(json!({"s": {"type": "string", "x-kubernetes-list-type": "set"}})),
            vec![format!(
                r#"{ROOT}.properties[s].type: Invalid value: "string": must be array if x-kubernetes-list-type is specified"#
            )],
        ),
        (
            obj(
                json!({"l": {"type": "array", "x-kubernetes-list-type": "bag", "items": {"type": "string"}}}),
            ),
            vec![format!(
                r#"{ROOT}.properties[l].x-kubernetes-list-type: Unsupported value: "bag": supported values: "atomic", "set", "map""#
            )],
        ),
        (
            obj(
                json!({"l": {"type": "array", "x-kubernetes-list-type": "map", "items": {"type": "object"}}}),
            ),
            vec![format!(
                "{ROOT}.properties[l].x-kubernetes-list-map-keys: Required value: must not be empty if x-kubernetes-list-type is map"
            )],
        ),
        (
            obj(
                json!({"l": {"type": "array", "x-kubernetes-list-type": "map",
                             "x-kubernetes-list-map-keys": ["name"],
                             "items": {"type": "object", "properties": {"name": {"type": "string"}}}}}),
            ),
            vec![format!(
                "{ROOT}.properties[l].items.properties[name].default: Required value: this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property"
            )],
        ),
        (
            obj(json!({"m": {"type": "object", "x-kubernetes-map-type": "loose"}})),
            vec![format!(
                r#"{ROOT}.properties[m].x-kubernetes-map-type: Unsupported value: "loose": supported values: "atomic", "granular""#
            )],
        ),
    ];
    for (schema, want) in cases {
        assert_eq!(schema_errors(schema.clone()), want, "{schema}");
    }
}

#[test]
fn defaults_must_validate_and_survive_pruning() {
    let cases: Vec<(Value, Vec<String>)> = vec![
        (
            json!({"replicas": {"type": "integer", "minimum": 0, "default": 1}}),
            vec![],
        ),
        (
            json!({"replicas": {"type": "integer", "minimum": 0, "default": -1}}),
            vec![format!(
                "{ROOT}.properties[spec].properties[replicas].default: Invalid value: -1:  in body should be greater than or equal to 0"
            )],
        ),
        (
            json!({"mode": {"type": "string", "enum": ["a", "b"], "default": "c"}}),
            vec![format!(
                r#"{ROOT}.properties[spec].properties[mode].default: Unsupported value: "c": supported values: "a", "b""#
            )],
        ),
        (
            json!({"o": {"type": "object", "properties": {"a": {"type": "string"}},
                         "default": {"a": "x", "b": 1}}}),
            vec![format!(
                r#"{ROOT}.properties[spec].properties[o].default: Invalid value: {{"a":"x","b":1}}: must not have unknown fields"#
            )],
        ),
        (
            json!({"o": {"type": "object", "properties": {"a": {"type": "string", "maxLength": 1}},
                         "default": {"a": "xy"}}}),
            vec![format!(
                "{ROOT}.properties[spec].properties[o].default.a: Too long: may not be more than 1 byte"
            )],
        ),
    ];
    for (props, want) in cases {
        let schema = json!({"type": "object", "properties": {
            "spec": {"type": "object", "properties": props}}});
        assert_eq!(schema_errors(schema.clone()), want, "{schema}");
    }
}

/// A 30-property spec of every common kind, as a benchmark CRD would have.
fn thirty_properties() -> (Value, Value) {
    let mut props = serde_json::Map::new();
    let mut spec = serde_json::Map::new();
    for i in 0..10 {
        props.insert(
            format!("name{i}"),
            json!({"type": "string", "maxLength": 63, "pattern": "^[a-z0-9-]+$"}),
        );
        spec.insert(format!("name{i}"), json!(format!("value-{i}")));
        props.insert(
            format!("count{i}"),
            json!({"type": "integer", "minimum": 0, "maximum": 1000, "default": 1}),
        );
        spec.insert(format!("count{i}"), json!(i));
        props.insert(
            format!("mode{i}"),
            json!({"type": "string", "enum": ["Auto", "Manual", "Off"]}),
        );
        spec.insert(format!("mode{i}"), json!("Manual"));
    }
    let schema = json!({"type": "object", "properties": {
        "spec": {"type": "object", "properties": props}}});
    (
        schema,
        json!({"apiVersion": "x.io/v1", "kind": "W",
                    "metadata": {"name": "w"}, "spec": spec}),
    )
}

/// (Its speed is a benchmark's to measure: `cargo bench -p berth-shared --bench cel_rules`.)
#[test]
fn a_thirty_property_resource_is_admitted_clean() {
    let (schema, cr) = thirty_properties();
    let s = Structural::from_schema(&schema, ROOT).unwrap_or_else(|e| panic!("{:?}", messages(&e)));
    let mut obj = cr.clone();
    assert!(s.prune(&mut obj).is_empty());
    s.apply_defaults(&mut obj);
    assert!(s.validate(&obj).is_empty());
}

#[test]
fn structural_schemas_can_be_shared_between_threads() {
    fn shared<T: Send + Sync>() {}
    shared::<Structural>();
}

#[test]
fn updates_ratchet_errors_on_unchanged_values() {
    let s = crd(json!({
        "a": {"type": "integer", "minimum": 1},
        "b": {"type": "string"},
        "either": {"type": "integer", "anyOf": [{"maximum": 1}, {"minimum": 10}]},
        "tags": {"type": "array", "x-kubernetes-list-type": "set",
                 "items": {"type": "string", "maxLength": 2}},
        "ports": {"type": "array", "x-kubernetes-list-type": "map",
                  "x-kubernetes-list-map-keys": ["name"],
                  "items": {"type": "object", "required": ["name"], "properties": {
                      "name": {"type": "string"}, "port": {"type": "integer", "maximum": 100}}}},
    }));
    // (old spec, new spec, messages)
    let cases: Vec<(Value, Value, Vec<&str>)> = vec![
        (json!({"a": 0, "b": "x"}), json!({"a": 0, "b": "y"}), vec![]),
        (
            json!({"a": 0}),
            json!({"a": -1}),
            vec!["spec.a: Invalid value: -1: spec.a in body should be greater than or equal to 1"],
        ),
        (
            json!({}),
            json!({"a": 0}),
            vec!["spec.a: Invalid value: 0: spec.a in body should be greater than or equal to 1"],
        ),
        (
            json!({"either": 5}),
            json!({"either": 5, "b": "new"}),
            vec![],
        ),
        (
            json!({"ports": [{"name": "a", "port": 200}]}),
            json!({"ports": [{"name": "b", "port": 1}, {"name": "a", "port": 200}]}),
            vec![],
        ),
        (
            json!({"ports": [{"name": "a", "port": 200}]}),
            json!({"ports": [{"name": "a", "port": 300}]}),
            vec![
                "spec.ports[0].port: Invalid value: 300: spec.ports[0].port in body should be less than or equal to 100",
            ],
        ),
        // Set items are not correlated: a changed set is validated whole.
        (
            json!({"tags": ["abc"]}),
            json!({"tags": ["abc", "x"]}),
            vec!["spec.tags[0]: Too long: may not be more than 2 bytes"],
        ),
        (
            json!({"tags": ["abc"]}),
            json!({"tags": ["abc"], "b": "x"}),
            vec![],
        ),
        // Duplicates are only refused when the old object had none.
        (
            json!({"tags": ["x", "x"]}),
            json!({"tags": ["x", "x", "y"]}),
            vec![],
        ),
        (
            json!({"tags": ["x"]}),
            json!({"tags": ["x", "x"]}),
            vec![r#"spec.tags[1]: Duplicate value: "x""#],
        ),
    ];
    for (old, new, want) in cases {
        let got = messages(&s.validate_update(&json!({"spec": new}), &json!({"spec": old})));
        assert_eq!(got, want, "{old} -> {new}");
    }
}

#[test]
fn status_updates_ratchet_too() {
    let s = Structural::from_schema(
        &json!({"type": "object", "properties": {
            "status": {"type": "object", "properties": {
                "ready": {"type": "integer", "minimum": 0},
                "phase": {"type": "string"}}}}}),
        ROOT,
    )
    .unwrap_or_else(|e| panic!("{:?}", messages(&e)));
    let old = json!({"ready": -1});
    assert!(
        s.validate_status(&json!({"ready": -1, "phase": "Up"}), Some(&old))
            .is_empty()
    );
    assert_eq!(
        messages(&s.validate_status(&json!({"ready": -2}), Some(&old))),
        ["status.ready: Invalid value: -2: ready in body should be greater than or equal to 0"]
    );
}

#[test]
fn a_null_default_is_no_default() {
    let s = crd(json!({"a": {"type": "string", "default": null}}));
    let mut obj = json!({"spec": {}});
    s.apply_defaults(&mut obj);
    assert_eq!(obj, json!({"spec": {}}));
    let mut obj = json!({"spec": {"a": null}});
    assert!(s.prune(&mut obj).is_empty());
    assert_eq!(obj, json!({"spec": {}}));
}

#[test]
fn type_enum_required_and_size_errors_hold_back_the_rules() {
    let s = crd(json!({
        "n": {"type": "integer", "maximum": 1},
        "c": {"type": "string", "enum": ["a"]},
        "u": {"type": "string", "format": "uuid"},
        "p": {"type": "string", "pattern": "^a$", "maxLength": 3},
        "o": {"type": "object", "required": ["x"], "properties": {"x": {"type": "string"}}},
    }));
    let cases: Vec<(Value, bool)> = vec![
        (json!({"n": 2}), false),
        (json!({"p": "b"}), false),
        (json!({"p": "bbbb"}), true),
        (json!({"o": {}}), true),
        (json!({"n": "x"}), true),
        (json!({"c": "b"}), true),
        (json!({"u": "nope"}), true),
        (json!({}), false),
    ];
    for (spec, blocked) in cases {
        let errs = s.validate(&json!({"spec": spec}));
        let got = super::rules_blocked_by(&errs);
        assert_eq!(got.is_some(), blocked, "{spec}");
        if let Some(e) = got {
            assert_eq!(
                e.message(),
                "<nil>: Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation"
            );
        }
    }
}
