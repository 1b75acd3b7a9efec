//! The PriorityClass printer: its value, whether it is the global default, and its
//! preemption policy (upstream `printPriorityClass`).

use jiff::Timestamp;
use serde_json::{Value, json};

use super::lookup::{int_at, opt_bool, str_at};
use super::{ColumnDefinition, age_col, col, created, name, name_col};

pub(crate) fn priority_class_columns() -> Vec<ColumnDefinition> {
    vec![
        name_col(),
        col(
            "Value",
            "integer",
            "value represents the integer value of this priority class. This is the actual priority that pods receive when they have the name of this class in their pod spec.",
        ),
        col(
            "Global-Default",
            "boolean",
            "globalDefault specifies whether this PriorityClass should be considered as the default priority for pods that do not have any priority class. Only one PriorityClass can be marked as `globalDefault`. However, if more than one PriorityClasses exists with their `globalDefault` field set to true, the smallest value of such global default PriorityClasses will be used as the default priority.",
        ),
        age_col(),
        col(
            "PreemptionPolicy",
            "string",
            "preemptionPolicy is the Policy for preempting pods with lower priority. One of Never, PreemptLowerPriority. Defaults to PreemptLowerPriority if unset.",
        ),
    ]
}

pub(crate) fn priority_class_cells(pc: &Value, now: Timestamp) -> Vec<Value> {
    vec![
        name(pc),
        json!(int_at(pc, &["value"])),
        json!(opt_bool(pc, &["globalDefault"]).unwrap_or(false)),
        created(pc, now),
        json!(str_at(pc, &["preemptionPolicy"])),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::fixture;

    #[test]
    fn a_class_prints_its_value_default_flag_and_policy() {
        let now = fixture::now();
        let pc = json!({"metadata": {"name": "high", "creationTimestamp": "2024-05-01T11:00:00Z"},
            "value": 1000, "preemptionPolicy": "Never"});
        assert_eq!(
            priority_class_cells(&pc, now),
            vec![
                json!("high"),
                json!(1000),
                json!(false),
                json!("60m"),
                json!("Never")
            ]
        );
        assert_eq!(priority_class_columns().len(), 5);
    }
}
