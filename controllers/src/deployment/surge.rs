//! Rolling-update arithmetic: `maxSurge`/`maxUnavailable` as absolute numbers or percentages of
//! `spec.replicas` (upstream `intstr.GetScaledValueFromIntOrPercent` and `ResolveFenceposts`).
//!
//! Worked example (DEP-15, DEP-16, DEP-17): 3 replicas with the default 25%/25%: surge is
//! ceil(0.75) = 1 and unavailable is floor(0.75) = 0, so a rollout keeps between 3 available and
//! 4 total pods. With 4 replicas both are 1 (3..5 pods). With maxSurge 0 and maxUnavailable 25%
//! of 3 both resolve to 0, and unavailable is raised to 1, or the rollout could never move.
//!
//! Planner: pure, no I/O.

use berth_shared::k8s_openapi::api::apps::v1::Deployment;
use berth_shared::k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

#[cfg(test)]
use crate::workload::scaled::SurgeError;
pub use crate::workload::scaled::scaled_value;

/// (surge, unavailable) for `desired` replicas: surge rounds up, unavailable rounds down, and
/// when both come out 0 unavailable becomes 1. Malformed values count as 0, as upstream does.
pub fn resolve_fenceposts(
    max_surge: Option<&IntOrString>,
    max_unavailable: Option<&IntOrString>,
    desired: i32,
) -> (i32, i32) {
    let zero = IntOrString::Int(0);
    let surge = scaled_value(max_surge.unwrap_or(&zero), desired, true).unwrap_or(0);
    let mut unavailable =
        scaled_value(max_unavailable.unwrap_or(&zero), desired, false).unwrap_or(0);
    if surge == 0 && unavailable == 0 {
        unavailable = 1;
    }
    (surge, unavailable)
}

/// `spec.replicas`, defaulted as the API does.
pub fn desired(d: &Deployment) -> i32 {
    d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)
}

/// Whether the Deployment uses the Recreate strategy (anything else is a rolling update, the
/// default).
pub fn is_recreate(d: &Deployment) -> bool {
    d.spec
        .as_ref()
        .and_then(|s| s.strategy.as_ref())
        .and_then(|s| s.type_.as_deref())
        == Some("Recreate")
}

fn fenceposts(d: &Deployment) -> (i32, i32) {
    let ru = d
        .spec
        .as_ref()
        .and_then(|s| s.strategy.as_ref())
        .and_then(|s| s.rolling_update.as_ref());
    resolve_fenceposts(
        ru.and_then(|r| r.max_surge.as_ref()),
        ru.and_then(|r| r.max_unavailable.as_ref()),
        desired(d),
    )
}

/// Upstream `MaxSurge`: 0 for Recreate.
pub fn max_surge(d: &Deployment) -> i32 {
    if is_recreate(d) {
        return 0;
    }
    fenceposts(d).0
}

/// Upstream `MaxUnavailable`: 0 for Recreate or 0 replicas, never more than the replicas.
pub fn max_unavailable(d: &Deployment) -> i32 {
    let want = desired(d);
    if is_recreate(d) || want == 0 {
        return 0;
    }
    fenceposts(d).1.min(want)
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{deployment, recreate};
    use super::*;

    #[test]
    fn deployment_limits_cap_unavailable_and_vanish_for_recreate() {
        let cases = [
            ("25% of 3", deployment(3, "25%", "25%"), (1, 0)),
            ("25% of 4", deployment(4, "25%", "25%"), (1, 1)),
            ("absolute 3 and 2 of 10", deployment(10, "3", "2"), (3, 2)),
            (
                "unavailable above replicas is capped",
                deployment(2, "0", "5"),
                (0, 2),
            ),
            (
                "zero replicas: nothing may be unavailable",
                deployment(0, "1", "1"),
                (1, 0),
            ),
            (
                "recreate has neither",
                recreate(deployment(3, "25%", "25%")),
                (0, 0),
            ),
        ];
        for (name, d, want) in cases {
            assert_eq!((max_surge(&d), max_unavailable(&d)), want, "{name}");
        }
    }

    fn s(v: &str) -> IntOrString {
        IntOrString::String(v.into())
    }

    #[test]
    fn percentages_scale_and_round_in_the_asked_direction() {
        let cases = [
            (s("25%"), 3, true, 1),
            (s("25%"), 3, false, 0),
            (s("25%"), 4, true, 1),
            (s("25%"), 4, false, 1),
            (s("30%"), 10, true, 3),
            (s("30%"), 10, false, 3),
            (s("30%"), 11, true, 4),
            (s("30%"), 11, false, 3),
            (s("100%"), 7, false, 7),
            (s("0%"), 7, true, 0),
            (IntOrString::Int(3), 10, true, 3),
            (IntOrString::Int(2), 10, false, 2),
        ];
        for (v, total, up, want) in cases {
            assert_eq!(
                scaled_value(&v, total, up),
                Ok(want),
                "{v:?} of {total} up={up}"
            );
        }
    }

    #[test]
    fn strings_without_a_percent_sign_are_errors() {
        assert_eq!(scaled_value(&s("3"), 10, true), Err(SurgeError::NotPercent));
        assert!(matches!(
            scaled_value(&s("x%"), 10, true),
            Err(SurgeError::BadNumber(_))
        ));
    }

    #[test]
    fn twenty_five_percent_of_three_is_surge_one_unavailable_zero() {
        assert_eq!(
            resolve_fenceposts(Some(&s("25%")), Some(&s("25%")), 3),
            (1, 0)
        );
    }

    #[test]
    fn fenceposts_round_and_both_zero_allows_one_unavailable() {
        let cases = [
            (Some(s("10%")), Some(s("10%")), 1, (1, 0)),
            (Some(s("0%")), Some(s("10%")), 1, (0, 1)),
            (Some(s("0%")), Some(s("25%")), 3, (0, 1)),
            (None, None, 5, (0, 1)),
            (Some(IntOrString::Int(0)), Some(s("25%")), 4, (0, 1)),
            (Some(s("30%")), Some(s("30%")), 10, (3, 3)),
            (
                Some(IntOrString::Int(3)),
                Some(IntOrString::Int(2)),
                10,
                (3, 2),
            ),
        ];
        for (surge, unavailable, desired, want) in cases {
            assert_eq!(
                resolve_fenceposts(surge.as_ref(), unavailable.as_ref(), desired),
                want,
                "{surge:?}/{unavailable:?} of {desired}"
            );
        }
    }
}
