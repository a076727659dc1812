//! Where a lock name lives in ZooKeeper's tree.

use dlock_core::LockName;

/// The queue node of one lock: `ROOT/<encoded name>`, a single path segment whatever
/// the name. `%`, `/` and `.` are percent-encoded (so no segment can be `.`, `..` or
/// empty, and no name can escape the root or nest under another), as are the code
/// points ZooKeeper refuses in paths.
pub(crate) fn queue_dir(root: &str, name: &LockName) -> String {
    let mut out = String::with_capacity(root.len() + name.as_str().len() + 1);
    out.push_str(root);
    out.push('/');
    for c in name.as_str().chars() {
        let forbidden =
            matches!(c, '%' | '/' | '.' | '\u{E000}'..='\u{F8FF}' | '\u{FFF0}'..='\u{FFFF}');
        if forbidden {
            let mut buf = [0u8; 4];
            for b in c.encode_utf8(&mut buf).bytes() {
                out.push_str(&format!("%{b:02X}"));
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The prefix of a contender's node name; ZooKeeper appends the sequence number.
/// The owner id in the name lets a client find its node again after a lost reply.
pub(crate) fn node_prefix(owner: &str) -> String {
    format!("lock-{owner}-")
}

/// The sequence number at the end of a contender's node name.
pub(crate) fn sequence(node: &str) -> Option<i64> {
    node.strip_prefix("lock-")?.rsplit_once('-')?.1.parse().ok()
}

/// The owner id inside a contender's node name.
pub(crate) fn owner_of(node: &str) -> Option<&str> {
    Some(node.strip_prefix("lock-")?.rsplit_once('-')?.0)
}

/// The contender with the lowest sequence number: the holder.
pub(crate) fn lowest(children: &[String]) -> Option<&String> {
    children
        .iter()
        .filter(|c| sequence(c).is_some())
        .min_by_key(|c| sequence(c))
}

/// The contender right before `seq`, if any.
pub(crate) fn predecessor(children: &[String], seq: i64) -> Option<&String> {
    children
        .iter()
        .filter(|c| sequence(c).is_some_and(|s| s < seq))
        .max_by_key(|c| sequence(c))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(n: &str) -> String {
        queue_dir("/dlock", &LockName::new(n).unwrap())
    }

    #[test]
    fn names_stay_one_safe_segment() {
        assert_eq!(dir("a"), "/dlock/a");
        assert_eq!(dir(".."), "/dlock/%2E%2E");
        assert_eq!(dir("a/b"), "/dlock/a%2Fb");
        assert_eq!(dir("/"), "/dlock/%2F");
        assert_eq!(dir("%2F"), "/dlock/%252F");
        assert_eq!(dir("x\u{E000}"), "/dlock/x%EE%80%80");
    }

    #[test]
    fn picks_holder_and_predecessor_by_sequence() {
        let c: Vec<String> = [
            "lock-bb-0000000007",
            "lock-aa-0000000003",
            "lock-cc-0000000011",
            "junk",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        assert_eq!(lowest(&c).unwrap(), "lock-aa-0000000003");
        assert_eq!(predecessor(&c, 11).unwrap(), "lock-bb-0000000007");
        assert_eq!(predecessor(&c, 3), None);
        assert_eq!(owner_of("lock-aa-0000000003"), Some("aa"));
    }
}
