//! A URL's credentials: written so every client reads them alike, and never shown.

use dlock_core::{LockError, redact_url};

/// Refuses a URL whose user name or password holds, unencoded, a character that ends
/// a URL's host part (`/`, `?`, `#`): each client would cut the URL at it in its own
/// way — a host named after half the password, a query parameter named after the
/// rest — and its error would show the pieces. Percent-encoded, any character works.
///
/// A URL the `url` crate reads whole (an `@` in a path or a query value) passes.
///
/// # Errors
/// [`LockError::Config`] saying what to encode, the URL shown without its password.
pub(crate) fn check(url: &str) -> Result<(), LockError> {
    let Some((_, rest)) = url.split_once("://") else {
        return Ok(());
    };
    let (Some(ends_host), Some(at)) = (rest.find(['/', '?', '#']), rest.rfind('@')) else {
        return Ok(());
    };
    if at < ends_host || url::Url::parse(url).is_ok() {
        return Ok(());
    }
    Err(LockError::Config(format!(
        "the user name or password in {} holds a character that ends a URL's host part: \
         percent-encode it (/ as %2F, ? as %3F, # as %23; also @ as %40, % as %25, : as %3A)",
        redact_url(url)
    )))
}

/// `e`, or — if its text shows the URL's password (a client echoing what it parsed) —
/// a configuration error with the password hidden.
pub(crate) fn scrubbed(e: LockError, url: &str) -> LockError {
    let Some(password) = password_of(url) else {
        return e;
    };
    let decoded = percent_encoding::percent_decode_str(password)
        .decode_utf8_lossy()
        .into_owned();
    let text = e.to_string();
    // a one- or two-letter password would match everywhere: such is no secret anyway
    let shown = [password, decoded.as_str()]
        .into_iter()
        .filter(|p| p.len() >= 3)
        .any(|p| text.contains(p));
    if !shown {
        return e;
    }
    let hidden = [password, decoded.as_str()]
        .into_iter()
        .filter(|p| p.len() >= 3)
        .fold(text, |t, p| t.replace(p, "***"));
    LockError::Config(format!("connecting to {}: {hidden}", redact_url(url)))
}

/// The password between the scheme and the host, as written (encoded).
fn password_of(url: &str) -> Option<&str> {
    let (_, rest) = url.split_once("://")?;
    let userinfo = &rest[..rest.rfind('@')?];
    let (_, password) = userinfo.split_once(':')?;
    (!password.is_empty()).then_some(password)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unencoded_host_ending_characters_are_refused_without_showing_the_password() {
        for url in [
            "postgres://u:p?a#s/s@h:5432/db",
            "zk://u:pa/ss@h:2181",
            "redlock://u:p#ss@h1:1,h2:2",
        ] {
            let e = check(url).unwrap_err().to_string();
            assert!(e.contains("percent-encode") && !e.contains("ss@"), "{e}");
        }
        for url in [
            "postgres://u:p%3Fa%23s%2Fs@h:5432/db",
            "postgres://h/db?application_name=a@b",
            "redis://h:6379",
            "sqlite:///var/lib/dlock/locks.sqlite",
            "memory://",
        ] {
            assert!(check(url).is_ok(), "{url}");
        }
    }

    #[test]
    fn an_error_that_echoes_the_password_is_replaced() {
        let url = "redis://u:s%40cret@h:6379";
        let e = scrubbed(LockError::backend_msg("bad auth for s@cret"), url);
        let text = e.to_string();
        assert!(
            matches!(e, LockError::Config(_)) && !text.contains("s@cret"),
            "{text}"
        );
        let e = scrubbed(LockError::backend_msg("refused"), url);
        assert!(!matches!(e, LockError::Config(_)), "untouched: {e}");
    }
}
