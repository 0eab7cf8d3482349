//! A segment sum's graph-file attributes.

use super::Segment;
use crate::graph::def::{UInt, MAX_RANK};
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct SegmentAttrs {
    axis: UInt<{ MAX_RANK as u64 }>,
    segments: UInt<{ u32::MAX as u64 - 1 }>,
}

impl SegmentAttrs {
    pub(super) fn of(s: &Segment) -> Self {
        SegmentAttrs {
            axis: UInt(s.axis as u64),
            segments: UInt(s.segments as u64),
        }
    }

    pub(super) fn op(&self) -> Segment {
        Segment {
            axis: self.axis.get(),
            segments: self.segments.get(),
        }
    }
}
