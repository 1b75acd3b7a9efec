//! Resource arithmetic for placement: quantities as the scheduler counts them (cpu in
//! millicores, everything else in whole units, both rounded up like upstream's `MilliValue()`
//! and `Value()`), a pod's effective request (the init-container and sidecar rule), and a
//! node's allocatable resources.
//!
//! Worked example of the effective request (seed 003:571-574): init containers asking 200m and
//! 100m cpu, app containers 100m + 50m: max(max(200m, 100m), 100m + 50m) = 200m.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1 as core;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

/// A resource list as the API spells it.
pub type ResourceList = BTreeMap<String, Quantity>;

/// What a container without a cpu request counts as when scoring (upstream's non-zero default).
pub const DEFAULT_MILLI_CPU_REQUEST: i64 = 100;
/// What a container without a memory request counts as when scoring: 200 MiB.
pub const DEFAULT_MEMORY_REQUEST: i64 = 200 * 1024 * 1024;

/// Amounts of the resources the scheduler fits: cpu (millicores), memory and ephemeral storage
/// (bytes), and scalar resources (extended resources and huge pages, whole units).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resources {
    pub milli_cpu: i64,
    pub memory: i64,
    pub ephemeral_storage: i64,
    pub scalar: BTreeMap<String, i64>,
}

/// Names the scheduler fits beyond cpu, memory and ephemeral storage: extended resources
/// (`example.com/gpu`), huge pages and attachable volumes.
pub fn is_scalar_resource(name: &str) -> bool {
    name.starts_with("hugepages-")
        || name.starts_with("attachable-volumes-")
        || (name.contains('/') && !name.starts_with("kubernetes.io/"))
}

impl Resources {
    /// Reads the resources the scheduler knows from a resource list; others (`pods`, unknown
    /// names) are ignored.
    pub fn from_list(list: &ResourceList) -> Resources {
        let mut r = Resources::default();
        for (name, q) in list {
            match name.as_str() {
                "cpu" => r.milli_cpu = milli_value(&q.0).unwrap_or(0),
                "memory" => r.memory = value(&q.0).unwrap_or(0),
                "ephemeral-storage" => r.ephemeral_storage = value(&q.0).unwrap_or(0),
                n if is_scalar_resource(n) => {
                    r.scalar.insert(n.to_string(), value(&q.0).unwrap_or(0));
                }
                _ => {}
            }
        }
        r
    }

    pub fn add(&mut self, other: &Resources) {
        self.combine(other, i64::saturating_add);
    }

    pub fn subtract(&mut self, other: &Resources) {
        self.combine(other, i64::saturating_sub);
    }

    /// Per resource, the larger of the two.
    pub fn max_with(&mut self, other: &Resources) {
        self.combine(other, i64::max);
    }

    /// Each resource of `self` replaced by `f` of it and `other`'s (a scalar resource `self`
    /// does not have counts as 0).
    fn combine(&mut self, other: &Resources, f: impl Fn(i64, i64) -> i64) {
        self.milli_cpu = f(self.milli_cpu, other.milli_cpu);
        self.memory = f(self.memory, other.memory);
        self.ephemeral_storage = f(self.ephemeral_storage, other.ephemeral_storage);
        for (k, v) in &other.scalar {
            let e = self.scalar.entry(k.clone()).or_insert(0);
            *e = f(*e, *v);
        }
    }

    /// Nothing requested at all.
    pub fn is_zero(&self) -> bool {
        self.milli_cpu == 0
            && self.memory == 0
            && self.ephemeral_storage == 0
            && self.scalar.values().all(|v| *v == 0)
    }
}

/// One container's requests for [`effective_requests`].
#[derive(Debug, Clone, Copy, Default)]
pub struct ContainerRequests<'a> {
    pub requests: Option<&'a ResourceList>,
    /// An init container with `restartPolicy: Always` (a sidecar): it keeps running beside the
    /// app containers.
    pub sidecar: bool,
}

impl<'a> ContainerRequests<'a> {
    pub fn of(c: &'a core::Container) -> ContainerRequests<'a> {
        ContainerRequests {
            requests: c.resources.as_ref().and_then(|r| r.requests.as_ref()),
            sidecar: c.restart_policy.as_deref() == Some("Always"),
        }
    }
}

/// Scheduling defaults for containers that do not request cpu or memory: `Some` gives the
/// non-zero requests the resource scores use, `None` the real requests the fit filter uses.
pub type MissingDefaults = Option<(i64, i64)>;

fn container_requests(c: &ContainerRequests<'_>, defaults: MissingDefaults) -> Resources {
    let mut r = c.requests.map(Resources::from_list).unwrap_or_default();
    if let Some((cpu, memory)) = defaults {
        let has = |name: &str| c.requests.is_some_and(|l| l.contains_key(name));
        if !has("cpu") {
            r.milli_cpu = r.milli_cpu.saturating_add(cpu);
        }
        if !has("memory") {
            r.memory = r.memory.saturating_add(memory);
        }
    }
    r
}

/// A pod's effective request (upstream `PodRequests`, v1.31 with sidecars): the sum of the app
/// containers and sidecars, or, when larger, what the heaviest moment of initialisation needs —
/// init container *i* runs beside every sidecar started before it — plus the pod overhead.
pub fn effective_requests<'a>(
    app: impl IntoIterator<Item = ContainerRequests<'a>>,
    init: impl IntoIterator<Item = ContainerRequests<'a>>,
    overhead: Option<&ResourceList>,
    defaults: MissingDefaults,
) -> Resources {
    let mut total = Resources::default();
    for c in app {
        total.add(&container_requests(&c, defaults));
    }
    let mut sidecars = Resources::default();
    let mut init_peak = Resources::default();
    for c in init {
        let own = container_requests(&c, defaults);
        let during = if c.sidecar {
            total.add(&own);
            sidecars.add(&own);
            sidecars.clone()
        } else {
            let mut r = own;
            r.add(&sidecars);
            r
        };
        init_peak.max_with(&during);
    }
    total.max_with(&init_peak);
    if let Some(o) = overhead {
        total.add(&Resources::from_list(o));
    }
    total
}

fn spec_requests(spec: &core::PodSpec, defaults: MissingDefaults) -> Resources {
    effective_requests(
        spec.containers.iter().map(ContainerRequests::of),
        spec.init_containers
            .iter()
            .flatten()
            .map(ContainerRequests::of),
        spec.overhead.as_ref(),
        defaults,
    )
}

/// What a pod requests, for fitting it on a node.
pub fn pod_requests(spec: &core::PodSpec) -> Resources {
    spec_requests(spec, None)
}

/// What a pod counts as when scoring nodes: containers without a cpu or memory request count
/// as 100m and 200 MiB.
pub fn pod_non_zero_requests(spec: &core::PodSpec) -> Resources {
    spec_requests(
        spec,
        Some((DEFAULT_MILLI_CPU_REQUEST, DEFAULT_MEMORY_REQUEST)),
    )
}

/// A node's allocatable resources and the number of pods it admits. Allocatable defaults to
/// capacity when the node does not report it, as the API server defaults it.
pub fn node_allocatable(status: Option<&core::NodeStatus>) -> (Resources, i64) {
    let list = status.and_then(|s| s.allocatable.as_ref().or(s.capacity.as_ref()));
    let Some(list) = list else {
        return (Resources::default(), 0);
    };
    let pods = list.get("pods").and_then(|q| value(&q.0)).unwrap_or(0);
    (Resources::from_list(list), pods)
}

/// A quantity in thousandths, rounded up (`MilliValue()`): `100m` → 100, `1` → 1000,
/// `0.1m` → 1. `None` for text that is not a quantity. Saturates at the i64 range.
pub fn milli_value(s: &str) -> Option<i64> {
    scaled(s, 3)
}

/// A quantity in whole units, rounded up (`Value()`): `1Ki` → 1024, `1.5` → 2, `100m` → 1.
pub fn value(s: &str) -> Option<i64> {
    scaled(s, 0)
}

/// `ceil(quantity × 10^scale)`, computed exactly on integers.
fn scaled(s: &str, scale: i32) -> Option<i64> {
    let (negative, rest) = match s.as_bytes().first()? {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    let num_len = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    let (number, suffix) = rest.split_at(num_len);
    let (int_part, frac_part) = number.split_once('.').unwrap_or((number, ""));
    if frac_part.contains('.') || (int_part.is_empty() && frac_part.is_empty()) {
        return None;
    }
    let (pow2, pow10) = suffix_powers(suffix)?;
    let digits = format!("{int_part}{frac_part}");
    let digits = digits.trim_start_matches('0');
    if digits.is_empty() {
        return Some(0);
    }
    if digits.len() > 36 {
        return Some(if negative { i64::MIN } else { i64::MAX });
    }
    let mantissa: i128 = digits.parse().ok()?;
    let exp10 = i64::from(pow10) - frac_part.len() as i64 + i64::from(scale);
    let magnitude = mantissa.checked_mul(1i128 << pow2).and_then(|m| {
        if exp10 >= 0 {
            10i128
                .checked_pow(u32::try_from(exp10).ok()?)
                .and_then(|p| m.checked_mul(p))
        } else {
            // Rounding up for a positive value, toward zero's other side for a negative one.
            let div = u32::try_from(-exp10)
                .ok()
                .and_then(|e| 10i128.checked_pow(e));
            Some(match div {
                None => i128::from(!negative),
                Some(d) if negative => m / d,
                Some(d) => (m + d - 1) / d,
            })
        }
    });
    let v = match magnitude {
        Some(m) if negative => -m,
        Some(m) => m,
        None => return Some(if negative { i64::MIN } else { i64::MAX }),
    };
    Some(v.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64)
}

/// `(power of 2, power of 10)` of a quantity suffix.
fn suffix_powers(suffix: &str) -> Option<(u32, i32)> {
    let p = match suffix {
        "" => (0, 0),
        "n" => (0, -9),
        "u" => (0, -6),
        "m" => (0, -3),
        "k" => (0, 3),
        "M" => (0, 6),
        "G" => (0, 9),
        "T" => (0, 12),
        "P" => (0, 15),
        "E" => (0, 18),
        "Ki" => (10, 0),
        "Mi" => (20, 0),
        "Gi" => (30, 0),
        "Ti" => (40, 0),
        "Pi" => (50, 0),
        "Ei" => (60, 0),
        _ => {
            let exp = suffix.strip_prefix(['e', 'E'])?;
            let unsigned = exp.strip_prefix(['+', '-']).unwrap_or(exp);
            if unsigned.is_empty() || !unsigned.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            let n: i32 = unsigned.parse().ok().filter(|n| *n <= 1000)?;
            (0, if exp.starts_with('-') { -n } else { n })
        }
    };
    Some(p)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn quantities_convert_to_scheduler_units_rounding_up() {
        let cases = [
            ("100m", Some(100), Some(1)),
            ("1", Some(1000), Some(1)),
            ("1.5", Some(1500), Some(2)),
            ("0.1m", Some(1), Some(1)),
            ("2Ki", Some(2_048_000), Some(2048)),
            ("1Gi", Some(1_073_741_824_000), Some(1_073_741_824)),
            ("16Gi", Some(17_179_869_184_000), Some(17_179_869_184)),
            ("1e3", Some(1_000_000), Some(1000)),
            ("5E-1", Some(500), Some(1)),
            ("128974848", Some(128_974_848_000), Some(128_974_848)),
            ("0", Some(0), Some(0)),
            ("+3k", Some(3_000_000), Some(3000)),
            ("abc", None, None),
            ("1.2.3", None, None),
            ("", None, None),
        ];
        for (q, milli, whole) in cases {
            assert_eq!(milli_value(q), milli, "milli of {q}");
            assert_eq!(value(q), whole, "value of {q}");
        }
    }

    fn spec(v: serde_json::Value) -> core::PodSpec {
        serde_json::from_value(v).unwrap()
    }

    fn container(name: &str, cpu: &str) -> serde_json::Value {
        json!({"name": name, "resources": {"requests": {"cpu": cpu}}})
    }

    #[test]
    fn the_effective_request_is_the_larger_of_app_sum_and_init_peak() {
        // T-POD-07: init 200m and 100m, app 100m + 50m ⇒ 200m.
        let s = spec(json!({
            "initContainers": [container("i1", "200m"), container("i2", "100m")],
            "containers": [container("a", "100m"), container("b", "50m")],
        }));
        assert_eq!(pod_requests(&s).milli_cpu, 200);
        // App containers heavier than any init container win.
        let s = spec(json!({
            "initContainers": [container("i1", "100m")],
            "containers": [container("a", "100m"), container("b", "50m")],
        }));
        assert_eq!(pod_requests(&s).milli_cpu, 150);
    }

    #[test]
    fn sidecars_add_to_the_app_sum_and_to_later_init_containers() {
        // sidecar 100m, then init 300m (runs beside the sidecar: 400m), app 200m.
        // App phase: 200m + 100m = 300m; init peak 400m ⇒ 400m.
        let mut side = container("side", "100m");
        side["restartPolicy"] = json!("Always");
        let s = spec(json!({
            "initContainers": [side, container("i", "300m")],
            "containers": [container("a", "200m")],
        }));
        assert_eq!(pod_requests(&s).milli_cpu, 400);
        // An init container before the sidecar does not run beside it.
        let mut side = container("side", "100m");
        side["restartPolicy"] = json!("Always");
        let s = spec(json!({
            "initContainers": [container("i", "250m"), side],
            "containers": [container("a", "200m")],
        }));
        assert_eq!(pod_requests(&s).milli_cpu, 300);
    }

    #[test]
    fn overhead_and_other_resources_are_added() {
        let s = spec(json!({
            "containers": [{"name": "a", "resources": {"requests": {
                "cpu": "1", "memory": "1Gi", "ephemeral-storage": "2Gi", "example.com/gpu": "2"}}}],
            "overhead": {"cpu": "250m", "memory": "120Mi"},
        }));
        let r = pod_requests(&s);
        assert_eq!(r.milli_cpu, 1250);
        assert_eq!(r.memory, (1 << 30) + 120 * (1 << 20));
        assert_eq!(r.ephemeral_storage, 2 << 30);
        assert_eq!(r.scalar.get("example.com/gpu"), Some(&2));
    }

    #[test]
    fn missing_requests_count_as_defaults_only_for_scoring() {
        let s = spec(json!({"containers": [
            {"name": "a"},
            {"name": "b", "resources": {"requests": {"cpu": "0"}}},
        ]}));
        assert!(pod_requests(&s).is_zero());
        let nz = pod_non_zero_requests(&s);
        // a: 100m + 200Mi; b: an explicit 0 cpu stays 0, memory defaults.
        assert_eq!(nz.milli_cpu, 100);
        assert_eq!(nz.memory, 2 * DEFAULT_MEMORY_REQUEST);
    }

    #[test]
    fn allocatable_falls_back_to_capacity() {
        let status: core::NodeStatus = serde_json::from_value(json!({
            "capacity": {"cpu": "4", "memory": "16Gi", "pods": "110"}}))
        .unwrap();
        let (r, pods) = node_allocatable(Some(&status));
        assert_eq!((r.milli_cpu, r.memory, pods), (4000, 16 << 30, 110));
        let status: core::NodeStatus = serde_json::from_value(json!({
            "capacity": {"cpu": "4"}, "allocatable": {"cpu": "3500m", "pods": "10"}}))
        .unwrap();
        assert_eq!(node_allocatable(Some(&status)).0.milli_cpu, 3500);
        assert_eq!(node_allocatable(None), (Resources::default(), 0));
    }
}
