//! The long fault run: every backend in the environment × every fault that applies,
//! several runs each, printed as the Markdown report kept in `FAULTS.md`.
//!
//! `dlock-faults --help` lists the flags: how many runs, how long, which backends,
//! faults and workloads (see [`Nemesis::CLOCKS`] for `--clock`). An unknown flag, a
//! bad number or workload, or a filter that keeps no backend is refused.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;

use dlock_faults::backends::{Backend, from_env};
use dlock_faults::report::{
    Row, WriterRow, add, clock_table, election_table, idempotency_table, table, writer_table,
};
use dlock_faults::run::{Plan, run};
use dlock_faults::{Nemesis, Verdict, Workload};

/// Every backend in the environment × every fault that applies, several runs each,
/// printed as the Markdown tables of FAULTS.md. Start the servers first:
/// `eval "$(scripts/services up --cluster)"`.
#[derive(Parser, Debug)]
#[command(name = "dlock-faults")]
struct Args {
    /// Runs per row.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    runs: u32,
    /// Seconds of workload per run (after a 1.5 s warm-up).
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u64).range(1..))]
    seconds: u64,
    /// Keep the backends whose label starts with one of these prefixes (e.g.
    /// `redis,etcd×3`).
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// Keep the faults whose label contains one of these words (e.g. `server clock`,
    /// `failover`).
    #[arg(long, value_delimiter = ',')]
    faults: Vec<String>,
    /// Workloads: `mutex`, `permits:3`, `rw`, `election`, `own-store`, `once` (each on
    /// the backends that offer it).
    #[arg(long, value_delimiter = ',', default_value = "mutex", value_parser = parse_workload)]
    workloads: Vec<Workload>,
    /// Run the clock faults instead (every backend's client clock stepped and slowed,
    /// the servers' clocks stepped) and print their table.
    #[arg(long)]
    clock: bool,
}

fn parse_workload(s: &str) -> Result<Workload, String> {
    Workload::parse(s).ok_or_else(|| {
        format!("unknown workload {s:?}: mutex, permits:N, rw, election, own-store or once")
    })
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> ExitCode {
    let args = Args::parse();
    let (runs, seconds) = (args.runs, args.seconds);
    let Ok(exe) = std::env::current_exe() else {
        return ExitCode::FAILURE;
    };
    let worker = exe.with_file_name("dlock-fault-worker");
    // `cargo run --bin dlock-faults` builds this binary only: without the worker every
    // run would fail one by one (as "could not be made") before saying why
    if !worker.is_file() {
        eprintln!(
            "dlock-faults: the worker binary {} is missing; build it first: cargo build -p dlock-faults --bins",
            worker.display()
        );
        return ExitCode::FAILURE;
    }
    let services = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scripts/services");
    let dir = std::env::temp_dir().join(format!("dlock-faults-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let plan = |fenced, workload: Workload| Plan {
        worker: worker.clone(),
        services: services.clone(),
        workers: workload.workers(),
        ttl: Duration::from_secs(1),
        hold: Duration::from_millis(20),
        warmup: Duration::from_millis(1500),
        duration: Duration::from_secs(seconds),
        fenced,
        workload,
    };
    let (workloads, only, faults) = (args.workloads, args.only, args.faults);
    let mut rows = Vec::new();
    let mut tally = Tally::default();
    let picked = |label: &str| faults.is_empty() || faults.iter().any(|f| label.contains(f));
    let wanted = |label: &str| only.is_empty() || only.iter().any(|o| label.starts_with(o));
    // the clock faults leave the private ensembles out: their faults are peer links
    let clock = args.clock;
    let mut backends = from_env(&dir.display().to_string());
    if !clock && wanted("zookeeper×3 (peer links cut)") {
        backends.push(Backend::partitionable_zookeeper(&dir.join("ensemble")).await);
    }
    if !clock && wanted("etcd×3 (peer links cut)") {
        backends.push(Backend::partitionable_etcd(&dir.join("etcd-cluster")).await);
    }
    backends.retain(|b| wanted(b.label));
    if backends.is_empty() {
        eprintln!(
            "dlock-faults: no backend's label starts with any of {only:?} (are the servers' variables set?)"
        );
        return ExitCode::FAILURE;
    }
    let mut clock_rows = Vec::new();
    for backend in backends {
        if clock {
            // the clock faults, and the fence's part shown by one unfenced control
            let cases = backend
                .clock_nemeses()
                .into_iter()
                .map(|n| (n, true))
                .chain([(Nemesis::ClientClockVerySlow, false)]);
            for (nemesis, fenced) in cases.filter(|(n, _)| picked(n.label())) {
                let plan = plan(fenced, Workload::Mutex);
                let row = run_row(&plan, &backend, nemesis, runs, &mut tally).await;
                clock_rows.push((row, fenced && backend.exclusion_expected(nemesis)));
            }
            continue;
        }
        for &workload in &workloads {
            let cases: Vec<(Nemesis, bool)> = if workload == Workload::Mutex {
                let mut c: Vec<_> = backend.nemeses().into_iter().map(|n| (n, true)).collect();
                c.push((Nemesis::PauseHolder, false));
                c
            } else if !backend.runs(workload) {
                Vec::new()
            } else {
                // the workloads on the backend's own store have unfenced controls too,
                // and the read-write lock a paused writer, fenced and not
                let control = matches!(workload, Workload::OwnStore | Workload::Once)
                    .then_some((Nemesis::PauseHolder, false));
                let writer = (workload == Workload::ReadWrite)
                    .then_some([(Nemesis::PauseWriter, true), (Nemesis::PauseWriter, false)])
                    .into_iter()
                    .flatten();
                backend
                    .nemeses()
                    .into_iter()
                    .filter(|n| {
                        matches!(
                            n,
                            Nemesis::KillHolder | Nemesis::PauseHolder | Nemesis::Partition
                        )
                    })
                    .map(|n| (n, true))
                    .chain(control)
                    .chain(writer)
                    .collect()
            };
            for (nemesis, fenced) in cases.into_iter().filter(|(n, _)| picked(n.label())) {
                let plan = plan(fenced, workload);
                rows.push(run_row(&plan, &backend, nemesis, runs, &mut tally).await);
            }
        }
    }
    if clock {
        let report = clock_table(&clock_rows);
        if std::io::Write::write_all(&mut std::io::stdout(), report.as_bytes()).is_err() {
            return ExitCode::FAILURE;
        }
        return verdict(tally.unsafe_runs);
    }
    let (elections, others): (Vec<Row>, Vec<Row>) = rows
        .into_iter()
        .partition(|r| r.nemesis.ends_with(&Workload::Election.label()));
    let (once, others): (Vec<Row>, Vec<Row>) = others
        .into_iter()
        .partition(|r| r.nemesis.contains(&Workload::Once.label()));
    let mut report = table(&others);
    if !elections.is_empty() {
        report.push('\n');
        report.push_str(&election_table(&elections));
    }
    if !once.is_empty() {
        report.push('\n');
        report.push_str(&idempotency_table(&once));
    }
    if !tally.writers.is_empty() {
        report.push('\n');
        report.push_str(&writer_table(&tally.writers));
    }
    if std::io::Write::write_all(&mut std::io::stdout(), report.as_bytes()).is_err() {
        return ExitCode::FAILURE;
    }
    verdict(tally.unsafe_runs)
}

/// What the runs add up to besides their rows.
#[derive(Default)]
struct Tally {
    /// Runs that broke what the backend promises under their fault, could not be made,
    /// or made no progress.
    unsafe_runs: u32,
    /// The paused writer's rows ([`WriterRow`]).
    writers: Vec<WriterRow>,
}

fn verdict(unsafe_runs: u32) -> ExitCode {
    if unsafe_runs > 0 {
        eprintln!("{unsafe_runs} run(s) were unsafe, could not be made or made no progress");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

/// `runs` runs of `nemesis` on `backend`, summed into one row; a run that accepted no
/// write, or a fenced run that broke what the backend promises under the fault, counts
/// in the tally's `unsafe_runs`, and a paused writer's runs add a [`WriterRow`].
async fn run_row(
    plan: &Plan,
    backend: &Backend,
    nemesis: Nemesis,
    runs: u32,
    tally: &mut Tally,
) -> Row {
    let workload = plan.workload;
    let mut row = Row {
        backend: backend.label.into(),
        nemesis: if plan.fenced {
            format!("{}{}", nemesis.label(), workload.label())
        } else {
            format!("{}{} (unfenced)", nemesis.label(), workload.label())
        },
        verdict: Verdict::default(),
        recoveries: Vec::new(),
        not_applied: 0,
    };
    let mut writer = WriterRow {
        backend: row.backend.clone(),
        nemesis: row.nemesis.clone(),
        ..WriterRow::default()
    };
    for _ in 0..runs {
        match run(plan, backend, nemesis).await {
            Ok(o) => {
                writer.runs += 1;
                writer.refused_by_reader_alone += u32::from(o.refused_by_reader_alone);
                add(&mut row.verdict, &o.verdict);
                row.recoveries.extend(o.recovery);
                if !o.applied {
                    row.not_applied += 1;
                }
                if o.verdict.ops == 0 {
                    // nothing was written (the servers down, the workers stuck): the
                    // run shows nothing about the fault and fails the report, as the
                    // CI suite's `no progress` does
                    eprintln!(
                        "{} / {}: no progress: no write was accepted",
                        backend.label, row.nemesis
                    );
                    tally.unsafe_runs += 1;
                } else if plan.fenced && !o.verdict.safe_if(backend.exclusion_expected(nemesis)) {
                    eprintln!(
                        "{} / {}: unsafe: {:?}\n{}",
                        backend.label,
                        row.nemesis,
                        o.verdict,
                        o.evidence.as_deref().unwrap_or_default()
                    );
                    tally.unsafe_runs += 1;
                }
            }
            Err(e) => {
                // a run that could not be made proves nothing: it fails the report
                eprintln!("{} / {}: {e}", backend.label, nemesis.label());
                tally.unsafe_runs += 1;
            }
        }
    }
    eprintln!("{} / {}: {:?}", row.backend, row.nemesis, row.verdict);
    if nemesis == Nemesis::PauseWriter {
        tally.writers.push(writer);
    }
    row
}
