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

/// `url` with its password filled in from outside it, so that it stays out of
/// crontabs, unit files and the process list **(contract)**: from the file a
/// `password-file=PATH` query parameter names (its first line; the parameter is taken
/// off), else from the environment variable `DLOCK_PASSWORD` — each only where the
/// URL names a user (or is a Redis one, which may sign in with a password alone) and
/// has no password of its own; never on `sqlite://` or `memory://`. `dlock run` and
/// `elect` keep `DLOCK_PASSWORD` from their command. The password is percent-encoded into the URL, so
/// it may hold any character. [`connect`](crate::connect) does this; a program that
/// connects an adapter itself calls it first.
///
/// ```
/// # let dir = std::env::temp_dir().join(format!("dlock-doc-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir).unwrap();
/// let file = dir.join("db-password");
/// std::fs::write(&file, "p?ss@word\n").unwrap();
/// let url = format!("postgres://app@db/app?password-file={}", file.display());
/// assert_eq!(dlock_any::with_password(&url)?, "postgres://app:p%3Fss%40word@db/app");
/// # Ok::<(), dlock_any::LockError>(())
/// ```
///
/// # Errors
/// [`LockError::Config`] when the file cannot be read, or the URL has a password
/// besides `password-file=`.
pub fn with_password(url: &str) -> Result<String, LockError> {
    let mut file = None;
    let url = dlock_core::backend::take_query(url, |key, value| {
        if key != "password-file" {
            return Ok(false);
        }
        file = Some(
            percent_encoding::percent_decode_str(value)
                .decode_utf8_lossy()
                .into_owned(),
        );
        Ok(true)
    })?;
    let password = match &file {
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|e| {
                LockError::Config(format!("password-file={path}: cannot read it: {e}"))
            })?;
            text.lines().next().unwrap_or_default().to_owned()
        }
        None => match std::env::var("DLOCK_PASSWORD") {
            Ok(p) if !p.is_empty() => p,
            _ => return Ok(url),
        },
    };
    if password_of(&url).is_some() {
        return match file {
            Some(_) => Err(LockError::Config(format!(
                "{} has a password and password-file=: give one",
                redact_url(&url)
            ))),
            None => Ok(url), // the URL's own wins over the environment
        };
    }
    let Some((scheme, rest)) = url.split_once("://") else {
        return Ok(url);
    };
    let lower = scheme.to_ascii_lowercase();
    // a file and an in-process map have no password: an `@` there is part of a path
    if matches!(lower.as_str(), "sqlite" | "memory") {
        return match file {
            Some(_) => Err(LockError::Config(format!(
                "password-file= in {}: {lower} takes no password",
                redact_url(&url)
            ))),
            None => Ok(url),
        };
    }
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let encoded =
        percent_encoding::utf8_percent_encode(&password, percent_encoding::NON_ALPHANUMERIC);
    Ok(match rest[..authority_end].rfind('@') {
        // `user:@host` says an empty password: this one takes its place
        Some(at) => {
            let user = rest[..at].strip_suffix(':').unwrap_or(&rest[..at]);
            format!("{scheme}://{user}:{encoded}{}", &rest[at..])
        }
        // Redis signs in with a password alone; other servers need the user named
        None if matches!(
            lower.as_str(),
            "redis" | "rediss" | "redlock" | "redis-sentinel" | "redis-cluster"
        ) =>
        {
            format!("{scheme}://:{encoded}@{rest}")
        }
        None if file.is_some() => {
            return Err(LockError::Config(format!(
                "password-file= in {}: name the user too (user@host)",
                redact_url(&url)
            )));
        }
        None => url,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_password_file_fills_the_url_and_is_taken_off() {
        let dir =
            std::env::temp_dir().join(format!("dlock-any-pw-{:016x}", dlock_core::random_u64()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("pw");
        std::fs::write(&file, "p?a#s/s%w@rd:x\nignored").unwrap();
        let at = |url: &str| format!("{url}password-file={}", file.display());
        assert_eq!(
            with_password(&at("redis://h:6379/0?")).unwrap(),
            "redis://:p%3Fa%23s%2Fs%25w%40rd%3Ax@h:6379/0"
        );
        assert_eq!(
            with_password(&at("mysql://app@h/db?ssl-mode=REQUIRED&")).unwrap(),
            "mysql://app:p%3Fa%23s%2Fs%25w%40rd%3Ax@h/db?ssl-mode=REQUIRED"
        );
        let both = with_password(&at("mysql://app:own@h/db?"))
            .unwrap_err()
            .to_string();
        assert!(
            both.contains("give one") && !both.contains("own@"),
            "{both}"
        );
        assert_eq!(
            with_password(&at("REDLOCK://h1:1,h2:2?")).unwrap(),
            "REDLOCK://:p%3Fa%23s%2Fs%25w%40rd%3Ax@h1:1,h2:2"
        );
        assert_eq!(
            with_password(&at("zk://app:@h:2181/x?")).unwrap(),
            "zk://app:p%3Fa%23s%2Fs%25w%40rd%3Ax@h:2181/x"
        );
        let sqlite = with_password(&at("sqlite://data@2024.db?")).unwrap_err();
        assert!(sqlite.to_string().contains("takes no password"), "{sqlite}");
        let no_user = with_password(&at("postgres://h/db?")).unwrap_err();
        assert!(no_user.to_string().contains("name the user"), "{no_user}");
        let missing = with_password("redis://h?password-file=/nonexistent/pw").unwrap_err();
        assert!(missing.to_string().contains("cannot read"), "{missing}");
    }

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
