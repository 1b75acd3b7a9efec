//! Pod Security Standards levels and versions, and the namespace labels that choose them
//! (upstream's `k8s.io/pod-security-admission/api`).
//! Planner: pure, no I/O.

use super::super::field::{FieldError, Path};
use std::collections::BTreeMap;
use std::fmt;

pub const ENFORCE_LEVEL_LABEL: &str = "pod-security.kubernetes.io/enforce";
pub const ENFORCE_VERSION_LABEL: &str = "pod-security.kubernetes.io/enforce-version";
pub const AUDIT_LEVEL_LABEL: &str = "pod-security.kubernetes.io/audit";
pub const AUDIT_VERSION_LABEL: &str = "pod-security.kubernetes.io/audit-version";
pub const WARN_LEVEL_LABEL: &str = "pod-security.kubernetes.io/warn";
pub const WARN_VERSION_LABEL: &str = "pod-security.kubernetes.io/warn-version";

/// The newest version whose checks Berth knows: its API level (`/version` says 1.34). A
/// newer `v1.N` label, and `latest`, are evaluated with these checks, as upstream caps them at
/// its own (emulated) version.
pub const LATEST_MINOR: u32 = 34;

/// A Pod Security Standards level, ordered from the least to the most strict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Level {
    Privileged,
    Baseline,
    Restricted,
}

/// A level or version that is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ParseError(pub &'static str);

const LEVEL_VALUES: &str = "must be one of privileged, baseline, restricted";
const VERSION_VALUES: &str = "must be \"latest\" or \"v1.x\"";

impl Level {
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Privileged => "privileged",
            Level::Baseline => "baseline",
            Level::Restricted => "restricted",
        }
    }
}

impl std::str::FromStr for Level {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Level, ParseError> {
        match s {
            "privileged" => Ok(Level::Privileged),
            "baseline" => Ok(Level::Baseline),
            "restricted" => Ok(Level::Restricted),
            _ => Err(ParseError(LEVEL_VALUES)),
        }
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The version of the standards a level is taken at: `v1.N`, or `latest`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Version {
    Minor(u32),
    Latest,
}

impl Version {
    /// The minor version whose checks apply (`latest` and newer versions: [`LATEST_MINOR`]).
    pub fn effective_minor(self) -> u32 {
        match self {
            Version::Minor(m) => m.min(LATEST_MINOR),
            Version::Latest => LATEST_MINOR,
        }
    }
}

impl std::str::FromStr for Version {
    type Err = ParseError;
    /// `latest` or `v1.N` (no leading zero), as upstream's `^v1\.([0-9]|[1-9][0-9]*)$`.
    fn from_str(s: &str) -> Result<Version, ParseError> {
        if s == "latest" {
            return Ok(Version::Latest);
        }
        let minor = s
            .strip_prefix("v1.")
            .filter(|m| !m.is_empty() && m.bytes().all(|b| b.is_ascii_digit()))
            .filter(|m| m.len() == 1 || !m.starts_with('0'))
            .and_then(|m| m.parse::<u32>().ok())
            .ok_or(ParseError(VERSION_VALUES))?;
        Ok(Version::Minor(minor))
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Version::Minor(m) => write!(f, "v1.{m}"),
            Version::Latest => f.write_str("latest"),
        }
    }
}

/// A level at a version: `restricted:latest`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LevelVersion {
    pub level: Level,
    pub version: Version,
}

impl LevelVersion {
    pub const PRIVILEGED: LevelVersion = LevelVersion {
        level: Level::Privileged,
        version: Version::Latest,
    };

    pub fn new(level: Level, version: Version) -> LevelVersion {
        LevelVersion { level, version }
    }

    /// Same checks: privileged at any version is privileged.
    pub fn equivalent(&self, other: &LevelVersion) -> bool {
        (self.level == Level::Privileged && other.level == Level::Privileged) || self == other
    }
}

impl fmt::Display for LevelVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.level, self.version)
    }
}

/// The three modes' levels for one namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    pub enforce: LevelVersion,
    pub audit: LevelVersion,
    pub warn: LevelVersion,
}

impl Default for Policy {
    /// Upstream's default: privileged in every mode.
    fn default() -> Policy {
        Policy {
            enforce: LevelVersion::PRIVILEGED,
            audit: LevelVersion::PRIVILEGED,
            warn: LevelVersion::PRIVILEGED,
        }
    }
}

impl Policy {
    pub fn fully_privileged(&self) -> bool {
        [self.enforce, self.audit, self.warn]
            .iter()
            .all(|lv| lv.level == Level::Privileged)
    }

    pub fn equivalent(&self, other: &Policy) -> bool {
        self.enforce.equivalent(&other.enforce)
            && self.audit.equivalent(&other.audit)
            && self.warn.equivalent(&other.warn)
    }
}

/// The policy a namespace's labels ask for, over `defaults`, and what is wrong with the labels.
/// A bad enforce level is taken as `restricted` (fail closed); bad audit and warn levels as
/// `privileged` (fail open); a bad version as `latest`. Without its own warn label, warn
/// follows a stricter explicit enforce level (and its version), so workloads warn at the level
/// their pods would be refused.
pub fn policy_to_evaluate(
    labels: &BTreeMap<String, String>,
    defaults: Policy,
) -> (Policy, Vec<FieldError>) {
    let mut p = defaults;
    let mut errs = Vec::new();
    if labels.is_empty() {
        return (p, errs);
    }
    let mut err = |label: &str, value: &str, e: ParseError| {
        errs.push(FieldError::invalid(
            &Path::new("metadata").child("labels").key(label),
            value,
            e.0,
        ));
    };
    let mut has_enforce_level = false;
    if let Some(v) = labels.get(ENFORCE_LEVEL_LABEL) {
        p.enforce.level = v.parse().unwrap_or_else(|e| {
            err(ENFORCE_LEVEL_LABEL, v, e);
            Level::Restricted
        });
        has_enforce_level = v.parse::<Level>().is_ok();
    }
    if let Some(v) = labels.get(ENFORCE_VERSION_LABEL) {
        p.enforce.version = parse_version(v, ENFORCE_VERSION_LABEL, &mut err);
    }
    if let Some(v) = labels.get(AUDIT_LEVEL_LABEL) {
        p.audit.level = v.parse().unwrap_or_else(|e| {
            err(AUDIT_LEVEL_LABEL, v, e);
            Level::Privileged
        });
    }
    if let Some(v) = labels.get(AUDIT_VERSION_LABEL) {
        p.audit.version = parse_version(v, AUDIT_VERSION_LABEL, &mut err);
    }
    let has_warn_level = labels.contains_key(WARN_LEVEL_LABEL);
    if let Some(v) = labels.get(WARN_LEVEL_LABEL) {
        p.warn.level = v.parse().unwrap_or_else(|e| {
            err(WARN_LEVEL_LABEL, v, e);
            Level::Privileged
        });
    }
    let has_warn_version = labels.contains_key(WARN_VERSION_LABEL);
    if let Some(v) = labels.get(WARN_VERSION_LABEL) {
        p.warn.version = parse_version(v, WARN_VERSION_LABEL, &mut err);
    }
    if !has_warn_level && has_enforce_level && p.enforce.level > p.warn.level {
        p.warn.level = p.enforce.level;
        if !has_warn_version {
            p.warn.version = p.enforce.version;
        }
    }
    (p, errs)
}

fn parse_version(
    value: &str,
    label: &str,
    err: &mut impl FnMut(&str, &str, ParseError),
) -> Version {
    value.parse().unwrap_or_else(|e| {
        err(label, value, e);
        Version::Latest
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::selector::label_set as labels;

    fn lv(level: Level, version: Version) -> LevelVersion {
        LevelVersion::new(level, version)
    }

    #[test]
    fn versions_parse_as_upstream_reads_them() {
        for (text, want) in [
            ("latest", Some(Version::Latest)),
            ("v1.0", Some(Version::Minor(0))),
            ("v1.25", Some(Version::Minor(25))),
            ("v1.99", Some(Version::Minor(99))),
            ("v1.025", None),
            ("v1.", None),
            ("v2.1", None),
            ("1.25", None),
            ("v1.25.0", None),
            ("Latest", None),
        ] {
            assert_eq!(text.parse::<Version>().ok(), want, "{text}");
        }
    }

    #[test]
    fn a_version_newer_than_berths_is_evaluated_at_berths() {
        assert_eq!(Version::Minor(40).effective_minor(), LATEST_MINOR);
        assert_eq!(Version::Latest.effective_minor(), LATEST_MINOR);
        assert_eq!(Version::Minor(22).effective_minor(), 22);
    }

    #[test]
    fn level_versions_print_as_upstream() {
        assert_eq!(
            lv(Level::Restricted, Version::Latest).to_string(),
            "restricted:latest"
        );
        assert_eq!(
            lv(Level::Baseline, Version::Minor(24)).to_string(),
            "baseline:v1.24"
        );
    }

    #[test]
    fn a_namespace_without_labels_gets_the_defaults() {
        let defaults = Policy {
            enforce: lv(Level::Baseline, Version::Latest),
            ..Policy::default()
        };
        assert_eq!(
            policy_to_evaluate(&labels(&[]), defaults),
            (defaults, vec![])
        );
    }

    #[test]
    fn warn_follows_an_explicit_stricter_enforce_level() {
        let (p, errs) = policy_to_evaluate(
            &labels(&[
                (ENFORCE_LEVEL_LABEL, "restricted"),
                (ENFORCE_VERSION_LABEL, "v1.24"),
            ]),
            Policy::default(),
        );
        assert!(errs.is_empty());
        assert_eq!(p.enforce, lv(Level::Restricted, Version::Minor(24)));
        assert_eq!(p.warn, lv(Level::Restricted, Version::Minor(24)));
        assert_eq!(p.audit, LevelVersion::PRIVILEGED);
    }

    #[test]
    fn an_explicit_warn_label_is_kept_even_when_enforce_is_stricter() {
        let (p, _) = policy_to_evaluate(
            &labels(&[
                (ENFORCE_LEVEL_LABEL, "restricted"),
                (WARN_LEVEL_LABEL, "baseline"),
            ]),
            Policy::default(),
        );
        assert_eq!(p.warn, lv(Level::Baseline, Version::Latest));
    }

    #[test]
    fn warn_keeps_its_own_version_when_it_follows_enforce() {
        let (p, _) = policy_to_evaluate(
            &labels(&[
                (ENFORCE_LEVEL_LABEL, "baseline"),
                (ENFORCE_VERSION_LABEL, "v1.20"),
                (WARN_VERSION_LABEL, "v1.22"),
            ]),
            Policy::default(),
        );
        assert_eq!(p.warn, lv(Level::Baseline, Version::Minor(22)));
    }

    #[test]
    fn a_bad_enforce_level_fails_closed_and_bad_warn_and_audit_fail_open() {
        let (p, errs) = policy_to_evaluate(
            &labels(&[
                (ENFORCE_LEVEL_LABEL, "bogus"),
                (AUDIT_LEVEL_LABEL, "bogus"),
                (WARN_LEVEL_LABEL, "bogus"),
                (WARN_VERSION_LABEL, "v9"),
            ]),
            Policy::default(),
        );
        assert_eq!(p.enforce, lv(Level::Restricted, Version::Latest));
        assert_eq!(p.audit.level, Level::Privileged);
        assert_eq!(p.warn.level, Level::Privileged);
        let messages: Vec<String> = errs.iter().map(FieldError::message).collect();
        assert_eq!(
            messages,
            [
                "metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: \"bogus\": must be one of privileged, baseline, restricted",
                "metadata.labels[pod-security.kubernetes.io/audit]: Invalid value: \"bogus\": must be one of privileged, baseline, restricted",
                "metadata.labels[pod-security.kubernetes.io/warn]: Invalid value: \"bogus\": must be one of privileged, baseline, restricted",
                "metadata.labels[pod-security.kubernetes.io/warn-version]: Invalid value: \"v9\": must be \"latest\" or \"v1.x\"",
            ]
        );
    }

    #[test]
    fn a_bad_enforce_level_does_not_raise_warn() {
        let (p, _) = policy_to_evaluate(
            &labels(&[(ENFORCE_LEVEL_LABEL, "bogus")]),
            Policy::default(),
        );
        assert_eq!(p.warn, LevelVersion::PRIVILEGED);
    }

    #[test]
    fn privileged_is_equivalent_at_every_version() {
        assert!(lv(Level::Privileged, Version::Minor(3)).equivalent(&LevelVersion::PRIVILEGED));
        assert!(
            !lv(Level::Baseline, Version::Minor(3))
                .equivalent(&lv(Level::Baseline, Version::Latest))
        );
    }
}
