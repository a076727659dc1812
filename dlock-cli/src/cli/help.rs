//! The long help texts of the subcommands (examples, exit codes), after their options,
//! and what `--version` prints.

pub(super) const DOCTOR_HELP: &str = "\
Each finding has a severity — info, warning (a guarantee is weaker than it could be), \
CRITICAL (a guarantee is broken: a lock can be held twice, a token can repeat, or \
nothing can be locked) — and one sentence of advice. Checked per backend: Redis (and \
each Redlock node) version, clock offset, replication role, maxmemory-policy, \
appendonly/appendfsync, and the spread of Redlock's clocks; PostgreSQL version, clock, \
role, synchronous_commit, standbys, whether LISTEN/NOTIFY reaches dlock (not behind a \
transaction pooler); MariaDB/MySQL version, clock, read_only, \
innodb_flush_log_at_trx_commit; SQLite version, journal mode, filesystem (a network \
filesystem is critical); every SQL database's lock table and its columns; etcd version, leader, members, alarms; ZooKeeper each \
server's version and mode, session-timeout bounds and the timeout granted.

Exit codes: 0 nothing critical; 78 a critical finding; 69 backend unreachable; \
70 backend error; 2 bad URL.

Examples:
  dlock doctor --url redis://cache:6379
  dlock doctor --json | jq '.[] | select(.severity != \"info\")'";

pub(super) const LEADER_HELP: &str = "\
Exit codes: 0 a leader leads; 1 none does (as test answers); 69 backend unreachable; \
70 backend error.

Examples:
  dlock leader scheduler          # who leads, its epoch; \"no leader\": exit 1
  dlock leader --json scheduler
  dlock leader --watch scheduler  # a line per change, until interrupted";

pub(super) const STATUS_HELP: &str = "\
Exit codes: 0 every name is held; 1 one is free (as test answers); 75 a ticket given \
no longer holds its lock; 2 bad name or ticket; 69 backend unreachable.

Examples:
  dlock status nightly-report invoices
  dlock status --json nightly-report
  dlock status \"$t\"               # a ticket from dlock acquire: does it hold?";

pub(super) const BENCH_HELP: &str = "\
Examples:
  dlock bench                                    # the default SQLite file
  dlock bench --url redis://127.0.0.1:6379 --scenario uncontended,handoff
  dlock bench --url postgres://app@db/app --json --metrics";

pub(super) const COMPLETIONS_HELP: &str = "\
Examples:
  dlock completions bash > ~/.local/share/bash-completion/completions/dlock
  dlock completions zsh > \"${fpath[1]}/_dlock\"
  dlock completions fish > ~/.config/fish/completions/dlock.fish";

pub(super) const MAN_HELP: &str = "\
Examples:
  dlock man | man -l -
  dlock man run | man -l -
  dlock man --out-dir /usr/local/share/man/man1   # dlock.1, a page per subcommand";

pub(super) const TICKET_HELP: &str = "\
A ticket is one line: the backend's name, the lock name, the acquisition's owner id \
(128 random bits), the fencing token and the TTL. It grants renewing and releasing \
that one lease while it lasts — keep it like a password — and holds no URL or \
password: each command connects with its own --url / DLOCK_URL. Every server backend \
takes tickets (ZooKeeper's servers need -Dzookeeper.extendedTypesEnabled=true: the \
lock moves to a TTL node).

Exit codes: 0 done; 73 busy (--wait 0); 74 the wait ran out; 75 the ticket's lease is \
gone (expired, released, taken over); 2 not a ticket, or one for another backend; \
69 backend unreachable; 70 backend error.

`dlock renew` prints the ticket again (with the TTL given by --ttl, if any; without \
--ttl it never shortens the lease). Pass a \
ticket as an argument, in $DLOCK_TICKET, or as `-` on stdin: the process list (ps) \
shows arguments to every user of the host.

Examples:
  t=$(dlock acquire --ttl 10m deploy) || exit   # exits holding the lock
  trap 'dlock release \"$t\"' EXIT              # released however the steps end
  ./step-one && dlock renew \"$t\" && ./step-two
  dlock status \"$t\"                       # does it still hold?";

pub(super) const PRUNE_HELP: &str = "\
A name taken again after its row was deleted starts from the database clock in \
microseconds, above every token it had, as long as the database clock never steps back \
by more than --idle-for: pick a day or more. Safe while locks are in use; held names \
are never deleted. Deletes in batches of 1000 rows. Every client of the table must run \
a dlock with prune first (an older one starts a recreated name at token 1).

Examples:
  dlock prune --url postgres://dlock@db/app --idle-for 7d
  DLOCK_URL=sqlite:///var/lib/dlock/locks.db dlock prune --idle-for 30d
";

pub(super) const MIGRATE_HELP: &str = "\
Connecting creates dlock's tables when they are missing (create=true, the default), \
which needs a role that may create tables. For an application role that may not \
(PostgreSQL 15 and later give none CREATE on the public schema), make the schema once \
as an owner role with `dlock migrate`, or apply what `dlock migrate --print` shows, \
grant the application role what `--grant ROLE` adds, and give it a URL with \
create=false. Run `dlock migrate` again after upgrading dlock: it upgrades an older \
schema in place. The table follows the URL's table= (default dlock_locks).

Examples:
  dlock migrate --url postgres://owner@db/app
  dlock migrate --print --grant app --url postgres://db/app > dlock-schema.sql
  dlock migrate --print --grant app --url mysql://db/app | mariadb app
  DLOCK_URL=postgres://app@db/app?create=false dlock run nightly -- ./nightly.sh
";

pub(super) const LIST_HELP: &str = "\
Waiters are counted on etcd and ZooKeeper (the queue behind the holder); on SQL and \
Redis waiters poll or listen and leave no trace, so the column shows -. Redis keys in \
the plain layout cannot be listed (they look like any other program's keys).

Examples:
  dlock list                    # every held lock
  dlock list jobs/              # names starting with jobs/
  dlock list --json | jq '.[] | select(.remaining_ms < 5000)'";

pub(super) const RUN_HELP: &str = "\
The command gets DLOCK_NAME, DLOCK_TOKEN (the fencing token: pass it with every write \
so the store can reject a stale holder) and DLOCK_OWNER in its environment. The lease \
is renewed every ttl/3 while it runs.

The command runs under a small supervisor that adopts everything it starts: its tree \
is every descendant, whatever process group or session it moves to (timeout, set -m, \
setsid, a daemon's double fork). Every stop goes to the whole tree. If the lease is \
lost, the tree gets SIGTERM (or SIGKILL with --on-lost kill), then SIGKILL after \
--grace. If renewals keep failing, the supervisor stops the tree before the lease runs \
out (SIGTERM a quarter TTL, at most --grace, before; SIGKILL at the end), even while \
dlock is stopped. If dlock dies (even by SIGKILL), the supervisor stops the tree the \
same way. SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 sent to dlock are \
forwarded to the command's process group. When the command exits, whatever it left \
running is stopped before the lock is released; if the release finds the lease gone \
(revoked or broken by release --force, or run out unseen), dlock exits 75. What escapes: work \
another process starts for the command (systemctl start, at), and a setuid program \
it may not signal.

With --permits N, up to N runs hold NAME at once; with --shared and --exclusive, \
runs share NAME's read-write lock (readers together, a writer alone; a waiting writer \
keeps new readers out). These are separate from NAME's plain lock.

With several NAMEs, all are taken as one, in sorted order (so two runs with \
overlapping names never deadlock), and all are released if one cannot be had; \
DLOCK_NAMES and DLOCK_TOKENS list them, one per line (DLOCK_NAME and DLOCK_TOKEN are \
the first).

--max-hold caps the hold: the command is stopped when it is reached. --min-hold keeps \
NAME blocked until that long after it was taken even if the command finishes sooner \
(a lock-delay, kept by the server: a run that exits or crashes cannot shorten it); it \
must not exceed --ttl.

Exit status: the command's own (128+N if killed by signal N); 73 lock busy (--wait 0); \
74 wait timed out; 75 lease lost while running; 76 --max-hold reached; 69 backend \
unreachable; 70 backend error; 2 bad usage or URL (also: --permits N while NAME's holders use another N, or a \
backend without semaphores and read-write locks); 127 command not found, 126 not runnable.

Backend: --url, else $DLOCK_URL, else an SQLite file in $XDG_STATE_HOME/dlock \
(~/.local/state/dlock). A URL without a password takes one from the file its \
password-file= parameter names, else from $DLOCK_PASSWORD. Examples:
  dlock run nightly-report -- ./report.sh
  dlock run --wait 0 --ttl 1m backup -- pg_dump app
  DLOCK_URL=postgres://app@db/app dlock run --wait 10m invoices -- ./charge.sh
  dlock run --metrics-addr localhost:9464 reindex -- ./reindex.sh  # /metrics
  dlock run --permits 3 --wait 5m heavy-export -- ./export.sh     # 3 at a time
  dlock run --shared catalog -- ./read-catalog.sh
  dlock run --exclusive catalog -- ./rebuild-catalog.sh
  dlock run accounts/7 accounts/9 -- ./transfer.sh 7 9            # both, as one
  dlock run --min-hold 5m --max-hold 1h nightly -- ./nightly.sh";

pub(super) const ELECT_HELP: &str = "\
Every host runs the same `dlock elect NAME -- COMMAND`; one leads and runs COMMAND, the \
others stand by (printing the current leader) and one takes over within --ttl when \
the leader exits, crashes or is cut off. The command gets DLOCK_NAME, DLOCK_EPOCH and \
DLOCK_TOKEN (the leadership's fencing token: strictly increasing from one leader to \
the next), DLOCK_VALUE and DLOCK_OWNER. If the leadership is lost, the command is \
stopped as in `dlock run`. When COMMAND exits, dlock resigns and exits with its status; \
with --requeue it campaigns again instead, and restarts COMMAND (with the new epoch) \
each time it leads again, until SIGTERM, SIGINT or SIGQUIT.

Examples:
  dlock elect --value \"$(hostname):8080\" scheduler -- ./scheduler
  dlock elect --requeue scheduler -- ./scheduler   # stand for good
  dlock leader scheduler            # who leads now
  dlock leader --watch scheduler    # every change, one line each";

pub(super) const RELEASE_HELP: &str = "\
dlock release TICKET releases the lease a ticket from `dlock acquire` stands for (see \
`dlock acquire --help`).

dlock release --force NAME revokes whoever holds lock NAME, on every backend: its \
lease is marked revoked on the server, its renewals fail — its `dlock run` stops its \
command and exits 75 — and nobody else gets the lock before that lease is over (it \
runs out; on etcd and ZooKeeper the run's release ends it too). With --now it breaks the holder instead (for one known dead): its lease \
is removed as its own release would remove it and the next waiter gets the lock at once \
with a higher fencing token, while a live broken run may still be at work until its next \
renewal (a fenced store refuses its writes once the new token has been seen). Without \
--yes it only says who holds the lock. The holder is named on stderr, with who stopped it.

Exit codes: 0 done (or nothing held); 2 not confirmed, not a ticket; 75 the ticket's \
lease is gone; 69 backend unreachable; 70 backend error.

Examples:
  dlock release \"$t\"
  dlock status nightly-report             # who holds it, for how long
  dlock release --force nightly-report    # says who holds it
  dlock release --force --yes nightly-report";

/// What `--version` prints: the version and the backends compiled in.
pub fn long_version() -> &'static str {
    static TEXT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    TEXT.get_or_init(|| {
        let backends: Vec<&str> = [
            ("sqlite", cfg!(feature = "sqlite")),
            ("postgres", cfg!(feature = "postgres")),
            ("mysql", cfg!(feature = "mysql")),
            ("redis redlock", cfg!(feature = "redis")),
            ("etcd", cfg!(feature = "etcd")),
            ("zookeeper", cfg!(feature = "zookeeper")),
        ]
        .into_iter()
        .filter_map(|(name, on)| on.then_some(name))
        .chain(["memory"])
        .collect();
        format!(
            "{}\nbackends: {}\ntls: {}",
            env!("CARGO_PKG_VERSION"),
            backends.join(" "),
            if cfg!(feature = "tls") {
                "rustls (Mozilla's roots, and a CA the URL names)"
            } else {
                "left out of this build"
            }
        )
    })
}
