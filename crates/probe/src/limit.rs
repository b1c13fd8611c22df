//! The open-file limit, which bounds how many targets a round can probe at once: every attempt
//! in flight holds one socket.

use rlimit::Resource;

/// Descriptors kept back from the round for everything else the process has open (its own
/// API client, logs, a database, the runtime).
const RESERVED: u64 = 128;

/// The open-file limit of this process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NofileLimit {
    /// Soft limit before [`raise_nofile_limit`] ran.
    pub before: u64,
    /// Soft limit in force.
    pub soft: u64,
    /// Hard limit.
    pub hard: u64,
    /// Why the soft limit could not be raised to the hard one, when it could not.
    pub error: Option<String>,
}

impl NofileLimit {
    /// Attempts that may be in flight at once under this limit.
    pub fn max_concurrency(&self) -> usize {
        usize::try_from(self.soft.saturating_sub(RESERVED).max(1)).unwrap_or(usize::MAX)
    }

    /// True when the soft limit was raised.
    pub fn raised(&self) -> bool {
        self.soft > self.before
    }
}

/// Reads the open-file limit without changing it.
pub fn nofile_limit() -> NofileLimit {
    match Resource::NOFILE.get() {
        Ok((soft, hard)) => NofileLimit { before: soft, soft, hard, error: None },
        Err(e) => NofileLimit {
            // Unknown: assume the common default rather than nothing.
            before: 1024,
            soft: 1024,
            hard: 1024,
            error: Some(format!("cannot read RLIMIT_NOFILE: {e}")),
        },
    }
}

/// Raises the soft open-file limit to the hard limit, where the system allows, and reports the
/// limit in force. Call once at start, before the first round.
pub fn raise_nofile_limit() -> NofileLimit {
    let current = nofile_limit();
    if current.error.is_some() || current.soft >= current.hard {
        return current;
    }
    // An unlimited hard limit cannot become the soft one on Linux (the kernel caps descriptors
    // at fs.nr_open), so fall back to smaller targets.
    let mut last_error = None;
    for want in [current.hard, 1 << 20, 1 << 16] {
        match rlimit::increase_nofile_limit(want) {
            Ok(_) => {
                let now = nofile_limit();
                return NofileLimit { before: current.soft, ..now };
            }
            Err(e) => last_error = Some(e.to_string()),
        }
    }
    NofileLimit { error: last_error.map(|e| format!("cannot raise RLIMIT_NOFILE: {e}")), ..current }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn concurrency_keeps_descriptors_back() {
        let l = NofileLimit { before: 1024, soft: 20_000, hard: 20_000, error: None };
        assert_eq!(l.max_concurrency(), 19_872);
        assert!(l.raised());
        let tiny = NofileLimit { soft: 100, ..l };
        assert_eq!(tiny.max_concurrency(), 1);
    }

    #[test]
    fn raising_reaches_the_hard_limit_and_is_idempotent() {
        let first = raise_nofile_limit();
        assert!(first.error.is_none(), "{first:?}");
        assert!(first.soft >= first.before);
        let again = raise_nofile_limit();
        assert_eq!(again.soft, first.soft);
        assert!(!again.raised());
        assert_eq!(nofile_limit().soft, first.soft);
    }
}
