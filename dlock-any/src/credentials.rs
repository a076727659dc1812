//! A URL's credentials: written so every client reads them alike, and never shown.

use dlock_core::{LockError, redact_url};

/// Refuses a URL whose user name or password holds, unencoded, a character that ends
/// a URL's host part (`/`, `?`, `#`) **(contract)**: each client would cut the URL at
/// it in its own way — a host named after half the password, a query parameter named
/// after the rest — and its error would show the pieces. Percent-encoded, any
/// character works. [`connect`](crate::connect) checks every URL so; a program that
/// connects an adapter itself (`SqlLock::connect`) calls this first.
///
/// A URL the `url` crate reads whole (an `@` in a path or a query value) passes.
///
/// ```
/// assert!(dlock_any::check_credentials("postgres://app:p%3Fss@db/app").is_ok());
/// assert!(dlock_any::check_credentials("postgres://app:p?ss@db/app").is_err());
/// ```
///
/// # Errors
/// [`LockError::Config`] saying what to encode, the URL shown without its password.
pub fn check_credentials(url: &str) -> Result<(), LockError> {
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

/// `e` with the URL's password (as written, and percent-decoded) hidden from its text,
/// if a client echoed it **(contract)**; the kind of error is kept (an `Unavailable`
/// stays one, so callers still retry it), its source dropped (its text may hold the
/// password too). A password of fewer than three characters is left: it would match
/// everywhere, and is no secret.
#[must_use]
pub fn hide_password(e: LockError, url: &str) -> LockError {
    let Some(password) = password_of(url) else {
        return e;
    };
    let decoded = percent_encoding::percent_decode_str(password)
        .decode_utf8_lossy()
        .into_owned();
    let secrets: Vec<&str> = [password, decoded.as_str()]
        .into_iter()
        .filter(|p| p.len() >= 3)
        .collect();
    let shows = |text: &str| secrets.iter().any(|p| text.contains(p));
    if !shows(&e.to_string()) && !shows(&format!("{e:?}")) {
        return e;
    }
    let hide = |text: &str| {
        secrets
            .iter()
            .fold(text.to_owned(), |t, p| t.replace(p, "***"))
    };
    match e {
        LockError::Unavailable { message, .. } => LockError::transient(hide(&message)),
        LockError::Backend { message, .. } => LockError::backend_msg(hide(&message)),
        LockError::InvalidArgument(m) => LockError::InvalidArgument(hide(&m)),
        other => LockError::Config(hide(&other.to_string())),
    }
}

/// The password between the scheme and the host, as written (encoded): the userinfo
/// is what precedes the authority's last `@`, the authority ending at the first `/`,
/// `?` or `#` ([`check_credentials`] refuses URLs where that would cut a password).
fn password_of(url: &str) -> Option<&str> {
    let (_, rest) = url.split_once("://")?;
    let authority = &rest[..rest.find(['/', '?', '#']).unwrap_or(rest.len())];
    let userinfo = &authority[..authority.rfind('@')?];
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
            let e = check_credentials(url).unwrap_err().to_string();
            assert!(e.contains("percent-encode") && !e.contains("ss@"), "{e}");
        }
        for url in [
            "postgres://u:p%3Fa%23s%2Fs@h:5432/db",
            "postgres://h/db?application_name=a@b",
            "redis://h:6379",
            "sqlite:///var/lib/dlock/locks.sqlite",
            "memory://",
        ] {
            assert!(check_credentials(url).is_ok(), "{url}");
        }
    }

    #[test]
    fn an_error_that_echoes_the_password_is_replaced() {
        let url = "redis://u:s%40cret@h:6379/?note=a@b";
        let e = hide_password(LockError::transient("bad auth for s@cret"), url);
        let text = e.to_string();
        assert!(
            matches!(e, LockError::Unavailable { .. }),
            "still unavailable: {e:?}"
        );
        assert!(!text.contains("s@cret"), "{text}");
        let e = hide_password(LockError::backend_msg("echo s%40cret"), url);
        let text = e.to_string();
        assert!(
            matches!(e, LockError::Backend { .. }) && !text.contains("cret"),
            "{text}"
        );
        let e = hide_password(LockError::backend_msg("refused"), url);
        assert_eq!(e.to_string(), LockError::backend_msg("refused").to_string());
    }
}
