//! A TLS failure in dlock's words: the client libraries pass on rustls' terms
//! (`UnknownIssuer`, `NotValidForName`, `InvalidContentType`), which say what broke but
//! not what to do.

use dlock_core::LockError;

/// What to do about the TLS failure `text` describes; `None` for any other error.
fn hint(text: &str) -> Option<&'static str> {
    let has = |words: &[&str]| words.iter().any(|w| text.contains(w));
    // rustls names a certificate it refused so; an expired session is no certificate
    let certificate = |words: &[&str]| {
        words
            .iter()
            .any(|w| text.contains(&format!("invalid peer certificate: {w}")))
    };
    Some(if certificate(&["UnknownIssuer"]) {
        "the server's certificate is not signed by a CA dlock trusts (the public web \
         roots, or the one the URL names): give its CA with sslrootcert= (PostgreSQL), \
         ssl-ca= (MySQL) or tls-ca= (Redis)"
    } else if certificate(&["NotValidForName", "certificate not valid for name"]) {
        "the server's certificate does not name the host in the URL: connect by a name or \
         address it carries"
    } else if certificate(&["Expired", "NotValidYet"]) {
        "the server's certificate is outside its validity (or this host's clock is wrong)"
    } else if has(&[
        "InvalidContentType",
        "corrupt message",
        "does not support TLS",
    ]) {
        "the server did not answer in TLS: is this its TLS port? (a plain port takes \
         redis://, sslmode=disable or ssl-mode=DISABLED)"
    } else if has(&["the feature is not enabled"]) {
        "this dlock was built without TLS: build it with its default features (or the \
         cargo feature tls)"
    } else {
        return None;
    })
}

/// `e` with what to do about a TLS failure added to its message, its kind kept (an
/// `Unavailable` stays one); any other error unchanged. [`connect`](crate::connect)
/// does this to its errors; a program that connects an adapter itself may too.
///
/// ```
/// let e = dlock_any::LockError::transient("db:5432: invalid peer certificate: UnknownIssuer");
/// assert!(dlock_any::explain_tls(e).to_string().contains("sslrootcert="));
/// ```
#[must_use]
pub fn explained(e: LockError) -> LockError {
    let mut text = format!("{e:?} {e}");
    let mut source = std::error::Error::source(&e);
    while let Some(s) = source {
        text.push_str(&s.to_string());
        source = s.source();
    }
    let Some(hint) = hint(&text) else {
        return e;
    };
    match e {
        LockError::Unavailable { message, source } => {
            let message = format!("{message}: {hint}");
            match source {
                Some(s) => LockError::unavailable(message, s),
                None => LockError::transient(message),
            }
        }
        LockError::Backend { message, source } => {
            let message = format!("{message}: {hint}");
            match source {
                Some(s) => LockError::backend(message, s),
                None => LockError::backend_msg(message),
            }
        }
        LockError::Config(message) => LockError::Config(format!("{message}: {hint}")),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rustls_terms_become_advice_and_the_kind_stays() {
        let e = explained(LockError::transient(
            "cannot connect to PostgreSQL at db:5432: invalid peer certificate: UnknownIssuer",
        ));
        assert!(matches!(e, LockError::Unavailable { .. }), "{e:?}");
        assert!(e.to_string().contains("sslrootcert="), "{e}");
        let e = explained(LockError::backend_msg(
            "received corrupt message of type InvalidContentType",
        ));
        assert!(e.to_string().contains("did not answer in TLS"), "{e}");
        let plain = LockError::transient("connection refused");
        assert_eq!(
            explained(plain).to_string(),
            "backend unavailable: connection refused"
        );
    }
}
