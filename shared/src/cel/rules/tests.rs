//! Table tests of CRD validation rules: each case a schema, an object (and an old one), and
//! the messages upstream would give.

use serde_json::{Value, json};

use super::{check, compile_errors, validate, validate_within};

fn messages(errs: &[crate::admission::FieldError]) -> Vec<String> {
    errs.iter().map(|e| e.message()).collect()
}

/// A custom resource schema whose `spec` carries `rules` and the given properties.
fn spec_schema(rules: Value, props: Value) -> Value {
    json!({
        "type": "object",
        "properties": {
            "spec": {"type": "object", "properties": props, "x-kubernetes-validations": rules}
        }
    })
}

fn replicas_props() -> Value {
    json!({
        "min": {"type": "integer"},
        "max": {"type": "integer"},
        "name": {"type": "string"},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}}
    })
}

struct Case {
    name: &'static str,
    rules: Value,
    new: Value,
    old: Option<Value>,
    want: Vec<&'static str>,
}

fn run(cases: Vec<Case>) {
    for c in cases {
        let schema = spec_schema(c.rules, replicas_props());
        let new = json!({"spec": c.new});
        let old = c.old.map(|o| json!({"spec": o}));
        let got = messages(&check(&schema, &new, old.as_ref()));
        assert_eq!(got, c.want, "{}", c.name);
    }
}

#[test]
fn rules_see_self_and_report_at_the_node() {
    run(vec![
        Case {
            name: "a passing rule gives nothing",
            rules: json!([{"rule": "self.min <= self.max", "message": "min must not exceed max"}]),
            new: json!({"min": 1, "max": 3}),
            old: None,
            want: vec![],
        },
        Case {
            name: "a failing rule gives its message at the node, valued by the node's type",
            rules: json!([{"rule": "self.min <= self.max", "message": "min must not exceed max"}]),
            new: json!({"min": 5, "max": 3}),
            old: None,
            want: vec![r#"spec: Invalid value: "object": min must not exceed max"#],
        },
        Case {
            name: "without a message the rule itself is quoted",
            rules: json!([{"rule": "self.min <= self.max"}]),
            new: json!({"min": 5, "max": 3}),
            old: None,
            want: vec![r#"spec: Invalid value: "object": failed rule: self.min <= self.max"#],
        },
        Case {
            name: "a runtime error names the rule",
            rules: json!([{"rule": "self.min <= self.max"}]),
            new: json!({"min": 5}),
            old: None,
            want: vec![
                r#"spec: Invalid value: "object": no such key: max evaluating rule: self.min <= self.max"#,
            ],
        },
        Case {
            name: "a non-bool comparison is an overload error",
            rules: json!([{"rule": "self.name > 3"}]),
            new: json!({"name": "x"}),
            old: None,
            want: vec![
                r#"spec: Invalid value: "object": 'no such overload: found no matching overload for '_>_' applied to '(string, int)'': call arguments did not match a supported operator, function or macro signature for rule: self.name > 3"#,
            ],
        },
        Case {
            name: "every failing rule is reported, in order",
            rules: json!([
                {"rule": "self.min > 0", "message": "min must be positive"},
                {"rule": "self.max < 10", "message": "max must be below 10"}
            ]),
            new: json!({"min": 0, "max": 10}),
            old: None,
            want: vec![
                r#"spec: Invalid value: "object": min must be positive"#,
                r#"spec: Invalid value: "object": max must be below 10"#,
            ],
        },
    ]);
}

#[test]
fn transition_rules_need_an_old_value() {
    let immutable = json!([{"rule": "self.name == oldSelf.name", "message": "name is immutable"}]);
    run(vec![
        Case {
            name: "skipped on create",
            rules: immutable.clone(),
            new: json!({"name": "a"}),
            old: None,
            want: vec![],
        },
        Case {
            name: "applied on update",
            rules: immutable.clone(),
            new: json!({"name": "b"}),
            old: Some(json!({"name": "a"})),
            want: vec![r#"spec: Invalid value: "object": name is immutable"#],
        },
        Case {
            name: "an unchanged value passes",
            rules: immutable,
            new: json!({"name": "a"}),
            old: Some(json!({"name": "a"})),
            want: vec![],
        },
        Case {
            name: "optionalOldSelf runs on create with oldSelf absent",
            rules: json!([{
                "rule": "oldSelf.hasValue() ? self.max >= oldSelf.value().max : self.max > 0",
                "optionalOldSelf": true,
                "message": "max may only grow, from a positive start"
            }]),
            new: json!({"max": 0}),
            old: None,
            want: vec![
                r#"spec: Invalid value: "object": max may only grow, from a positive start"#,
            ],
        },
        Case {
            name: "optionalOldSelf sees the old value on update",
            rules: json!([{
                "rule": "oldSelf.hasValue() ? self.max >= oldSelf.value().max : self.max > 0",
                "optionalOldSelf": true,
                "message": "max may only grow"
            }]),
            new: json!({"max": 2}),
            old: Some(json!({"max": 3})),
            want: vec![r#"spec: Invalid value: "object": max may only grow"#],
        },
    ]);
}

#[test]
fn message_expression_field_path_and_reason_shape_the_error() {
    run(vec![
        Case {
            name: "messageExpression gives the message",
            rules: json!([{
                "rule": "self.min <= self.max",
                "message": "static",
                "messageExpression": "'min ' + string(self.min) + ' exceeds max ' + string(self.max)"
            }]),
            new: json!({"min": 5, "max": 3}),
            old: None,
            want: vec![r#"spec: Invalid value: "object": min 5 exceeds max 3"#],
        },
        Case {
            name: "a messageExpression that fails falls back to the message",
            rules: json!([{
                "rule": "self.min <= self.max",
                "message": "static",
                "messageExpression": "'missing ' + self.nothing"
            }]),
            new: json!({"min": 5, "max": 3}),
            old: None,
            want: vec![r#"spec: Invalid value: "object": static"#],
        },
        Case {
            name: "an empty messageExpression result falls back to the default",
            rules: json!([{"rule": "self.min <= self.max", "messageExpression": "'  '"}]),
            new: json!({"min": 5, "max": 3}),
            old: None,
            want: vec![r#"spec: Invalid value: "object": failed rule: self.min <= self.max"#],
        },
        Case {
            name: "fieldPath moves the error",
            rules: json!([{"rule": "self.min <= self.max", "message": "too small", "fieldPath": ".max"}]),
            new: json!({"min": 5, "max": 3}),
            old: None,
            want: vec![r#"spec.max: Invalid value: "object": too small"#],
        },
        Case {
            name: "fieldPath into a map is a key",
            rules: json!([{"rule": "!('x' in self.labels)", "message": "no x", "fieldPath": ".labels['x']"}]),
            new: json!({"labels": {"x": "1"}}),
            old: None,
            want: vec![r#"spec.labels[x]: Invalid value: "object": no x"#],
        },
        Case {
            name: "reason Forbidden",
            rules: json!([{"rule": "!has(self.name)", "message": "name is set by the system", "reason": "FieldValueForbidden"}]),
            new: json!({"name": "x"}),
            old: None,
            want: vec!["spec: Forbidden: name is set by the system"],
        },
        Case {
            name: "reason Required",
            rules: json!([{"rule": "has(self.name)", "message": "name is needed", "reason": "FieldValueRequired"}]),
            new: json!({}),
            old: None,
            want: vec!["spec: Required value: name is needed"],
        },
        Case {
            name: "reason Duplicate",
            rules: json!([{"rule": "self.min != self.max", "reason": "FieldValueDuplicate"}]),
            new: json!({"min": 1, "max": 1}),
            old: None,
            want: vec![r#"spec: Duplicate value: "object""#],
        },
    ]);
}

#[test]
fn rules_run_at_every_depth_with_upstream_paths() {
    let schema = json!({
        "type": "object",
        "x-kubernetes-validations": [{"rule": "self.metadata.name.startsWith('x-')", "message": "name must start with x-"}],
        "properties": {
            "spec": {"type": "object", "properties": {
                "labels": {"type": "object", "additionalProperties": {
                    "type": "string",
                    "x-kubernetes-validations": [{"rule": "self.size() < 4", "message": "too long"}]
                }},
                "ports": {"type": "array", "items": {
                    "type": "integer",
                    "x-kubernetes-validations": [{"rule": "self > 0", "message": "must be positive"}]
                }},
                "optional": {"type": "string", "nullable": true,
                    "x-kubernetes-validations": [{"rule": "self != ''"}]}
            }}
        }
    });
    let obj = json!({
        "metadata": {"name": "y"},
        "spec": {"labels": {"a": "ok", "b": "toolong"}, "ports": [1, 0, 2, -1], "optional": null}
    });
    assert_eq!(
        messages(&check(&schema, &obj, None)),
        vec![
            r#"<nil>: Invalid value: "object": name must start with x-"#,
            r#"spec.labels[b]: Invalid value: "string": too long"#,
            r#"spec.ports[1]: Invalid value: "integer": must be positive"#,
            r#"spec.ports[3]: Invalid value: "integer": must be positive"#,
        ]
    );
}

fn list_map_schema(list_type: &str) -> Value {
    json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "items": {
            "type": "array",
            "x-kubernetes-list-type": list_type,
            "x-kubernetes-list-map-keys": ["name"],
            "items": {
                "type": "object",
                "properties": {"name": {"type": "string"}, "size": {"type": "integer"}},
                "x-kubernetes-validations": [{"rule": "self.size >= oldSelf.size", "message": "size may not shrink"}]
            }
        }
    }}}})
}

#[test]
fn list_items_correlate_by_map_keys_only() {
    let old = json!({"spec": {"items": [{"name": "a", "size": 5}, {"name": "b", "size": 1}]}});
    // Reordered, `a` shrunk, `c` new (no old value: the transition rule is skipped).
    let new = json!({"spec": {"items": [
        {"name": "b", "size": 2}, {"name": "c", "size": 0}, {"name": "a", "size": 4}
    ]}});
    assert_eq!(
        messages(&check(&list_map_schema("map"), &new, Some(&old))),
        vec![r#"spec.items[2]: Invalid value: "object": size may not shrink"#]
    );
    // An atomic list's items have no old values: the transition rule never runs.
    assert!(check(&list_map_schema("atomic"), &new, Some(&old)).is_empty());
}

#[test]
fn unchanged_values_ratchet_to_warnings() {
    let schema = spec_schema(
        json!([{"rule": "self.min <= self.max", "message": "min must not exceed max"}]),
        replicas_props(),
    );
    let bad = json!({"spec": {"min": 5, "max": 3}});
    let outcome = validate(&schema, &bad, Some(&bad));
    assert!(outcome.errors.is_empty());
    assert_eq!(
        outcome.warnings,
        vec![r#"spec: Invalid value: "object": min must not exceed max"#]
    );
    // Changing the invalid value makes it an error again.
    let worse = json!({"spec": {"min": 6, "max": 3}});
    assert_eq!(validate(&schema, &worse, Some(&bad)).errors.len(), 1);
}

#[test]
fn cost_limits_end_validation_with_an_error_not_a_hang() {
    let list: Vec<i64> = (0..400).collect();
    let schema = spec_schema(
        json!([
            {"rule": "self.items.all(x, self.items.all(y, self.items.all(z, x + y + z >= 0)))"},
            {"rule": "false", "message": "never reached"}
        ]),
        json!({"items": {"type": "array", "items": {"type": "integer"}}}),
    );
    let obj = json!({"spec": {"items": list}});
    assert_eq!(
        messages(&check(&schema, &obj, None)),
        vec![
            r#"spec: Invalid value: "object": 'operation cancelled: actual cost limit exceeded': no further validation rules will be run due to call cost exceeds limit for rule: self.items.all(x, self.items.all(y, self.items.all(z, x + y + z >= 0)))"#
        ]
    );
    // A messageExpression over its limit stops the validation too, naming the expression.
    let schema = spec_schema(
        json!([
            {"rule": "false", "messageExpression": "string(self.items.map(x, self.items.map(y, self.items.map(z, 1))).size())"},
            {"rule": "false", "message": "never reached"}
        ]),
        json!({"items": {"type": "array", "items": {"type": "integer"}}}),
    );
    assert_eq!(
        messages(&check(&schema, &obj, None)),
        vec![
            r#"spec: Invalid value: "object": no further validation rules will be run due to call cost exceeds limit for messageExpression: "string(self.items.map(x, self.items.map(y, self.items.map(z, 1))).size())""#
        ]
    );
    // Cheap rules that together exceed the total budget stop with upstream's budget message.
    let schema = spec_schema(
        json!([
            {"rule": "self.items.all(x, x >= 0)"},
            {"rule": "self.items.all(x, x >= 0)"},
            {"rule": "self.items.all(x, x >= 0)"}
        ]),
        json!({"items": {"type": "array", "items": {"type": "integer"}}}),
    );
    let outcome = validate_within(&schema, &obj, None, 2000);
    assert_eq!(
        messages(&outcome.errors),
        vec![
            r#"spec: Invalid value: "object": validation failed due to running out of cost budget, no further validation rules will be run"#
        ]
    );
}

#[test]
fn crd_rules_that_do_not_compile_are_reported_at_their_path() {
    let schema = json!({"type": "object", "properties": {
        "spec": {"type": "object",
            "properties": {
                "min": {"type": "integer"},
                "tags": {"type": "array", "items": {"type": "string",
                    "x-kubernetes-validations": [{"rule": "self == oldSelf"}]}}
            },
            "x-kubernetes-validations": [
                {"rule": "self.min >"},
                {"rule": "self.min > 0", "messageExpression": "'a' +"},
                {"rule": "self.min > 0"}
            ]
        }
    }});
    let got = messages(&compile_errors(&schema, "spec.validation.openAPIV3Schema"));
    assert_eq!(got.len(), 3, "{got:#?}");
    assert!(
        got[0].starts_with(
            r#"spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule: Invalid value: apiextensions.ValidationRule{Rule:"self.min >", Message:"", MessageExpression:"", Reason:(*apiextensions.FieldValueErrorReason)(nil), FieldPath:"", OptionalOldSelf:(*bool)(nil)}: compilation failed: ERROR: <input>:1:"#
        ),
        "{}",
        got[0]
    );
    assert!(
        got[1].starts_with("spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[1].messageExpression: Invalid value: apiextensions.ValidationRule{")
            && got[1].contains("messageExpression compilation failed: ERROR: <input>:1:"),
        "{}",
        got[1]
    );
    assert_eq!(
        got[2],
        r#"spec.validation.openAPIV3Schema.properties[spec].properties[tags].items.x-kubernetes-validations[0].rule: Invalid value: "self == oldSelf": oldSelf cannot be used on the uncorrelatable portion of the schema within spec.validation.openAPIV3Schema.properties[spec].properties[tags].items"#
    );
}

#[test]
fn crd_rule_fields_are_checked_as_upstream() {
    let cases: Vec<(Value, &str)> = vec![
        (
            json!({"rule": " "}),
            "s.x-kubernetes-validations[0].rule: Required value: rule is not specified",
        ),
        (
            json!({"rule": "true", "reason": "Other"}),
            r#"s.x-kubernetes-validations[0].reason: Unsupported value: "Other": supported values: "FieldValueDuplicate", "FieldValueForbidden", "FieldValueInvalid", "FieldValueRequired""#,
        ),
        (
            json!({"rule": "true", "fieldPath": ".nope"}),
            r#"s.x-kubernetes-validations[0].fieldPath: Invalid value: ".nope": fieldPath must be a valid path: does not refer to a valid field"#,
        ),
        (
            json!({"rule": "true", "message": "a\nb"}),
            "s.x-kubernetes-validations[0].message: Invalid value: \"a\\nb\": message must not contain line breaks",
        ),
        (
            json!({"rule": "true &&\ntrue"}),
            "s.x-kubernetes-validations[0].message: Required value: message must be specified if rule contains line breaks",
        ),
        (
            json!({"rule": "true", "messageExpression": " "}),
            "s.x-kubernetes-validations[0].messageExpression: Required value: messageExpression must be non-empty if specified",
        ),
    ];
    for (rule, want) in cases {
        let schema = json!({"type": "object", "properties": {"a": {"type": "string"}},
            "x-kubernetes-validations": [rule]});
        assert_eq!(messages(&compile_errors(&schema, "s")), vec![want]);
    }
    let fine = json!({"type": "object", "properties": {"a": {"type": "string"}},
        "x-kubernetes-validations": [{"rule": "self.a != ''", "fieldPath": ".a", "reason": "FieldValueForbidden"}]});
    assert!(compile_errors(&fine, "s").is_empty());
}

#[test]
fn numbers_and_durations_follow_the_schema_type() {
    let schema = spec_schema(
        json!([{"rule": "self.ratio * 2.0 == 2.0 && self.count * 2 == 4", "message": "typed"}]),
        json!({"ratio": {"type": "number"}, "count": {"type": "integer"}}),
    );
    let timeouts = spec_schema(
        json!([{"rule": "!(has(self.request) && has(self.backend)) || self.backend <= self.request",
            "message": "backend timeout cannot be longer than request timeout"}]),
        json!({"request": {"type": "string", "format": "duration"},
            "backend": {"type": "string", "format": "duration"}}),
    );
    assert!(
        check(
            &timeouts,
            &json!({"spec": {"request": "1m", "backend": "30s"}}),
            None
        )
        .is_empty()
    );
    assert_eq!(
        messages(&check(
            &timeouts,
            &json!({"spec": {"request": "10s", "backend": "1m"}}),
            None
        )),
        vec![
            r#"spec: Invalid value: "object": backend timeout cannot be longer than request timeout"#
        ]
    );
    // `1` under `type: number` is a double, so double arithmetic applies to it.
    assert!(check(&schema, &json!({"spec": {"ratio": 1, "count": 2}}), None).is_empty());
    assert!(check(&schema, &json!({"spec": {"ratio": 1.0, "count": 2}}), None).is_empty());
    assert_eq!(
        messages(&check(
            &schema,
            &json!({"spec": {"ratio": 2, "count": 2}}),
            None
        )),
        vec![r#"spec: Invalid value: "object": typed"#]
    );
}
