//! Mutual exclusion between controllers sharing a store: a lock is one key outside the API's
//! key space (`/locks/<name>`), created by compare-and-swap and deleted when released; a
//! holder that dies without releasing it is overtaken once its expiry (wall clock) passes.
//! For short critical sections that must see every earlier holder's writes (take the lock,
//! then [`Store::sync_blocking`]).

use super::{Precondition, Revision, Store, StoreError};
use serde_json::{Value, json};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// A held lock; released on drop.
pub struct StoreLock {
    store: Store,
    key: String,
    revision: Revision,
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

fn expiry(obj: &Value) -> u64 {
    obj["expiresMs"].as_u64().unwrap_or(0)
}

impl Store {
    /// Takes the lock `name`, held for at most `ttl` if never released, waiting at most
    /// `wait` for another holder. Blocking.
    pub fn lock(&self, name: &str, ttl: Duration, wait: Duration) -> Result<StoreLock, StoreError> {
        let key = format!("/locks/{name}");
        let deadline = Instant::now() + wait;
        let mut pause = Duration::from_millis(2);
        loop {
            let now = now_ms();
            let pre = match self.latest(&key) {
                None => Some(Precondition::Absent),
                Some(held) if expiry(&held.value()?) <= now => {
                    Some(Precondition::Revision(held.revision))
                }
                Some(_) => None,
            };
            if let Some(pre) = pre {
                let body = json!({
                    "metadata": {"name": name},
                    "holder": std::process::id(),
                    "expiresMs": now + ttl.as_millis() as u64,
                });
                match self.put(&key, body, pre) {
                    Ok(stored) => {
                        return Ok(StoreLock {
                            store: self.clone(),
                            key,
                            revision: stored.revision,
                        });
                    }
                    Err(StoreError::AlreadyExists | StoreError::Conflict) => continue,
                    Err(e) => return Err(e),
                }
            }
            if Instant::now() >= deadline {
                return Err(StoreError::Unavailable(format!("the lock {name} is held")));
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(50));
        }
    }
}

impl Drop for StoreLock {
    fn drop(&mut self) {
        // Gone or overtaken already: nothing to release.
        let _ = self
            .store
            .delete(&self.key, Precondition::Revision(self.revision), None);
    }
}
