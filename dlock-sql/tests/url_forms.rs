//! What a SQL URL may say, and what an error about one may show.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use dlock_core::LockError;
use dlock_sql::SqlLock;

/// A password holding a `/`, and one given as `?password=`, never reach an error's
/// text or its Debug output (both leaked before).
#[tokio::test]
async fn errors_never_show_a_password() {
    for url in [
        "postgres://u:hun/ter2@127.0.0.1:1/db",
        "postgres://u@127.0.0.1:1/db?password=hunter2",
        "mysql://u@127.0.0.1:1/db?sslmode=disable&password=hunter2",
    ] {
        let e = SqlLock::builder(url)
            .op_timeout(Duration::from_secs(1))
            .connect()
            .await
            .unwrap_err();
        let (shown, debug) = (e.to_string(), format!("{e:?}"));
        for secret in ["hunter2", "hun/ter2", "ter2"] {
            assert!(
                !shown.contains(secret) && !debug.contains(secret),
                "{url}: {shown} / {debug}"
            );
        }
    }
}

/// `sqlite:/x` (one slash) is refused, naming the two forms it could have meant; it
/// used to create the file `/x` at the root of the filesystem.
#[tokio::test]
async fn a_one_slash_sqlite_url_is_refused() {
    let root = format!("/dlock-url-forms-{:016x}.sqlite", dlock_core::random_u64());
    let e = SqlLock::connect(&format!("sqlite:{root}"))
        .await
        .unwrap_err();
    let created = std::path::Path::new(&root).exists();
    let _ = std::fs::remove_file(&root);
    assert!(!created, "it created {root}");
    assert!(matches!(e, LockError::Config(_)), "{e:?}");
    let text = e.to_string();
    assert!(text.contains(&format!("sqlite://{root}")), "{text}");
    // the documented forms open
    let dir =
        std::env::temp_dir().join(format!("dlock-url-forms-{:016x}", dlock_core::random_u64()));
    std::fs::create_dir_all(&dir).unwrap();
    SqlLock::connect(&format!("sqlite://{}/abs.sqlite", dir.display()))
        .await
        .expect("sqlite:///abs");
    SqlLock::connect("sqlite::memory:").await.expect("memory");
}
