//! The app transactions idem writes with every Delta commit: each names
//! one fact about a slice or a source (an app id) and records a number for
//! it (the transaction's version). They survive checkpoints and log
//! cleanup, and two commits carrying one app id at once conflict.

use deltalake::kernel::Transaction;

use crate::digest::Digest;
use crate::table::commit::CommitRequest;
use crate::table::mode::Mode;

/// App id: the slice's commit sequence number.
pub(super) fn slice_app(slice: &str) -> String {
    format!("idem:slice:{slice}")
}

/// App id: how many objects of an append-only source were consumed.
pub(super) fn progress_app(source: &str) -> String {
    format!(
        "idem:progress:{}",
        Digest::of_bytes(source.as_bytes()).hex()
    )
}

/// App id: the sequence number that committed the slice's output `digest`.
pub(super) fn out_app(slice: &str, digest: &Digest) -> String {
    format!("idem:out:{slice}:{}", digest.hex())
}

/// App id: the version the slice's current commit was made for (the
/// version it read, plus one). delta-rs lands a commit there or, when other
/// commits won the race and did not conflict with it, later: the commit is
/// found by reading forward from there, not the log's history.
pub(super) fn at_app(slice: &str) -> String {
    format!("idem:at:{slice}")
}

/// App id: the version the latest commit naming `partition` was made
/// for (see [`at_app`]).
pub(super) fn partition_at_app(partition: &crate::slice::Partition) -> String {
    format!("idem:partition-at:{partition}")
}

/// App id: the version the latest commit that advanced `source` was made
/// for (see [`at_app`]).
pub(super) fn progress_at_app(source: &str) -> String {
    format!(
        "idem:progress-at:{}",
        Digest::of_bytes(source.as_bytes()).hex()
    )
}

/// App id: how many data files the slice's commit `seq` added.
pub(super) fn nfiles_app(slice: &str, seq: i64) -> String {
    format!("idem:nfiles:{slice}:{seq}")
}

/// The app transactions of the slice's commit `seq` of `req`, made for
/// version `at` (`nfiles`: how many data files it adds, when it counts
/// them).
pub(super) fn transactions(
    req: &CommitRequest<'_>,
    seq: i64,
    at: u64,
    nfiles: Option<usize>,
) -> Vec<Transaction> {
    let at = at as i64;
    let mut txns = vec![
        Transaction::new(slice_app(req.slice), seq),
        Transaction::new(out_app(req.slice, req.output_digest), seq),
        Transaction::new(at_app(req.slice), at),
    ];
    if let Some(p) = &req.progress {
        // Two runs advancing one source at once conflict on this app id
        // (their ranges may overlap), so only one commits.
        txns.push(Transaction::new(progress_app(&p.source), p.count as i64));
        txns.push(Transaction::new(progress_at_app(&p.source), at));
    }
    if let Mode::OverwritePartition { partition } = req.mode {
        // Two slices committing one partition at once conflict on this
        // app id even when neither adds or removes a file.
        txns.push(Transaction::new(format!("idem:partition:{partition}"), seq));
        txns.push(Transaction::new(partition_at_app(partition), at));
    }
    if let Some(n) = nfiles {
        txns.push(Transaction::new(nfiles_app(req.slice, seq), n as i64));
    }
    txns
}
