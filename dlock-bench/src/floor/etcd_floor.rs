//! The etcd floor: one txn on a pre-granted lease, one delete.

use super::*;
use etcd_client::{Client, Compare, CompareOp, PutOptions, Txn, TxnOp};

/// With a lease granted once up front: one txn to create the key, one delete.
pub struct EtcdFloor {
    client: Client,
    lease: i64,
    key: String,
}

/// A client for the `etcd://` URL's members and a 60 s lease granted up front.
pub async fn client_with_lease(url: &str) -> Result<(Client, i64), String> {
    let hosts = url
        .split_once("://")
        .map_or(url, |(_, h)| h)
        .trim_end_matches('/');
    let endpoints: Vec<String> = hosts.split(',').map(|h| format!("http://{h}")).collect();
    let mut client = Client::connect(&endpoints, None)
        .await
        .map_err(|e| e.to_string())?;
    // an hour: a run's scenarios take minutes (the held one alone can take one), and
    // the floor's keys are deleted every cycle, so nothing lingers on it
    let lease = client
        .lease_grant(3600, None)
        .await
        .map_err(|e| e.to_string())?
        .id();
    Ok((client, lease))
}

/// Creates `key` on `lease` only if it does not exist: the raw way to take a lock.
pub fn create_if_absent(key: &str, lease: i64) -> Txn {
    Txn::new()
        .when([Compare::create_revision(key, CompareOp::Equal, 0)])
        .and_then([TxnOp::put(
            key,
            "",
            Some(PutOptions::new().with_lease(lease)),
        )])
}

pub async fn connect(url: &str) -> Result<Box<dyn Floor>, String> {
    let (client, lease) = client_with_lease(url).await?;
    Ok(Box::new(EtcdFloor {
        client,
        lease,
        key: format!("bench-floor/{}", key()),
    }))
}

#[async_trait]
impl Floor for EtcdFloor {
    fn describe(&self) -> &'static str {
        "1 txn (create with a pre-granted lease) + 1 delete"
    }
    async fn cycle(&self) -> Result<(), String> {
        let mut c = self.client.clone();
        let r = c
            .txn(create_if_absent(&self.key, self.lease))
            .await
            .map_err(|e| e.to_string())?;
        if !r.succeeded() {
            return Err("floor key exists".into());
        }
        c.delete(self.key.clone(), None)
            .await
            .map_err(|e| e.to_string())?;
        Ok(())
    }
    async fn fork(&self) -> Result<Box<dyn Floor>, String> {
        Ok(Box::new(EtcdFloor {
            client: self.client.clone(),
            lease: self.lease,
            key: format!("bench-floor/{}", key()),
        }))
    }
}
