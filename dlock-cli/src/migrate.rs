//! `dlock migrate`: makes dlock's SQL schema as an owner role, or prints it (and the
//! grants an application role needs) for a database administrator to apply.

use std::process::ExitCode;

use dlock_any::LockError;

use crate::cli::MigrateArgs;
use crate::{exit, url};

pub async fn migrate(args: MigrateArgs) -> ExitCode {
    let url = match url::resolve(args.backend.url.as_deref()) {
        Ok(u) => u,
        Err(e) => return exit::fail(&e),
    };
    match run(&url, &args).await {
        Ok(out) => match crate::stdout::write(out.as_bytes()) {
            Ok(()) => ExitCode::SUCCESS,
            Err(code) => code,
        },
        Err(e) => exit::fail(&e),
    }
}

#[cfg(any(feature = "postgres", feature = "mysql", feature = "sqlite"))]
async fn run(url: &str, args: &MigrateArgs) -> Result<String, LockError> {
    dlock_any::check_credentials(url)?;
    // printing connects nowhere: a password file it cannot read is no matter
    let filled = if args.print {
        dlock_any::backend::take_query(url, |key, _| Ok(key == "password-file"))?
    } else {
        dlock_any::with_password(url)?
    };
    let url = filled.as_str();
    let schema = dlock_any::Schema::for_url(url).map_err(|e| not_sql_if(url, e))?;
    if args.print {
        let grants = match &args.grant {
            Some(role) => schema.grants(role)?,
            None => Vec::new(),
        };
        let mut out = format!(
            "-- dlock's schema on {} (dlock {})\n",
            schema.database,
            env!("CARGO_PKG_VERSION")
        );
        for statement in schema.statements.iter().chain(&grants) {
            // the statements' own indentation is the source's: one level for a reader
            let lines: Vec<&str> = statement.trim().lines().map(str::trim).collect();
            out.push('\n');
            out.push_str(&lines.join("\n    "));
            out.push_str(";\n");
        }
        return Ok(out);
    }
    dlock_any::SqlLock::migrate(url)
        .await
        .map_err(|e| dlock_any::explain_tls(dlock_any::hide_password(e, url)))?;
    Ok(format!(
        "dlock's schema is ready on {}: {}\n",
        dlock_any::redact_url(url),
        schema.tables.join(", ")
    ))
}

#[cfg(not(any(feature = "postgres", feature = "mysql", feature = "sqlite")))]
async fn run(url: &str, _args: &MigrateArgs) -> Result<String, LockError> {
    Err(not_sql(url.split(':').next().unwrap_or_default()))
}

/// `e`, or for a URL that is not a SQL one, what dlock keeps there instead.
#[cfg(any(feature = "postgres", feature = "mysql", feature = "sqlite"))]
fn not_sql_if(url: &str, e: LockError) -> LockError {
    let scheme = url.split(':').next().unwrap_or_default();
    if matches!(
        scheme,
        "sqlite" | "postgres" | "postgresql" | "mysql" | "mariadb"
    ) {
        e
    } else {
        not_sql(scheme)
    }
}

fn not_sql(scheme: &str) -> LockError {
    LockError::Config(format!(
        "dlock migrate makes SQL tables (sqlite, postgres, mysql), not {scheme}: the other \
         backends keep no schema, only keys or nodes under their prefix or root"
    ))
}
