//! The scan kernel's WGSL: one template, `shaders/scan.wgsl`, one invocation per chunk.

use super::{ScanKernel, ScanOp, ScanPass};
use crate::ops::wgsl::{self, Writer};

impl ScanKernel {
    /// The WGSL kernel (template `shaders/scan.wgsl`).
    pub fn wgsl(&self) -> String {
        let d = self.dtype;
        let mut bindings = Writer::new();
        wgsl::storage_binding(&mut bindings, 0, "in0", d);
        let out_binding = if self.pass == ScanPass::FromPrefix {
            wgsl::storage_binding(&mut bindings, 1, "prefix", d);
            2
        } else {
            1
        };
        wgsl::storage_binding(&mut bindings, out_binding, "out", d);
        let combine = match self.op {
            ScanOp::Sum => "acc + v",
            ScanOp::Prod => "acc * v",
        };
        let mut step = Writer::new();
        step.indent(2);
        let mut finish = Writer::new();
        finish.indent(1);
        match (self.pass, self.exclusive) {
            (ScanPass::Totals, _) => {
                step.line(&format!("acc = {combine};"));
                finish.line(&format!("{};", wgsl::store("out", "t", "acc", d)));
            }
            (ScanPass::Whole | ScanPass::FromPrefix, true) => {
                step.line(&format!("{};", wgsl::store("out", "at", "acc", d)));
                step.line(&format!("acc = {combine};"));
            }
            (ScanPass::Whole | ScanPass::FromPrefix, false) => {
                step.line(&format!("acc = {combine};"));
                step.line(&format!("{};", wgsl::store("out", "at", "acc", d)));
            }
        }
        let init = match self.pass {
            ScanPass::FromPrefix => wgsl::load("prefix", "t", d),
            ScanPass::Whole | ScanPass::Totals => wgsl::literal(d, self.op.identity(d)),
        };
        let (k, order) = if self.reverse {
            ("lo + len - 1u - s", "from the end")
        } else {
            ("lo + s", "from the start")
        };
        wgsl::fill_template(
            include_str!("../../../shaders/scan.wgsl"),
            &[
                ("BINDINGS", bindings.finish()),
                ("WG", wgsl::WORKGROUP.to_string()),
                ("INVOCATIONS", self.invocations().to_string()),
                ("CHUNKS", self.chunks().to_string()),
                ("CHUNK", self.chunk().to_string()),
                ("INNER", self.inner.to_string()),
                ("N", self.n.to_string()),
                ("INIT", init),
                ("K", k.to_string()),
                ("ORDER", order.to_string()),
                (
                    "START",
                    if self.pass == ScanPass::FromPrefix {
                        "the chunk's prefix".to_string()
                    } else {
                        "the identity".to_string()
                    },
                ),
                ("LOAD", wgsl::load("in0", "at", d)),
                ("STEP", step.finish()),
                ("FINISH", finish.finish()),
            ],
        )
    }
}
