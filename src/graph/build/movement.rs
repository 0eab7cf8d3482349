//! Movement builders: views (reshape, squeeze, expand_dims), transpose, index-math copies
//! (slice, flip, broadcast_to, concat, pad, take) and compositions of them (stack, split,
//! tile, reflect pad).

use super::{Axes, Loc};
use crate::graph::{Dim, Graph, Site, Tensor};
use crate::ops::movement::{self, SliceArg, StridedKind};
use crate::ops::{Declared, Leaf, Movement, Op};
use crate::{DType, Error, Result, Shape};
use std::panic::Location;

/// Inputs one concat kernel reads at most; longer lists become a tree of concats, so no kernel
/// needs more storage bindings than WebGPU's default limit of 8.
const CONCAT_FAN_IN: usize = 6;

/// How [`Graph::pad`] fills the border.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PadMode {
    /// A constant, converted to the tensor's dtype like a cast (`as` in Rust).
    Constant(f64),
    /// Mirror without repeating the edge (NumPy's `reflect`); each pad must be < the axis size.
    Reflect,
}

impl Graph {
    /// A view with a new shape of the same element count; one dimension may be -1.
    /// No data is copied.
    #[track_caller]
    pub fn reshape(&mut self, x: Tensor, shape: &[isize]) -> Result<Tensor> {
        let loc = Location::caller();
        let from = &self.arg(x, "reshape", loc)?.shape;
        let out = movement::reshape_shape(from, shape)
            .map_err(|m| Error::build("reshape", loc, m).of_shapes(&[from]))?;
        self.view(x, out, "reshape", loc)
    }

    /// [`Graph::reshape`] to dimensions that may be known only at run time: each a size, a
    /// run-time dimension's name (one of [`Graph::dim_names`]), a product of those
    /// (`Dim::Product(1, vec!["batch".into(), "seq".into()])` for a flattened `[batch, seq]`)
    /// or at most one [`Dim::Unknown`], inferred from the element count like `-1`.
    ///
    /// ```
    /// # fn main() -> wgflow::Result<()> {
    /// use wgflow::{DType, Dim, Graph};
    /// let mut g = Graph::new();
    /// let x = g.placeholder_dyn("x", [Dim::named("batch"), Dim::named("seq"), 8.into()], DType::F32)?;
    /// let rows = g.reshape(x, &[-1, 8])?;
    /// let heads = g.reshape_dims(rows, [Dim::named("batch"), Dim::named("seq"), 2.into(), 4.into()])?;
    /// assert_eq!(g.dims(heads)?[3], Dim::Known(4));
    /// # Ok(()) }
    /// ```
    #[track_caller]
    pub fn reshape_dims<D: Into<Dim>>(
        &mut self,
        x: Tensor,
        dims: impl IntoIterator<Item = D>,
    ) -> Result<Tensor> {
        let loc = Location::caller();
        let mut target = Vec::new();
        for d in dims.into_iter().map(Into::into) {
            target.push(match d {
                Dim::Known(n) => isize::try_from(n).map_err(|_| {
                    Error::build("reshape", loc, format!("size {n} is too large")).of_value()
                })?,
                Dim::Unknown => -1,
                named => {
                    let sym = self
                        .sym_dim(&named)
                        .map_err(|m| Error::build("reshape", loc, m))?;
                    let probe = self
                        .syms
                        .probe_a_shape(std::slice::from_ref(&sym))
                        .ok_or_else(|| {
                            Error::build("reshape", loc, format!("{named} is too large")).of_value()
                        })?;
                    probe.dims()[0] as isize
                }
            });
        }
        let from = &self.arg(x, "reshape", loc)?.shape;
        let out = movement::reshape_shape(from, &target)
            .map_err(|m| Error::build("reshape", loc, m).of_shapes(&[from]))?;
        self.view(x, out, "reshape", loc)
    }

    /// Permute axes: output axis `i` is input axis `perm[i]` (NumPy `transpose(x, perm)`).
    #[track_caller]
    pub fn transpose(&mut self, x: Tensor, perm: &[isize]) -> Result<Tensor> {
        let loc = Location::caller();
        let from = &self.arg(x, "transpose", loc)?.shape;
        let (perm, out) = movement::permute_shape(from, perm)
            .map_err(|m| Error::build("transpose", loc, m).of_shapes(&[from]))?;
        if perm.iter().enumerate().all(|(i, &p)| i == p) {
            // The identity permutation moves nothing: a view.
            return self.view(x, out, "transpose", loc);
        }
        let site = Site::new("transpose", loc);
        self.add_op(
            Op::Movement(Movement::Permute(perm)),
            &[x],
            Declared::none(),
            site,
        )
    }

    /// Remove size-1 axes: the listed ones (an error if one is not size 1), or all with `None`.
    /// A view.
    #[track_caller]
    pub fn squeeze(&mut self, x: Tensor, axes: Option<&[isize]>) -> Result<Tensor> {
        let loc = Location::caller();
        let shape = self.arg(x, "squeeze", loc)?.shape.clone();
        let drop: Vec<usize> = match axes {
            None => (0..shape.rank())
                .filter(|&k| shape.dims()[k] == 1)
                .collect(),
            Some(list) => {
                let mut v = Vec::new();
                for &a in list {
                    let k = shape.axis(a).ok_or_else(|| {
                        Error::build(
                            "squeeze",
                            loc,
                            format!("axis {a} is out of range for shape {shape}"),
                        )
                        .of_shapes(&[&shape])
                    })?;
                    if shape.dims()[k] != 1 {
                        return Err(Error::build(
                            "squeeze",
                            loc,
                            format!(
                                "axis {a} of shape {shape} has size {}, not 1",
                                shape.dims()[k]
                            ),
                        )
                        .of_shapes(&[&shape]));
                    }
                    v.push(k);
                }
                v
            }
        };
        let dims: Vec<usize> = (0..shape.rank())
            .filter(|k| !drop.contains(k))
            .map(|k| shape.dims()[k])
            .collect();
        self.view(x, Shape(dims), "squeeze", loc)
    }

    /// Insert a size-1 axis at `axis` (in `-(rank+1)..=rank`). A view.
    #[track_caller]
    pub fn expand_dims(&mut self, x: Tensor, axis: isize) -> Result<Tensor> {
        let loc = Location::caller();
        let mut dims = self.arg(x, "expand_dims", loc)?.shape.dims().to_vec();
        let r = dims.len() as isize;
        let k = if axis < 0 { axis + r + 1 } else { axis };
        if !(0..=r).contains(&k) {
            return Err(Error::build(
                "expand_dims",
                loc,
                format!("axis {axis} is out of range for rank {r} (+1)"),
            )
            .of_shapes(&[&Shape::new(dims.clone())]));
        }
        dims.insert(k as usize, 1);
        self.view(x, Shape(dims), "expand_dims", loc)
    }

    /// Broadcast to `shape` with NumPy's rules (a copy with stride-0 reads).
    #[track_caller]
    pub fn broadcast_to(&mut self, x: Tensor, shape: &[usize]) -> Result<Tensor> {
        let loc = Location::caller();
        let from = self.arg(x, "broadcast_to", loc)?.shape.clone();
        let to = Shape::new(shape);
        if Shape::broadcast(&from, &to).as_ref() != Some(&to) {
            return Err(Error::build(
                "broadcast_to",
                loc,
                format!("shape {from} cannot broadcast to {to}"),
            )
            .of_shapes(&[&from]));
        }
        if from == to {
            return self.view(x, to, "broadcast_to", loc);
        }
        let strides = from
            .broadcast_strides(&to)
            .iter()
            .map(|&s| s as i64)
            .collect();
        self.strided(x, StridedKind::BroadcastTo, to, 0, strides, loc)
    }

    /// NumPy basic slicing `x[a0, a1, ...]`: one [`SliceArg`] per leading axis, with any
    /// non-zero step (negative steps walk backwards). An empty result is an error.
    #[track_caller]
    pub fn slice(&mut self, x: Tensor, args: &[SliceArg]) -> Result<Tensor> {
        let loc = Location::caller();
        self.whole_run_time_axes(x, args, loc)?;
        let from = self.arg(x, "slice", loc)?.shape.clone();
        let (to, offset, strides) = movement::slice_plan(&from, args)
            .map_err(|m| Error::build("slice", loc, m).of_shapes(&[&from]))?;
        if to == from
            && offset == 0
            && strides == from.strides().iter().map(|&s| s as i64).collect::<Vec<_>>()
        {
            return self.view(x, to, "slice", loc);
        }
        self.strided(x, StridedKind::Slice, to, offset, strides, loc)
    }

    /// Reverse the order of elements along `axes` (NumPy `flip`).
    #[track_caller]
    pub fn flip(&mut self, x: Tensor, axes: impl Into<Axes>) -> Result<Tensor> {
        let loc = Location::caller();
        let shape = self.arg(x, "flip", loc)?.shape.clone();
        let list = match axes.into() {
            Axes::All => (0..shape.rank() as isize).collect(),
            Axes::List(l) => l,
        };
        let mut args = vec![SliceArg::full(); shape.rank()];
        for a in list {
            let k = shape.axis(a).ok_or_else(|| {
                Error::build(
                    "flip",
                    loc,
                    format!("axis {a} is out of range for shape {shape}"),
                )
                .of_shapes(&[&shape])
            })?;
            args[k] = SliceArg::new(None, None, -1);
        }
        let (to, offset, strides) = movement::slice_plan(&shape, &args)
            .map_err(|m| Error::build("flip", loc, m).of_shapes(&[&shape]))?;
        self.strided(x, StridedKind::Flip, to, offset, strides, loc)
    }

    /// Join tensors of one dtype along an existing `axis`; other axes must agree.
    #[track_caller]
    pub fn concat(&mut self, xs: &[Tensor], axis: isize) -> Result<Tensor> {
        self.concat_at(xs, axis, Location::caller())
    }

    /// Join tensors of one shape along a new `axis` (NumPy `stack`).
    #[track_caller]
    pub fn stack(&mut self, xs: &[Tensor], axis: isize) -> Result<Tensor> {
        let loc = Location::caller();
        let first = *xs.first().ok_or_else(|| {
            Error::build("stack", loc, "needs at least one tensor").of_arity("1 or more", 0)
        })?;
        let base = &self.arg(first, "stack", loc)?.shape;
        for &x in xs {
            let s = &self.arg(x, "stack", loc)?.shape;
            if s != base {
                return Err(
                    Error::build("stack", loc, format!("shapes {base} and {s} differ"))
                        .of_shapes(&[base, s]),
                );
            }
        }
        let expanded = xs
            .iter()
            .map(|&x| self.expand_dims(x, axis))
            .collect::<Result<Vec<_>>>()
            .map_err(|e| relabel(e, "stack", loc))?;
        self.concat_at(&expanded, axis, loc)
    }

    /// Split into `sections` equal parts along `axis` (NumPy `split` with an integer).
    #[track_caller]
    pub fn split(&mut self, x: Tensor, sections: usize, axis: isize) -> Result<Vec<Tensor>> {
        let loc = Location::caller();
        let shape = self.arg(x, "split", loc)?.shape.clone();
        let k = shape.axis(axis).ok_or_else(|| {
            Error::build(
                "split",
                loc,
                format!("axis {axis} is out of range for shape {shape}"),
            )
            .of_shapes(&[&shape])
        })?;
        let n = shape.dims()[k];
        if sections == 0 || !n.is_multiple_of(sections) {
            return Err(Error::build(
                "split",
                loc,
                format!("axis {axis} of size {n} does not split into {sections} equal sections"),
            )
            .of_shapes(&[&shape]));
        }
        let part = (n / sections) as isize;
        (0..sections as isize)
            .map(|s| {
                let mut args = vec![SliceArg::full(); k + 1];
                args[k] = SliceArg::range(s * part, (s + 1) * part);
                self.slice_at(x, &args, loc)
            })
            .collect()
    }

    /// Pad each axis by `(before, after)` elements (NumPy `pad`); `pads` may be shorter than the
    /// rank, missing axes get no padding.
    #[track_caller]
    pub fn pad(&mut self, x: Tensor, pads: &[(usize, usize)], mode: PadMode) -> Result<Tensor> {
        let loc = Location::caller();
        let node = self.arg(x, "pad", loc)?;
        let (shape, dtype) = (node.shape.clone(), node.dtype);
        if pads.len() > shape.rank() {
            return Err(Error::build(
                "pad",
                loc,
                format!("{} pad widths for shape {shape}", pads.len()),
            )
            .of_shapes(&[&shape]));
        }
        let mut pads = pads.to_vec();
        pads.resize(shape.rank(), (0, 0));
        match mode {
            PadMode::Constant(v) => {
                let dims = shape
                    .dims()
                    .iter()
                    .zip(&pads)
                    .map(|(d, (a, b))| d.checked_add(*a)?.checked_add(*b))
                    .collect::<Option<_>>()
                    .ok_or_else(|| {
                        Error::build("pad", loc, format!("pads {pads:?} overflow shape {shape}"))
                            .of_value()
                    })?;
                let value = match dtype {
                    DType::F32 => (v as f32).to_bits(),
                    DType::F16 => crate::dtype::f32_to_f16_word((v as f32).to_bits()),
                    DType::I32 => v as i32 as u32,
                    DType::U32 => v as u32,
                    DType::Bool => (v != 0.0) as u32,
                };
                let before = pads.iter().map(|p| p.0).collect();
                let op = Op::Movement(Movement::Pad { before, value });
                let out = Shape(dims);
                self.add_op(op, &[x], Declared::shape(&out), Site::new("pad", loc))
            }
            PadMode::Reflect => {
                let mut y = x;
                for (k, &(a, b)) in pads.iter().enumerate() {
                    let d = shape.dims()[k];
                    if a >= d || b >= d {
                        return Err(Error::build(
                            "pad",
                            loc,
                            format!("reflect padding ({a}, {b}) of axis {k} needs both below its size {d}"),
                        ).of_shapes(&[&shape]));
                    }
                    let mut parts = Vec::new();
                    let axis_slice = |start: Option<isize>, stop: Option<isize>| {
                        let mut args = vec![SliceArg::full(); k + 1];
                        args[k] = SliceArg::new(start, stop, -1);
                        args
                    };
                    if a > 0 {
                        parts.push(self.slice_at(
                            y,
                            &axis_slice(Some(a as isize), Some(0)),
                            loc,
                        )?);
                    }
                    parts.push(y);
                    if b > 0 {
                        let (d, b) = (d as isize, b as isize);
                        // A stop of -1 would wrap around: `None` runs through index 0.
                        let stop = Some(d - 2 - b).filter(|&s| s >= 0);
                        parts.push(self.slice_at(y, &axis_slice(Some(d - 2), stop), loc)?);
                    }
                    y = self.concat_at(&parts, k as isize, loc)?;
                }
                Ok(y)
            }
        }
    }

    /// Repeat `x` `reps[k]` times along each axis (NumPy `tile`; a shorter `reps` applies to the
    /// trailing axes, a longer one adds leading axes).
    #[track_caller]
    pub fn tile(&mut self, x: Tensor, reps: &[usize]) -> Result<Tensor> {
        let loc = Location::caller();
        let mut dims = self.arg(x, "tile", loc)?.shape.dims().to_vec();
        let mut reps = reps.to_vec();
        while dims.len() < reps.len() {
            dims.insert(0, 1);
        }
        while reps.len() < dims.len() {
            reps.insert(0, 1);
        }
        // [d0, d1] -> [1, d0, 1, d1] -> broadcast [r0, d0, r1, d1] -> [r0*d0, r1*d1].
        let paired: Vec<usize> = dims.iter().flat_map(|&d| [1, d]).collect();
        let wide: Vec<usize> = dims.iter().zip(&reps).flat_map(|(&d, &r)| [r, d]).collect();
        let out: Vec<usize> = dims
            .iter()
            .zip(&reps)
            .map(|(&d, &r)| d.checked_mul(r))
            .collect::<Option<_>>()
            .ok_or_else(|| {
                Error::build("tile", loc, format!("reps {reps:?} overflow the shape")).of_value()
            })?;
        let v = self.view(x, Shape(paired), "tile", loc)?;
        let b = self
            .broadcast_to(v, &wide)
            .map_err(|e| relabel(e, "tile", loc))?;
        self.view(b, Shape(out), "tile", loc)
    }

    /// `take(x, indices, axis)`: the output is `x.shape[:axis] + indices.shape + x.shape[axis+1:]`.
    /// Indices are i32; negative ones count from the end. Constant indices out of
    /// `-n..n` are a build error; fed indices are clamped to the axis after wrapping negatives
    /// once (they cannot be checked before the run, and a GPU kernel cannot raise).
    #[track_caller]
    pub fn take(&mut self, x: Tensor, indices: Tensor, axis: isize) -> Result<Tensor> {
        let loc = Location::caller();
        let (shape, shape_dtype) = {
            let n = self.arg(x, "take", loc)?;
            (n.shape.clone(), n.dtype)
        };
        let index_node = self.arg(indices, "take", loc)?;
        if index_node.dtype != DType::I32 {
            return Err(Error::build_dtype(
                "take",
                loc,
                format!("indices must be i32, got {}", index_node.dtype),
                &[shape_dtype, index_node.dtype],
            ));
        }
        let k = shape.axis(axis).ok_or_else(|| {
            Error::build(
                "take",
                loc,
                format!("axis {axis} is out of range for shape {shape}"),
            )
            .of_shapes(&[&shape])
        })?;
        let n = shape.dims()[k] as i64;
        if let Op::Leaf(Leaf::Constant(t)) = &index_node.op {
            if let Some(&bad) = t
                .words()
                .iter()
                .find(|&&w| !(-n..n).contains(&(w as i32 as i64)))
            {
                return Err(Error::build(
                    "take",
                    loc,
                    format!(
                        "index {} is out of range for axis {axis} of size {n}",
                        bad as i32
                    ),
                )
                .of_value());
            }
        }
        let op = Op::Movement(Movement::Gather(k));
        self.add_op(op, &[x, indices], Declared::none(), Site::new("take", loc))
    }

    /// A view of `x` as `shape` (same element count), reported and named as `name`.
    pub(crate) fn view(&mut self, x: Tensor, shape: Shape, name: &str, loc: Loc) -> Result<Tensor> {
        let op = Op::Movement(Movement::Reshape);
        self.add_op(op, &[x], Declared::shape(&shape), Site::new(name, loc))
    }

    fn strided(
        &mut self,
        x: Tensor,
        kind: StridedKind,
        shape: Shape,
        offset: i64,
        strides: Vec<i64>,
        loc: Loc,
    ) -> Result<Tensor> {
        let op = Op::Movement(Movement::Strided {
            kind,
            offset,
            strides,
        });
        self.add_op(
            op,
            &[x],
            Declared::shape(&shape),
            Site::new(kind.name(), loc),
        )
    }

    /// A slice takes each run-time axis whole: its other arguments would depend on the size
    /// (see `Movement::rebind`).
    fn whole_run_time_axes(&self, x: Tensor, args: &[SliceArg], loc: Loc) -> Result<()> {
        let Some(sym) = &self.arg(x, "slice", loc)?.sym else {
            return Ok(());
        };
        let full = |a: &SliceArg| a.step == 1 && a.start.is_none_or(|s| s == 0) && a.stop.is_none();
        let bad = sym
            .iter()
            .enumerate()
            .find(|(k, d)| !d.is_known() && args.get(*k).is_some_and(|a| !full(a)));
        match bad {
            None => Ok(()),
            Some((k, _)) => Err(Error::build(
                "slice",
                loc,
                format!(
                    "axis {k} of {} is known only at run time; only a whole `:` slice of it is supported",
                    crate::graph::dims_text(&self.dims(x)?)
                ),
            )),
        }
    }

    fn slice_at(&mut self, x: Tensor, args: &[SliceArg], loc: Loc) -> Result<Tensor> {
        self.whole_run_time_axes(x, args, loc)?;
        let from = self.arg(x, "slice", loc)?.shape.clone();
        let (to, offset, strides) = movement::slice_plan(&from, args)
            .map_err(|m| Error::build("slice", loc, m).of_shapes(&[&from]))?;
        self.strided(x, StridedKind::Slice, to, offset, strides, loc)
    }

    fn concat_at(&mut self, xs: &[Tensor], axis: isize, loc: Loc) -> Result<Tensor> {
        let first = *xs.first().ok_or_else(|| {
            Error::build("concat", loc, "needs at least one tensor").of_arity("1 or more", 0)
        })?;
        let base = self.arg(first, "concat", loc)?.shape.clone();
        let k = base.axis(axis).ok_or_else(|| {
            Error::build(
                "concat",
                loc,
                format!("axis {axis} is out of range for shape {base}"),
            )
            .of_shapes(&[&base])
        })?;
        if xs.len() > CONCAT_FAN_IN {
            let parts = xs
                .chunks(CONCAT_FAN_IN)
                .map(|c| self.concat_at(c, axis, loc))
                .collect::<Result<Vec<_>>>()?;
            return self.concat_at(&parts, axis, loc);
        }
        if xs.len() == 1 {
            return self.view(first, base, "concat", loc);
        }
        let op = Op::Movement(Movement::Concat(k));
        self.add_op(op, xs, Declared::none(), Site::new("concat", loc))
    }
}

/// Report an inner builder's error under the composite the user called.
fn relabel(e: Error, op: &str, loc: Loc) -> Error {
    match e {
        Error::Build { message, kind, .. } => Error::build_kind(op, loc, message, kind),
        other => other,
    }
}
