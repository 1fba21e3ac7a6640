//! The points of `save` where the fault-injection hook can stop it ([`FaultPoint`]), apart
//! from the store's options and reports so that the error type can name one without
//! depending on them.

/// The write and sync steps of `save`, in the order they happen (see "Crash consistency" in
/// the crate README). Used by the fault-injection hook.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum FaultPoint {
    /// Append path: an uncommitted tail left by an earlier crash was cut off the messages file.
    TailTruncated,
    /// Append path: the new lines were written to `messages/<id>.jsonl` (not yet synced).
    AppendWritten,
    /// Append path: the messages file was fsynced.
    AppendSynced,
    /// Append path: the messages directory was fsynced after creating the file.
    AppendDirSynced,
    /// Rewrite path: the complete new list was written to the temp file (not yet synced).
    TempWritten,
    /// Rewrite path: the temp file was fsynced.
    TempSynced,
    /// Rewrite path: the messages directory was fsynced (the temp file's name is durable).
    TempDirSynced,
    /// The row transaction (the commit point) is durable.
    Committed,
    /// Rewrite path: the temp file was renamed over `messages/<id>.jsonl`.
    Renamed,
    /// Rewrite path: the messages directory was fsynced after the rename.
    RenameDirSynced,
}

impl FaultPoint {
    /// Every fault point, in order.
    pub const ALL: [FaultPoint; 10] = [
        FaultPoint::TailTruncated,
        FaultPoint::AppendWritten,
        FaultPoint::AppendSynced,
        FaultPoint::AppendDirSynced,
        FaultPoint::TempWritten,
        FaultPoint::TempSynced,
        FaultPoint::TempDirSynced,
        FaultPoint::Committed,
        FaultPoint::Renamed,
        FaultPoint::RenameDirSynced,
    ];
}
