//! The movement ops' shape rules.

use super::*;

/// Shape rule for reshape; one dimension may be -1 and is inferred.
pub fn reshape_shape(input: &Shape, target: &[isize]) -> Result<Shape, String> {
    let mut infer = None;
    let mut known = 1usize;
    for (i, &d) in target.iter().enumerate() {
        match d {
            -1 if infer.is_none() => infer = Some(i),
            -1 => return Err(format!("only one -1 is allowed in {target:?}")),
            d if d < 0 => return Err(format!("dimension {d} in {target:?} is negative")),
            d => known = known.checked_mul(d as usize).ok_or("shape overflows")?,
        }
    }
    let n = input.numel();
    let mut dims: Vec<usize> = target.iter().map(|&d| d.max(0) as usize).collect();
    if let Some(i) = infer {
        if known == 0 {
            return Err(format!(
                "cannot infer the -1 in {target:?}: the other dimensions hold zero elements"
            ));
        }
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

/// Shape rule for slice: one [`SliceArg`] per leading axis (missing trailing axes are `:`).
/// Returns the output shape, the word offset of the first element and the signed strides.
pub fn slice_plan(input: &Shape, args: &[SliceArg]) -> Result<(Shape, i64, Vec<i64>), String> {
    if args.len() > input.rank() {
        return Err(format!(
            "{} slice arguments for shape {input} of rank {}",
            args.len(),
            input.rank()
        ));
    }
    let strides = input.strides();
    let (mut dims, mut offset, mut out_strides) = (Vec::new(), 0i64, Vec::new());
    for (k, &n) in input.dims().iter().enumerate() {
        let arg = args.get(k).copied().unwrap_or_else(SliceArg::full);
        let (start, step, count) = arg.resolve(n)?;
        dims.push(count);
        if count == 0 {
            // An empty result reads nothing: no offset to account for.
            out_strides.push(0);
            continue;
        }
        let step = step as i64;
        let overflow = || format!("slice {arg:?} of axis {k} overflows the index range");
        offset = (start as i64)
            .checked_mul(strides[k] as i64)
            .and_then(|o| o.checked_add(offset))
            .ok_or_else(overflow)?;
        out_strides.push(step.checked_mul(strides[k] as i64).ok_or_else(overflow)?);
    }
    Ok((Shape(dims), offset, out_strides))
}

/// A strided read of `out` from `input`: every element it reads must lie inside the input.
pub(super) fn strided_shape(
    input: &Shape,
    out: &Shape,
    offset: i64,
    strides: &[i64],
) -> Result<Shape, String> {
    if strides.len() != out.rank() {
        return Err(format!("{} strides for output shape {out}", strides.len()));
    }
    if out.numel() > 0 {
        // The lowest and highest word read, in i128 so no stride can overflow them.
        let (mut lo, mut hi) = (offset as i128, offset as i128);
        for (&d, &s) in out.dims().iter().zip(strides) {
            let span = (d as i128 - 1) * s as i128;
            if span < 0 {
                lo += span;
            } else {
                hi += span;
            }
        }
        if lo < 0 || hi >= input.numel() as i128 {
            return Err(format!(
                "reading {out} from offset {offset} with strides {strides:?} leaves the input {input}"
            ));
        }
    }
    Ok(out.clone())
}

/// Concat along `axis`: equal ranks and dtypes, equal sizes outside the axis.
pub(super) fn concat_shape(inputs: &[(Shape, DType)], axis: usize) -> Result<Shape, Reject> {
    let (base, dtype) = &inputs[0];
    if axis >= base.rank() {
        return Err(format!("axis {axis} is out of range for shape {base}").into());
    }
    let mut total = 0usize;
    for (s, d) in inputs {
        let agree = s.rank() == base.rank()
            && (0..s.rank()).all(|j| j == axis || s.dims()[j] == base.dims()[j]);
        if !agree || d != dtype {
            let m = format!("{d} {s} does not match {dtype} {base} outside axis {axis}");
            return Err(if agree { Reject::dtype(m) } else { m.into() });
        }
        total = total
            .checked_add(s.dims()[axis])
            .ok_or("the concatenated axis overflows")?;
    }
    let mut dims = base.dims().to_vec();
    dims[axis] = total;
    Ok(Shape(dims))
}

/// Constant padding: `out` holds `input` at `before` on every axis.
pub(super) fn pad_shape(input: &Shape, out: &Shape, before: &[usize]) -> Result<Shape, String> {
    let fits = out.rank() == input.rank()
        && before.len() == input.rank()
        && (0..input.rank()).all(|k| {
            input.dims()[k]
                .checked_add(before[k])
                .is_some_and(|n| n <= out.dims()[k])
        });
    if !fits {
        return Err(format!(
            "shape {input} padded by {before:?} in front does not fit {out}"
        ));
    }
    Ok(out.clone())
}

/// `take`: `x.shape[:axis] + indices.shape + x.shape[axis+1:]`, i32 indices.
pub(super) fn gather_shape(inputs: &[(Shape, DType)], axis: usize) -> Result<Shape, Reject> {
    let [(x, _), (indices, di)] = inputs else {
        return Err(format!("take needs 2 inputs, {} given", inputs.len()).into());
    };
    if *di != DType::I32 {
        return Err(Reject::dtype(format!("indices must be i32, got {di}")));
    }
    if axis >= x.rank() {
        return Err(format!("axis {axis} is out of range for shape {x}").into());
    }
    let d = x.dims();
    let dims = d[..axis]
        .iter()
        .chain(indices.dims())
        .chain(&d[axis + 1..])
        .copied()
        .collect();
    Ok(Shape(dims))
}
