//! From an error chain to the exit code (and `--json` error kind) the CLI
//! reports: the first error of the chain that the library knows says its
//! kind; plain messages (the CLI's own checks) are input errors.

use idem::kind::Kind;

/// The kind of the first error in `chain` (outermost first) that the
/// library knows; plain messages (the CLI's own checks) are input errors.
pub fn kind_of_chain<'a>(
    chain: impl Iterator<Item = &'a (dyn std::error::Error + 'static)>,
) -> Kind {
    chain.filter_map(kind_of).next().unwrap_or(Kind::Input)
}

/// The kind of one error, when it is one of the library's.
fn kind_of(e: &(dyn std::error::Error + 'static)) -> Option<Kind> {
    macro_rules! known {
        ($($t:ty),* $(,)?) => {
            $(if let Some(e) = e.downcast_ref::<$t>() {
                return Some(e.kind());
            })*
        };
    }
    known!(
        idem::run::RunError,
        idem::pipeline::PipelineError,
        idem::slice::SliceError,
        idem::sandbox::SandboxError,
        idem::execute::ExecError,
        idem::table::TableError,
        idem::storage::StorageError,
        idem::build::BuildError,
        idem::expect::ExpectError,
        idem::scaffold::ScaffoldError,
        idem::digest::DigestError,
        idem::manifest::ManifestError,
        idem::attest::KeyError,
    );
    // What is left of plain I/O in the CLI writes local outputs (exec's
    // Parquet file, sample files, a scaffold): inputs and modules are
    // read through the library's own errors above.
    if e.downcast_ref::<std::io::Error>().is_some() {
        return Some(Kind::Storage);
    }
    None
}
