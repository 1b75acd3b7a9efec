//! The controllers' wall clock, an input like any other (DESIGN decision 7): reconcilers read
//! `now` from the [`Clock`] in their [`super::Context`] and pass it to their planners as a
//! value, so a test can set the time a decision is made at. The agent's pod workers do the
//! same with their `Clock`.

use jiff::{SignedDuration, Timestamp};
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

/// Where "now" comes from: the system clock in the binary, a clock a test sets in tests.
#[derive(Clone)]
pub struct Clock(Arc<dyn Fn() -> Timestamp + Send + Sync>);

impl Clock {
    /// The system's wall clock.
    pub fn system() -> Clock {
        Clock(Arc::new(Timestamp::now))
    }

    /// A clock that reads `now` from `f`.
    pub fn from_fn(f: impl Fn() -> Timestamp + Send + Sync + 'static) -> Clock {
        Clock(Arc::new(f))
    }

    /// The current time.
    pub fn now(&self) -> Timestamp {
        (self.0)()
    }
}

impl Default for Clock {
    fn default() -> Self {
        Clock::system()
    }
}

impl fmt::Debug for Clock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Clock({})", self.now())
    }
}

/// A clock that stands still until a test moves it.
#[derive(Debug, Clone)]
pub struct SetClock(Arc<Mutex<Timestamp>>);

impl SetClock {
    /// A clock stopped at `at`.
    pub fn at(at: Timestamp) -> SetClock {
        SetClock(Arc::new(Mutex::new(at)))
    }

    /// Sets the time to `at`.
    pub fn set(&self, at: Timestamp) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = at;
    }

    /// Moves the time forward by `by`.
    pub fn advance(&self, by: SignedDuration) {
        let mut t = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        *t = t.saturating_add(by).unwrap_or(*t);
    }

    /// The [`Clock`] that reads this time, for a [`super::Context`].
    pub fn clock(&self) -> Clock {
        let at = self.0.clone();
        Clock::from_fn(move || *at.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_set_clock_reads_what_the_test_set_and_moves_only_when_told() {
        let start: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let set = SetClock::at(start);
        let clock = set.clock();
        assert_eq!(clock.now(), start);
        assert_eq!(clock.now(), start);
        set.advance(SignedDuration::from_secs(90));
        assert_eq!(clock.now(), start + SignedDuration::from_secs(90));
        set.set(start);
        assert_eq!(clock.clone().now(), start);
    }
}
