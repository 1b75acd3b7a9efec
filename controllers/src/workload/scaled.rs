//! An int-or-percent of a total (upstream's `intstr.GetScaledValueFromIntOrPercent`), as the
//! rolling updates of Deployments, DaemonSets and StatefulSets resolve `maxSurge`,
//! `maxUnavailable` and `partition`-like fields. Pure.
//!
//! Worked example: "25%" of 3 is 0.75: 1 rounded up, 0 rounded down.

use berth_shared::k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

/// A malformed int-or-percent (validation rejects these before they reach the controller).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SurgeError {
    #[error("invalid type: string is not a percentage")]
    NotPercent,
    #[error("invalid value {0:?}")]
    BadNumber(String),
}

/// `value` of `total`: an integer as is; a percentage scaled and rounded up or down.
pub fn scaled_value(value: &IntOrString, total: i32, round_up: bool) -> Result<i32, SurgeError> {
    match value {
        IntOrString::Int(i) => Ok(*i),
        IntOrString::String(s) => {
            let digits = s.strip_suffix('%').ok_or(SurgeError::NotPercent)?;
            let pct: i64 = digits
                .parse()
                .map_err(|_| SurgeError::BadNumber(s.clone()))?;
            let product = pct * i64::from(total);
            let mut v = product.div_euclid(100);
            if round_up && product.rem_euclid(100) != 0 {
                v += 1;
            }
            Ok(i32::try_from(v).unwrap_or(if v < 0 { i32::MIN } else { i32::MAX }))
        }
    }
}
