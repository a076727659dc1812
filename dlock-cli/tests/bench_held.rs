//! `dlock bench`'s held scenario on Redis, alone in its test binary: it counts every
//! script call the server receives, so no other test may run beside it.
#![cfg(feature = "server-tests")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

use dlock_conformance::required_env;

mod common;
use common::succeeded;

/// On Redis, `dlock bench`'s held scenario counts what the server received: renewals
/// due together go out as one script call, so the server sees far fewer requests than
/// the guards make renewals.
#[test]
fn bench_held_counts_batched_renewals_at_the_server() {
    let url = required_env("DLOCK_TEST_REDIS_URL");
    let out = Command::new(env!("CARGO_BIN_EXE_dlock"))
        .env("DLOCK_URL", &url)
        .args([
            "bench",
            "--json",
            "--scenario",
            "held",
            "--held-locks",
            "300",
            "--held-ttl",
            "900ms",
        ])
        .output()
        .unwrap();
    succeeded(&out);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let figure = |metric: &str| -> f64 {
        json["figures"]
            .as_array()
            .and_then(|f| f.iter().find(|f| f["metric"] == metric))
            .and_then(|f| f["dlock"].as_f64())
            .unwrap_or_else(|| panic!("{metric} missing: {json}"))
    };
    let (renewals, server) = (figure("renewals/s"), figure("server req/s"));
    // 300 guards renewing every ~0.3 s: ~1 000 renewals/s, in a few calls per tick
    assert!(renewals > 500.0, "{json}");
    assert!(server < renewals / 10.0, "{json}");
}
