//! The PodDisruptionBudget printer: the budget as written and the disruptions it allows now.

use jiff::Timestamp;
use serde_json::{Value, json};

use super::lookup::{at, int_at};
use super::{ColumnDefinition, age_col, col, created, name, name_col};

pub(crate) fn pdb_columns() -> Vec<ColumnDefinition> {
    vec![
        name_col(),
        col(
            "Min Available",
            "string",
            "The minimum number of pods that must be available.",
        ),
        col(
            "Max Unavailable",
            "string",
            "The maximum number of pods that may be unavailable.",
        ),
        col(
            "Allowed Disruptions",
            "integer",
            "Calculated number of pods that may be disrupted at this time.",
        ),
        age_col(),
    ]
}

/// An IntOrString as written (`2` or `50%`), `N/A` when unset.
fn int_or_string(obj: &Value, path: &[&str]) -> String {
    match at(obj, path) {
        Some(Value::Number(n)) => n.to_string(),
        Some(Value::String(s)) => s.clone(),
        _ => "N/A".to_string(),
    }
}

pub(crate) fn pdb_cells(pdb: &Value, now: Timestamp) -> Vec<Value> {
    vec![
        name(pdb),
        json!(int_or_string(pdb, &["spec", "minAvailable"])),
        json!(int_or_string(pdb, &["spec", "maxUnavailable"])),
        json!(int_at(pdb, &["status", "disruptionsAllowed"])),
        created(pdb, now),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::fixture;

    #[test]
    fn budgets_print_as_written_or_not_applicable() {
        let now = fixture::now();
        let pdb = |spec: Value| {
            json!({"metadata": {"name": "web", "creationTimestamp": "2024-05-01T11:00:00Z"},
                   "spec": spec, "status": {"disruptionsAllowed": 1}})
        };
        assert_eq!(
            pdb_cells(&pdb(json!({"minAvailable": 2})), now),
            vec![
                json!("web"),
                json!("2"),
                json!("N/A"),
                json!(1),
                json!("60m")
            ]
        );
        let c = pdb_cells(&pdb(json!({"maxUnavailable": "25%"})), now);
        assert_eq!((c[1].clone(), c[2].clone()), (json!("N/A"), json!("25%")));
        assert_eq!(pdb_columns().len(), c.len());
    }
}
