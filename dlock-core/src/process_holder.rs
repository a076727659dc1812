//! Who holds a lock, as an operator asks: which host, which process, running what,
//! since when. Stored as the lease's holder value, so every backend keeps it with the
//! lease and hands it back with the holder (`inspect`, `list`, `holders`).

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::{HolderValue, LockError, MAX_HOLDER_VALUE, OwnerId, format_duration};

/// A holder described as a process **(contract)**: `dlock run` takes every lock with
/// one, and a service does the same with [`ProcessHolder::this_process`] and
/// [`crate::Locker::with_value`]; `dlock status`, `list`, `leader` and the waiting
/// message show it.
///
/// ```
/// use dlock_core::ProcessHolder;
///
/// let me = ProcessHolder::this_process("nightly-report");
/// let value = me.to_value()?;
/// let back = ProcessHolder::from_value(&value).expect("one of ours");
/// assert_eq!(back.pid, std::process::id());
/// assert_eq!(back.command, "nightly-report");
/// # Ok::<(), dlock_core::LockError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProcessHolder {
    /// The host's name.
    pub host: String,
    /// The process id on that host.
    pub pid: u32,
    /// What it runs (a command's name, a service's).
    pub command: String,
    /// When it was granted the lock, by its own clock (milliseconds; values written
    /// before it was granted, while it waited, are refreshed by [`ProcessHolder::granted`]).
    pub since: SystemTime,
}

impl ProcessHolder {
    /// This process, running `command`, taking a lock now.
    #[must_use]
    pub fn this_process(command: &str) -> Self {
        Self {
            host: host_name(),
            pid: std::process::id(),
            command: command.to_owned(),
            since: SystemTime::now(),
        }
    }

    /// The same process, granted the lock now: what it proclaims once a wait ends
    /// (its value was written when it started waiting, and the hold's age counts from
    /// the grant).
    #[must_use]
    pub fn granted(&self) -> Self {
        Self {
            since: SystemTime::now(),
            ..self.clone()
        }
    }

    /// As a holder value, `host=web-3,pid=4121,since=1764790000.250,cmd=backup.sh`: the
    /// command last (it may hold commas), shortened until the value fits
    /// [`HolderValue`]'s bounds.
    ///
    /// # Errors
    /// [`LockError::InvalidArgument`] when even the value without a command does not
    /// fit (a host name longer than a hundred bytes).
    pub fn to_value(&self) -> Result<HolderValue, LockError> {
        let since = self
            .since
            .duration_since(UNIX_EPOCH)
            .unwrap_or(Duration::ZERO);
        let head = format!(
            "host={},pid={},since={}.{:03},cmd=",
            self.host,
            self.pid,
            since.as_secs(),
            since.subsec_millis()
        );
        let printable: String = self.command.chars().filter(|c| !c.is_control()).collect();
        let mut command = printable.as_str();
        loop {
            match HolderValue::new(&format!("{head}{command}")) {
                Ok(v) => return Ok(v),
                Err(e) if command.is_empty() => return Err(e),
                Err(_) => {
                    // drop the last character (never split one)
                    let cut = command
                        .char_indices()
                        .next_back()
                        .map_or(0, |(i, _)| i)
                        .min(MAX_HOLDER_VALUE);
                    command = &command[..cut];
                }
            }
        }
    }

    /// Reads a holder value written by [`ProcessHolder::to_value`]; `None` for any
    /// other value.
    #[must_use]
    pub fn from_value(value: &HolderValue) -> Option<Self> {
        let text = value.as_str();
        let (head, command) = text.split_once(",cmd=")?;
        let mut host = None;
        let mut pid = None;
        let mut since = None;
        for field in head.split(',') {
            match field.split_once('=')? {
                ("host", h) => host = Some(h.to_owned()),
                ("pid", p) => pid = p.parse().ok(),
                ("since", s) => since = since_of(s),
                _ => return None,
            }
        }
        Some(Self {
            host: host?,
            pid: pid?,
            command: command.to_owned(),
            since: UNIX_EPOCH + since?,
        })
    }

    /// The process holding as `owner`, if it said.
    #[must_use]
    pub fn of(owner: &OwnerId) -> Option<Self> {
        owner.holder_value().as_ref().and_then(Self::from_value)
    }

    /// How long it has held, by this host's clock (zero if its clock is ahead).
    #[must_use]
    pub fn age(&self) -> Duration {
        SystemTime::now()
            .duration_since(self.since)
            .unwrap_or(Duration::ZERO)
    }
}

/// `web-3 pid 4121 (backup.sh) for 3m12s`.
impl fmt::Display for ProcessHolder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} pid {} ({}) for {}",
            self.host,
            self.pid,
            self.command,
            format_duration(self.age())
        )
    }
}

/// `1764790000.250` (or whole seconds, as values written before milliseconds were).
fn since_of(text: &str) -> Option<Duration> {
    let (secs, millis) = match text.split_once('.') {
        Some((secs, m)) if (1..=3).contains(&m.len()) && m.bytes().all(|b| b.is_ascii_digit()) => {
            let scale = 10u64.pow(3 - u32::try_from(m.len()).ok()?);
            (secs, m.parse::<u64>().ok()? * scale)
        }
        Some(_) => return None,
        None => (text, 0),
    };
    Some(Duration::from_secs(secs.parse().ok()?) + Duration::from_millis(millis))
}

/// This host's name: the kernel's, else `$HOSTNAME`, else `localhost`.
fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty() && !h.contains([',', '=']))
        .unwrap_or_else(|| "localhost".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_or_odd_command_is_shortened_to_fit() {
        let mut me = ProcessHolder::this_process(&"é/x y,z".repeat(40));
        me.host = "web-3".into();
        let value = me.to_value().unwrap();
        let back = ProcessHolder::from_value(&value).unwrap();
        assert_eq!(back.host, "web-3");
        assert!(!back.command.is_empty() && me.command.starts_with(&back.command));
        assert!(value.as_str().len() <= MAX_HOLDER_VALUE);
    }

    #[test]
    fn other_values_are_not_processes() {
        for v in ["10.0.0.7:8080", "host=a,pid=x,since=1,cmd=y", "cmd=y"] {
            assert_eq!(
                ProcessHolder::from_value(&HolderValue::new(v).unwrap()),
                None,
                "{v}"
            );
        }
    }

    #[test]
    fn since_keeps_milliseconds_and_reads_whole_seconds() {
        let mut me = ProcessHolder::this_process("x");
        me.since = UNIX_EPOCH + Duration::from_millis(1_764_790_000_250);
        let back = ProcessHolder::from_value(&me.to_value().unwrap()).unwrap();
        assert_eq!(back.since, me.since);
        let old = HolderValue::new("host=a,pid=1,since=1764790000,cmd=y").unwrap();
        let old = ProcessHolder::from_value(&old).unwrap();
        assert_eq!(old.since, UNIX_EPOCH + Duration::from_secs(1_764_790_000));
        for bad in ["1.2345", "1.x", "-1", "1."] {
            let v = HolderValue::new(&format!("host=a,pid=1,since={bad},cmd=y")).unwrap();
            assert_eq!(ProcessHolder::from_value(&v), None, "{bad}");
        }
    }

    #[test]
    fn it_reads_like_a_sentence() {
        let mut me = ProcessHolder::this_process("backup.sh");
        me.host = "web-3".into();
        me.pid = 4121;
        me.since = SystemTime::now() - Duration::from_secs(192);
        assert_eq!(me.to_string(), "web-3 pid 4121 (backup.sh) for 3m12s");
    }
}
