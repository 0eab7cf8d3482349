//! A row op's graph-file attributes: layer normalisation's `eps`; the cross-entropy passes
//! have none.

use super::{RowPass, Rows};
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RowAttrs {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    eps: Option<f32>,
}

impl RowAttrs {
    pub(super) fn of(r: &Rows) -> Self {
        RowAttrs {
            eps: r.pass.is_norm().then(|| r.eps()),
        }
    }

    pub(super) fn op(&self, pass: RowPass) -> Result<Rows, String> {
        match (pass.is_norm(), self.eps) {
            (true, Some(e)) => Ok(Rows {
                pass,
                eps_bits: e.to_bits(),
            }),
            (true, None) => Err(format!("{} needs an 'eps'", pass.name())),
            (false, None) => Ok(Rows { pass, eps_bits: 0 }),
            (false, Some(_)) => Err(format!("{} takes no 'eps'", pass.name())),
        }
    }
}
