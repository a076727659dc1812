//! Settings shared by `RedisLock` and `Redlock`, from the builder or URL parameters.

use std::time::Duration;

use dlock_core::backend::{WaitPolicy, take_query};
use dlock_core::{LockError, parse_duration};

/// The default key prefix.
pub const DEFAULT_PREFIX: &str = "dlock:";

#[derive(Clone, Debug)]
pub(crate) struct Options {
    pub prefix: String,
    pub timeout: Duration,
    pub policy: WaitPolicy,
    /// A CA certificate (PEM) to trust for `rediss://` instead of the system roots.
    pub tls_ca: Option<Vec<u8>>,
}

impl Options {
    pub(crate) fn new(timeout: Duration) -> Self {
        Self {
            prefix: DEFAULT_PREFIX.into(),
            timeout,
            policy: WaitPolicy::default(),
            tls_ca: None,
        }
    }
}

/// What both builders collect: the options, and the first invalid value given.
#[derive(Clone, Debug)]
pub(crate) struct Settings {
    pub opts: Options,
    error: Option<String>,
}

impl Settings {
    pub(crate) fn new(timeout: Duration) -> Self {
        Self {
            opts: Options::new(timeout),
            error: None,
        }
    }

    pub(crate) fn prefix(&mut self, prefix: &str) {
        match validate_prefix(prefix) {
            Ok(()) => prefix.clone_into(&mut self.opts.prefix),
            Err(e) => self.error = Some(e.to_string()),
        }
    }

    /// The options, or the first invalid value as a `Config` error.
    pub(crate) fn finish(self) -> Result<Options, LockError> {
        match self.error {
            Some(e) => Err(LockError::Config(e)),
            None => Ok(self.opts),
        }
    }
}

/// Checks a key prefix: no `{` or `}` (they would change the keys' hash tag) and no
/// control characters.
pub(crate) fn validate_prefix(prefix: &str) -> Result<(), LockError> {
    if prefix.contains(['{', '}']) || prefix.chars().any(char::is_control) || prefix.len() > 128 {
        return Err(LockError::Config(format!(
            "key prefix {prefix:?} must be at most 128 characters without braces or control characters"
        )));
    }
    Ok(())
}

/// Takes dlock's own `prefix` and `timeout` query parameters off a Redis URL.
pub(crate) fn take_url_options(url: &str, opts: &mut Options) -> Result<String, LockError> {
    take_query(url, |key, value| {
        match key {
            "prefix" => {
                validate_prefix(value).map_err(|e| e.to_string())?;
                opts.prefix = value.to_owned();
            }
            "timeout" => opts.timeout = parse_duration(value).map_err(|e| e.to_string())?,
            _ => return Ok(false),
        }
        Ok(true)
    })
}
