//! The one error type every adapter returns.

use std::time::Duration;

/// A boxed error from a client library, kept as the `source` of a [`LockError`].
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Everything that can go wrong with a lock operation.
///
/// Adapters map their client library's errors onto these variants so callers can
/// decide what to do without knowing the backend: `Unavailable` is worth a retry,
/// `LeaseLost` means stop working on the protected resource, `Config` and
/// `InvalidArgument` are caller mistakes.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LockError {
    /// The lock name is empty, too long or contains a control character.
    #[error("invalid lock name {name:?}: {reason}")]
    InvalidName {
        /// The rejected name (lossy, for the message only).
        name: String,
        /// Why it was rejected.
        reason: &'static str,
    },
    /// An argument other than the name is out of range (for example a zero TTL).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// `acquire` waited for the whole `wait` duration without getting the lock.
    #[error("timed out after {waited:?} waiting for lock {name:?}")]
    Timeout {
        /// The lock that stayed busy.
        name: String,
        /// How long the caller waited.
        waited: Duration,
    },
    /// The lease is no longer held: it expired, was released, or was taken over.
    #[error("lease on lock {name:?} is lost")]
    LeaseLost {
        /// The lock whose lease was lost.
        name: String,
    },
    /// The hold reached its cap ([`crate::Locker::with_max_hold`]): the guarded work
    /// was stopped and the lock released.
    #[error("lock {name:?} was held for its maximum of {max_hold:?}")]
    HoldExpired {
        /// The lock.
        name: String,
        /// The cap.
        max_hold: Duration,
    },
    /// A fenced write carried a token below one already used on its resource: a later
    /// holder has written there, so this holder's lease is stale. Nothing was written.
    #[error("stale fencing token {offered} on {resource:?}: {} was already used there", seen.map_or_else(|| "a higher one".to_owned(), |s| s.to_string()))]
    StaleToken {
        /// The resource written to.
        resource: String,
        /// The highest token used there, where the store says.
        seen: Option<u64>,
        /// The token this write carried.
        offered: u64,
    },
    /// The server could not be reached, or did not answer in time. The outcome of the
    /// operation is unknown.
    #[error("backend unavailable: {message}")]
    Unavailable {
        /// What failed, without secrets.
        message: String,
        /// The client library's error, if any.
        #[source]
        source: Option<BoxError>,
    },
    /// The server answered with an error.
    #[error("backend error: {message}")]
    Backend {
        /// What failed, without secrets.
        message: String,
        /// The client library's error, if any.
        #[source]
        source: Option<BoxError>,
    },
    /// A URL or an option is malformed or names a backend that is not compiled in.
    #[error("configuration error: {0}")]
    Config(String),
    /// The backend does not offer this primitive (see [`crate::Capabilities::shared`]):
    /// it could not keep its guarantees safely.
    #[error("{backend} does not offer {what}")]
    Unsupported {
        /// The backend's name.
        backend: &'static str,
        /// What was asked for.
        what: String,
    },
    /// A semaphore was asked for with another permit count than its current holders
    /// and waiters use. The count is part of a name's contract while anyone holds or
    /// waits for it, so two callers can never admit different numbers at once.
    #[error("semaphore {name:?} is in use with {in_use} permits; asked with {asked}")]
    PermitsMismatch {
        /// The semaphore.
        name: String,
        /// The count its holders and waiters use.
        in_use: u32,
        /// The count this caller asked with.
        asked: u32,
    },
}

impl LockError {
    /// An [`LockError::Unavailable`] with a message and a source.
    pub fn unavailable(message: impl Into<String>, source: impl Into<BoxError>) -> Self {
        Self::Unavailable {
            message: message.into(),
            source: Some(source.into()),
        }
    }

    /// An [`LockError::Unavailable`] with a message and no source: the server did not
    /// answer, a queue stopped, a grant could not be confirmed in time.
    pub fn transient(message: impl Into<String>) -> Self {
        Self::Unavailable {
            message: message.into(),
            source: None,
        }
    }

    /// An [`LockError::Backend`] with a message and no source: the server answered
    /// with something this client cannot use.
    pub fn backend_msg(message: impl Into<String>) -> Self {
        Self::Backend {
            message: message.into(),
            source: None,
        }
    }

    /// An [`LockError::Backend`] with a message and a source.
    pub fn backend(message: impl Into<String>, source: impl Into<BoxError>) -> Self {
        Self::Backend {
            message: message.into(),
            source: Some(source.into()),
        }
    }

    /// A [`LockError::Unsupported`]: `backend` does not offer `access`.
    pub fn unsupported(backend: &'static str, access: crate::Access) -> Self {
        let what = match access {
            crate::Access::Exclusive => "this lock".to_owned(),
            crate::Access::Permit(_) => "semaphores".to_owned(),
            crate::Access::Read | crate::Access::Write => "read-write locks".to_owned(),
        };
        Self::Unsupported { backend, what }
    }

    /// A [`LockError::Unsupported`]: `backend` does not offer `what` (a feature).
    #[must_use]
    pub fn unsupported_feature(backend: &'static str, what: &str) -> Self {
        Self::Unsupported {
            backend,
            what: what.to_owned(),
        }
    }

    /// A [`LockError::StaleToken`].
    #[must_use]
    pub fn stale_token(resource: &str, seen: Option<u64>, offered: crate::FencingToken) -> Self {
        Self::StaleToken {
            resource: resource.to_owned(),
            seen,
            offered: offered.get(),
        }
    }

    /// A [`LockError::PermitsMismatch`].
    pub fn permits_mismatch(name: &crate::LockName, in_use: u32, asked: u32) -> Self {
        Self::PermitsMismatch {
            name: name.as_str().to_owned(),
            in_use,
            asked,
        }
    }

    /// A [`LockError::LeaseLost`] for `name`.
    pub fn lease_lost(name: &crate::LockName) -> Self {
        Self::LeaseLost {
            name: name.as_str().to_owned(),
        }
    }

    /// `true` for errors after which the operation's outcome is unknown and a retry may
    /// succeed ([`LockError::Unavailable`]).
    #[must_use]
    pub fn is_transient(&self) -> bool {
        matches!(self, Self::Unavailable { .. })
    }
}

/// Removes the secrets from a URL so it can appear in errors and logs: the password of
/// its userinfo, and the value of every query parameter that carries one
/// (`password`, `sslpassword`, `pass`, `pwd`, `secret`, `token`, `auth`).
///
/// `redis://user:secret@host:6379/0` becomes `redis://user:***@host:6379/0`;
/// `postgres://h/db?password=x` becomes `postgres://h/db?password=***`. The userinfo
/// runs to the *last* `@` of the URL, so a password holding `/`, `?`, `#` or `@` is
/// hidden whole (a query value with an `@` hides more than it needs, never less). A
/// string without either is returned unchanged.
#[must_use]
pub fn redact_url(url: &str) -> String {
    let Some(scheme_end) = url.find("://").map(|i| i + 3) else {
        return redact_query(url);
    };
    let rest = &url[scheme_end..];
    let Some(at) = rest.rfind('@') else {
        return redact_query(url);
    };
    let userinfo = &rest[..at];
    let shown_user = match userinfo.find(':') {
        Some(colon) => format!("{}:***", &userinfo[..colon]),
        None => userinfo.to_owned(),
    };
    redact_query(&format!(
        "{}{}@{}",
        &url[..scheme_end],
        shown_user,
        &rest[at + 1..]
    ))
}

/// Query parameters whose values are secrets.
const SECRET: [&str; 7] = [
    "password",
    "sslpassword",
    "pass",
    "pwd",
    "secret",
    "token",
    "auth",
];

/// `key=value` as an error may show it: the value hidden if it is a secret.
pub(crate) fn shown_pair(key: &str, value: &str) -> String {
    if SECRET.contains(&key.to_ascii_lowercase().as_str()) {
        format!("{key}=***")
    } else {
        format!("{key}={value}")
    }
}

/// The query parameters of `url` that carry a secret, with their values hidden.
fn redact_query(url: &str) -> String {
    let Some((base, query)) = url.split_once('?') else {
        return url.to_owned();
    };
    let (query, fragment) = match query.split_once('#') {
        Some((q, f)) => (q, Some(f)),
        None => (query, None),
    };
    let pairs: Vec<String> = query
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some((k, v)) => shown_pair(k, v),
            None => pair.to_owned(),
        })
        .collect();
    let mut out = format!("{base}?{}", pairs.join("&"));
    if let Some(f) = fragment {
        out.push('#');
        out.push_str(f);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redacts_password_but_keeps_user_and_host() {
        assert_eq!(
            redact_url("redis://u:s3cret@h:1/0?x=1"),
            "redis://u:***@h:1/0?x=1"
        );
        assert_eq!(redact_url("postgres://h/db"), "postgres://h/db");
        assert_eq!(redact_url("redis://:pw@h"), "redis://:***@h");
        assert_eq!(redact_url("sqlite:///tmp/x"), "sqlite:///tmp/x");
        assert_eq!(redact_url("no url"), "no url");
    }

    /// Both leaked before: the userinfo was cut at the first `/`, and query
    /// parameters were not looked at.
    #[test]
    fn redacts_a_password_with_a_slash_and_one_in_the_query() {
        let shown = redact_url("postgres://app:pa/ss?w#rd@db:5432/app");
        assert!(!shown.contains("pa/ss"), "{shown}");
        assert_eq!(shown, "postgres://app:***@db:5432/app");
        let shown = redact_url("postgres://db/app?sslmode=disable&password=hunter2&table=t");
        assert_eq!(
            shown,
            "postgres://db/app?sslmode=disable&password=***&table=t"
        );
        let shown = redact_url("mysql://u@h/d?PASSWORD=x#frag");
        assert_eq!(shown, "mysql://u@h/d?PASSWORD=***#frag");
        assert_eq!(
            redact_url("redlock://:pw@h1:1,h2:2?fallback=local"),
            "redlock://:***@h1:1,h2:2?fallback=local"
        );
    }

    #[test]
    fn only_unavailable_is_transient() {
        assert!(LockError::unavailable("x", "y").is_transient());
        assert!(!LockError::backend("x", "y").is_transient());
        assert!(!LockError::Config("x".into()).is_transient());
    }
}
