//! Reductions over a set of axes: sum, mean, max, min (keepdims or not).

use crate::backend::gpu::codegen::{self, Writer};
use crate::ops::elementwise::binary_cpu;
use crate::ops::BinaryOp;
use crate::{DType, Shape};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    Sum,
    Mean,
    Max,
    Min,
}

impl ReduceOp {
    pub fn name(self) -> &'static str {
        match self {
            ReduceOp::Sum => "sum",
            ReduceOp::Mean => "mean",
            ReduceOp::Max => "max",
            ReduceOp::Min => "min",
        }
    }
}

/// Shape rule: `axes` (possibly negative, possibly `None` for all) against `input`.
/// Returns the sorted, de-duplicated axes and the output shape.
pub fn reduce_shape(
    input: &Shape,
    axes: Option<&[isize]>,
    keepdims: bool,
) -> Result<(Vec<usize>, Shape), String> {
    let mut resolved = Vec::new();
    match axes {
        None => resolved.extend(0..input.rank()),
        Some(list) => {
            for &a in list {
                let ax = input.axis(a).ok_or_else(|| {
                    format!(
                        "axis {a} is out of range for shape {input} (rank {})",
                        input.rank()
                    )
                })?;
                if resolved.contains(&ax) {
                    return Err(format!("axis {a} is repeated in {list:?}"));
                }
                resolved.push(ax);
            }
        }
    }
    resolved.sort_unstable();
    let dims = input
        .dims()
        .iter()
        .enumerate()
        .filter_map(|(i, &d)| match (resolved.contains(&i), keepdims) {
            (false, _) => Some(d),
            (true, true) => Some(1),
            (true, false) => None,
        })
        .collect::<Vec<_>>();
    Ok((resolved, Shape(dims)))
}

/// A reduction of one input over `axes` (sorted, unique).
#[derive(Debug, Clone, PartialEq)]
pub struct ReduceKernel {
    pub op: ReduceOp,
    pub in_shape: Shape,
    pub dtype: DType,
    pub axes: Vec<usize>,
    pub out_shape: Shape,
}

impl ReduceKernel {
    fn split(&self) -> (Vec<usize>, Vec<usize>, Vec<usize>, Vec<usize>) {
        let strides = self.in_shape.strides();
        let (mut kd, mut ks, mut rd, mut rs) = (vec![], vec![], vec![], vec![]);
        for (i, &d) in self.in_shape.dims().iter().enumerate() {
            if self.axes.contains(&i) {
                rd.push(d);
                rs.push(strides[i]);
            } else {
                kd.push(d);
                ks.push(strides[i]);
            }
        }
        (kd, ks, rd, rs)
    }

    /// Number of input elements folded into each output element.
    pub fn reduced_count(&self) -> usize {
        self.axes.iter().map(|&a| self.in_shape.dims()[a]).product()
    }

    pub fn run_cpu(&self, input: &[u32]) -> Vec<u32> {
        let (kd, ks, rd, rs) = self.split();
        let outer: usize = kd.iter().product();
        let count = self.reduced_count();
        let offset = |linear: usize, dims: &[usize], strides: &[usize]| {
            let mut rem = linear;
            let mut off = 0;
            for k in (0..dims.len()).rev() {
                off += (rem % dims[k]) * strides[k];
                rem /= dims[k];
            }
            off
        };
        let combine = match self.op {
            ReduceOp::Sum | ReduceOp::Mean => BinaryOp::Add,
            ReduceOp::Max => BinaryOp::Maximum,
            ReduceOp::Min => BinaryOp::Minimum,
        };
        let offsets: Vec<usize> = (0..count).map(|r| offset(r, &rd, &rs)).collect();
        (0..outer)
            .map(|o| {
                let base = offset(o, &kd, &ks);
                let (mut acc, start) = match self.op {
                    ReduceOp::Sum | ReduceOp::Mean => (0u32, 0),
                    ReduceOp::Max | ReduceOp::Min => (input[base], 1),
                };
                for off in &offsets[start..] {
                    acc = binary_cpu(combine, self.dtype, acc, input[base + off]);
                }
                if self.op == ReduceOp::Mean {
                    let n = match self.dtype {
                        DType::F32 => (count as f32).to_bits(),
                        _ => count as u32,
                    };
                    acc = binary_cpu(BinaryOp::Div, self.dtype, acc, n);
                }
                acc
            })
            .collect()
    }

    /// WGSL (template `shaders/reduce.wgsl`): one invocation per output element.
    pub fn wgsl(&self) -> String {
        let (kd, ks, rd, rs) = self.split();
        let count = self.reduced_count();
        let d = self.dtype;
        let mut bindings = Writer::new();
        codegen::storage_binding(&mut bindings, 0, "in0", d);
        codegen::storage_binding(&mut bindings, 1, "out", d);
        let mut base = Writer::new();
        base.indent(1);
        codegen::strided_index(&mut base, "base", "o", &kd, &ks);
        let mut offset = Writer::new();
        offset.indent(2);
        codegen::strided_index(&mut offset, "off", "r", &rd, &rs);
        let (init, start) = match self.op {
            ReduceOp::Sum | ReduceOp::Mean => (codegen::literal(d, 0), "0u"),
            ReduceOp::Max | ReduceOp::Min => (codegen::load("in0", "base", d), "1u"),
        };
        let combine = match (self.op, d.is_float()) {
            (ReduceOp::Sum | ReduceOp::Mean, _) => "acc + v",
            (ReduceOp::Max, true) => "wgf_max(acc, v)",
            (ReduceOp::Min, true) => "wgf_min(acc, v)",
            (ReduceOp::Max, false) => "max(acc, v)",
            (ReduceOp::Min, false) => "min(acc, v)",
        };
        let finish = match (self.op, d) {
            (ReduceOp::Mean, DType::F32) => {
                format!("acc / {}", codegen::literal(d, (count as f32).to_bits()))
            }
            (ReduceOp::Mean, DType::I32) => {
                format!("wgf_div_i32(acc, {})", codegen::literal(d, count as u32))
            }
            (ReduceOp::Mean, _) => {
                format!("wgf_div_u32(acc, {})", codegen::literal(d, count as u32))
            }
            _ => "acc".to_string(),
        };
        codegen::fill_template(
            include_str!("../../shaders/reduce.wgsl"),
            &[
                ("BINDINGS", bindings.finish()),
                ("WG", codegen::WORKGROUP.to_string()),
                ("N", format!("{}u", self.out_shape.numel())),
                ("BASE", base.finish()),
                ("INIT", init),
                ("START", start.to_string()),
                ("R", format!("{count}u")),
                ("OFFSET", offset.finish()),
                ("LOAD", codegen::load("in0", "base + off", d)),
                ("COMBINE", combine.to_string()),
                ("FINISH", finish),
            ],
        )
    }
}
