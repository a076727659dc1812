//! The scripts on a real server (`DLOCK_TEST_REDIS_URL`; `scripts/test --quick`, which
//! starts none, skips them by this module's name).

#![allow(clippy::unwrap_used, clippy::expect_used)]
use super::PROPOSE;
use crate::quorum::MAX_AHEAD_MICROS;

fn test_url() -> String {
    dlock_conformance::required_env("DLOCK_TEST_REDIS_URL")
}

async fn connect(url: &str) -> redis::aio::MultiplexedConnection {
    redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

/// A fresh name's lock and fence keys (one hash slot).
fn keys(what: &str) -> (String, String) {
    let tag = format!("{{dlock-test:{what}-{:016x}}}", dlock_core::random_u64());
    (format!("{tag}:lock"), format!("{tag}:fence"))
}

async fn server_micros(c: &mut redis::aio::MultiplexedConnection) -> u64 {
    let (s, us): (u64, u64) = redis::cmd("TIME").query_async(c).await.unwrap();
    s * 1_000_000 + us
}

/// How many of `keys` exist.
async fn existing(c: &mut redis::aio::MultiplexedConnection, keys: &[&str]) -> i64 {
    redis::cmd("EXISTS").arg(keys).query_async(c).await.unwrap()
}

/// Deletes `keys`.
async fn delete(c: &mut redis::aio::MultiplexedConnection, keys: &[&str]) {
    let _: () = redis::cmd("DEL").arg(keys).query_async(c).await.unwrap();
}

/// Fails on a script that takes any proposal: a client clock ten years ahead set
/// the name's token ten years ahead.
#[tokio::test]
async fn a_proposal_far_ahead_of_the_server_clock_is_ignored() {
    let mut c = connect(&test_url()).await;
    let (lock, fence) = keys("proposal");
    let acquire = |proposal: u64| propose(&lock, &fence, proposal, 0, 0);

    let now = server_micros(&mut c).await;
    let ten_years = 10 * 365 * 86_400 * 1_000_000_u64;
    let (answer, counter, clock): (i64, u64, u64) =
        acquire(now + ten_years).invoke_async(&mut c).await.unwrap();
    assert_eq!((answer, counter), (2, 0), "refused, naming the counter");
    assert!(
        clock >= now && clock < now + 60_000_000,
        "and the server clock ({clock} µs, {now} before)"
    );
    let exists = existing(&mut c, &[&lock]).await;
    assert_eq!(exists, 0, "a refused proposal leaves no lock key behind");

    // five seconds ahead is too far as well (a client clock a little ahead): taken,
    // it would carry the name's tokens past the other nodes' clocks
    let now = server_micros(&mut c).await;
    let (answer, _, _): (i64, u64, u64) =
        acquire(now + 5_000_000).invoke_async(&mut c).await.unwrap();
    assert_eq!(answer, 2, "a proposal 5 s ahead is refused");

    // a proposal a second ahead, as Redlock makes, is taken at exactly that token
    let proposal = server_micros(&mut c).await + 1_000_000;
    let (taken, next, _): (i64, u64, u64) = acquire(proposal).invoke_async(&mut c).await.unwrap();
    assert_eq!((taken, next), (1, proposal));

    // once released, the same proposal again is at the counter: refused
    delete(&mut c, &[&lock]).await;
    let (answer, counter, _): (i64, u64, u64) =
        acquire(proposal).invoke_async(&mut c).await.unwrap();
    assert_eq!((answer, counter), (2, proposal));

    // a node whose counter stands two minutes past its clock (the clock stepped
    // back) names it, and takes its successor once the round passes it on
    let ahead = server_micros(&mut c).await + 120_000_000;
    let _: () = redis::cmd("SET")
        .arg(&fence)
        .arg(ahead)
        .query_async(&mut c)
        .await
        .unwrap();
    let (answer, counter, _): (i64, u64, u64) =
        acquire(ahead + 1).invoke_async(&mut c).await.unwrap();
    assert_eq!((answer, counter), (2, ahead), "refused, naming its counter");
    let (taken, next, _): (i64, u64, u64) = propose(&lock, &fence, ahead + 1, 0, ahead)
        .invoke_async(&mut c)
        .await
        .unwrap();
    assert_eq!((taken, next), (1, ahead + 1));
    delete(&mut c, &[&lock, &fence]).await;
}

/// PROPOSE for `owner-1` (TTL 10 s) at `proposal`, with a restart delay of `rest`
/// seconds and the round's highest named counter `highest`.
fn propose(
    lock: &str,
    fence: &str,
    proposal: u64,
    rest: u64,
    highest: u64,
) -> redis::ScriptInvocation<'static> {
    let mut inv = PROPOSE.key(lock);
    inv.key(fence)
        .arg("owner-1")
        .arg(10_000)
        .arg(proposal)
        .arg(rest)
        .arg(MAX_AHEAD_MICROS)
        .arg(highest);
    inv
}

/// Fails on a bound measured from the node's own counter: a counter a client whose
/// clock is ahead carried 1.9 s past the clock let the next such client take a
/// token 3.5 s ahead, and so on, 2 s a grant.
#[tokio::test]
async fn tokens_do_not_ratchet_ahead_of_the_clock() {
    let mut c = connect(&test_url()).await;
    let (lock, fence) = keys("ratchet");
    let now = server_micros(&mut c).await;
    let _: () = redis::cmd("SET")
        .arg(&fence)
        .arg(now + 1_900_000)
        .query_async(&mut c)
        .await
        .unwrap();
    let (answer, counter, _): (i64, u64, u64) = propose(&lock, &fence, now + 3_500_000, 0, 0)
        .invoke_async(&mut c)
        .await
        .unwrap();
    assert_eq!((answer, counter), (2, now + 1_900_000), "refused");
    // the round's next proposal follows the counter and clock the node named
    let next = counter + 1;
    let (taken, token, _): (i64, u64, u64) = propose(&lock, &fence, next, 0, counter)
        .invoke_async(&mut c)
        .await
        .unwrap();
    assert_eq!((taken, token), (1, next));
    delete(&mut c, &[&lock, &fence]).await;
}

/// Fails on a script without a delayed restart: a node up for less than the
/// restart delay granted at once.
#[tokio::test]
async fn a_node_up_for_less_than_the_restart_delay_grants_nothing() {
    let mut c = connect(&test_url()).await;
    let info: String = redis::cmd("INFO")
        .arg("server")
        .query_async(&mut c)
        .await
        .unwrap();
    let up: u64 = info
        .lines()
        .find_map(|l| l.strip_prefix("uptime_in_seconds:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let (lock, fence) = keys("resting");
    let propose = |delay: u64, proposal: u64| propose(&lock, &fence, proposal, delay, 0);
    // a delay an hour past this server's uptime: it has just "restarted"
    let proposal = server_micros(&mut c).await + 1_000_000;
    let (answer, left_ms, _): (i64, u64, u64) = propose(up + 3600, proposal)
        .invoke_async(&mut c)
        .await
        .unwrap();
    assert_eq!(answer, 3, "a resting node refuses the grant");
    assert!(
        (3_599_000..=3_601_000).contains(&left_ms),
        "and says how long it rests: {left_ms} ms"
    );
    let exists = existing(&mut c, &[&lock, &fence]).await;
    assert_eq!(exists, 0, "and writes nothing");
    // up longer than the delay (or no delay): granted
    assert!(up >= 1, "the test server has been up a second");
    for delay in [up, 0] {
        let proposal = server_micros(&mut c).await + 1_000_000;
        let (answer, token, _): (i64, u64, u64) =
            propose(delay, proposal).invoke_async(&mut c).await.unwrap();
        assert_eq!((answer, token), (1, proposal), "delay {delay} s, up {up} s");
        delete(&mut c, &[&lock]).await;
    }
    delete(&mut c, &[&fence]).await;
}

/// Fails on a script that reads the uptime with `redis.call` (every acquisition of
/// such a user errs with NOPERM) or grants when it cannot read it (`or ARGV[4]`,
/// failing open): a user whose ACL denies `INFO` is refused (answer 4) and nothing
/// is written, and granted when the restart delay is off.
#[tokio::test]
async fn a_node_that_cannot_read_its_uptime_grants_nothing() {
    let url = test_url();
    let mut admin = connect(&url).await;
    let user = format!("dlock-test-noinfo-{:016x}", dlock_core::random_u64());
    let _: () = redis::cmd("ACL")
        .arg(&["SETUSER", &user, "on", ">pw", "~*", "&*", "+@all", "-info"])
        .query_async(&mut admin)
        .await
        .unwrap();
    let as_user = url.replacen("redis://", &format!("redis://{user}:pw@"), 1);
    let mut c = connect(&as_user).await;
    let (lock, fence) = keys("noinfo");
    for (delay, answer) in [(60, 4), (0, 1)] {
        let proposal = server_micros(&mut c).await + 1_000_000;
        let (got, _, _): (i64, u64, u64) = propose(&lock, &fence, proposal, delay, 0)
            .invoke_async(&mut c)
            .await
            .unwrap();
        assert_eq!(got, answer, "restart delay {delay} s");
        if delay > 0 {
            let exists = existing(&mut c, &[&lock, &fence]).await;
            assert_eq!(exists, 0, "a refused grant writes nothing");
        }
    }
    delete(&mut admin, &[&lock, &fence]).await;
    let _: () = redis::cmd("ACL")
        .arg(&["DELUSER", &user])
        .query_async(&mut admin)
        .await
        .unwrap();
}
