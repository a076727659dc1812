//! Where a lock name lives in etcd's key space.

use dlock_core::{Access, LockName};

/// `PREFIX<escaped name>/` — the queue of one lock; each contender's key is this plus
/// its owner id. `/` and `%` in the name are escaped, so no name's queue is a prefix of
/// another's (`a/` must not contain the keys of `a/b`).
pub(crate) fn queue_dir(prefix: &str, name: &LockName) -> String {
    escaped_dir(prefix.to_owned(), name)
}

/// The queue of `name` for `access`'s primitive: the mutex's as [`queue_dir`];
/// semaphores under `PREFIX%sem/<escaped name>/`, read-write locks under
/// `PREFIX%rw/<escaped name>/`. An escaped name never starts with `%s` or `%r` (a `%`
/// becomes `%25`), so these never meet a mutex's queue.
pub(crate) fn dir_for(prefix: &str, name: &LockName, access: Access) -> String {
    match access {
        Access::Permit(_) => escaped_dir(format!("{prefix}%sem/"), name),
        Access::Read | Access::Write => escaped_dir(format!("{prefix}%rw/"), name),
        _ => queue_dir(prefix, name),
    }
}

fn escaped_dir(out: String, name: &LockName) -> String {
    let mut out = escaped_prefix(out, name.as_str());
    out.push('/');
    out
}

/// `out` followed by `text` with `%` and `/` escaped: every mutex queue whose name starts
/// with `text` starts with it.
pub(crate) fn escaped_prefix(mut out: String, text: &str) -> String {
    out.reserve(text.len());
    for c in text.chars() {
        match c {
            '%' => out.push_str("%25"),
            '/' => out.push_str("%2F"),
            c => out.push(c),
        }
    }
    out
}

/// The lock name of a mutex contender's key under `prefix`; `None` for a semaphore's,
/// a read-write lock's or any other key.
pub(crate) fn name_of(prefix: &str, key: &[u8]) -> Option<String> {
    let rest = std::str::from_utf8(key).ok()?.strip_prefix(prefix)?;
    let (escaped, _owner) = rest.rsplit_once('/')?;
    let mut name = String::with_capacity(escaped.len());
    let mut parts = escaped.split('%');
    name.push_str(parts.next()?);
    for part in parts {
        match part.get(..2) {
            Some("25") => name.push('%'),
            Some("2F") => name.push('/'),
            _ => return None, // `%sem/…`, `%rw/…`: not a mutex
        }
        name.push_str(&part[2..]);
    }
    (!name.is_empty() && !escaped.contains('/')).then_some(name)
}

/// The owner id at the end of a contender's key.
pub(crate) fn owner_of(key: &[u8]) -> String {
    let key = String::from_utf8_lossy(key);
    key.rsplit('/').next().unwrap_or_default().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_contenders_key_gives_back_its_name() {
        for n in ["a", "a/b", "50%/x", "%2F"] {
            let key = format!("{}0123abcd", dir(n));
            assert_eq!(
                name_of("dlock/", key.as_bytes()).as_deref(),
                Some(n),
                "{key}"
            );
        }
        let sem = dir_for("dlock/", &LockName::new("s").unwrap(), Access::Permit(2));
        assert_eq!(name_of("dlock/", format!("{sem}owner").as_bytes()), None);
        // a revoke's marker (`break_holder.rs`) is no contender, and in no queue
        let marker = escaped_prefix("dlock/%revoke/".into(), "a/b") + "/7";
        assert_eq!(name_of("dlock/", marker.as_bytes()), None);
        assert!(!marker.starts_with(&dir("%revoke")) && !marker.starts_with(&dir("a")));
        assert!(dir("a/b").starts_with(&escaped_prefix("dlock/".into(), "a/")));
    }

    fn dir(n: &str) -> String {
        queue_dir("dlock/", &LockName::new(n).unwrap())
    }

    #[test]
    fn no_queue_contains_another() {
        assert_eq!(dir("a"), "dlock/a/");
        assert_eq!(dir("a/b"), "dlock/a%2Fb/");
        assert!(!dir("a/b").starts_with(&dir("a")));
        assert_ne!(dir("a%2Fb"), dir("a/b"));
        assert_eq!(owner_of(b"dlock/a%2Fb/0123abcd"), "0123abcd");
        let sem = dir_for("dlock/", &LockName::new("a").unwrap(), Access::Permit(2));
        assert_eq!(sem, "dlock/%sem/a/");
        assert!(!sem.starts_with(&dir("%sem")) && !sem.starts_with(&dir("%")));
    }
}
