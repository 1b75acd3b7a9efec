//! Berth integration harness.
