//! A server that is down, told at once: client libraries retry a refused connection
//! until their own timeout and then report "timeout" or nothing useful, so an adapter
//! first asks whether anything listens where its URL points.

use std::time::Duration;

use crate::LockError;

/// Opens (and closes) a TCP connection to each of `hosts` (`host:port`) in turn, each
/// within `limit`: `Ok` as soon as one answers, or when one does not answer in time (a
/// slow network is the client library's to judge). When every host refuses,
/// [`LockError::Unavailable`] naming `what` and the hosts: "cannot connect to
/// ZooKeeper at 127.0.0.1:2181: Connection refused".
///
/// # Errors
/// [`LockError::Unavailable`] when no host accepts a connection.
///
/// # Cancel safety
/// Dropping it changes nothing.
pub async fn any_reachable(what: &str, hosts: &[&str], limit: Duration) -> Result<(), LockError> {
    let mut refused = None;
    for host in hosts {
        match tokio::time::timeout(limit, tokio::net::TcpStream::connect(*host)).await {
            Ok(Ok(_)) | Err(_) => return Ok(()),
            Ok(Err(e)) => refused = Some(e),
        }
    }
    match refused {
        Some(e) => Err(LockError::Unavailable {
            message: format!("cannot connect to {what} at {}: {e}", hosts.join(",")),
            source: Some(Box::new(e)),
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_closed_port_is_named_at_once() {
        let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = free.local_addr().unwrap().to_string();
        drop(free);
        let e = any_reachable("Redis", &[&addr], Duration::from_secs(2))
            .await
            .unwrap_err();
        assert!(e.to_string().contains(&format!("Redis at {addr}")), "{e}");
        let open = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let there = open.local_addr().unwrap().to_string();
        assert!(
            any_reachable("Redis", &[&addr, &there], Duration::from_secs(2))
                .await
                .is_ok()
        );
    }
}
