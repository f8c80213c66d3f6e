//! An Iceberg table's snapshots as idem reads them ([`LogCommit`]): each
//! snapshot's summary holds idem's keys as text.

use std::collections::HashMap;

use super::Iceberg;
use crate::table::record::{LogCommit, from_text};

impl Iceberg {
    /// Every snapshot's idem fields, newest first (`version` is the
    /// snapshot's sequence number).
    pub fn idem_history(&self) -> Vec<LogCommit> {
        let Some(m) = self.metadata() else {
            return Vec::new();
        };
        let mut out: Vec<LogCommit> = m
            .snapshots()
            .map(|s| {
                let props = &s.summary().additional_properties;
                // Summaries hold text; some fields are numbers and JSON in
                // a Delta commitInfo.
                let idem: HashMap<String, serde_json::Value> = props
                    .iter()
                    .filter(|(k, _)| k.starts_with("idem."))
                    .map(|(k, v)| (k.clone(), from_text(k, v)))
                    .collect();
                LogCommit {
                    version: s.sequence_number().max(0) as u64,
                    data_change: true,
                    idem,
                    shape: None,
                    touches_files: true,
                    txns: Vec::new(),
                }
            })
            .collect();
        out.sort_by_key(|c| std::cmp::Reverse(c.version));
        out
    }
}
