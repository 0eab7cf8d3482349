//! An attention op's graph-file attributes.

use super::{Attention, AttentionPass};
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct AttentionAttrs {
    causal: bool,
    scale: f32,
}

impl AttentionAttrs {
    pub(super) fn of(a: &Attention) -> Self {
        AttentionAttrs {
            causal: a.causal,
            scale: a.scale(),
        }
    }

    pub(super) fn op(&self, pass: AttentionPass) -> Attention {
        Attention {
            pass,
            causal: self.causal,
            scale_bits: self.scale.to_bits(),
        }
    }
}
