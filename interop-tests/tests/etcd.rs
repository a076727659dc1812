//! dlock's etcd locks and `etcdctl lock` (etcd's `concurrency.Mutex`) on the same name:
//! with `prefix=` empty both put a contender key `<name>/<id>` and hold in create-
//! revision order, so each keeps the other out, they queue together first come first
//! served, and dlock's fencing tokens and the create revisions of etcdctl's keys are one
//! sequence (`ETCD_LOCK_REV`, the revision etcdctl got the lock at, is not a token).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use dlock_any::{DistributedLock, LockName};
use dlock_conformance::{acquiring_timed, required_env, take};
use dlock_etcd::EtcdLock;
use dlock_etcd::etcd_client::{Client, GetOptions};
use dlock_interop_tests::unique;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::time::{Instant, sleep, timeout};

const TTL: Duration = Duration::from_secs(10);

fn endpoints() -> String {
    required_env("DLOCK_TEST_ETCD_ENDPOINTS")
}

async fn dlock() -> Arc<EtcdLock> {
    let hosts = endpoints().replace("http://", "");
    Arc::new(
        EtcdLock::from_url(&format!("etcd://{hosts}?prefix="))
            .await
            .unwrap(),
    )
}

async fn client() -> Client {
    let hosts: Vec<String> = endpoints()
        .split(',')
        .map(|e| e.replace("http://", ""))
        .collect();
    Client::connect(hosts, None).await.unwrap()
}

/// `etcdctl lock NAME sh -c SCRIPT`, its stdout piped; the script sees
/// `$ETCD_LOCK_KEY` and `$ETCD_LOCK_REV` and talks to the same etcd through `$ETCDCTL_ENDPOINTS`.
fn etcdctl_lock(name: &str, script: &str) -> Child {
    Command::new("etcdctl")
        .env("ETCDCTL_ENDPOINTS", endpoints())
        .args(["lock", name, "--", "sh", "-c", script])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("etcdctl (Debian: etcd-client) must be installed")
}

/// What `etcdctl lock` tells its command: the key it holds by and the store revision
/// when it got the lock. Its fencing token in dlock's sense is that key's create
/// revision (`ETCD_LOCK_REV` is at least that, and not ordered with other holders').
const PRINT_HOLD: &str = "echo \"$ETCD_LOCK_KEY $ETCD_LOCK_REV\"";

/// The create revision of the key `etcdctl lock` reported holding by, and its
/// `ETCD_LOCK_REV`.
async fn their_token(line: &str) -> (u64, u64) {
    let (key, rev) = line.trim().split_once(' ').unwrap();
    let mut etcd = client().await;
    let got = etcd.get(key, None).await.unwrap();
    let created = u64::try_from(got.kvs()[0].create_revision()).unwrap();
    (created, rev.parse().unwrap())
}

/// The first line the child prints, within `within`.
async fn first_line(child: &mut Child, within: Duration) -> Option<String> {
    let out = child.stdout.as_mut().unwrap();
    let mut lines = BufReader::new(out).lines();
    timeout(within, lines.next_line()).await.ok()?.ok()?
}

/// Waits until `n` contenders are queued under `name/`.
async fn queued(client: &mut Client, name: &str, n: usize) {
    let end = Instant::now() + Duration::from_secs(10);
    loop {
        let got = client
            .get(
                format!("{name}/"),
                Some(GetOptions::new().with_prefix().with_keys_only()),
            )
            .await
            .unwrap();
        if got.kvs().len() >= n {
            return;
        }
        assert!(
            Instant::now() < end,
            "{n} contenders never queued on {name}"
        );
        sleep(Duration::from_millis(20)).await;
    }
}

/// A file whose creation ends an `etcdctl lock` command, and the command: print what it
/// holds by, then hold until the file appears — so the test decides when it releases.
fn hold_until_told() -> (std::path::PathBuf, String) {
    let file = std::env::temp_dir().join(unique("interop-etcd-release"));
    let script = format!(
        "{PRINT_HOLD}; until [ -e '{}' ]; do sleep 0.02; done",
        file.display()
    );
    (file, script)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcdctls_holder_keeps_dlock_out_and_then_lets_it_in() {
    let lock = dlock().await;
    let name = unique("interop-etcd");
    let (release, script) = hold_until_told();
    let mut theirs = etcdctl_lock(&name, &script);
    let line = first_line(&mut theirs, Duration::from_secs(10))
        .await
        .expect("etcdctl took the lock");
    let (token, rev) = their_token(&line).await;
    assert!(
        rev >= token,
        "ETCD_LOCK_REV {rev} is the revision it got the lock at"
    );
    let n = LockName::new(&name).unwrap();
    assert!(
        lock.try_acquire(&n, TTL).await.unwrap().is_none(),
        "etcdctl holds {name}"
    );
    let waiting = acquiring_timed(&lock, &n, TTL, Duration::from_secs(20));
    sleep(Duration::from_millis(300)).await;
    assert!(!waiting.is_finished(), "dlock got in while etcdctl held");
    let released = Instant::now();
    std::fs::write(&release, b"").unwrap();
    let (at, lease) = timeout(Duration::from_secs(10), waiting)
        .await
        .unwrap()
        .unwrap();
    assert!(at >= released, "dlock got in before etcdctl let go");
    assert!(
        lease.token().get() > token,
        "one token order: {} after {token}",
        lease.token()
    );
    assert!(lock.release(&lease).await.unwrap());
    assert!(theirs.wait().await.unwrap().success());
    let _ = std::fs::remove_file(&release);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dlocks_holder_keeps_etcdctl_out_and_they_queue_in_order() {
    let lock = dlock().await;
    let mut etcd = client().await;
    let name = unique("interop-etcd");
    let n = LockName::new(&name).unwrap();
    let first = take(&lock, &n, TTL).await;
    // etcdctl queues behind dlock's holder, then a second dlock contender behind it
    let (release, script) = hold_until_told();
    let mut theirs = etcdctl_lock(&name, &script);
    queued(&mut etcd, &name, 2).await;
    let second = acquiring_timed(&lock, &n, TTL, Duration::from_secs(20));
    queued(&mut etcd, &name, 3).await;
    assert!(
        first_line_now(&mut theirs).await.is_none(),
        "etcdctl got in while dlock held"
    );
    assert!(lock.release(&first).await.unwrap());
    let line = first_line(&mut theirs, Duration::from_secs(10))
        .await
        .expect("etcdctl is next");
    let (token, _) = their_token(&line).await;
    assert!(token > first.token().get(), "tokens follow the queue");
    sleep(Duration::from_millis(300)).await;
    assert!(
        !second.is_finished(),
        "the later dlock contender jumped the queue"
    );
    let released = Instant::now();
    std::fs::write(&release, b"").unwrap();
    let exited = timeout(Duration::from_secs(10), theirs.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(exited.success());
    let (at, lease) = timeout(Duration::from_secs(10), second)
        .await
        .unwrap()
        .unwrap();
    assert!(
        at >= released,
        "dlock's second got in before etcdctl let go"
    );
    assert!(lease.token().get() > token, "tokens follow the queue");
    assert!(lock.release(&lease).await.unwrap());
    let _ = std::fs::remove_file(&release);
}

/// The first line if the child printed one already.
async fn first_line_now(child: &mut Child) -> Option<String> {
    first_line(child, Duration::from_millis(300)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_counter_incremented_by_both_loses_nothing() {
    let lock = dlock().await;
    let name = unique("interop-etcd");
    let counter = unique("interop-etcd-counter");
    const OURS: usize = 2 * 8;
    const THEIRS: usize = 8;
    let mut tasks = Vec::new();
    for _ in 0..2 {
        let (lock, name, counter) = (Arc::clone(&lock), name.clone(), counter.clone());
        tasks.push(tokio::spawn(async move {
            let mut etcd = client().await;
            let n = LockName::new(&name).unwrap();
            for _ in 0..OURS / 2 {
                let l = lock
                    .acquire(&n, TTL, Duration::from_secs(30))
                    .await
                    .unwrap();
                let v = read(&mut etcd, &counter).await;
                sleep(Duration::from_millis(5)).await;
                etcd.put(counter.as_str(), (v + 1).to_string(), None)
                    .await
                    .unwrap();
                assert!(lock.release(&l).await.unwrap());
            }
        }));
    }
    let script = format!(
        "v=$(etcdctl get --print-value-only {counter}); etcdctl put {counter} $(( ${{v:-0}} + 1 )) >/dev/null"
    );
    for _ in 0..THEIRS {
        let status = etcdctl_lock(&name, &script).wait().await.unwrap();
        assert!(status.success());
    }
    for t in tasks {
        t.await.unwrap();
    }
    let mut etcd = client().await;
    assert_eq!(read(&mut etcd, &counter).await, (OURS + THEIRS) as u64);
}

async fn read(etcd: &mut Client, key: &str) -> u64 {
    let got = etcd.get(key, None).await.unwrap();
    got.kvs().first().map_or(0, |kv| {
        String::from_utf8_lossy(kv.value()).trim().parse().unwrap()
    })
}
