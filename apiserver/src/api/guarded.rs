//! A response body that holds a value (an in-flight permit, a connection's open-request mark)
//! until the body has been sent or dropped, so that what the value counts ends with the response,
//! not when the handler returns.

use axum::body::Body;
use bytes::Bytes;
use http_body::{Frame, SizeHint};
use std::pin::Pin;
use std::task::{Context, Poll};

/// `inner`, with `_held` dropped together with it.
pub struct Guarded<G> {
    inner: Body,
    _held: G,
}

impl<G: Send + Unpin + 'static> Guarded<G> {
    /// Wraps `body` so that `held` lives as long as it.
    pub fn wrap(body: Body, held: G) -> Body {
        Body::new(Guarded {
            inner: body,
            _held: held,
        })
    }
}

impl<G: Unpin> http_body::Body for Guarded<G> {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.get_mut().inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    struct Mark(Arc<AtomicUsize>);
    impl Drop for Mark {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[tokio::test]
    async fn the_held_value_is_dropped_with_the_body_after_its_bytes_are_read() {
        let dropped = Arc::new(AtomicUsize::new(0));
        let body = Guarded::wrap(Body::from("hello"), Mark(dropped.clone()));
        assert_eq!(dropped.load(Ordering::SeqCst), 0);
        let bytes = axum::body::to_bytes(body, 1024).await.expect("body");
        assert_eq!(&bytes[..], b"hello");
        assert_eq!(dropped.load(Ordering::SeqCst), 1);
    }
}
