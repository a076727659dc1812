//! The ZooKeeper floor: create + list in one round trip, one delete.

use super::*;
use zookeeper_client as zk;

/// Create an ephemeral-sequential node and list its parent in one round trip, then
/// delete the node.
pub struct ZkFloor {
    client: zk::Client,
    dir: String,
}

/// A session on the `zk://` URL's servers (its chroot, if any, is not used).
pub async fn session(url: &str) -> Result<zk::Client, String> {
    let hosts = url.split_once("://").map_or(url, |(_, h)| h);
    let hosts = hosts.split('/').next().unwrap_or(hosts);
    zk::Client::connect(hosts).await.map_err(|e| e.to_string())
}

pub async fn connect(url: &str) -> Result<Box<dyn Floor>, String> {
    Ok(Box::new(ZkFloor::new(session(url).await?).await?))
}

impl ZkFloor {
    async fn new(client: zk::Client) -> Result<Self, String> {
        let dir = format!("/bench-floor-{}", key());
        make_dir(&client, &dir).await.map_err(|e| e.to_string())?;
        Ok(Self { client, dir })
    }

    async fn once(&self) -> Result<(), zk::Error> {
        let prefix = format!("{}/lock-", self.dir);
        let create = self.client.create(
            &prefix,
            b"",
            &zk::CreateMode::EphemeralSequential.with_acls(zk::Acls::anyone_all()),
        );
        let list = self.client.list_children(&self.dir);
        let (created, listed) = tokio::join!(create, list);
        let (_, seq) = created?;
        listed?;
        self.client.delete(&format!("{prefix}{seq}"), None).await
    }
}

/// The floor's directory: a container, so the server deletes it once the run's last
/// lock node is gone. It may delete it between two cycles too (its container check
/// runs every second on the test servers), so a cycle that finds it gone makes it
/// again.
async fn make_dir(client: &zk::Client, dir: &str) -> Result<(), zk::Error> {
    let mode = zk::CreateMode::Container.with_acls(zk::Acls::anyone_all());
    match client.create(dir, b"", &mode).await {
        Ok(_) | Err(zk::Error::NodeExists) => Ok(()),
        Err(e) => Err(e),
    }
}

#[async_trait]
impl Floor for ZkFloor {
    fn describe(&self) -> &'static str {
        "create ephemeral-sequential + list children (one round trip) + delete"
    }
    async fn cycle(&self) -> Result<(), String> {
        match self.once().await {
            Err(zk::Error::NoNode) => {
                make_dir(&self.client, &self.dir)
                    .await
                    .map_err(|e| e.to_string())?;
                self.once().await.map_err(|e| e.to_string())
            }
            done => done.map_err(|e| e.to_string()),
        }
    }
    async fn fork(&self) -> Result<Box<dyn Floor>, String> {
        Ok(Box::new(ZkFloor::new(self.client.clone()).await?))
    }
}
