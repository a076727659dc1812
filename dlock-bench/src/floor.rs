//! Raw-protocol floors: the same acquire + release job with the fewest server commands,
//! on the same client crates the adapters use. Our figure divided by the floor's, in
//! the same run, is what the adapter's own work costs.

use dlock_any::async_trait;

/// One acquire + release cycle on a free lock, done the cheapest way.
#[async_trait]
pub trait Floor: Send + Sync {
    /// What the floor does, for the report.
    fn describe(&self) -> &'static str;
    /// One cycle.
    ///
    /// # Cancel safety
    /// Dropping it stops the measurement where it stands: a lock it holds then is
    /// released by its TTL at the latest.
    async fn cycle(&self) -> Result<(), String>;
    /// The same floor on its own lock name, sharing this one's connections (for the
    /// parallel scenario, as dlock's tasks share one client).
    ///
    /// # Cancel safety
    /// Dropping it stops the measurement where it stands: a lock it holds then is
    /// released by its TTL at the latest.
    async fn fork(&self) -> Result<Box<dyn Floor>, String>;
}

#[cfg_attr(
    not(any(
        feature = "redis",
        feature = "postgres",
        feature = "mysql",
        feature = "sqlite"
    )),
    allow(dead_code)
)]
fn owner() -> String {
    format!(
        "{:016x}{:016x}",
        dlock_any::random_u64(),
        dlock_any::random_u64()
    )
}

/// A floor's lock name: the run's (`crate::scratch::run_id`), so that what a floor
/// leaves (a Redis fencing counter) goes with the run's own names at its end.
fn key() -> String {
    format!(
        "dlock-bench-{}-floor-{:016x}",
        crate::scratch::run_id(),
        dlock_any::random_u64()
    )
}

pub use crate::url_parts::scheme_and_base;

/// A floor for the URL's backend, if there is one for it in this build.
///
/// # Cancel safety
/// Dropping it stops the measurement where it stands: a lock it holds then is released
/// by its TTL at the latest.
pub async fn for_url(url: &str) -> Option<Result<Box<dyn Floor>, String>> {
    let (scheme, plain) = scheme_and_base(url);
    match scheme.as_str() {
        #[cfg(feature = "redis")]
        "redis" => Some(redis_floor::connect(plain).await),
        #[cfg(feature = "redis")]
        "redlock" => Some(redis_floor::redlock(plain).await),
        #[cfg(feature = "postgres")]
        "postgres" | "postgresql" => Some(sql_floor::postgres(plain).await),
        #[cfg(feature = "mysql")]
        "mysql" | "mariadb" => {
            Some(sql_floor::mysql(&plain.replacen("mariadb:", "mysql:", 1)).await)
        }
        #[cfg(feature = "sqlite")]
        "sqlite" => Some(sql_floor::sqlite(plain).await),
        #[cfg(feature = "etcd")]
        "etcd" => Some(etcd_floor::connect(plain).await),
        #[cfg(feature = "zookeeper")]
        "zk" | "zookeeper" => Some(zk_floor::connect(plain).await),
        _ => None,
    }
}

#[cfg(feature = "etcd")]
pub(crate) mod etcd_floor;
#[cfg(feature = "redis")]
mod redis_floor;
#[cfg(any(feature = "postgres", feature = "mysql", feature = "sqlite"))]
mod sql_floor;
#[cfg(feature = "postgres")]
pub(crate) use sql_floor::postgres_pool;
#[cfg(feature = "zookeeper")]
pub(crate) mod zk_floor;
