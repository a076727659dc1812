//! Dependency injection: a service holds an `Arc<dyn DistributedLock>`, wired from a
//! URL in production and from `MemoryLock` in its unit tests.
//!
//! Run: `cargo run -p dlock-any --example injection -- sqlite:///tmp/example-locks.db`

use std::sync::Arc;
use std::time::Duration;

use dlock_any::{DistributedLock, FencingToken, LockError, Locker};

/// A service that must not charge an invoice twice, whatever runs it.
struct InvoiceService {
    locks: Locker,
}

impl InvoiceService {
    fn new(locks: Arc<dyn DistributedLock>) -> Self {
        Self {
            locks: Locker::new(locks)
                .with_ttl(Duration::from_secs(15))
                .with_wait(Duration::from_secs(5)),
        }
    }

    /// Charges under the invoice's lock; the token goes along with the write so the
    /// payment store can reject a stale holder.
    async fn charge(&self, invoice: u64) -> Result<FencingToken, LockError> {
        self.locks
            .with_lock(format!("invoices/{invoice}"), |token| async move {
                // payments.charge(invoice, token).await
                token
            })
            .await
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), LockError> {
    let url = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "memory://".into());
    let service = InvoiceService::new(dlock_any::connect(&url).await?);
    let token = service.charge(7).await?;
    eprintln!("charged invoice 7 under fencing token {token}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use dlock_any::MemoryLock;

    #[tokio::test]
    async fn charging_twice_gets_increasing_tokens() {
        let service = InvoiceService::new(Arc::new(MemoryLock::new()));
        let a = service.charge(1).await.unwrap();
        let b = service.charge(1).await.unwrap();
        assert!(b > a);
    }
}
