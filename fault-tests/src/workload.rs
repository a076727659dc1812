//! What the workers do with the name: take its mutex, one of a semaphore's permits, or
//! a side of its read-write lock — and the fence each of those calls for.

/// The primitive a run exercises.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workload {
    /// The mutex: at most one holder.
    Mutex,
    /// A semaphore with this many permits: at most that many holders.
    Semaphore(u32),
    /// A read-write lock: each acquisition a writer one time in four, else a reader.
    ReadWrite,
    /// Leader election: every worker campaigns, leads briefly, resigns, and observes
    /// the leadership all along; at most one leader, epochs only forward.
    Election,
    /// The mutex, with the counter kept in the backend's own store and written through
    /// its fence helper (SQL fenced transaction, Redis fenced script, etcd guarded
    /// transaction, ZooKeeper guarded multi) instead of the runner's store.
    OwnStore,
    /// Exactly-once effects: every worker runs requests (ids repeated across workers
    /// and over time) through `Idempotent::run_once`, whose work appends the request's
    /// effect through the fence; at most one effect per request, one result for all.
    Once,
}

impl Workload {
    /// The worker's command-line form.
    #[must_use]
    pub fn arg(self) -> String {
        match self {
            Self::Mutex => "mutex".into(),
            Self::Semaphore(n) => format!("permits:{n}"),
            Self::ReadWrite => "rw".into(),
            Self::Election => "election".into(),
            Self::OwnStore => "own-store".into(),
            Self::Once => "once".into(),
        }
    }

    /// Reads [`Workload::arg`] back.
    #[must_use]
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "mutex" => Some(Self::Mutex),
            "rw" => Some(Self::ReadWrite),
            "election" => Some(Self::Election),
            "own-store" => Some(Self::OwnStore),
            "once" => Some(Self::Once),
            _ => s
                .strip_prefix("permits:")
                .and_then(|n| n.parse().ok())
                .filter(|n| *n > 0)
                .map(Self::Semaphore),
        }
    }

    /// What the report adds to a fault's label.
    #[must_use]
    pub fn label(self) -> String {
        match self {
            Self::Mutex => String::new(),
            Self::Semaphore(n) => format!(" [semaphore, {n} permits]"),
            Self::ReadWrite => " [read-write]".into(),
            Self::Election => " [election]".into(),
            Self::OwnStore => " [own store]".into(),
            Self::Once => " [idempotency]".into(),
        }
    }

    /// Worker processes: enough that holders contend.
    #[must_use]
    pub fn workers(self) -> u32 {
        match self {
            Self::Mutex => 3,
            Self::Semaphore(n) => n + 2,
            Self::ReadWrite => 4,
            Self::Election | Self::OwnStore => 3,
            Self::Once => 4,
        }
    }
}

/// The check a store protected by the workload makes, from the tokens of the reads and
/// writes it accepted:
/// - mutex and election: a token (an epoch) below the highest seen is stale;
/// - semaphore of N: a token below the N-th highest seen is refused — conservative: N
///   newer grants have been seen, so the permit may be gone (it may also be a slow
///   holder still within its lease, which then counts as a fence rejection; the checker
///   judges staleness by the holder's own validity window instead);
/// - read-write: a write below the highest token seen, or a read below the highest
///   writer token seen, is stale (a writer's token is above every earlier grant, and
///   nobody holds with a writer).
#[derive(Clone, Debug)]
pub struct Fence {
    workload: Workload,
    /// The highest tokens seen, highest first (as many as the check needs).
    top: Vec<u64>,
    highest_write: u64,
}

impl Fence {
    /// An empty fence for `workload`.
    #[must_use]
    pub fn new(workload: Workload) -> Self {
        Self {
            workload,
            top: Vec::new(),
            highest_write: 0,
        }
    }

    fn keep(&self) -> usize {
        match self.workload {
            Workload::Semaphore(n) => usize::try_from(n).unwrap_or(1),
            _ => 1,
        }
    }

    /// Whether an operation under `token` is current (`write`: a write, else a read).
    #[must_use]
    pub fn admits(&self, token: u64, write: bool) -> bool {
        match self.workload {
            Workload::ReadWrite if !write => token >= self.highest_write,
            _ => self.top.len() < self.keep() || token >= self.top[self.keep() - 1],
        }
    }

    /// Notes an accepted operation.
    pub fn record(&mut self, token: u64, write: bool) {
        if write {
            self.highest_write = self.highest_write.max(token);
        }
        let pos = self.top.partition_point(|t| *t > token);
        if !self.top.contains(&token) {
            self.top.insert(pos, token);
        }
        self.top.truncate(self.keep());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fence_follows_the_workload() {
        let mut m = Fence::new(Workload::Mutex);
        m.record(5, true);
        assert!(!m.admits(4, true) && m.admits(5, true));
        let mut s = Fence::new(Workload::Semaphore(2));
        s.record(5, true);
        s.record(7, true);
        assert!(s.admits(5, true) && !s.admits(4, true));
        s.record(9, false);
        assert!(!s.admits(5, true) && s.admits(7, true));
        let mut rw = Fence::new(Workload::ReadWrite);
        rw.record(5, false);
        rw.record(6, false);
        assert!(rw.admits(5, false), "readers share");
        assert!(!rw.admits(5, true), "a writer older than a reader is stale");
        rw.record(8, true);
        assert!(!rw.admits(7, false) && rw.admits(9, false));
        for w in [
            Workload::Semaphore(3),
            Workload::Election,
            Workload::OwnStore,
            Workload::Once,
        ] {
            assert_eq!(Workload::parse(&w.arg()), Some(w));
        }
    }
}
