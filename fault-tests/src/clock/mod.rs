//! A clock the drills can step or slow: libfaketime (`LD_PRELOAD`) reading its offset
//! and rate from a file that the runner rewrites while the faked processes run.
//!
//! Only what goes through the C library is faked: Rust's `Instant` and `SystemTime`,
//! SQLite's `unixepoch()`, `redis-server`, PostgreSQL, MariaDB and the JVM
//! (ZooKeeper) all read their clocks there. Go programs (etcd) read the kernel's vDSO
//! directly, so their clocks cannot be faked this way. Two servers get a small preload
//! of our own instead, which only steps the time of day ([`FakeClock::stepping`],
//! `step.c`, built with the system's C compiler): Debian's `redis-server`, linked with
//! jemalloc, which libfaketime cannot load into (libfaketime #130), and ZooKeeper's JVM,
//! which under libfaketime kept both cores busy while idle and served 7× slower.

use std::path::{Path, PathBuf};

/// Where Debian's `faketime` package puts the library, for any architecture: its
/// thread-safe build (`libfaketimeMT`), as the servers and the workers' runtimes read
/// the clock from many threads at once.
#[must_use]
pub fn libfaketime() -> Option<PathBuf> {
    let dirs = std::fs::read_dir("/usr/lib").ok()?;
    dirs.filter_map(Result::ok)
        .map(|d| d.path().join("faketime/libfaketimeMT.so.1"))
        .find(|p| p.exists())
}

/// The preload that steps a wall clock without libfaketime.
const STEP_SOURCE: &str = include_str!("step.c");

/// `step.c` built into `dir`, once per version of its source.
fn step_library(dir: &Path) -> std::io::Result<PathBuf> {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    STEP_SOURCE.hash(&mut hasher);
    let library = dir.join(format!("dlock-clock-step-{:016x}.so", hasher.finish()));
    if library.exists() {
        return Ok(library);
    }
    let scratch = dir.join(format!("dlock-clock-step-{}", std::process::id()));
    let (source, building) = (scratch.with_extension("c"), scratch.with_extension("so"));
    std::fs::write(&source, STEP_SOURCE)?;
    let built = std::process::Command::new("cc")
        .args(["-shared", "-fPIC", "-O2", "-o"])
        .arg(&building)
        .arg(&source)
        .status()?;
    let _ = std::fs::remove_file(&source);
    if !built.success() {
        return Err(std::io::Error::other(
            "cc could not build the clock-step preload",
        ));
    }
    // renamed into place only once whole: a build killed halfway is never loaded
    std::fs::rename(&building, &library)?;
    Ok(library)
}

/// Which preload fakes the clock.
#[derive(Debug)]
enum Library {
    /// libfaketime: steps and rates, every clock.
    Faketime(PathBuf),
    /// `step.c`: steps of the wall clock only.
    Step(PathBuf),
}

/// One faked clock, shared by every process started with its [`FakeClock::env`].
#[derive(Debug)]
pub struct FakeClock {
    file: PathBuf,
    library: Library,
}

impl FakeClock {
    /// A clock in `dir` that starts true (`+0`).
    ///
    /// # Errors
    /// When libfaketime is not installed (`scripts/services` installs it) or the file
    /// cannot be written.
    pub fn new(dir: &Path) -> std::io::Result<Self> {
        let library = libfaketime().ok_or_else(|| {
            std::io::Error::other("libfaketime is missing: apt-get install faketime")
        })?;
        std::fs::create_dir_all(dir)?;
        Self::with(dir, Library::Faketime(library))
    }

    /// A clock in `dir`, starting true, whose wall time can only be stepped
    /// ([`FakeClock::set`] with `+N` or `-N` seconds), for programs linked with
    /// jemalloc.
    ///
    /// # Errors
    /// When the preload cannot be built (no C compiler) or the file written.
    pub fn stepping(dir: &Path) -> std::io::Result<Self> {
        std::fs::create_dir_all(dir)?;
        let library = step_library(dir)?;
        Self::with(dir, Library::Step(library))
    }

    fn with(dir: &Path, library: Library) -> std::io::Result<Self> {
        let file = dir.join(format!("faketime-{:016x}", dlock_any::random_u64()));
        let clock = Self { file, library };
        clock.set("+0")?;
        Ok(clock)
    }

    /// Sets the clock to libfaketime's `spec`: `+7200` steps it two hours ahead of the
    /// true time, `-7200` behind, `+0 x0.8` runs it at 0.8 of true speed from each
    /// process's start. Written to a new file and renamed over the old one, so a faked
    /// process never reads half a spec.
    ///
    /// # Errors
    /// When the file cannot be written.
    pub fn set(&self, spec: &str) -> std::io::Result<()> {
        if matches!(self.library, Library::Step(_)) && spec.contains('x') {
            return Err(std::io::Error::other(format!(
                "a stepping clock only steps: {spec:?} asks for a rate"
            )));
        }
        let next = self.file.with_extension("next");
        std::fs::write(&next, format!("{spec}\n"))?;
        std::fs::rename(&next, &self.file)
    }

    /// The preload library that fakes this clock.
    #[must_use]
    pub fn library(&self) -> &Path {
        match &self.library {
            Library::Faketime(l) | Library::Step(l) => l,
        }
    }

    /// The environment that puts a process on this clock. With `monotonic` false only
    /// the wall clock is faked (a step of the time of day, as NTP or an operator makes);
    /// with it, every clock, timers included (a crystal running fast or slow). A
    /// [`FakeClock::stepping`] clock only ever fakes the wall clock.
    #[must_use]
    pub fn env(&self, monotonic: bool) -> Vec<(&'static str, String)> {
        let library = match &self.library {
            Library::Faketime(l) => l,
            Library::Step(l) => {
                return vec![
                    ("LD_PRELOAD", l.display().to_string()),
                    ("DLOCK_CLOCK_STEP_FILE", self.file.display().to_string()),
                ];
            }
        };
        let mut env = vec![
            ("LD_PRELOAD", library.display().to_string()),
            ("FAKETIME_TIMESTAMP_FILE", self.file.display().to_string()),
            // read the file at every call, so a step lands at once
            ("FAKETIME_NO_CACHE", "1".to_owned()),
        ];
        if !monotonic {
            env.push(("DONT_FAKE_MONOTONIC", "1".to_owned()));
        }
        env
    }
}

impl Drop for FakeClock {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.file);
    }
}
