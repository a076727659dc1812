//! dlock's own query parameters on a backend URL.

use crate::{LockError, redact_url};

/// Takes the query parameters that `own` accepts off `url` and returns the URL with
/// the others left for the client library. `own(key, value)` applies a parameter and
/// says whether it was one of dlock's (`Ok(false)`: not ours, keep it in the URL); its
/// error is a reason, which comes back as [`LockError::Config`] naming the parameter
/// (the URL shown without its password).
///
/// ```
/// use dlock_core::backend::take_query;
/// let mut table = String::new();
/// let rest = take_query("postgres://u:pw@h/db?sslmode=disable&table=t1", |k, v| {
///     Ok(match k {
///         "table" => { table = v.to_owned(); true }
///         _ => false,
///     })
/// })?;
/// assert_eq!((rest.as_str(), table.as_str()), ("postgres://u:pw@h/db?sslmode=disable", "t1"));
/// # Ok::<(), dlock_core::LockError>(())
/// ```
///
/// # Errors
/// [`LockError::Config`] for a value `own` refuses.
pub fn take_query(
    url: &str,
    mut own: impl FnMut(&str, &str) -> Result<bool, String>,
) -> Result<String, LockError> {
    let Some((base, query)) = url.split_once('?') else {
        return Ok(url.to_owned());
    };
    let mut rest = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        match own(key, value) {
            Ok(true) => {}
            Ok(false) => rest.push(pair),
            Err(why) => {
                return Err(LockError::Config(format!(
                    "{} in {:?}: {why}",
                    crate::error::shown_pair(key, value),
                    redact_url(url)
                )));
            }
        }
    }
    Ok(if rest.is_empty() {
        base.to_owned()
    } else {
        format!("{base}?{}", rest.join("&"))
    })
}

/// A URL's `user[:password]` as the server must get them: percent-decoded, so a
/// password may hold any character (`/` written `%2F`, `@` `%40`, `%` `%25`), as the
/// SQL and Redis clients read theirs.
///
/// ```
/// use dlock_core::backend::credentials;
/// let (user, password) = credentials("app:p%3Fa%23s%2Fs%25w%40rd%3Ax")?;
/// assert_eq!((user.as_str(), password.as_str()), ("app", "p?a#s/s%w@rd:x"));
/// # Ok::<(), dlock_core::LockError>(())
/// ```
///
/// # Errors
/// [`LockError::Config`] when the decoded bytes are not UTF-8 (nothing of them shown).
pub fn credentials(userinfo: &str) -> Result<(String, String), LockError> {
    let (user, password) = userinfo.split_once(':').unwrap_or((userinfo, ""));
    let decode = |part: &str, what: &str| {
        percent_encoding::percent_decode_str(part)
            .decode_utf8()
            .map(|s| s.into_owned())
            .map_err(|_| {
                LockError::Config(format!(
                    "the URL's {what} is not UTF-8 once percent-decoded"
                ))
            })
    };
    Ok((decode(user, "user name")?, decode(password, "password")?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_value_is_a_config_error_without_the_password() {
        let e = take_query("redis://u:secret@h?timeout=soon", |_, _| {
            Err("not a duration".into())
        })
        .unwrap_err();
        let msg = e.to_string();
        assert!(matches!(e, LockError::Config(_)));
        assert!(
            msg.contains("timeout=soon") && !msg.contains("secret"),
            "{msg}"
        );
    }

    #[test]
    fn a_url_without_query_is_kept() {
        assert_eq!(
            take_query("zk://h:1/x", |_, _| Ok(true)).unwrap(),
            "zk://h:1/x"
        );
        assert_eq!(
            take_query("zk://h:1/x?a=1", |_, _| Ok(true)).unwrap(),
            "zk://h:1/x"
        );
    }
}
