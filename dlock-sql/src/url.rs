//! dlock's own parameters in a database URL: taken off and applied to [`Options`],
//! the rest left for sqlx, anything neither reads refused.

use dlock_core::backend::take_query;
use dlock_core::{LockError, parse_duration};

use crate::options::{Options, validate_table_name};

/// Splits dlock's own query parameters off a database URL and applies them; the rest
/// of the URL goes to sqlx unchanged.
///
/// A parameter that is neither dlock's nor one sqlx reads for that database is refused:
/// sqlx would ignore it, and a typo (`op_timout=`) would silently run on a default.
pub(crate) fn take_url_options(url: &str, opts: &mut Options) -> Result<String, LockError> {
    let client_keys = client_keys(url);
    take_query(url, |key, value| {
        let duration = || parse_duration(value).map_err(|e| e.to_string());
        match key {
            "table" => {
                validate_table_name(value).map_err(|e| e.to_string())?;
                opts.table = value.to_owned();
            }
            "pool_size" => {
                opts.pool_size = value
                    .parse()
                    .ok()
                    .filter(|n| *n > 0)
                    .ok_or("pool_size must be a positive integer")?;
            }
            "op_timeout" => opts.op_timeout = duration()?,
            "poll_max" => opts.poll_max = duration()?,
            "listen" => {
                opts.listen = match value {
                    "true" | "1" => true,
                    "false" | "0" => false,
                    _ => return Err("listen must be true or false".into()),
                }
            }
            "create" => {
                opts.create_table = match value {
                    "true" | "1" => true,
                    "false" | "0" => false,
                    _ => return Err("create must be true or false".into()),
                }
            }
            "fifo" => {
                opts.fifo = Some(match value {
                    "true" | "1" => true,
                    "false" | "0" => false,
                    _ => return Err("fifo must be true or false".into()),
                });
            }
            "pooler" if url.starts_with("postgres") => {
                opts.transaction_pooler = match value {
                    "transaction" => true,
                    "none" | "session" => false,
                    _ => return Err("pooler must be transaction, session or none".into()),
                };
            }
            _ if client_keys.contains(&key)
                || (url.starts_with("postgres") && key.starts_with("options[")) =>
            {
                return Ok(false);
            }
            _ => {
                return Err(format!(
                    "unknown parameter: dlock reads table, create, pool_size, op_timeout, \
                     poll_max, listen, fifo and (PostgreSQL) pooler; the database driver reads {}",
                    client_keys.join(", ")
                ));
            }
        }
        Ok(true)
    })
}

/// The query parameters sqlx 0.9 reads for each database (its `options/parse.rs`).
fn client_keys(url: &str) -> &'static [&'static str] {
    if url.starts_with("postgres") {
        &[
            "sslmode",
            "ssl-mode",
            "sslrootcert",
            "ssl-root-cert",
            "ssl-ca",
            "sslcert",
            "ssl-cert",
            "sslkey",
            "ssl-key",
            "statement-cache-capacity",
            "host",
            "hostaddr",
            "port",
            "dbname",
            "user",
            "password",
            "application_name",
            "options",
        ]
    } else if url.starts_with("mysql") || url.starts_with("mariadb") {
        &[
            "sslmode",
            "ssl-mode",
            "sslca",
            "ssl-ca",
            "sslcert",
            "ssl-cert",
            "sslkey",
            "ssl-key",
            "charset",
            "collation",
            "statement-cache-capacity",
            "socket",
            "timezone",
            "time-zone",
        ]
    } else {
        &["mode", "cache", "immutable", "vfs"]
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use dlock_core::LockError;

    use super::*;

    #[test]
    fn own_parameters_are_taken_and_the_rest_kept() {
        let mut o = Options::default();
        let url = take_url_options(
            "postgres://u:pw@h/db?sslmode=disable&table=locks2&op_timeout=2s&listen=false",
            &mut o,
        )
        .unwrap();
        assert_eq!(url, "postgres://u:pw@h/db?sslmode=disable");
        assert_eq!(o.table, "locks2");
        assert_eq!(o.op_timeout, Duration::from_secs(2));
        assert!(!o.listen);
        let err = take_url_options("mysql://u:pw@h/db?pool_size=0", &mut o).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("pool_size") && !msg.contains("pw"), "{msg}");
        assert!(take_url_options("sqlite://x?table=a;b", &mut o).is_err());
    }

    #[test]
    fn pooler_is_read_for_postgres_only() {
        let mut o = Options::default();
        let url = take_url_options("postgres://h/db?pooler=transaction", &mut o).unwrap();
        assert_eq!(url, "postgres://h/db");
        assert!(o.transaction_pooler);
        take_url_options("postgresql://h/db?pooler=session", &mut o).unwrap();
        assert!(!o.transaction_pooler);
        for bad in [
            "postgres://h/db?pooler=statement",
            "mysql://h/db?pooler=transaction",
            "sqlite:///tmp/x.db?pooler=transaction",
        ] {
            let err = take_url_options(bad, &mut o).unwrap_err();
            assert!(matches!(err, LockError::Config(_)), "{bad}: {err}");
        }
    }

    #[test]
    fn parameters_neither_ours_nor_the_drivers_are_refused() {
        let mut o = Options::default();
        for ok in [
            "postgres://h/db?application_name=x&options[statement_timeout]=5s",
            "mariadb://h/db?ssl-mode=DISABLED&charset=utf8mb4",
            "sqlite:///tmp/x.db?mode=rwc",
        ] {
            assert!(take_url_options(ok, &mut o).is_ok(), "{ok}");
        }
        for bad in [
            "postgres://u:pw@h/db?op_timout=2s",
            "mysql://h/db?application_name=x",
            "sqlite:///tmp/x.db?pool=2",
        ] {
            let err = take_url_options(bad, &mut o).unwrap_err();
            let msg = err.to_string();
            assert!(
                matches!(err, LockError::Config(_)) && !msg.contains("pw"),
                "{msg}"
            );
        }
    }
}
