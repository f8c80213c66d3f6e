//! idem's failures as Python exceptions: one class per kind of the CLI's
//! exit codes, each carrying `kind` and `exit_code`, with the message the
//! CLI prints (the error and its causes, joined by ": ").

use idem::kind::Kind;
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

create_exception!(
    idem,
    IdemError,
    PyException,
    "An idem failure: `kind` and `exit_code` are the CLI's for the same failure."
);
create_exception!(
    idem,
    CheckFailed,
    IdemError,
    "The output failed an expectation or an audit module: nothing was published (exit 1)."
);
create_exception!(
    idem,
    InputError,
    IdemError,
    "The arguments or the inputs are wrong: a missing file, malformed Parquet, bad params, a mode the table was not made with (exit 2)."
);
create_exception!(
    idem,
    PartitionMissing,
    InputError,
    "The dataset has no partition for the slice (a date without input): `idem backfill --skip-missing` skips such a slice (exit 2)."
);
create_exception!(
    idem,
    GuestError,
    IdemError,
    "The sandbox refused the module, or the guest failed: a trap, a limit, an error it returned, unusable output (exit 3)."
);
create_exception!(
    idem,
    StorageError,
    IdemError,
    "A store or a commit failed: unreachable, refused credentials, no conditional writes, a table changed under idem (exit 4). Worth a retry."
);

/// `e` as the exception of its kind.
pub fn raise(kind: Kind, e: &(dyn std::error::Error + 'static)) -> PyErr {
    of_kind(kind, message(e))
}

/// The exception of `kind` with `message`.
pub fn of_kind(kind: Kind, message: String) -> PyErr {
    match kind {
        Kind::Check => CheckFailed::new_err(message),
        Kind::Input => InputError::new_err(message),
        Kind::Guest => GuestError::new_err(message),
        Kind::Storage => StorageError::new_err(message),
    }
}

/// `e` as the exception of its kind, its message after `context: ` (as
/// the CLI's `with_context` prints it).
pub fn raise_in(kind: Kind, context: &str, e: &(dyn std::error::Error + 'static)) -> PyErr {
    of_kind(kind, format!("{context}: {}", message(e)))
}

/// An error of the library's run API as its exception.
pub fn run_error(e: idem::run::RunError) -> PyErr {
    use idem::run::RunError;
    use idem::slice::SliceError;
    match e {
        RunError::Slice(SliceError::NoPartition { .. }) => PartitionMissing::new_err(message(&e)),
        e => raise(e.kind(), &e),
    }
}

/// What the CLI prints after `error: ` for `e`: the error and its causes.
fn message(e: &(dyn std::error::Error + 'static)) -> String {
    idem::text::message_of(e)
}

/// The exception classes, with each kind's `kind` and `exit_code` set on
/// the class (`idem.InputError.exit_code == 2`).
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("IdemError", py.get_type::<IdemError>())?;
    let kinds = [
        (py.get_type::<CheckFailed>(), Kind::Check, "CheckFailed"),
        (py.get_type::<InputError>(), Kind::Input, "InputError"),
        (py.get_type::<GuestError>(), Kind::Guest, "GuestError"),
        (py.get_type::<StorageError>(), Kind::Storage, "StorageError"),
    ];
    for (class, kind, name) in kinds {
        class.setattr("kind", kind.name())?;
        class.setattr("exit_code", kind.exit_code())?;
        m.add(name, class)?;
    }
    // A kind of InputError: its class attributes are InputError's.
    m.add("PartitionMissing", py.get_type::<PartitionMissing>())?;
    Ok(())
}
