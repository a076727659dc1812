//! Names that a naive key mapping would break.

use super::{LONG_TTL, clients_and_name, take};
use crate::Harness;
use dlock_core::{LockName, MAX_NAME_LEN};

/// Awkward names are all distinct locks that can be held at the same time, inspected
/// and released: separators, path tricks, hash tags, quotes, SQL, unicode (characters
/// beyond the Basic Multilingual Plane too), the maximum length, and names that differ
/// only by case, by an escape sequence or by trailing spaces.
pub async fn awkward_names_are_distinct(h: &impl Harness) {
    let ([a, b], base) = clients_and_name(h, "names").await;
    let suffixes: Vec<String> = vec![
        String::new(),
        "/".into(),
        "/a".into(),
        "/a/".into(),
        "//a".into(),
        "/.".into(),
        "/..".into(),
        "/../..".into(),
        "/./a".into(),
        ":a".into(),
        "_a".into(),
        "%2Fa".into(),
        "/A".into(),
        "/{tag}".into(),
        "{x}".into(),
        "/'; DROP TABLE dlock_locks; --".into(),
        "/\"q\"".into(),
        "/*".into(),
        "/?".into(),
        "/ spaced ".into(),
        // differ from the base only by trailing spaces (a PAD SPACE collation's blind spot)
        " ".into(),
        "  ".into(),
        "/ünïcødé✓".into(),
        "/🦀".into(),
        "/𝄞\u{10FFFD}".into(),
        "/lock-".into(),
        "/\\".into(),
    ];
    let mut names: Vec<LockName> = suffixes
        .iter()
        .map(|s| LockName::new(&format!("{base}{s}")).expect("valid name"))
        .collect();
    let filler = MAX_NAME_LEN - base.as_str().len();
    names.push(LockName::new(&format!("{base}{}", "x".repeat(filler))).expect("max length"));
    let mut leases = Vec::new();
    for n in &names {
        leases.push(take(&*a, n, LONG_TTL).await);
    }
    for (n, lease) in names.iter().zip(&leases) {
        assert!(
            b.try_acquire(n, LONG_TTL).await.expect("try").is_none(),
            "{n:?} should be held"
        );
        let info = b.inspect(n).await.expect("inspect").expect("held");
        assert_eq!(
            &info.owner,
            lease.owner(),
            "{n:?} maps to another name's lock"
        );
    }
    for lease in &leases {
        assert!(
            a.release(lease).await.expect("release"),
            "{:?}",
            lease.name()
        );
    }
    for n in &names {
        assert!(b.inspect(n).await.expect("inspect").is_none(), "{n:?}");
    }
}
