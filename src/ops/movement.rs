//! Movement ops: reshape (a view: no kernel, no copy) and transpose/permute (a strided copy).

use crate::backend::gpu::codegen::{self, Writer};
use crate::{DType, Shape};

/// Shape rule for reshape; one dimension may be -1 and is inferred.
pub fn reshape_shape(input: &Shape, target: &[isize]) -> Result<Shape, String> {
    let mut infer = None;
    let mut known = 1usize;
    for (i, &d) in target.iter().enumerate() {
        match d {
            -1 if infer.is_none() => infer = Some(i),
            -1 => return Err(format!("only one -1 is allowed in {target:?}")),
            d if d < 0 => return Err(format!("dimension {d} in {target:?} is negative")),
            0 => {
                return Err(format!(
                    "zero-size dimension in {target:?}: empty tensors are not supported"
                ))
            }
            d => known = known.checked_mul(d as usize).ok_or("shape overflows")?,
        }
    }
    let n = input.numel();
    let mut dims: Vec<usize> = target.iter().map(|&d| d.max(0) as usize).collect();
    if let Some(i) = infer {
        if !n.is_multiple_of(known) {
            return Err(format!(
                "cannot reshape {input} ({n} elements) to {target:?}"
            ));
        }
        dims[i] = n / known;
    }
    let out = Shape(dims);
    if out.numel() != n {
        return Err(format!(
            "cannot reshape {input} ({n} elements) to {out} ({} elements)",
            out.numel()
        ));
    }
    Ok(out)
}

/// Shape rule for permute; `perm` must be a permutation of `0..rank` (negatives allowed).
pub fn permute_shape(input: &Shape, perm: &[isize]) -> Result<(Vec<usize>, Shape), String> {
    if perm.len() != input.rank() {
        return Err(format!(
            "permutation {perm:?} has {} axes but shape {input} has {}",
            perm.len(),
            input.rank()
        ));
    }
    let mut resolved = Vec::with_capacity(perm.len());
    for &p in perm {
        let ax = input
            .axis(p)
            .ok_or_else(|| format!("axis {p} in {perm:?} is out of range for shape {input}"))?;
        if resolved.contains(&ax) {
            return Err(format!("{perm:?} is not a permutation: axis {p} repeats"));
        }
        resolved.push(ax);
    }
    let dims = resolved.iter().map(|&a| input.dims()[a]).collect();
    Ok((resolved, Shape(dims)))
}

/// `out[i] = in[offset(i)]` with the output's axes taken from `perm` of the input's.
#[derive(Debug, Clone, PartialEq)]
pub struct PermuteKernel {
    pub in_shape: Shape,
    pub perm: Vec<usize>,
    pub out_shape: Shape,
    pub dtype: DType,
}

impl PermuteKernel {
    fn src_strides(&self) -> Vec<usize> {
        let s = self.in_shape.strides();
        self.perm.iter().map(|&p| s[p]).collect()
    }

    pub fn run_cpu(&self, input: &[u32]) -> Vec<u32> {
        let dims = self.out_shape.dims();
        let strides = self.src_strides();
        (0..self.out_shape.numel())
            .map(|i| {
                let (mut rem, mut off) = (i, 0);
                for k in (0..dims.len()).rev() {
                    off += (rem % dims[k]) * strides[k];
                    rem /= dims[k];
                }
                input[off]
            })
            .collect()
    }

    pub fn wgsl(&self) -> String {
        let mut bindings = Writer::new();
        codegen::storage_binding(&mut bindings, 0, "in0", self.dtype);
        codegen::storage_binding(&mut bindings, 1, "out", self.dtype);
        let mut body = Writer::new();
        body.indent(1);
        codegen::strided_index(
            &mut body,
            "src",
            "i",
            self.out_shape.dims(),
            &self.src_strides(),
        );
        codegen::fill_template(
            include_str!("../../shaders/permute.wgsl"),
            &[
                ("BINDINGS", bindings.finish()),
                ("WG", codegen::WORKGROUP.to_string()),
                ("N", format!("{}u", self.out_shape.numel())),
                ("BODY", body.finish()),
            ],
        )
    }
}
