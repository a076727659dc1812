//! Where a lock name lives in ZooKeeper's tree.

use dlock_core::LockName;

/// The queue node of one lock: `ROOT/<encoded name>`, a single path segment whatever
/// the name. `%`, `/` and `.` are percent-encoded (so no segment can be `.`, `..` or
/// empty, and no name can escape the root or nest under another), as are the code
/// points ZooKeeper refuses in paths: the private-use and specials ranges, and every
/// character outside the Basic Multilingual Plane (an emoji, say), which Java holds as
/// a UTF-16 surrogate pair and ZooKeeper rejects as "bad arguments".
pub(crate) fn queue_dir(root: &str, name: &LockName) -> String {
    let mut out = String::with_capacity(root.len() + name.as_str().len() + 1);
    out.push_str(root);
    out.push('/');
    for c in name.as_str().chars() {
        let forbidden = matches!(
            c,
            '%' | '/' | '.' | '\u{E000}'..='\u{F8FF}' | '\u{FFF0}'..='\u{FFFF}' | '\u{10000}'..
        );
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

/// The lock name a child of the root stands for (the inverse of [`queue_dir`]'s
/// encoding); `None` for a semaphore's or a read-write lock's queue (`%sem:…`,
/// `%rw:…`) or a node dlock did not name.
pub(crate) fn name_of(segment: &str) -> Option<String> {
    let mut bytes = Vec::with_capacity(segment.len());
    let mut rest = segment.as_bytes();
    while let Some((&b, tail)) = rest.split_first() {
        if b == b'%' {
            let hex = std::str::from_utf8(tail.get(..2)?).ok()?;
            bytes.push(u8::from_str_radix(hex, 16).ok()?);
            rest = &tail[2..];
        } else {
            bytes.push(b);
            rest = tail;
        }
    }
    String::from_utf8(bytes).ok().filter(|n| !n.is_empty())
}

/// How a mutex's contender nodes are named.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum NodeLayout {
    /// dlock's own: `lock-<owner>-<sequence>`. The default.
    #[default]
    Dlock,
    /// Apache Curator's (`InterProcessMutex`, `LeaderSelector`; zookeeper-client's
    /// `LockPrefix::new_curator(dir, "lock-")`): `_c_<owner>-lock-<sequence>`, ordered
    /// by the sequence after the last `lock-`, so that Curator's contenders and dlock's
    /// form one queue on the same path.
    Curator,
}

impl std::str::FromStr for NodeLayout {
    type Err = dlock_core::LockError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "dlock" => Ok(Self::Dlock),
            "curator" => Ok(Self::Curator),
            _ => Err(dlock_core::LockError::Config(format!(
                "layout={s}: expected dlock (the default) or curator"
            ))),
        }
    }
}

impl NodeLayout {
    /// The prefix of a contender's node name; ZooKeeper appends the sequence number.
    /// The owner id in the name lets a client find its node again after a lost reply.
    pub(crate) fn node_prefix(self, owner: &str) -> String {
        match self {
            Self::Dlock => format!("lock-{owner}-"),
            Self::Curator => format!("_c_{owner}-lock-"),
        }
    }
}

/// The sequence number at the end of a contender's node name, in either layout (a
/// queue is read the same way whichever layout wrote its nodes: Curator's contenders
/// count whenever they share the path).
///
/// ZooKeeper's sequence is a signed 32-bit counter of the parent's child changes,
/// written as `%010d`: after 2³¹ changes it wraps to `-2147483648` and counts up from
/// there. In dlock's layout the owner id (hex) holds no `-`, so everything after the
/// first `-` that follows it is the sequence, sign included; in Curator's, everything
/// after the last `lock-` (a `-` sign cannot be mistaken for it).
pub(crate) fn sequence(node: &str) -> Option<i32> {
    // an empty owner is Curator's unprotected `lock-<seq>` with a wrapped (negative) seq
    if let Some(seq) = node
        .strip_prefix("lock-")
        .and_then(|rest| rest.split_once('-'))
        .filter(|(owner, _)| !owner.is_empty())
        .and_then(|(_, seq)| seq.parse().ok())
    {
        return Some(seq);
    }
    node.rsplit_once("lock-")?.1.parse().ok()
}

/// The owner id inside a contender's node name (in Curator's layout: the text between
/// `_c_` and `-lock-`, a UUID for Curator's own contenders).
pub(crate) fn owner_of(node: &str) -> Option<&str> {
    if let Some(rest) = node.strip_prefix("_c_") {
        return Some(rest.rsplit_once("-lock-")?.0);
    }
    Some(node.strip_prefix("lock-")?.split_once('-')?.0)
}

/// Where `seq` stands relative to `origin` in creation order. The contenders of one
/// queue are created within far fewer than 2³¹ changes of each other, so the wrapping
/// difference orders them correctly across the wrap (serial-number arithmetic, as in
/// RFC 1982), where comparing the raw numbers would put the newest first.
fn offset(seq: i32, origin: i32) -> i32 {
    seq.wrapping_sub(origin)
}

/// The contender created first: the holder.
pub(crate) fn lowest(children: &[String]) -> Option<&String> {
    let origin = children.iter().find_map(|c| sequence(c))?;
    children
        .iter()
        .filter_map(|c| Some((offset(sequence(c)?, origin), c)))
        .min_by_key(|(o, _)| *o)
        .map(|(_, c)| c)
}

/// The contender created right before `seq`, if any.
pub(crate) fn predecessor(children: &[String], seq: i32) -> Option<&String> {
    children
        .iter()
        .filter_map(|c| Some((offset(sequence(c)?, seq), c)))
        .filter(|(o, _)| *o < 0)
        .max_by_key(|(o, _)| *o)
        .map(|(_, c)| c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_queue_node_gives_back_its_name() {
        for n in ["a", "a/b", "50%.x", "émoji 😀", "\u{E001}"] {
            let dir = queue_dir("/dlock", &LockName::new(n).unwrap());
            let segment = dir.strip_prefix("/dlock/").unwrap();
            assert_eq!(name_of(segment).as_deref(), Some(n), "{segment}");
        }
        assert_eq!(name_of("%sem:abc"), None);
        assert_eq!(name_of("%rw:abc"), None);
    }

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
        assert_eq!(dir("a\u{1F980}"), "/dlock/a%F0%9F%A6%80");
    }

    fn nodes(seqs: &[&str]) -> Vec<String> {
        seqs.iter()
            .enumerate()
            .map(|(i, s)| format!("lock-{i:032x}-{s}"))
            .collect()
    }

    #[test]
    fn curators_nodes_and_ours_order_in_one_queue() {
        let ours = NodeLayout::Curator.node_prefix("ab12");
        assert_eq!(ours, "_c_ab12-lock-");
        let children = vec![
            format!("{ours}0000000007"),
            "_c_3f2a9c1e-55aa-4b1e-9d0e-1c2b3a4d5e6f-lock-0000000005".to_owned(),
            "lock-0000000006".to_owned(), // Curator without protection
            format!("{}0000000004", NodeLayout::Dlock.node_prefix("cd34")),
        ];
        assert_eq!(sequence(&children[0]), Some(7));
        assert_eq!(sequence(&children[1]), Some(5));
        assert_eq!(sequence(&children[2]), Some(6));
        assert_eq!(sequence(&children[3]), Some(4));
        assert_eq!(sequence("lock--2147483647"), Some(-2_147_483_647));
        assert_eq!(owner_of("lock--2147483647"), Some(""));
        assert_eq!(owner_of(&children[0]), Some("ab12"));
        assert_eq!(
            owner_of(&children[1]),
            Some("3f2a9c1e-55aa-4b1e-9d0e-1c2b3a4d5e6f")
        );
        assert_eq!(owner_of(&children[3]), Some("cd34"));
        assert_eq!(lowest(&children), Some(&children[3]));
        assert_eq!(predecessor(&children, 7), Some(&children[2]));
        assert_eq!(predecessor(&children, 6), Some(&children[1]));
        assert_eq!(
            "curator".parse::<NodeLayout>().unwrap(),
            NodeLayout::Curator
        );
        assert!("flat".parse::<NodeLayout>().is_err());
    }

    #[test]
    fn order_survives_the_sequence_wrapping_around() {
        // created in this order: the last two after the parent's counter wrapped
        let c = nodes(&["2147483646", "2147483647", "-2147483648", "-2147483647"]);
        assert_eq!(sequence(&c[2]), Some(i32::MIN));
        assert_eq!(owner_of(&c[2]), Some(format!("{:032x}", 2).as_str()));
        assert_eq!(lowest(&c), Some(&c[0]));
        assert_eq!(predecessor(&c, i32::MIN), Some(&c[1]));
        assert_eq!(predecessor(&c, i32::MIN + 1), Some(&c[2]));
        assert_eq!(predecessor(&c, i32::MAX), Some(&c[0]));
        assert_eq!(predecessor(&c, 2_147_483_646), None);
        // the holder released: the first node after the wrap holds next
        assert_eq!(lowest(&c[2..]), Some(&c[2]));
        assert_eq!(lowest(&c[1..]), Some(&c[1]));
        // ZooKeeper's %010d of small negatives
        let c = nodes(&["-000000002", "-000000001", "0000000000"]);
        assert_eq!(sequence(&c[1]), Some(-1));
        assert_eq!(lowest(&c), Some(&c[0]));
        assert_eq!(predecessor(&c, 0), Some(&c[1]));
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
