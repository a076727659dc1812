//! What the benchmark reads from a backend URL before it connects.

/// The URL's scheme (lower case) and the URL without its query (dlock's own options).
pub fn scheme_and_base(url: &str) -> (String, &str) {
    let scheme = url
        .split(':')
        .next()
        .unwrap_or_default()
        .to_ascii_lowercase();
    (scheme, url.split('?').next().unwrap_or(url))
}
