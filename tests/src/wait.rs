//! Waiting on conditions with deadlines: `wait_for` polls until a probe holds and, on timeout,
//! panics with what it waited for and the last thing it saw; `ensure_for` checks that a probe
//! keeps holding for a while (negative properties). Tests never sleep to order events; only these
//! pollers pause, between probes.

use std::fmt::Debug;
use std::time::{Duration, Instant};

/// First pause between probes; doubled after each miss up to `MAX_PAUSE`, so fast conditions are
/// seen within ~10 ms and slow ones do not spin.
const FIRST_PAUSE: Duration = Duration::from_millis(10);
const MAX_PAUSE: Duration = Duration::from_millis(200);

/// Polls `probe` until it returns `Ok`, and returns that value. `Err(observation)` means "not
/// yet"; the last observation is printed if `timeout` passes, together with `what` and whatever
/// `context` returns at that moment (for example the controller's log tail).
pub fn wait_for_with<T, O: Debug>(
    timeout: Duration,
    what: &str,
    context: impl Fn() -> String,
    mut probe: impl FnMut() -> Result<T, O>,
) -> T {
    let start = Instant::now();
    let mut pause = FIRST_PAUSE;
    let mut probes = 0u32;
    loop {
        probes += 1;
        let observed = match probe() {
            Ok(value) => return value,
            Err(observed) => observed,
        };
        let elapsed = start.elapsed();
        if elapsed >= timeout {
            panic!(
                "timed out after {elapsed:.1?} ({probes} probes) waiting for: {what}\n\
                 last observation: {observed:#?}\n{}",
                context()
            );
        }
        std::thread::sleep(pause.min(timeout - elapsed));
        pause = (pause * 2).min(MAX_PAUSE);
    }
}

/// [`wait_for_with`] without extra context.
pub fn wait_for<T, O: Debug>(
    timeout: Duration,
    what: &str,
    probe: impl FnMut() -> Result<T, O>,
) -> T {
    wait_for_with(timeout, what, String::new, probe)
}

/// Polls `probe` for the whole of `duration` and panics at the first `Err(observation)`: the
/// property must hold throughout, not just eventually.
pub fn ensure_for_with<O: Debug>(
    duration: Duration,
    what: &str,
    context: impl Fn() -> String,
    mut probe: impl FnMut() -> Result<(), O>,
) {
    let start = Instant::now();
    let mut probes = 0u32;
    loop {
        probes += 1;
        if let Err(observed) = probe() {
            panic!(
                "expected to hold for {duration:?}, broke after {:.1?} (probe {probes}): {what}\n\
                 observation: {observed:#?}\n{}",
                start.elapsed(),
                context()
            );
        }
        let elapsed = start.elapsed();
        if elapsed >= duration {
            return;
        }
        std::thread::sleep(MAX_PAUSE.min(duration - elapsed));
    }
}

/// [`ensure_for_with`] without extra context.
pub fn ensure_for<O: Debug>(duration: Duration, what: &str, probe: impl FnMut() -> Result<(), O>) {
    ensure_for_with(duration, what, String::new, probe)
}

/// The tail of a probe: `Ok(())` when `holds`, else `Err(seen)` (what the probe saw, printed if
/// the wait times out). `seen` is computed either way; keep it cheap.
pub fn ok_if<O>(holds: bool, seen: O) -> Result<(), O> {
    if holds { Ok(()) } else { Err(seen) }
}

/// Seconds as a `Duration`, for readable call sites: `wait_for(secs(10), ...)`.
pub const fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    #[test]
    fn wait_for_returns_the_first_ok_value() {
        let calls = Cell::new(0);
        let got = wait_for(secs(5), "third probe", || {
            calls.set(calls.get() + 1);
            if calls.get() >= 3 {
                Ok(calls.get())
            } else {
                Err(calls.get())
            }
        });
        assert_eq!(got, 3);
    }

    #[test]
    fn wait_for_panics_with_the_description_and_the_last_observation() {
        let err = std::panic::catch_unwind(|| {
            wait_for_with(
                Duration::from_millis(50),
                "never",
                || "CONTEXT".into(),
                || Err::<(), _>("still nothing"),
            )
        })
        .expect_err("must time out");
        let msg = err.downcast_ref::<String>().expect("formatted panic");
        assert!(msg.contains("waiting for: never"), "{msg}");
        assert!(msg.contains("still nothing"), "{msg}");
        assert!(msg.contains("CONTEXT"), "{msg}");
    }

    #[test]
    fn ensure_for_probes_until_the_duration_has_passed() {
        let calls = Cell::new(0);
        let start = Instant::now();
        ensure_for(Duration::from_millis(300), "always fine", || {
            calls.set(calls.get() + 1);
            Ok::<(), ()>(())
        });
        assert!(start.elapsed() >= Duration::from_millis(300));
        assert!(calls.get() >= 2, "probed {} times", calls.get());
    }

    #[test]
    fn ensure_for_panics_as_soon_as_the_property_breaks() {
        let err =
            std::panic::catch_unwind(|| ensure_for(secs(30), "stays empty", || Err("one item")))
                .expect_err("must fail at once");
        let msg = err.downcast_ref::<String>().expect("formatted panic");
        assert!(
            msg.contains("stays empty") && msg.contains("one item"),
            "{msg}"
        );
    }
}
