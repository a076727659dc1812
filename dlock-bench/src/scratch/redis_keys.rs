//! Deleting a run's keys from every Redis server its URL reaches: the server, each
//! Redlock node, each master of a cluster, the master the sentinels name.

use redis::aio::MultiplexedConnection;

/// Deletes the keys matching `pattern` (a `SCAN MATCH` pattern) on the servers behind
/// `url` (its scheme one of dlock's Redis schemes; its query ignored).
///
/// # Errors
/// The first server that could not be reached or asked, as text.
pub(super) async fn delete_matching(url: &str, pattern: &str) -> Result<(), String> {
    for server in servers(url).await? {
        let mut conn = connect(&server).await?;
        delete_on(&mut conn, pattern)
            .await
            .map_err(|e| format!("{}: {e}", dlock_any::redact_url(&server)))?;
    }
    Ok(())
}

async fn connect(server: &str) -> Result<MultiplexedConnection, String> {
    let shown = dlock_any::redact_url(server);
    redis::Client::open(server)
        .map_err(|e| format!("{shown}: {e}"))?
        .get_multiplexed_async_connection()
        .await
        .map_err(|e| format!("{shown}: {e}"))
}

/// `SCAN`s one server a page at a time, deleting what each page found (one key per
/// `UNLINK`: a cluster node refuses several keys of different slots in one).
async fn delete_on(conn: &mut MultiplexedConnection, pattern: &str) -> redis::RedisResult<()> {
    let mut cursor = 0_u64;
    loop {
        let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(pattern)
            .arg("COUNT")
            .arg(1000)
            .query_async(conn)
            .await?;
        if !keys.is_empty() {
            let mut pipe = redis::pipe();
            for k in &keys {
                pipe.cmd("UNLINK").arg(k).ignore();
            }
            pipe.query_async::<()>(conn).await?;
        }
        if next == 0 {
            return Ok(());
        }
        cursor = next;
    }
}

/// The servers behind `url`, as URLs the client opens.
async fn servers(url: &str) -> Result<Vec<String>, String> {
    let url = url.split(['?', '#']).next().unwrap_or(url);
    let (scheme, rest) = url.split_once("://").ok_or("a URL without a scheme")?;
    let (auth, rest) = match rest.rsplit_once('@') {
        Some((a, r)) => (format!("{a}@"), r),
        None => (String::new(), rest),
    };
    let (hosts, path) = rest.split_once('/').unwrap_or((rest, ""));
    let hosts: Vec<&str> = hosts.split(',').collect();
    match scheme {
        "redis" | "rediss" => Ok(vec![url.to_owned()]),
        "redlock" => Ok(hosts
            .iter()
            .map(|h| format!("redis://{auth}{h}/{path}"))
            .collect()),
        "redis-cluster" => cluster_masters(&auth, &hosts).await,
        "redis-sentinel" => sentinel_master(&auth, &hosts, path).await,
        _ => Ok(Vec::new()),
    }
}

/// Every master a cluster's first reachable seed lists (`CLUSTER NODES`).
async fn cluster_masters(auth: &str, seeds: &[&str]) -> Result<Vec<String>, String> {
    let mut last = String::from("no seed");
    for seed in seeds {
        let mut conn = match connect(&format!("redis://{auth}{seed}")).await {
            Ok(c) => c,
            Err(e) => {
                last = e;
                continue;
            }
        };
        let nodes: String = redis::cmd("CLUSTER")
            .arg("NODES")
            .query_async(&mut conn)
            .await
            .map_err(|e| format!("CLUSTER NODES on {seed}: {e}"))?;
        return Ok(masters_in(&nodes)
            .map(|addr| format!("redis://{auth}{addr}"))
            .collect());
    }
    Err(last)
}

/// The `ip:port` of each live master in a `CLUSTER NODES` reply.
fn masters_in(nodes: &str) -> impl Iterator<Item = &str> {
    nodes.lines().filter_map(|line| {
        let mut fields = line.split_whitespace();
        let addr = fields.nth(1)?;
        let flags = fields.next()?;
        let master = flags.split(',').any(|f| f == "master")
            && !flags.split(',').any(|f| f == "fail" || f == "noaddr");
        master.then(|| addr.split(['@', ',']).next().unwrap_or(addr))
    })
}

/// The master the first sentinel that answers names (`path`: `mastername[/db]`).
async fn sentinel_master(
    auth: &str,
    sentinels: &[&str],
    path: &str,
) -> Result<Vec<String>, String> {
    let (name, db) = path.split_once('/').unwrap_or((path, ""));
    let mut last = String::from("no sentinel");
    for sentinel in sentinels {
        let mut conn = match connect(&format!("redis://{sentinel}")).await {
            Ok(c) => c,
            Err(e) => {
                last = e;
                continue;
            }
        };
        let addr: Option<(String, String)> = redis::cmd("SENTINEL")
            .arg("get-master-addr-by-name")
            .arg(name)
            .query_async(&mut conn)
            .await
            .map_err(|e| format!("SENTINEL get-master-addr-by-name on {sentinel}: {e}"))?;
        if let Some((ip, port)) = addr {
            return Ok(vec![format!("redis://{auth}{ip}:{port}/{db}")]);
        }
        last = format!("{sentinel} knows no master {name}");
    }
    Err(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cluster_reply_names_its_live_masters() {
        let reply = "\
07c3 127.0.0.1:30004@31004 slave e7d1 0 1 4 connected
67ed 127.0.0.1:30002@31002 master - 0 1 2 connected 5461-10922
e7d1 127.0.0.1:30001@31001,host-a myself,master - 0 0 1 connected 0-5460
292f 127.0.0.1:30003@31003 master,fail - 0 1 3 disconnected 10923-16383
";
        let masters: Vec<&str> = masters_in(reply).collect();
        assert_eq!(masters, ["127.0.0.1:30002", "127.0.0.1:30001"]);
    }

    #[tokio::test]
    async fn redlock_urls_split_into_their_nodes() {
        assert_eq!(
            servers("redlock://:pw@a:1,b:2/3?prefix=x:").await.unwrap(),
            ["redis://:pw@a:1/3", "redis://:pw@b:2/3"]
        );
        assert_eq!(
            servers("redis://h:6379/7?prefix=x:").await.unwrap(),
            ["redis://h:6379/7"]
        );
    }
}
