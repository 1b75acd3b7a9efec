//! The instant the planners' tests count their seconds from.

use jiff::Timestamp;

/// `s` seconds after (or before) the tests' epoch, 2023-11-14T22:13:20Z.
pub(crate) fn at(s: i64) -> Timestamp {
    Timestamp::from_second(1_700_000_000 + s).expect("a time within jiff's range")
}
