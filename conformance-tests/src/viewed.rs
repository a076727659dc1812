//! The mutex cases on a shared primitive's exclusive side: the write side of a
//! read-write lock and a one-permit semaphore must each behave as a mutex, so the whole
//! mutex specification checks their expiry, fencing, waiting and cancel safety too.

use std::time::Duration;

use async_trait::async_trait;
use dlock_core::Access;

use crate::{Harness, Link, TestClient, Timings};

/// A harness whose clients take `access` where a case takes the mutex.
pub struct Viewed<H> {
    inner: H,
    access: Access,
}

impl<H> Viewed<H> {
    /// `inner`'s clients, viewing `access` (`Access::Write` or `Access::Permit(1)`) as
    /// their mutex.
    pub fn new(inner: H, access: Access) -> Self {
        Self { inner, access }
    }
}

#[async_trait]
impl<H: Harness> Harness for Viewed<H> {
    async fn client(&self) -> TestClient {
        self.inner.client().await.viewed(self.access)
    }

    async fn partitionable_client(&self) -> (TestClient, Box<dyn Link>) {
        let (client, link) = self.inner.partitionable_client().await;
        (client.viewed(self.access), link)
    }

    fn timings(&self) -> Timings {
        self.inner.timings()
    }

    // an inner harness may still override these three itself
    fn short_ttl(&self) -> Duration {
        self.inner.short_ttl()
    }

    fn expiry_slack(&self) -> Duration {
        self.inner.expiry_slack()
    }

    fn workload(&self) -> (usize, usize) {
        self.inner.workload()
    }
}
