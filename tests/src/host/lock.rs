//! The host-wide lock of the tests that run real containers, in two modes: shared by tests whose
//! clusters are isolated by unique names and leased address ranges (see [`super::tenancy`]), so
//! several of them run at once; exclusive for tests that read or change host-wide state another
//! cluster would disturb or be disturbed by (see [`super::sharing`] for which is which).
//!
//! One `flock(2)` on `/run/lock/berth-agent-tests.lock`: `LOCK_SH` or `LOCK_EX` on a file
//! description of its own per acquisition, so the kernel arbitrates between processes (nextest
//! runs each test in one) and between test threads of one process (`cargo test`) alike. A
//! thread that already holds the lock and asks again (a test holding it around a cluster of its
//! own) gets a guard that holds nothing: the outer guard covers it. Asking for the exclusive
//! lock while holding the shared one would wait for itself, so it panics instead. A second
//! file, the gate (`…lock.gate`), gives a waiting exclusive holder precedence over shared ones
//! that ask after it.

use std::cell::RefCell;
use std::fs::File;
use std::path::Path;

/// Where the host lock lives; every real-container test process on the machine takes it.
pub const LOCK_FILE: &str = "/run/lock/berth-agent-tests.lock";

/// Set (to `exclusive`) by a test that holds the lock alone for a child test process it runs
/// and kills (`agent_teardown`'s killed-test scenario): the child works under its parent's
/// lock instead of waiting for it, and no other test slips in between the child's death and
/// its parent's checks.
pub const LENT_ENV: &str = "BERTH_HOST_LOCK_LENT";

/// How a test uses the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostUse {
    /// Its clusters are isolated by unique names and leased ranges: others may run beside it.
    Shared,
    /// It measures or changes host-wide state: it runs alone.
    Exclusive,
}

thread_local! {
    /// The mode this thread holds the lock in, and how many guards it has out.
    static HELD: RefCell<Option<(HostUse, usize)>> = const { RefCell::new(None) };
}

/// Holds the host lock while alive.
pub struct HostLock {
    /// `None` for a nested guard (the thread's outer guard holds the lock).
    _file: Option<File>,
    mode: HostUse,
}

impl HostLock {
    /// Blocks until the lock is ours in the mode the running test is classified for
    /// ([`super::sharing::current_host_use`]).
    pub fn acquire() -> HostLock {
        HostLock::acquire_as(super::sharing::current_host_use())
    }

    /// Blocks until the lock is ours in the shared mode.
    pub fn shared() -> HostLock {
        HostLock::acquire_as(HostUse::Shared)
    }

    /// Blocks until the lock is ours alone.
    pub fn exclusive() -> HostLock {
        HostLock::acquire_as(HostUse::Exclusive)
    }

    /// Blocks until the lock is ours in `mode`.
    pub fn acquire_as(mode: HostUse) -> HostLock {
        HostLock::acquire_at(Path::new(LOCK_FILE), mode)
    }

    /// Blocks until the lock at `path` is ours in `mode` (tests of the lock use a file of
    /// their own).
    fn acquire_at(path: &Path, mode: HostUse) -> HostLock {
        let nested = HELD.with(|h| {
            let mut h = h.borrow_mut();
            match h.as_mut() {
                Some((held, n)) if *held == HostUse::Exclusive || mode == HostUse::Shared => {
                    *n += 1;
                    Some(*held)
                }
                Some(_) => panic!(
                    "this thread holds the host lock shared and asks for it exclusive: it would \
                     wait for itself (take the exclusive lock first)"
                ),
                None => None,
            }
        });
        if let Some(held) = nested {
            return HostLock {
                _file: None,
                mode: held,
            };
        }
        // A child test process whose parent holds the lock alone for it (see [`LENT_ENV`]).
        if std::env::var(LENT_ENV).is_ok_and(|v| v == "exclusive") {
            HELD.with(|h| *h.borrow_mut() = Some((HostUse::Exclusive, 1)));
            return HostLock {
                _file: None,
                mode: HostUse::Exclusive,
            };
        }
        if let Some(dir) = path.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        // The gate gives a waiting exclusive holder precedence: it holds the gate while it
        // waits, and a shared holder passes the gate (shared, at once released) before it takes
        // the lock. Without it flock lets shared holders in one after another while an exclusive
        // one waits, and with several lanes of shared tests it could wait past its timeout.
        let gate = open(&gate_path(path));
        let through_gate = match mode {
            HostUse::Shared => gate.lock_shared(),
            HostUse::Exclusive => gate.lock(),
        };
        through_gate.unwrap_or_else(|e| panic!("cannot pass the host lock's gate: {e}"));
        let file = open(path);
        let locked = match mode {
            HostUse::Shared => file.lock_shared(),
            HostUse::Exclusive => file.lock(),
        };
        locked.unwrap_or_else(|e| panic!("cannot take the host lock {}: {e}", path.display()));
        drop(gate);
        HELD.with(|h| *h.borrow_mut() = Some((mode, 1)));
        HostLock {
            _file: Some(file),
            mode,
        }
    }

    /// The mode the lock is held in (a nested guard's is its outer guard's).
    pub fn mode(&self) -> HostUse {
        self.mode
    }
}

/// The gate beside the lock file at `path`.
fn gate_path(path: &Path) -> std::path::PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".gate");
    name.into()
}

/// Opens (creating) a lock file; a test cannot go on without it.
fn open(path: &Path) -> File {
    File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .unwrap_or_else(|e| panic!("cannot open the host lock {}: {e}", path.display()))
}

impl Drop for HostLock {
    fn drop(&mut self) {
        // The file (if this guard has it) closes after this, which releases the flock.
        HELD.with(|h| {
            let mut h = h.borrow_mut();
            if let Some((_, n)) = h.as_mut() {
                *n -= 1;
                if *n == 0 {
                    *h = None;
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, mpsc};
    use std::time::Duration;

    fn lock(dir: &tempfile::TempDir, mode: HostUse) -> HostLock {
        HostLock::acquire_at(&dir.path().join("lock"), mode)
    }

    /// A thread that takes the lock in `mode`, says `who` on `tx` once it holds it, and lets
    /// it go.
    fn holder(
        dir: &Arc<tempfile::TempDir>,
        mode: HostUse,
        who: &'static str,
        tx: &mpsc::Sender<&'static str>,
    ) -> std::thread::JoinHandle<()> {
        let (dir, tx) = (dir.clone(), tx.clone());
        std::thread::spawn(move || {
            let _lock = lock(&dir, mode);
            tx.send(who).unwrap();
        })
    }

    #[test]
    fn two_shared_holders_do_not_wait_for_each_other_and_an_exclusive_one_waits_for_both() {
        let dir = Arc::new(tempfile::tempdir().unwrap());
        let first = lock(&dir, HostUse::Shared);
        let d2 = dir.clone();
        let (tx, rx) = mpsc::channel();
        let tx2 = tx.clone();
        let second = std::thread::spawn(move || {
            let lock = lock(&d2, HostUse::Shared);
            tx2.send("shared").unwrap();
            std::thread::sleep(Duration::from_millis(300));
            drop(lock);
        });
        assert_eq!(
            rx.recv_timeout(Duration::from_secs(10)),
            Ok("shared"),
            "a second shared holder got in beside the first"
        );
        let exclusive = holder(&dir, HostUse::Exclusive, "exclusive", &tx);
        assert!(
            rx.recv_timeout(Duration::from_millis(500)).is_err(),
            "the exclusive holder must wait while a shared one holds the lock"
        );
        drop(first);
        second.join().unwrap();
        assert_eq!(rx.recv_timeout(Duration::from_secs(10)), Ok("exclusive"));
        exclusive.join().unwrap();
    }

    #[test]
    fn a_waiting_exclusive_holder_goes_before_shared_ones_that_come_after_it() {
        let dir = Arc::new(tempfile::tempdir().unwrap());
        let first = lock(&dir, HostUse::Shared);
        let (tx, rx) = mpsc::channel();
        let exclusive = holder(&dir, HostUse::Exclusive, "exclusive", &tx);
        // The exclusive holder is waiting once the gate is taken: a shared try on the gate
        // fails then.
        let gate = open(&gate_path(&dir.path().join("lock")));
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while gate.try_lock_shared().is_ok() {
            gate.unlock().unwrap();
            assert!(
                std::time::Instant::now() < deadline,
                "the exclusive holder never waited"
            );
            std::thread::yield_now();
        }
        let later = holder(&dir, HostUse::Shared, "later shared", &tx);
        assert!(
            rx.recv_timeout(Duration::from_millis(500)).is_err(),
            "nothing gets in while the first shared holder holds the lock"
        );
        drop(first);
        assert_eq!(rx.recv_timeout(Duration::from_secs(10)), Ok("exclusive"));
        assert_eq!(rx.recv_timeout(Duration::from_secs(10)), Ok("later shared"));
        exclusive.join().unwrap();
        later.join().unwrap();
    }

    #[test]
    fn a_thread_holding_the_lock_nests_and_an_upgrade_panics() {
        let dir = Arc::new(tempfile::tempdir().unwrap());
        let outer = lock(&dir, HostUse::Exclusive);
        let inner = lock(&dir, HostUse::Shared);
        assert_eq!(inner.mode(), HostUse::Exclusive);
        drop(inner);
        drop(outer);
        let shared = lock(&dir, HostUse::Shared);
        let upgrade = std::panic::catch_unwind(|| lock(&dir, HostUse::Exclusive));
        assert!(upgrade.is_err(), "upgrading must panic, not deadlock");
        drop(shared);
        // Released: another thread gets it exclusively at once.
        let d = dir.clone();
        let t = std::thread::spawn(move || drop(lock(&d, HostUse::Exclusive)));
        t.join().unwrap();
    }
}
