//! The Redis and Redlock floor: the acquire and release scripts' bare minimum.

use super::*;

/// `SET NX PX` + `INCR` of the fence in one EVALSHA; compare-and-delete + `PUBLISH`
/// in another.
#[derive(Clone)]
pub struct RedisFloor {
    conn: redis::aio::MultiplexedConnection,
    acquire: redis::Script,
    release: redis::Script,
    key: String,
    fence: String,
    owner: String,
}

pub async fn connect(url: &str) -> Result<Box<dyn Floor>, String> {
    Ok(Box::new(node(url).await?))
}

async fn node(url: &str) -> Result<RedisFloor, String> {
    let client = redis::Client::open(url).map_err(|e| e.to_string())?;
    let conn = client
        .get_multiplexed_async_connection()
        .await
        .map_err(|e| e.to_string())?;
    let k = key();
    Ok(RedisFloor {
        conn,
        acquire: redis::Script::new(
            "if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return redis.call('INCR', KEYS[2]) end return 0",
        ),
        release: redis::Script::new(
            "if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) redis.call('PUBLISH', ARGV[2], '1') return 1 end return 0",
        ),
        key: format!("{{{k}}}:lock"),
        fence: format!("{{{k}}}:fence"),
        owner: owner(),
    })
}

impl RedisFloor {
    fn renamed(&self) -> Self {
        let k = key();
        Self {
            key: format!("{{{k}}}:lock"),
            fence: format!("{{{k}}}:fence"),
            owner: owner(),
            ..self.clone()
        }
    }

    async fn take(&self) -> Result<bool, String> {
        let mut c = self.conn.clone();
        let t: i64 = self
            .acquire
            .key(&self.key)
            .key(&self.fence)
            .arg(&self.owner)
            .arg(10_000)
            .invoke_async(&mut c)
            .await
            .map_err(|e| e.to_string())?;
        Ok(t != 0)
    }

    async fn give_back(&self) -> Result<(), String> {
        let mut c = self.conn.clone();
        let _: i64 = self
            .release
            .key(&self.key)
            .arg(&self.owner)
            .arg("bench-floor")
            .invoke_async(&mut c)
            .await
            .map_err(|e| e.to_string())?;
        Ok(())
    }
}

/// Redlock's floor: the single-node floor's two scripts, sent to every node in
/// parallel, a quorum required (one round each way; no fencing-counter round).
pub struct RedlockFloor {
    nodes: Vec<RedisFloor>,
}

pub async fn redlock(url: &str) -> Result<Box<dyn Floor>, String> {
    let hosts = url.split_once("://").map_or(url, |(_, h)| h);
    let hosts = hosts.split(['/', '?']).next().unwrap_or(hosts);
    let mut nodes = Vec::new();
    for h in hosts.split(',') {
        nodes.push(node(&format!("redis://{h}")).await?);
    }
    RedlockFloor::on_one_name(nodes)
}

impl RedlockFloor {
    /// One lock name and owner across the nodes (the first node's), as Redlock uses.
    fn on_one_name(mut nodes: Vec<RedisFloor>) -> Result<Box<dyn Floor>, String> {
        let first = nodes.first().ok_or("no Redlock node")?.clone();
        for n in &mut nodes {
            n.key.clone_from(&first.key);
            n.fence.clone_from(&first.fence);
            n.owner.clone_from(&first.owner);
        }
        Ok(Box::new(Self { nodes }))
    }
}

#[async_trait]
impl Floor for RedlockFloor {
    fn describe(&self) -> &'static str {
        "on every node in parallel: 1 EVALSHA (SET NX PX + INCR), then 1 EVALSHA (compare, DEL, PUBLISH); quorum"
    }
    async fn cycle(&self) -> Result<(), String> {
        let mut set = tokio::task::JoinSet::new();
        for n in &self.nodes {
            let n = n.clone();
            set.spawn(async move { n.take().await });
        }
        let taken = set
            .join_all()
            .await
            .into_iter()
            .filter(|r| matches!(r, Ok(true)))
            .count();
        if taken <= self.nodes.len() / 2 {
            return Err("floor lock busy".into());
        }
        let mut set = tokio::task::JoinSet::new();
        for n in &self.nodes {
            let n = n.clone();
            set.spawn(async move { n.give_back().await });
        }
        set.join_all()
            .await
            .into_iter()
            .collect::<Result<Vec<()>, String>>()?;
        Ok(())
    }
    async fn fork(&self) -> Result<Box<dyn Floor>, String> {
        Self::on_one_name(self.nodes.iter().map(RedisFloor::renamed).collect())
    }
}

#[async_trait]
impl Floor for RedisFloor {
    fn describe(&self) -> &'static str {
        "1 EVALSHA (SET NX PX + INCR) + 1 EVALSHA (compare, DEL, PUBLISH)"
    }
    async fn cycle(&self) -> Result<(), String> {
        if !self.take().await? {
            return Err("floor lock busy".into());
        }
        self.give_back().await
    }
    async fn fork(&self) -> Result<Box<dyn Floor>, String> {
        Ok(Box::new(self.renamed()))
    }
}
