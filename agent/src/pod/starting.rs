//! The pod manager as the agent's server sees it while the agent starts: the server answers
//! before the manager exists (it needs the pod CIDR and the network first), and a request
//! that needs the manager in that window waits for it, up to a bound, rather than being
//! refused. A restarted agent thus serves `kubectl exec` and port-forwards into pods that
//! kept running across the restart as soon as it has its manager.

use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// What a request that found no manager within the bound is answered.
pub const STARTING: &str = "the agent is starting";

/// A value set once, later than the readers that need it may arrive.
pub struct Starting<T> {
    tx: watch::Sender<Option<Arc<T>>>,
}

impl<T> Default for Starting<T> {
    fn default() -> Self {
        Self {
            tx: watch::Sender::new(None),
        }
    }
}

impl<T: Send + Sync + 'static> Starting<T> {
    /// Sets the value; the first one set stays.
    pub fn set(&self, value: Arc<T>) {
        self.tx.send_if_modified(|slot| {
            let unset = slot.is_none();
            if unset {
                *slot = Some(value);
            }
            unset
        });
    }

    /// The value if it is set, without waiting.
    pub fn now(&self) -> Result<Arc<T>, String> {
        self.tx.borrow().clone().ok_or_else(|| STARTING.to_string())
    }

    /// A future (owning what it needs) that resolves to the value once it is set, or to
    /// [`STARTING`] if it is not set within `bound`.
    pub fn wait(
        &self,
        bound: Duration,
    ) -> impl std::future::Future<Output = Result<Arc<T>, String>> + Send + 'static {
        let mut rx = self.tx.subscribe();
        async move {
            match tokio::time::timeout(bound, rx.wait_for(Option::is_some)).await {
                Ok(Ok(set)) => set.clone().ok_or_else(|| STARTING.to_string()),
                _ => Err(STARTING.to_string()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_request_made_before_the_value_is_set_gets_it_once_it_is() {
        let s = Starting::<u32>::default();
        assert_eq!(s.now(), Err(STARTING.to_string()));
        let waiting = tokio::spawn(s.wait(Duration::from_secs(30)));
        tokio::task::yield_now().await;
        tokio::time::advance(Duration::from_secs(2)).await;
        s.set(Arc::new(7));
        assert_eq!(waiting.await.ok().and_then(Result::ok).as_deref(), Some(&7));
        assert_eq!(s.now().as_deref(), Ok(&7));
    }

    #[tokio::test(start_paused = true)]
    async fn a_value_never_set_is_answered_as_starting_after_the_bound() {
        let s = Starting::<u32>::default();
        let started = tokio::time::Instant::now();
        assert_eq!(
            s.wait(Duration::from_secs(30)).await,
            Err(STARTING.to_string())
        );
        assert_eq!(started.elapsed(), Duration::from_secs(30));
    }

    #[tokio::test]
    async fn the_first_value_set_stays() {
        let s = Starting::<u32>::default();
        s.set(Arc::new(1));
        s.set(Arc::new(2));
        assert_eq!(s.wait(Duration::ZERO).await.as_deref(), Ok(&1));
    }
}
