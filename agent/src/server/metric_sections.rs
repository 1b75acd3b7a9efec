//! The agent server's backend with more metric families after its own on `/metrics`: the
//! certificate metrics and the network policy counters, each a [`MetricsSection`] of the
//! module that keeps them.

use std::sync::Arc;

use futures::future::BoxFuture;

use super::{AttachRequest, Backend, ExecRequest, ExecStreams, LogTarget, PodNetwork};

/// Metric families in the text format, appended to the backend's.
pub trait MetricsSection: Send + Sync + 'static {
    fn render(self: Arc<Self>) -> BoxFuture<'static, String>;
}

/// `inner`, with `sections` after its own metrics.
pub struct WithSections<B> {
    pub inner: Arc<B>,
    pub sections: Vec<Arc<dyn MetricsSection>>,
}

impl<B: Backend> Backend for WithSections<B> {
    fn log_target(
        &self,
        namespace: &str,
        pod: &str,
        container: &str,
        previous: bool,
    ) -> Result<LogTarget, String> {
        self.inner.log_target(namespace, pod, container, previous)
    }

    fn exec(&self, req: ExecRequest) -> BoxFuture<'static, Result<ExecStreams, String>> {
        self.inner.exec(req)
    }

    fn pod_netns(
        &self,
        namespace: &str,
        pod: &str,
    ) -> BoxFuture<'static, Result<PodNetwork, String>> {
        self.inner.pod_netns(namespace, pod)
    }

    fn metrics(&self) -> BoxFuture<'static, Result<String, String>> {
        let own = self.inner.metrics();
        let sections: Vec<_> = self.sections.iter().map(|s| s.clone().render()).collect();
        Box::pin(async move {
            let mut text = own.await?;
            for s in sections {
                text.push_str(&s.await);
            }
            Ok(text)
        })
    }

    fn resource_metrics(&self) -> BoxFuture<'static, Result<String, String>> {
        self.inner.resource_metrics()
    }

    fn attach(&self, req: AttachRequest) -> BoxFuture<'static, Result<ExecStreams, String>> {
        self.inner.attach(req)
    }
}
