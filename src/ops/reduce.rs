//! Reductions over a set of axes (keepdims or not): sum, mean, max, min, prod, all, any, and
//! argmax/argmin (the index of the first extreme in row-major order of the reduced axes).
//! var, std and logsumexp are composites in `graph/build_nn.rs`.

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
    Prod,
    /// Logical and over bool input.
    All,
    /// Logical or over bool input.
    Any,
    /// Row-major index (i32) of the first maximum among the reduced elements; a NaN counts as
    /// the maximum, so the first NaN's index is returned (NumPy's rule).
    ArgMax,
    /// Like `ArgMax` for the minimum; the first NaN wins as well.
    ArgMin,
}

impl ReduceOp {
    pub fn name(self) -> &'static str {
        match self {
            ReduceOp::Sum => "sum",
            ReduceOp::Mean => "mean",
            ReduceOp::Max => "max",
            ReduceOp::Min => "min",
            ReduceOp::Prod => "prod",
            ReduceOp::All => "all",
            ReduceOp::Any => "any",
            ReduceOp::ArgMax => "argmax",
            ReduceOp::ArgMin => "argmin",
        }
    }

    /// Whether the op returns an index rather than a folded value.
    pub fn is_arg(self) -> bool {
        matches!(self, ReduceOp::ArgMax | ReduceOp::ArgMin)
    }

    /// The output dtype for an input of dtype `d`.
    pub fn out_dtype(self, d: DType) -> DType {
        match self {
            ReduceOp::ArgMax | ReduceOp::ArgMin => DType::I32,
            ReduceOp::All | ReduceOp::Any => DType::Bool,
            _ => d,
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
        let offsets: Vec<usize> = (0..count).map(|r| offset(r, &rd, &rs)).collect();
        (0..outer)
            .map(|o| {
                let base = offset(o, &kd, &ks);
                let vals = offsets.iter().map(|off| input[base + off]);
                self.fold_cpu(vals, count)
            })
            .collect()
    }

    fn fold_cpu(&self, mut vals: impl Iterator<Item = u32>, count: usize) -> u32 {
        let d = self.dtype;
        let combine = match self.op {
            ReduceOp::Sum | ReduceOp::Mean => BinaryOp::Add,
            ReduceOp::Prod => BinaryOp::Mul,
            ReduceOp::Max => BinaryOp::Maximum,
            ReduceOp::Min => BinaryOp::Minimum,
            ReduceOp::All => return vals.all(|v| truthy(d, v)) as u32,
            ReduceOp::Any => return vals.any(|v| truthy(d, v)) as u32,
            ReduceOp::ArgMax | ReduceOp::ArgMin => {
                let better = if self.op == ReduceOp::ArgMax {
                    BinaryOp::Greater
                } else {
                    BinaryOp::Less
                };
                let nan = |w: u32| d == DType::F32 && f32::from_bits(w).is_nan();
                let mut best = vals.next().unwrap_or(0);
                let mut at = 0u32;
                for (r, v) in vals.enumerate() {
                    if !nan(best) && (nan(v) || binary_cpu(better, d, v, best) != 0) {
                        best = v;
                        at = r as u32 + 1;
                    }
                }
                return at;
            }
        };
        let mut acc = match self.op {
            ReduceOp::Sum | ReduceOp::Mean => 0,
            ReduceOp::Prod => one_word(d),
            _ => vals.next().unwrap_or(0),
        };
        for v in vals {
            acc = binary_cpu(combine, d, acc, v);
        }
        if self.op == ReduceOp::Mean {
            let n = match d {
                DType::F32 => (count as f32).to_bits(),
                _ => count as u32,
            };
            acc = binary_cpu(BinaryOp::Div, d, acc, n);
        }
        acc
    }

    /// WGSL (templates `shaders/reduce.wgsl`, `shaders/arg_reduce.wgsl`): one invocation per
    /// output element looping over the reduced elements in row-major order.
    pub fn wgsl(&self) -> String {
        let (kd, ks, rd, rs) = self.split();
        let count = self.reduced_count();
        let d = self.dtype;
        let out_d = self.op.out_dtype(d);
        let mut bindings = Writer::new();
        codegen::storage_binding(&mut bindings, 0, "in0", d);
        codegen::storage_binding(&mut bindings, 1, "out", out_d);
        let mut base = Writer::new();
        base.indent(1);
        codegen::strided_index(&mut base, "base", "o", &kd, &ks);
        let mut offset = Writer::new();
        offset.indent(2);
        codegen::strided_index(&mut offset, "off", "r", &rd, &rs);
        let common = [
            ("BINDINGS", bindings.finish()),
            ("WG", codegen::WORKGROUP.to_string()),
            ("N", format!("{}u", self.out_shape.numel())),
            ("BASE", base.finish()),
            ("R", format!("{count}u")),
            ("OFFSET", offset.finish()),
        ];
        if self.op.is_arg() {
            let cmp = if self.op == ReduceOp::ArgMax {
                ">"
            } else {
                "<"
            };
            let (isnan_best, isnan_v) = if d.is_float() {
                ("wgf_isnan(best)", "wgf_isnan(v)")
            } else {
                ("false", "false")
            };
            let mut values = common.to_vec();
            values.extend([
                ("INIT", codegen::load("in0", "base", d)),
                ("LOAD", codegen::load("in0", "base + off", d)),
                (
                    "BETTER",
                    format!("!{isnan_best} && ({isnan_v} || v {cmp} best)"),
                ),
            ]);
            return codegen::fill_template(include_str!("../../shaders/arg_reduce.wgsl"), &values);
        }
        let (init, start) = match self.op {
            ReduceOp::Sum | ReduceOp::Mean => (codegen::literal(d, 0), "0u"),
            ReduceOp::Prod => (codegen::one(d), "0u"),
            ReduceOp::All => ("true".to_string(), "0u"),
            ReduceOp::Any => ("false".to_string(), "0u"),
            _ => (codegen::load("in0", "base", d), "1u"),
        };
        let combine = match (self.op, d.is_float()) {
            (ReduceOp::Sum | ReduceOp::Mean, _) => "acc + v",
            (ReduceOp::Prod, _) => "acc * v",
            // NaN is true; the bit test keeps fast-math drivers from folding `NaN != 0` to false.
            (ReduceOp::All, true) => "acc && (v != 0.0 || wgf_isnan(v))",
            (ReduceOp::Any, true) => "acc || (v != 0.0 || wgf_isnan(v))",
            (ReduceOp::All, false) => "acc && (v != OTHER_ZERO)",
            (ReduceOp::Any, false) => "acc || (v != OTHER_ZERO)",
            (ReduceOp::Max, true) => "wgf_max(acc, v)",
            (ReduceOp::Min, true) => "wgf_min(acc, v)",
            (ReduceOp::Max, false) => "max(acc, v)",
            _ => "min(acc, v)",
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
        let mut values = common.to_vec();
        values.extend([
            ("INIT", init),
            ("START", start.to_string()),
            ("LOAD", codegen::load("in0", "base + off", d)),
            ("COMBINE", combine.replace("OTHER_ZERO", &zero_of(d))),
            ("STORE", codegen::store("out", "o", &finish, out_d)),
        ]);
        codegen::fill_template(include_str!("../../shaders/reduce.wgsl"), &values)
    }
}

/// The row-major offset of element `linear` of `dims` laid out with `strides`.
fn offset(linear: usize, dims: &[usize], strides: &[usize]) -> usize {
    let mut rem = linear;
    let mut off = 0;
    for k in (0..dims.len()).rev() {
        off += (rem % dims[k]) * strides[k];
        rem /= dims[k];
    }
    off
}

/// NumPy truthiness of one element: non-zero, with NaN true and -0.0 false.
fn truthy(d: DType, w: u32) -> bool {
    match d {
        DType::F32 => f32::from_bits(w) != 0.0,
        _ => w != 0,
    }
}

/// The zero literal compared against in `all`/`any` (bools load as `bool`).
fn zero_of(d: DType) -> String {
    match d {
        DType::Bool => "false".into(),
        _ => codegen::literal(d, 0),
    }
}

fn one_word(d: DType) -> u32 {
    match d {
        DType::F32 => 1.0f32.to_bits(),
        _ => 1,
    }
}
