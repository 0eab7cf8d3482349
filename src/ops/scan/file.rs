//! A scan's graph-file attributes.

use super::Scan;
use crate::graph::def::{UInt, MAX_RANK};
use serde::{Deserialize, Serialize};

/// A scan's graph-file attributes.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ScanAttrs {
    pub(super) axis: UInt<{ MAX_RANK as u64 }>,
    pub(super) exclusive: bool,
    pub(super) reverse: bool,
}

impl Scan {
    pub(super) fn attrs(&self) -> ScanAttrs {
        ScanAttrs {
            axis: UInt(self.axis as u64),
            exclusive: self.exclusive,
            reverse: self.reverse,
        }
    }
}
