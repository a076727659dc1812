//! Pointing a server URL at a fault proxy.

/// The `host:port` part of `scheme://[user[:password]@]host:port[/path][?query]`.
///
/// ```
/// use dlock_conformance::url_host_port;
/// assert_eq!(url_host_port("postgres://u:p@127.0.0.1:5432/db").as_deref(), Some("127.0.0.1:5432"));
/// assert_eq!(url_host_port("redis://h:6379").as_deref(), Some("h:6379"));
/// ```
#[must_use]
pub fn url_host_port(url: &str) -> Option<String> {
    let (_, rest) = url.split_once("://")?;
    let authority = &rest[..rest.find(['/', '?', '#']).unwrap_or(rest.len())];
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, hp)| hp);
    (!host_port.is_empty()).then(|| host_port.to_owned())
}

/// `url` with its `host:port` replaced by `addr` (for routing a client through a
/// [`crate::FaultProxy`]).
///
/// ```
/// use dlock_conformance::url_with_host_port;
/// assert_eq!(
///     url_with_host_port("mysql://u:p@127.0.0.1:3306/db?x=1", "127.0.0.1:9"),
///     "mysql://u:p@127.0.0.1:9/db?x=1"
/// );
/// ```
#[must_use]
pub fn url_with_host_port(url: &str, addr: &str) -> String {
    match url_host_port(url) {
        Some(hp) => url
            .replacen(&format!("@{hp}"), &format!("@{addr}"), 1)
            .replacen(&format!("://{hp}"), &format!("://{addr}"), 1),
        None => url.to_owned(),
    }
}
