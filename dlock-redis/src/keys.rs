//! Where a lock name lives in Redis.

use dlock_core::{LockError, LockName};

use crate::options::{KeyLayout, Options};

/// The keys and channel of one lock. All share one `{hash tag}` (the escaped name), so
/// a script touching both keys stays in one Redis Cluster slot.
#[derive(Clone, Debug)]
pub(crate) struct Keys {
    /// `PREFIX{name}:lock` — value: the holder's owner id (unique per acquisition;
    /// release and renew compare it), with the lease as its PX expiry.
    pub lock: String,
    /// `PREFIX{name}:fence` — the fencing counter. Only a new holder increments it, so
    /// while a lock is held it equals the holder's token; it expires a retention after
    /// a release (see `scripts::RELEASE`).
    pub fence: String,
    /// `PREFIX{name}:released` — pub/sub channel every release and proclaim publishes
    /// on (observers and Redlock's waiters listen there); `…:released:<owner id>` is a
    /// queued waiter's own channel, where a release tells it the lock is its
    /// (`queue.rs`).
    pub channel: String,
    /// `PREFIX{name}:value` — the holder's proclaimed value, with its owner id
    /// (`proclaim.rs`).
    pub value: String,
    /// `PREFIX{name}:queue` — the waiters' owner ids, oldest first (`queue.rs`).
    pub queue: String,
    /// `PREFIX{name}:waiters` — hash: a waiter's owner id → its deadline and TTL.
    pub waiters: String,
    /// Whether waiters queue (`queue.rs`): not in the plain layout, where two names can
    /// share companion keys (`x` and `{x}` both use `{x}:…`) — one name's release must
    /// not hand its key to the other's waiter — and where other clients do not queue.
    pub fifo: bool,
}

impl Keys {
    pub(crate) fn new(opts: &Options, name: &LockName) -> Self {
        let prefix = &opts.prefix;
        match opts.layout {
            KeyLayout::Tagged => {
                let tag = escape(name.as_str());
                Self {
                    lock: format!("{prefix}{{{tag}}}:lock"),
                    fence: format!("{prefix}{{{tag}}}:fence"),
                    channel: format!("{prefix}{{{tag}}}:released"),
                    value: format!("{prefix}{{{tag}}}:value"),
                    queue: format!("{prefix}{{{tag}}}:queue"),
                    waiters: format!("{prefix}{{{tag}}}:waiters"),
                    fifo: true,
                }
            }
            // in the lock key's cluster slot: after its own hash tag if it has one,
            // else with the whole lock key as the tag — unless it holds a `}`, which
            // would end that tag early: then a tag of the lock key's slot goes first
            KeyLayout::Plain => {
                let lock = format!("{prefix}{}", name.as_str());
                let base = if has_hash_tag(&lock) {
                    lock.clone()
                } else if !lock.contains('}') {
                    format!("{{{lock}}}")
                } else {
                    let tag = slot_tag(crate::cluster::slot(lock.as_bytes()));
                    format!("{{{tag}}}:{lock}")
                };
                Self {
                    fence: format!("{base}:token"),
                    channel: format!("{base}:released"),
                    value: format!("{base}:value"),
                    queue: format!("{base}:queue"),
                    waiters: format!("{base}:waiters"),
                    fifo: false,
                    lock,
                }
            }
        }
    }
}

impl Keys {
    /// Only [`Keys::lock`], without the companions: what a renewal needs. Renewals of
    /// every held lock are in flight at once on each tick, so each one's size counts.
    pub(crate) fn lock_key(opts: &Options, name: &LockName) -> String {
        let prefix = &opts.prefix;
        match opts.layout {
            KeyLayout::Tagged => format!("{prefix}{{{}}}:lock", escape(name.as_str())),
            KeyLayout::Plain => format!("{prefix}{}", name.as_str()),
        }
    }

    /// The channel on which `owner`, queued for this lock, hears that it was granted.
    pub(crate) fn grant_channel(&self, owner: &str) -> String {
        format!("{}:{owner}", self.channel)
    }

    /// [`Keys::new`] for a new acquisition, refusing a plain-layout name whose lock key
    /// is another name's counter or channel key: `{a}:token` would take the counter of
    /// `a` for a lock (and `a`'s next token would count from its owner id). Every such
    /// key carries a hash tag and ends in one of [`COMPANIONS`].
    pub(crate) fn for_acquire(opts: &Options, name: &LockName) -> Result<Self, LockError> {
        let keys = Self::new(opts, name);
        if opts.layout == KeyLayout::Plain {
            let base = COMPANIONS
                .iter()
                .find_map(|suffix| keys.lock.strip_suffix(suffix));
            if base.is_some_and(has_hash_tag) {
                return Err(LockError::InvalidName {
                    name: name.as_str().chars().take(64).collect(),
                    reason: "in the plain key layout, its key is another name's fencing counter, \
                             release channel or value (a hash tag, then :token, :released or :value)",
                });
            }
        }
        Ok(keys)
    }
}

/// The suffixes of a plain-layout lock's companion keys and channel (its queue keys are
/// named but never used: see [`Keys::fifo`]).
const COMPANIONS: [&str; 3] = [":token", ":released", ":value"];

/// The `SCAN MATCH` pattern of the lock keys whose names start with `prefix`; `None` in
/// the plain layout, whose keys cannot be told from other programs' keys.
pub(crate) fn scan_pattern(opts: &Options, prefix: &str) -> Option<String> {
    match opts.layout {
        KeyLayout::Tagged => Some(format!(
            "{}{{{}*}}:lock",
            glob_escape(&opts.prefix),
            glob_escape(&escape(prefix))
        )),
        KeyLayout::Plain => None,
    }
}

/// The `SCAN MATCH` patterns of the holder keys of the semaphores, then of the
/// read-write locks, whose names start with `prefix`; `None` in the plain layout, as
/// [`scan_pattern`].
pub(crate) fn shared_scan_patterns(opts: &Options, prefix: &str) -> Option<[String; 2]> {
    let mutexes = scan_pattern(opts, prefix)?;
    let base = mutexes.strip_suffix(":lock")?;
    Some([format!("{base}:sem"), format!("{base}:rw")])
}

/// The name of the semaphore or read-write lock whose holder key, found by
/// [`shared_scan_patterns`], is `key`; and which of the two it is.
pub(crate) fn shared_name_of(opts: &Options, key: &str) -> Option<(String, dlock_core::Access)> {
    let rest = key.strip_prefix(opts.prefix.as_str())?.strip_prefix('{')?;
    let (tag, access) = if let Some(tag) = rest.strip_suffix("}:sem") {
        (tag, dlock_core::Access::Permit(1))
    } else {
        (rest.strip_suffix("}:rw")?, dlock_core::Access::Read)
    };
    Some((unescape(tag), access))
}

/// Why the plain layout cannot list its locks.
pub(crate) fn plain_unlisted() -> dlock_core::LockError {
    dlock_core::LockError::Unsupported {
        backend: "redis",
        what: "listing locks in the plain key layout (its keys look like any other \
               program's; use the default layout to list)"
            .into(),
    }
}

/// The lock name a key found by [`scan_pattern`] belongs to.
pub(crate) fn name_of(opts: &Options, key: &str) -> Option<String> {
    let tag = key
        .strip_prefix(opts.prefix.as_str())?
        .strip_prefix('{')?
        .strip_suffix("}:lock")?;
    Some(unescape(tag))
}

/// `text` matching itself in a Redis glob pattern.
fn glob_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// The inverse of [`escape`].
fn unescape(tag: &str) -> String {
    let mut out = String::with_capacity(tag.len());
    let mut rest = tag;
    while let Some(i) = rest.find('%') {
        out.push_str(&rest[..i]);
        let code = rest.get(i..i + 3).unwrap_or("");
        let (decoded, used) = match code {
            "%25" => ("%", 3),
            "%7B" => ("{", 3),
            "%7D" => ("}", 3),
            _ => ("%", 1), // not ours: kept as it is
        };
        out.push_str(decoded);
        rest = &rest[i + used..];
    }
    out.push_str(rest);
    out
}

/// A hash tag of Redis Cluster slot `slot`: the smallest decimal number that hashes
/// there (a table of all 16 384, made on first use: about 170 000 CRC16s of a few
/// bytes each).
pub(crate) fn slot_tag(slot: u16) -> &'static str {
    static TAGS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    let tags = TAGS.get_or_init(|| {
        let mut tags = vec![String::new(); 16_384];
        let mut left = tags.len();
        let mut n: u64 = 0;
        while left > 0 {
            let candidate = n.to_string();
            let s = usize::from(crate::cluster::slot(candidate.as_bytes()));
            if let Some(t) = tags.get_mut(s)
                && t.is_empty()
            {
                *t = candidate;
                left -= 1;
            }
            n += 1;
        }
        tags
    });
    tags.get(usize::from(slot)).map_or("0", String::as_str)
}

/// Whether Redis Cluster hashes `key` by a tag: a `{` followed, later, by a `}` with
/// something between them.
pub(crate) fn has_hash_tag(key: &str) -> bool {
    key.find('{')
        .and_then(|open| key[open + 1..].find('}'))
        .is_some_and(|len| len > 0)
}

/// Escapes `%`, `{` and `}` so a name can neither end the hash tag early nor make it
/// empty (`{}` would hash the whole key and split a lock from its counter), and two
/// different names never give the same key.
pub(crate) fn escape(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        match c {
            '%' => out.push_str("%25"),
            '{' => out.push_str("%7B"),
            '}' => out.push_str("%7D"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_scanned_key_gives_back_its_name() {
        let opts = Options::new(std::time::Duration::from_secs(1));
        for name in ["a", "jobs/nightly", "%7B{x}%", "%25", "b*[?]\\"] {
            let n = LockName::new(name).unwrap();
            let key = Keys::new(&opts, &n).lock;
            assert_eq!(name_of(&opts, &key).as_deref(), Some(name), "{key}");
        }
        assert_eq!(
            scan_pattern(&opts, "b*").as_deref(),
            Some(format!("{}{{b\\**}}:lock", opts.prefix).as_str())
        );
    }
    use super::*;

    #[test]
    fn a_plain_name_that_is_another_names_counter_is_refused() {
        let mut opts = Options::new(std::time::Duration::from_secs(1));
        opts.layout = KeyLayout::Plain;
        let mut refused = 0;
        for prefix in ["", "dlock:"] {
            opts.prefix = prefix.into();
            for taken in ["a", "user:{42}", "x}y"] {
                let keys = Keys::new(&opts, &LockName::new(taken).unwrap());
                for key in [&keys.fence, &keys.channel] {
                    // only keys under the prefix are some name's lock key
                    let Some(name) = key.strip_prefix(prefix) else {
                        continue;
                    };
                    let err = Keys::for_acquire(&opts, &LockName::new(name).unwrap()).unwrap_err();
                    assert!(
                        matches!(err, LockError::InvalidName { .. }),
                        "{name}: {err}"
                    );
                    refused += 1;
                }
            }
        }
        assert!(refused >= 8, "{refused}");
        for fine in ["a:token", "orders/42", "{a}:tokens", "{a}:lock"] {
            assert!(
                Keys::for_acquire(&opts, &LockName::new(fine).unwrap()).is_ok(),
                "{fine}"
            );
        }
        // the tagged layout escapes braces: no name meets another's keys
        opts.layout = KeyLayout::Tagged;
        assert!(Keys::for_acquire(&opts, &LockName::new("{a}:token").unwrap()).is_ok());
    }

    #[test]
    fn lock_key_is_the_lock_key_of_every_layout() {
        let mut opts = Options::new(std::time::Duration::from_secs(1));
        for layout in [KeyLayout::Tagged, KeyLayout::Plain] {
            opts.layout = layout;
            for n in ["orders/42", "user:{42}", "a}b", "%7B{x}%", "{a}:token"] {
                let name = LockName::new(n).unwrap();
                assert_eq!(
                    Keys::lock_key(&opts, &name),
                    Keys::new(&opts, &name).lock,
                    "{n}"
                );
            }
        }
    }

    fn k(n: &str) -> Keys {
        let opts = Options::new(std::time::Duration::from_secs(1));
        Keys::new(&opts, &LockName::new(n).unwrap())
    }

    #[test]
    fn the_plain_layout_names_the_lock_key_as_the_set_nx_family_does() {
        let mut opts = Options::new(std::time::Duration::from_secs(1));
        opts.layout = KeyLayout::Plain;
        opts.prefix = String::new();
        let keys = Keys::new(&opts, &LockName::new("orders/42").unwrap());
        assert_eq!(keys.lock, "orders/42");
        assert_eq!(keys.fence, "{orders/42}:token");
        assert_eq!(keys.channel, "{orders/42}:released");
        // a name with its own hash tag keeps it first
        let keys = Keys::new(&opts, &LockName::new("user:{42}").unwrap());
        assert_eq!(keys.lock, "user:{42}");
        assert_eq!(keys.fence, "user:{42}:token");
        assert!(has_hash_tag("a{b}") && !has_hash_tag("a{}b") && !has_hash_tag("a}b{"));
        // every key of a name in its lock key's slot, awkward braces included
        for name in [
            "orders/42",
            "a}b",
            "x{}y{z}",
            "}",
            "a{b",
            "{}",
            "a{}b}c",
            "user:{42}",
        ] {
            let keys = Keys::new(&opts, &LockName::new(name).unwrap());
            let slot = crate::cluster::slot(keys.lock.as_bytes());
            assert_eq!(
                crate::cluster::slot(keys.fence.as_bytes()),
                slot,
                "{keys:?}"
            );
            assert_eq!(
                crate::cluster::slot(keys.channel.as_bytes()),
                slot,
                "{keys:?}"
            );
        }
        assert_ne!(
            Keys::new(&opts, &LockName::new("a}b").unwrap()).fence,
            Keys::new(&opts, &LockName::new("a}c").unwrap()).fence
        );
    }

    #[test]
    fn every_slot_has_a_tag() {
        for slot in [0, 1, 12_182, 16_383] {
            assert_eq!(
                crate::cluster::slot(format!("{{{}}}x", slot_tag(slot)).as_bytes()),
                slot
            );
        }
    }

    #[test]
    fn names_cannot_break_the_hash_tag_or_collide() {
        assert_eq!(k("a").lock, "dlock:{a}:lock");
        assert_eq!(k("}x").lock, "dlock:{%7Dx}:lock");
        assert_eq!(k("{}").fence, "dlock:{%7B%7D}:fence");
        assert_ne!(k("%7D").lock, k("}").lock);
        assert_ne!(k("a}:lock").lock, k("a").lock);
    }
}
