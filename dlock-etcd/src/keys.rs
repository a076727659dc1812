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

fn escaped_dir(mut out: String, name: &LockName) -> String {
    out.reserve(name.as_str().len() + 1);
    for c in name.as_str().chars() {
        match c {
            '%' => out.push_str("%25"),
            '/' => out.push_str("%2F"),
            c => out.push(c),
        }
    }
    out.push('/');
    out
}

/// The owner id at the end of a contender's key.
pub(crate) fn owner_of(key: &[u8]) -> String {
    let key = String::from_utf8_lossy(key);
    key.rsplit('/').next().unwrap_or_default().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

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
