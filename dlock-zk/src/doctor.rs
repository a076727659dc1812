//! What decides whether locking on the ensemble is safe: each server's version and
//! mode (four-letter words `srvr` and `conf`), and the session timeout it granted.

use std::time::Duration;

use dlock_core::{Finding, LockError};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Sends four-letter word `word` to `host` and returns the answer.
async fn four_letter(host: &str, word: &str) -> Option<String> {
    let ask = async {
        let mut s = tokio::net::TcpStream::connect(host).await.ok()?;
        s.write_all(word.as_bytes()).await.ok()?;
        let mut out = String::new();
        s.read_to_string(&mut out).await.ok()?;
        Some(out)
    };
    tokio::time::timeout(Duration::from_secs(3), ask)
        .await
        .ok()?
}

fn field<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    text.lines()
        .find_map(|l| l.strip_prefix(key))
        .map(|v| v.trim_start_matches([':', '=', ' ']).trim())
}

/// The findings on the servers in `hosts` (`h:p,h:p`), for a session that asked for
/// `asked` and was granted `granted`.
pub(crate) async fn diagnose(
    hosts: &str,
    asked: Duration,
    granted: Duration,
) -> Result<Vec<Finding>, LockError> {
    let mut found = Vec::new();
    // servers that answered, and those of them serving (a follower or an observer
    // serves only inside a quorum)
    let (mut answered, mut serving) = (0, 0);
    let mut bounds = None;
    for host in hosts.split(',').map(str::trim) {
        let Some(srvr) = four_letter(host, "srvr").await else {
            found.push(Finding::warning(
                format!("{host}: reachable"),
                "no answer to srvr",
                "a server down costs the ensemble its margin: it holds with a majority",
            ));
            continue;
        };
        answered += 1;
        if srvr.contains("not in the whitelist") {
            serving += 1; // it answers, so it runs; its mode is not ours to see
            found.push(Finding::info(
                format!("{host}: four-letter words"),
                "srvr and conf are not allowed (4lw.commands.whitelist)",
            ));
            continue;
        }
        let version = field(&srvr, "Zookeeper version").unwrap_or("?");
        let version = version.split(['-', ',']).next().unwrap_or(version);
        let mode = field(&srvr, "Mode").unwrap_or("?");
        serving += usize::from(matches!(
            mode,
            "leader" | "follower" | "observer" | "standalone" | "read-only"
        ));
        found.push(Finding::info(
            format!("{host}: server"),
            format!("ZooKeeper {version}, {mode}"),
        ));
        if bounds.is_none()
            && let Some(conf) = four_letter(host, "conf").await
            && let (Some(min), Some(max)) = (
                field(&conf, "minSessionTimeout").and_then(|v| v.parse::<u64>().ok()),
                field(&conf, "maxSessionTimeout").and_then(|v| v.parse::<u64>().ok()),
            )
        {
            bounds = Some((Duration::from_millis(min), Duration::from_millis(max)));
        }
    }
    if answered > 0 && serving == 0 {
        found.push(Finding::critical(
            "quorum",
            "no server that answered is serving requests",
            "the ensemble has no quorum: nothing can be locked until a majority is back",
        ));
    }
    if let Some((min, max)) = bounds {
        found.push(Finding::info(
            "session timeout bounds",
            format!("{} … {} ms", min.as_millis(), max.as_millis()),
        ));
    }
    let granted_text = format!(
        "asked {} ms, granted {} ms",
        asked.as_millis(),
        granted.as_millis()
    );
    found.push(if granted == asked {
        Finding::info("session timeout", granted_text)
    } else {
        Finding::warning(
            "session timeout",
            granted_text,
            "the server clamps session timeouts to its bounds: a crashed holder's lock \
             outlives it by the granted timeout, and leases last that long",
        )
    });
    Ok(found)
}
