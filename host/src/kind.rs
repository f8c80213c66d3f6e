//! The kinds of failure, one per exit code of the CLI (and `--json` error
//! kind). A leaf: each error type of the library says its own kind next
//! to its definition (`kind()`), and the CLI maps an error chain to its
//! exit code. A verification mismatch or a failed audit is a result, not
//! an error, and has no kind.

/// The kind of a failure, one per exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The command line or its inputs are wrong (a missing file, malformed
    /// Parquet, bad params, a mode the table was not made with). Exit 2.
    Input,
    /// The sandbox refused the module, or the guest failed (trap, limit,
    /// error, output that is unusable). Exit 3.
    Guest,
    /// A store or a commit failed (unreachable, refused credentials, no
    /// conditional writes, a table another writer changed under idem). Exit 4.
    Storage,
    /// A check did not pass: the output failed an expectation, so nothing
    /// was published. Exit 1, like a verification mismatch.
    Check,
}

impl Kind {
    /// The process exit code.
    pub fn exit_code(self) -> u8 {
        match self {
            Kind::Check => 1,
            Kind::Input => 2,
            Kind::Guest => 3,
            Kind::Storage => 4,
        }
    }

    /// The kind named `name` (see [`Kind::name`]).
    pub fn from_name(name: &str) -> Option<Kind> {
        [Kind::Check, Kind::Input, Kind::Guest, Kind::Storage]
            .into_iter()
            .find(|k| k.name() == name)
    }

    /// The name used in `--json` errors.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Input => "input",
            Kind::Guest => "guest",
            Kind::Storage => "storage",
            Kind::Check => "check",
        }
    }
}
