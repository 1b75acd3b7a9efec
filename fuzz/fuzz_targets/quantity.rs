//! Fuzz target: resource quantities (`500m`, `1.5Gi`, `2e3`). A quantity that parses must give
//! its accessors without panicking, and its negation must parse to the opposite value.
#![no_main]

use berth_shared::quantity::Quantity;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(q) = Quantity::parse(s) else {
        return;
    };
    let _ = (q.millis(), q.value(), q.is_whole(), q.is_negative());
    let _ = q.saturating_add(q).cmp_to(&q);
    if let Some(unsigned) = s
        .strip_prefix('+')
        .or(Some(s))
        .filter(|u| !u.starts_with('-'))
        && let Ok(neg) = Quantity::parse(&format!("-{unsigned}"))
    {
        assert_eq!(neg.is_negative(), q.is_positive(), "{s:?}");
        assert_eq!(neg.saturating_add(q), Quantity::default(), "{s:?}");
    }
});
