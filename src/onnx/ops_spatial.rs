//! Spatial sampling and small transforms: `GridSample` (nearest, linear and cubic taps
//! gathered from the input, any number of spatial axes), `AffineGrid` (a constant base grid
//! times `theta`), `DFT` (a matmul with constant cosine and sine matrices) and `Det` (the
//! permutation expansion, for matrices up to 4×4) and 2-D `DeformConv` (bilinear taps at the
//! offset positions, then one matmul with the filters).
//!
//! All are composites of existing builders: `GridSample`'s coordinates are elementwise
//! arithmetic and each tap one `take` of a `[N·S, C]` view of the input at a flat index,
//! weighted and summed.

use super::build::{bad, Cx, Node};
use super::ops_shape::norm_axis;
use crate::{DType, HostTensor, Result, SliceArg, Tensor};

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Nearest,
    Linear,
    Cubic,
}

#[derive(Clone, Copy, PartialEq)]
enum Padding {
    Zeros,
    Border,
    Reflection,
}

/// Elementwise helpers over one dtype (the coordinates' float type).
struct Ew<'a, 'b> {
    cx: &'a mut Cx<'b>,
    dt: DType,
}

impl Ew<'_, '_> {
    fn c(&mut self, v: f64) -> Result<Tensor> {
        self.cx.scalar(v, self.dt)
    }
    fn add_c(&mut self, x: Tensor, v: f64) -> Result<Tensor> {
        let c = self.c(v)?;
        self.cx.g.add(x, c)
    }
    fn mul_c(&mut self, x: Tensor, v: f64) -> Result<Tensor> {
        let c = self.c(v)?;
        self.cx.g.mul(x, c)
    }
    /// `x` clamped to `[lo, hi]`.
    fn clamp(&mut self, x: Tensor, lo: f64, hi: f64) -> Result<Tensor> {
        let (l, h) = (self.c(lo)?, self.c(hi)?);
        let x = self.cx.g.maximum(x, l)?;
        self.cx.g.minimum(x, h)
    }
    /// Whether `x` lies outside `[lo, hi]`.
    fn outside(&mut self, x: Tensor, lo: f64, hi: f64) -> Result<Tensor> {
        let (l, h) = (self.c(lo)?, self.c(hi)?);
        let below = self.cx.g.less(x, l)?;
        let above = self.cx.g.greater(x, h)?;
        self.cx.g.logical_or(below, above)
    }
    /// The reference's `_gs_reflect`: fold `x` back into `[lo, hi]` by reflecting at the
    /// nearer border as often as needed.
    fn reflect(&mut self, x: Tensor, lo: f64, hi: f64) -> Result<Tensor> {
        let range = hi - lo;
        if range <= 0.0 {
            // One cell with align_corners: every coordinate reflects onto it.
            let z = self.mul_c(x, 0.0)?;
            return self.add_c(z, lo);
        }
        let l = self.c(lo)?;
        let below = self.cx.g.less(x, l)?;
        let neg = self.cx.g.neg(x)?;
        let d_lo = self.add_c(neg, lo)?;
        let d_hi = self.add_c(x, -hi)?;
        let dx = self.cx.g.select(below, d_lo, d_hi)?;
        let q = self.mul_c(dx, 1.0 / range)?;
        let k = self.cx.g.floor(q)?;
        let kr = self.mul_c(k, range)?;
        let r = self.cx.g.sub(dx, kr)?;
        let half = self.mul_c(k, 0.5)?;
        let half_floor = self.cx.g.floor(half)?;
        let even = self.cx.g.equal(half, half_floor)?;
        let from_lo = self.add_c(r, lo)?;
        let neg_r = self.cx.g.neg(r)?;
        let from_hi = self.add_c(neg_r, hi)?;
        // Below: even → lo + r, odd → hi - r; above: the other way round.
        let a = self.cx.g.select(below, from_lo, from_hi)?;
        let b = self.cx.g.select(below, from_hi, from_lo)?;
        let folded = self.cx.g.select(even, a, b)?;
        let out = self.outside(x, lo, hi)?;
        self.cx.g.select(out, folded, x)
    }
}

/// One tap along one spatial axis: the cell index (i32, in range) and its weight (`None`
/// for 1).
type Tap = (Tensor, Option<Tensor>);

pub(super) fn grid_sample(cx: &mut Cx, n: &Node) -> Result<Tensor> {
    let (x, grid) = (cx.t(n, 0)?, cx.t(n, 1)?);
    let xs = cx.g.probe_shape(x)?.dims().to_vec();
    let gs = cx.g.probe_shape(grid)?.dims().to_vec();
    let r = xs.len().saturating_sub(2);
    if r == 0 || gs.len() != r + 2 || gs[0] != xs[0] || gs[r + 1] != r {
        return Err(bad(format!(
            "X of shape {xs:?} and grid of shape {gs:?} do not match (want grid [N, …, {r}])"
        )));
    }
    let dt = cx.g.dtype(x)?;
    if !dt.is_float() || cx.g.dtype(grid)? != dt {
        return Err(bad(crate::onnx::wrong_dtype(
            "X and grid must have the same float type",
        )));
    }
    let mode = match n.string("mode").as_deref().unwrap_or(if n.opset >= 20 {
        "linear"
    } else {
        "bilinear"
    }) {
        "nearest" => Mode::Nearest,
        "linear" | "bilinear" => Mode::Linear,
        "cubic" | "bicubic" => Mode::Cubic,
        m => return Err(n.unsupported(format!("mode '{m}'"))),
    };
    let padding = match n.string("padding_mode").as_deref().unwrap_or("zeros") {
        "zeros" => Padding::Zeros,
        "border" => Padding::Border,
        "reflection" => Padding::Reflection,
        m => return Err(n.unsupported(format!("padding_mode '{m}'"))),
    };
    let align = n.int("align_corners", 0) != 0;
    let (batch, chans) = (xs[0], xs[1]);
    let spatial = &xs[2..];
    let s: usize = spatial.iter().product();
    let out = &gs[1..=r];
    let p: usize = out.iter().product();
    if batch * s > i32::MAX as usize {
        return Err(bad("input too large for i32 indices"));
    }
    let grid2 =
        cx.g.reshape(grid, &[batch as isize, p as isize, r as isize])?;
    // Taps per spatial axis (axis i reads grid component r-1-i: the grid holds x, y, z).
    let mut taps: Vec<Vec<Tap>> = Vec::with_capacity(r);
    for (i, &d) in spatial.iter().enumerate() {
        let comp = r - 1 - i;
        let gi = cx.g.slice(
            grid2,
            &[
                SliceArg::full(),
                SliceArg::full(),
                SliceArg::new(Some(comp as isize), Some(comp as isize + 1), 1),
            ],
        )?;
        let gi = cx.g.reshape(gi, &[batch as isize, p as isize])?;
        let mut ew = Ew { cx: &mut *cx, dt };
        taps.push(axis_taps(&mut ew, gi, d, mode, padding, align)?);
    }
    // Every combination of one tap per axis: gather at the flat index, weight, sum.
    let mut strides = vec![1usize; r];
    for i in (0..r.saturating_sub(1)).rev() {
        strides[i] = strides[i + 1] * spatial[i + 1];
    }
    let offsets = cx.g.arange(0.0, (batch * s) as f64, s as f64, DType::I32)?;
    let offsets = cx.g.reshape(offsets, &[batch as isize, 1])?;
    let mut perm: Vec<isize> = vec![0];
    perm.extend((2..r as isize + 2).collect::<Vec<_>>());
    perm.push(1);
    let xt = cx.g.transpose(x, &perm)?;
    let table = cx.g.reshape(xt, &[(batch * s) as isize, chans as isize])?;
    let mut acc: Option<Tensor> = None;
    let combos: usize = taps.iter().map(|t| t.len()).product();
    for mut c in 0..combos {
        let mut index = offsets;
        let mut weight: Option<Tensor> = None;
        for i in (0..r).rev() {
            let (idx, w) = taps[i][c % taps[i].len()];
            c /= taps[i].len();
            let scaled = if strides[i] == 1 {
                idx
            } else {
                let st = cx.scalar(strides[i] as f64, DType::I32)?;
                cx.g.mul(idx, st)?
            };
            index = cx.g.add(index, scaled)?;
            weight = match (weight, w) {
                (a, None) => a,
                (None, b) => b,
                (Some(a), Some(b)) => Some(cx.g.mul(a, b)?),
            };
        }
        let v = cx.g.take(table, index, 0)?; // [N, P, C]
        let v = match weight {
            Some(w) => {
                let w = cx.g.reshape(w, &[batch as isize, p as isize, 1])?;
                cx.g.mul(v, w)?
            }
            None => v,
        };
        acc = Some(match acc {
            None => v,
            Some(a) => cx.g.add(a, v)?,
        });
    }
    let y = acc.ok_or_else(|| bad("no taps"))?;
    let y = cx.g.transpose(y, &[0, 2, 1])?;
    let mut shape = vec![batch as isize, chans as isize];
    shape.extend(out.iter().map(|&d| d as isize));
    cx.g.reshape(y, &shape)
}

/// The taps along one axis of size `d` for normalized coordinates `g` (`[N, P]`).
fn axis_taps(
    ew: &mut Ew<'_, '_>,
    g: Tensor,
    d: usize,
    mode: Mode,
    padding: Padding,
    align: bool,
) -> Result<Vec<Tap>> {
    let df = d as f64;
    // Denormalize: [-1, 1] onto the cell centres (align_corners) or the cells' outer edges.
    let g1 = ew.add_c(g, 1.0)?;
    let mut x = if align {
        ew.mul_c(g1, (df - 1.0) / 2.0)?
    } else {
        let t = ew.mul_c(g1, df / 2.0)?;
        ew.add_c(t, -0.5)?
    };
    let (lo, hi) = if align {
        (0.0, df - 1.0)
    } else {
        (-0.5, df - 0.5)
    };
    if mode == Mode::Nearest {
        x = ew.cx.g.round(x)?;
    }
    match padding {
        Padding::Zeros => {}
        Padding::Border => {
            let out = ew.outside(x, lo, hi)?;
            let cl = ew.clamp(x, 0.0, df - 1.0)?;
            x = ew.cx.g.select(out, cl, x)?;
        }
        Padding::Reflection => x = ew.reflect(x, lo, hi)?,
    }
    taps_at(ew, x, d, mode, padding, (lo, hi))
}

/// The taps around pixel coordinates `x` along an axis of size `d`; `(lo, hi)` is the range
/// reflection folds tap positions into.
fn taps_at(
    ew: &mut Ew<'_, '_>,
    x: Tensor,
    d: usize,
    mode: Mode,
    padding: Padding,
    (lo, hi): (f64, f64),
) -> Result<Vec<Tap>> {
    let df = d as f64;
    // Tap positions (integral floats) and weights.
    let mut pos: Vec<(Tensor, Option<Tensor>)> = Vec::new();
    match mode {
        Mode::Nearest => {
            // The reference truncates toward zero (astype(int32)).
            let i = ew.cx.g.cast(x, DType::I32)?;
            pos.push((ew.cx.g.cast(i, ew.dt)?, None));
        }
        Mode::Linear | Mode::Cubic => {
            let f = ew.cx.g.floor(x)?;
            let t = ew.cx.g.sub(x, f)?;
            let (first, weights) = if mode == Mode::Linear {
                let nt = ew.cx.g.neg(t)?;
                (0, vec![ew.add_c(nt, 1.0)?, t])
            } else {
                (-1, cubic_weights(ew, t)?)
            };
            for (k, w) in weights.into_iter().enumerate() {
                let at = ew.add_c(f, (first + k as i64) as f64)?;
                pos.push((at, Some(w)));
            }
        }
    }
    // Where each position reads: in range, or per padding mode.
    let mut taps = Vec::with_capacity(pos.len());
    for (at, w) in pos {
        let (at, w) = match padding {
            Padding::Zeros => {
                let out = ew.outside(at, 0.0, df - 1.0)?;
                let zero = ew.c(0.0)?;
                let w = match w {
                    Some(w) => w,
                    None => ew.c(1.0)?,
                };
                (at, Some(ew.cx.g.select(out, zero, w)?))
            }
            Padding::Border => (at, w),
            Padding::Reflection => {
                let rf = ew.reflect(at, lo, hi)?;
                // int(...) truncates toward zero: -0.5 reads cell 0.
                let i = ew.cx.g.cast(rf, DType::I32)?;
                (ew.cx.g.cast(i, ew.dt)?, w)
            }
        };
        let at = ew.clamp(at, 0.0, df - 1.0)?;
        taps.push((ew.cx.g.cast(at, DType::I32)?, w));
    }
    Ok(taps)
}

/// Keys' cubic convolution weights (A = -0.75) of the taps at -1, 0, 1, 2 for the fraction
/// `t` in `[0, 1)`.
fn cubic_weights(ew: &mut Ew<'_, '_>, t: Tensor) -> Result<Vec<Tensor>> {
    const A: f64 = -0.75;
    // Outer taps (distance s in [1, 2]): ((A·s - 5A)·s + 8A)·s - 4A.
    let outer = |ew: &mut Ew<'_, '_>, s: Tensor| -> Result<Tensor> {
        let a = ew.mul_c(s, A)?;
        let a = ew.add_c(a, -5.0 * A)?;
        let a = ew.cx.g.mul(a, s)?;
        let a = ew.add_c(a, 8.0 * A)?;
        let a = ew.cx.g.mul(a, s)?;
        ew.add_c(a, -4.0 * A)
    };
    // Inner taps (distance s in [0, 1]): ((A+2)·s - (A+3))·s² + 1.
    let inner = |ew: &mut Ew<'_, '_>, s: Tensor| -> Result<Tensor> {
        let a = ew.mul_c(s, A + 2.0)?;
        let a = ew.add_c(a, -(A + 3.0))?;
        let s2 = ew.cx.g.mul(s, s)?;
        let a = ew.cx.g.mul(a, s2)?;
        ew.add_c(a, 1.0)
    };
    let t1 = ew.add_c(t, 1.0)?;
    let nt = ew.cx.g.neg(t)?;
    let one_minus = ew.add_c(nt, 1.0)?;
    let two_minus = ew.add_c(nt, 2.0)?;
    Ok(vec![
        outer(ew, t1)?,
        inner(ew, t)?,
        inner(ew, one_minus)?,
        outer(ew, two_minus)?,
    ])
}

pub(super) fn affine_grid(cx: &mut Cx, n: &Node) -> Result<Tensor> {
    let theta = cx.t(n, 0)?;
    let size = cx.ints(n, 1)?;
    let ts = cx.g.probe_shape(theta)?.dims().to_vec();
    let r = size.len().saturating_sub(2);
    if !(r == 2 || r == 3) || ts != [size[0].max(0) as usize, r, r + 1] {
        return Err(bad(format!(
            "theta of shape {ts:?} and size {size:?} do not match (want [N, 2, 3] with a \
             4-D size or [N, 3, 4] with a 5-D size)"
        )));
    }
    let dims: Vec<usize> = size[2..]
        .iter()
        .map(|&d| usize::try_from(d).map_err(|_| bad(format!("negative size {d}"))))
        .collect::<Result<_>>()?;
    let align = n.int("align_corners", 0) != 0;
    let axis = |d: usize| -> Vec<f64> {
        (0..d)
            .map(|i| {
                if align {
                    if d == 1 {
                        -1.0
                    } else {
                        -1.0 + i as f64 * (2.0 / (d as f64 - 1.0))
                    }
                } else {
                    -1.0 + (2 * i + 1) as f64 / d as f64
                }
            })
            .collect()
    };
    let coords: Vec<Vec<f64>> = dims.iter().map(|&d| axis(d)).collect();
    // The homogeneous base grid (x, y[, z], 1) in row-major order over the spatial axes.
    let count = super::limits::count(&dims, cx.opts, "the sampling grid")?;
    let mut base = super::limits::room(count.saturating_mul(r + 1), "the sampling grid")?;
    for flat in 0..count {
        let mut rest = flat;
        let mut idx = vec![0; r];
        for i in (0..r).rev() {
            idx[i] = rest % dims[i];
            rest /= dims[i];
        }
        for i in (0..r).rev() {
            base.push(coords[i][idx[i]] as f32);
        }
        base.push(1.0);
    }
    let dt = cx.g.dtype(theta)?;
    let base =
        cx.g.constant(HostTensor::new(vec![1, count, r + 1], base)?)?;
    let base = cx.g.cast(base, dt)?;
    let base = cx.g.broadcast_to(base, &[ts[0], count, r + 1])?;
    let tt = cx.g.transpose(theta, &[0, 2, 1])?;
    let grid = cx.g.matmul(base, tt)?; // [N, count, r]
    let mut shape = vec![ts[0] as isize];
    shape.extend(dims.iter().map(|&d| d as isize));
    shape.push(r as isize);
    cx.g.reshape(grid, &shape)
}

/// `DFT` along one axis: the signal axis moved last and flattened to `[M, L]`, times
/// constant `[L, K]` cosine and sine matrices (angles reduced mod n in f64, so the table is
/// exact to f32 rounding). Forward: `Y = Σ x·e^(-2πi·jk/n)`; inverse: `e^(+…)` over n;
/// inverse and onesided: NumPy's `irfft` (Hermitian input, real output).
pub(super) fn dft(cx: &mut Cx, n: &Node) -> Result<Tensor> {
    let x = cx.t(n, 0)?;
    let dims = cx.g.probe_shape(x)?.dims().to_vec();
    let rank = dims.len();
    let comps = dims.last().copied().unwrap_or(0);
    if rank < 2 || !(comps == 1 || comps == 2) {
        return Err(bad(format!(
            "input of shape {dims:?} (want […, signal…, 1 or 2])"
        )));
    }
    let axis = if n.opset >= 20 {
        match cx.opt_ints(n, 2)? {
            Some(v) if v.len() == 1 => v[0],
            Some(v) => return Err(bad(format!("axis must be one value, got {v:?}"))),
            None => -2,
        }
    } else {
        n.int("axis", 1)
    };
    let axis = norm_axis(axis, rank)?;
    if axis == rank - 1 {
        return Err(bad("axis cannot be the last (real/imaginary) axis"));
    }
    let inverse = n.int("inverse", 0) != 0;
    let onesided = n.int("onesided", 0) != 0;
    let len_in = dims[axis];
    let len = match cx.opt_ints(n, 1)? {
        Some(v) if v.len() == 1 && v[0] > 0 => v[0] as usize,
        Some(v) => {
            return Err(bad(format!(
                "dft_length must be one positive value, got {v:?}"
            )))
        }
        None if inverse && onesided => 2 * len_in.saturating_sub(1),
        None => len_in,
    };
    if len == 0 {
        return Err(bad("empty signal"));
    }
    let dt = cx.g.dtype(x)?;
    // Real and imaginary parts, the signal axis last, as [M, rows].
    let part = |cx: &mut Cx, c: usize| -> Result<Tensor> {
        let mut args = vec![SliceArg::full(); rank - 1];
        args.push(SliceArg::new(Some(c as isize), Some(c as isize + 1), 1));
        cx.g.slice(x, &args)
    };
    let mut perm: Vec<isize> = (0..rank as isize - 1)
        .filter(|&a| a != axis as isize)
        .collect();
    perm.push(axis as isize);
    let moved: Vec<usize> = perm.iter().map(|&a| dims[a as usize]).collect();
    let m: usize = moved[..moved.len() - 1].iter().product();
    // Inverse onesided reads the first n/2+1 bins; the others read the first n samples.
    let rows = if inverse && onesided {
        len_in.min(len / 2 + 1)
    } else {
        len_in.min(len)
    };
    let flat = |cx: &mut Cx, c: usize| -> Result<Tensor> {
        let p = part(cx, c)?;
        let sq = cx.g.reshape(
            p,
            &dims[..rank - 1]
                .iter()
                .map(|&d| d as isize)
                .collect::<Vec<_>>(),
        )?;
        let t = cx.g.transpose(sq, &perm)?;
        let t = cx.g.reshape(t, &[m as isize, len_in as isize])?;
        if rows == len_in {
            Ok(t)
        } else {
            cx.g.slice(
                t,
                &[
                    SliceArg::full(),
                    SliceArg::new(Some(0), Some(rows as isize), 1),
                ],
            )
        }
    };
    let xr = flat(cx, 0)?;
    let xi = if comps == 2 { Some(flat(cx, 1)?) } else { None };
    let cols = if inverse && onesided {
        len
    } else if onesided {
        len / 2 + 1
    } else {
        len
    };
    // The DFT matrix is rows x cols constants: a long signal asks for its square.
    let count = super::limits::count(&[rows, cols], cx.opts, "the DFT matrix")?;
    let table = |scale: &dyn Fn(usize) -> f64, sin: bool| -> Result<HostTensor> {
        let mut v = super::limits::room(count, "the DFT matrix")?;
        for j in 0..rows {
            for k in 0..cols {
                let a = 2.0 * std::f64::consts::PI * ((j * k) % len) as f64 / len as f64;
                v.push((scale(j) * if sin { a.sin() } else { a.cos() }) as f32);
            }
        }
        HostTensor::new(vec![rows, cols], v)
    };
    let mat = |cx: &mut Cx, scale: &dyn Fn(usize) -> f64, sin: bool| -> Result<Tensor> {
        let t = cx.g.constant(table(scale, sin)?)?;
        cx.g.cast(t, dt)
    };
    let nf = len as f64;
    let (re, im) = if inverse && onesided {
        // Each bin k counts twice (it and its mirror n-k) but 0 and, for even n, n/2.
        let w = move |k: usize| {
            if k == 0 || 2 * k == len {
                1.0 / nf
            } else {
                2.0 / nf
            }
        };
        let (c, s) = (mat(cx, &w, false)?, mat(cx, &w, true)?);
        let mut y = cx.g.matmul(xr, c)?;
        if let Some(xi) = xi {
            let t = cx.g.matmul(xi, s)?;
            y = cx.g.sub(y, t)?;
        }
        (y, None)
    } else {
        let scale = if inverse { 1.0 / nf } else { 1.0 };
        let w = move |_: usize| scale;
        let (c, s) = (mat(cx, &w, false)?, mat(cx, &w, true)?);
        // Forward: re = xr·C + xi·S, im = xi·C - xr·S; inverse flips the sine's sign.
        let rc = cx.g.matmul(xr, c)?;
        let rs = cx.g.matmul(xr, s)?;
        let (mut re, mut im) = (rc, cx.g.neg(rs)?);
        if inverse {
            im = rs;
        }
        if let Some(xi) = xi {
            let ic = cx.g.matmul(xi, c)?;
            let is = cx.g.matmul(xi, s)?;
            re = if inverse {
                cx.g.sub(re, is)?
            } else {
                cx.g.add(re, is)?
            };
            im = cx.g.add(im, ic)?;
        }
        (re, Some(im))
    };
    // Back to the input's layout, the components last.
    let mut shape: Vec<isize> = moved[..moved.len() - 1]
        .iter()
        .map(|&d| d as isize)
        .collect();
    shape.push(cols as isize);
    let mut inv = vec![0isize; perm.len()];
    for (i, &p) in perm.iter().enumerate() {
        inv[p as usize] = i as isize;
    }
    let back = |cx: &mut Cx, t: Tensor| -> Result<Tensor> {
        let t = cx.g.reshape(t, &shape)?;
        let t = cx.g.transpose(t, &inv)?;
        cx.g.expand_dims(t, -1)
    };
    let re = back(cx, re)?;
    match im {
        None => Ok(re),
        Some(im) => {
            let im = back(cx, im)?;
            cx.g.concat(&[re, im], -1)
        }
    }
}

/// `Det` of `[…, n, n]` for n up to 4: the sum over permutations of signed products of
/// entries (exact up to f32 rounding of at most 24 products).
pub(super) fn det(cx: &mut Cx, n: &Node) -> Result<Tensor> {
    let x = cx.t(n, 0)?;
    let dims = cx.g.probe_shape(x)?.dims().to_vec();
    let r = dims.len();
    if r < 2 || dims[r - 1] != dims[r - 2] {
        return Err(bad(format!(
            "input of shape {dims:?} is not a stack of square matrices"
        )));
    }
    let size = dims[r - 1];
    if !(1..=4).contains(&size) {
        return Err(n.unsupported(format!("{size}×{size} matrices (only up to 4×4)")));
    }
    let batch: Vec<isize> = dims[..r - 2].iter().map(|&d| d as isize).collect();
    let entry = |cx: &mut Cx, i: usize, j: usize| -> Result<Tensor> {
        let mut args = vec![SliceArg::full(); r - 2];
        args.push(SliceArg::new(Some(i as isize), Some(i as isize + 1), 1));
        args.push(SliceArg::new(Some(j as isize), Some(j as isize + 1), 1));
        let e = cx.g.slice(x, &args)?;
        cx.g.reshape(e, &batch)
    };
    let mut a = super::limits::room(size.saturating_mul(size), "the matrix entries")?;
    for i in 0..size {
        for j in 0..size {
            a.push(entry(cx, i, j)?);
        }
    }
    // Every permutation of 0..size with its sign (Heap's algorithm would do; size ≤ 4).
    let mut perms: Vec<(Vec<usize>, bool)> = vec![(vec![], false)];
    for k in 0..size {
        let mut next = Vec::new();
        for (p, odd) in &perms {
            for pos in 0..=p.len() {
                let mut q = p.clone();
                q.insert(pos, k);
                // Inserting k (the largest so far) at pos makes p.len() - pos inversions.
                next.push((q, *odd ^ ((p.len() - pos) % 2 == 1)));
            }
        }
        perms = next;
    }
    let mut acc: Option<Tensor> = None;
    for (p, odd) in perms {
        let mut term = a[p[0]];
        for (i, &j) in p.iter().enumerate().skip(1) {
            term = cx.g.mul(term, a[i * size + j])?;
        }
        acc = Some(match (acc, odd) {
            (None, false) => term,
            (None, true) => cx.g.neg(term)?,
            (Some(s), false) => cx.g.add(s, term)?,
            (Some(s), true) => cx.g.sub(s, term)?,
        });
    }
    acc.ok_or_else(|| bad("empty matrix"))
}

/// 2-D `DeformConv` with one filter group: for each offset group, the input's channels are
/// sampled bilinearly (zeros outside) at every kernel tap moved by its offset, times the
/// mask; the samples `[N, C·K, P]` then meet the filters `[O, C·K]` in one matmul.
pub(super) fn deform_conv(cx: &mut Cx, n: &Node) -> Result<Tensor> {
    let (x, w, off) = (cx.t(n, 0)?, cx.t(n, 1)?, cx.t(n, 2)?);
    let (bias, mask) = (cx.opt_t(n, 3)?, cx.opt_t(n, 4)?);
    let xs = cx.g.probe_shape(x)?.dims().to_vec();
    let ws = cx.g.probe_shape(w)?.dims().to_vec();
    let os = cx.g.probe_shape(off)?.dims().to_vec();
    if xs.len() != 4 || ws.len() != 4 || os.len() != 4 {
        return Err(n.unsupported("DeformConv other than 2-D"));
    }
    if n.int("group", 1) != 1 {
        return Err(n.unsupported("DeformConv with group > 1"));
    }
    let (batch, chans, h, wd) = (xs[0], xs[1], xs[2], xs[3]);
    let (oc, kh, kw) = (ws[0], ws[2], ws[3]);
    if ws[1] != chans {
        return Err(bad(format!(
            "W of shape {ws:?} does not match X of shape {xs:?}"
        )));
    }
    let kernel = n.ints("kernel_shape").unwrap_or(vec![kh as i64, kw as i64]);
    if kernel != [kh as i64, kw as i64] {
        return Err(bad(format!(
            "kernel_shape {kernel:?} does not match W of shape {ws:?}"
        )));
    }
    let two = |name: &str, d: i64| -> Result<[usize; 2]> {
        let v = n.ints(name).unwrap_or(vec![d, d]);
        match v[..] {
            [a, b] if a >= 0 && b >= 0 => Ok([a as usize, b as usize]),
            _ => Err(bad(format!(
                "{name} must be two non-negative values, got {v:?}"
            ))),
        }
    };
    let [sh, sw] = two("strides", 1)?;
    let [dh, dw] = two("dilations", 1)?;
    let pads = n.ints("pads").unwrap_or(vec![0; 4]);
    if pads.len() != 4 || sh == 0 || sw == 0 {
        return Err(bad(format!(
            "pads {pads:?} / strides must be 4 values / positive"
        )));
    }
    let og = n.int("offset_group", 1).max(1) as usize;
    let k = kh * kw;
    let (oh, ow) = (os[2], os[3]);
    let p = oh * ow;
    if chans % og != 0 || os[0] != batch || os[1] != og * k * 2 {
        return Err(bad(format!(
            "offset of shape {os:?} does not match offset_group {og} and kernel {kh}×{kw}"
        )));
    }
    let cg = chans / og;
    let dt = cx.g.dtype(x)?;
    // Offsets as [N, OG, K, 2, P]; the mask as [N, OG, K·P].
    let off = cx.g.reshape(
        off,
        &[batch as isize, og as isize, k as isize, 2, p as isize],
    )?;
    let mask = match mask {
        Some(m) => Some(cx.g.reshape(m, &[batch as isize, og as isize, (k * p) as isize])?),
        None => None,
    };
    // Each tap's undeformed position, [K, P] per axis.
    let base = |along_h: bool| -> Result<HostTensor> {
        let mut v = super::limits::room(k.saturating_mul(p), "the offsets")?;
        for a in 0..kh {
            for b in 0..kw {
                for i in 0..oh {
                    for j in 0..ow {
                        v.push(if along_h {
                            (i * sh + a * dh) as f32 - pads[0] as f32
                        } else {
                            (j * sw + b * dw) as f32 - pads[1] as f32
                        });
                    }
                }
            }
        }
        HostTensor::new(vec![k, p], v)
    };
    let (by, bx) = (base(true)?, base(false)?);
    let by = cx.g.constant(by)?;
    let by = cx.g.cast(by, dt)?;
    let bx = cx.g.constant(bx)?;
    let bx = cx.g.cast(bx, dt)?;
    let xt = cx.g.transpose(x, &[0, 2, 3, 1])?;
    let table =
        cx.g.reshape(xt, &[(batch * h * wd) as isize, chans as isize])?;
    let offsets =
        cx.g.arange(0.0, (batch * h * wd) as f64, (h * wd) as f64, DType::I32)?;
    let offsets = cx.g.reshape(offsets, &[batch as isize, 1])?;
    let mut groups = Vec::with_capacity(og);
    for g in 0..og {
        let rows = |cx: &mut Cx, comp: isize| -> Result<Tensor> {
            let s = cx.g.slice(
                off,
                &[
                    SliceArg::full(),
                    SliceArg::new(Some(g as isize), Some(g as isize + 1), 1),
                    SliceArg::full(),
                    SliceArg::new(Some(comp), Some(comp + 1), 1),
                ],
            )?;
            cx.g.reshape(s, &[batch as isize, k as isize, p as isize])
        };
        let oy = rows(cx, 0)?;
        let ox = rows(cx, 1)?;
        let py = cx.g.add(oy, by)?;
        let px = cx.g.add(ox, bx)?;
        let py = cx.g.reshape(py, &[batch as isize, (k * p) as isize])?;
        let px = cx.g.reshape(px, &[batch as isize, (k * p) as isize])?;
        let mut ew = Ew { cx: &mut *cx, dt };
        let ty = taps_at(&mut ew, py, h, Mode::Linear, Padding::Zeros, (0.0, 0.0))?;
        let tx = taps_at(&mut ew, px, wd, Mode::Linear, Padding::Zeros, (0.0, 0.0))?;
        let tab = cx.g.slice(
            table,
            &[
                SliceArg::full(),
                SliceArg::new(Some((g * cg) as isize), Some(((g + 1) * cg) as isize), 1),
            ],
        )?;
        let gmask = match mask {
            Some(m) => {
                let s = cx.g.slice(
                    m,
                    &[
                        SliceArg::full(),
                        SliceArg::new(Some(g as isize), Some(g as isize + 1), 1),
                    ],
                )?;
                Some(cx.g.reshape(s, &[batch as isize, (k * p) as isize])?)
            }
            None => None,
        };
        let mut acc: Option<Tensor> = None;
        for &(iy, wy) in &ty {
            for &(ix, wx) in &tx {
                let st = cx.scalar(wd as f64, DType::I32)?;
                let row = cx.g.mul(iy, st)?;
                let idx = cx.g.add(row, ix)?;
                let idx = cx.g.add(idx, offsets)?;
                let v = cx.g.take(tab, idx, 0)?; // [N, K·P, Cg]
                let (wy, wx) = (wy.ok_or_else(|| bad("tap"))?, wx.ok_or_else(|| bad("tap"))?);
                let mut wgt = cx.g.mul(wy, wx)?;
                if let Some(m) = gmask {
                    wgt = cx.g.mul(wgt, m)?;
                }
                let wgt = cx.g.reshape(wgt, &[batch as isize, (k * p) as isize, 1])?;
                let v = cx.g.mul(v, wgt)?;
                acc = Some(match acc {
                    None => v,
                    Some(a) => cx.g.add(a, v)?,
                });
            }
        }
        groups.push(acc.ok_or_else(|| bad("no taps"))?);
    }
    let cols = if groups.len() == 1 {
        groups[0]
    } else {
        cx.g.concat(&groups, 2)?
    };
    // [N, K, P, C] → [N, C, K, P] → [N, C·K, P].
    let cols = cx.g.reshape(
        cols,
        &[batch as isize, k as isize, p as isize, chans as isize],
    )?;
    let cols = cx.g.transpose(cols, &[0, 3, 1, 2])?;
    let cols =
        cx.g.reshape(cols, &[batch as isize, (chans * k) as isize, p as isize])?;
    let wm = cx.g.reshape(w, &[1, oc as isize, (chans * k) as isize])?;
    let wm = cx.g.broadcast_to(wm, &[batch, oc, chans * k])?;
    let mut y = cx.g.matmul(wm, cols)?; // [N, O, P]
    if let Some(b) = bias {
        let b = cx.g.reshape(b, &[1, oc as isize, 1])?;
        y = cx.g.add(y, b)?;
    }
    cx.g.reshape(y, &[batch as isize, oc as isize, oh as isize, ow as isize])
}
