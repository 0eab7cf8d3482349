//! cpu:0's window-per-plane kernels (depthwise convolution, average pooling) on *phase
//! planes* (max pooling is by rows, [`super::maxpool`]).
//!
//! A plane is copied once, bordered with zeros, into
//! `s·s` phase planes for stride `s`: phase `(a, b)` holds bordered cell `(y·s + a, x·s + b)`
//! at `y·pw + x`. Then tap `(ki, kj)` of output `(oy, ox)` is element `oy·pw + ox` of phase
//! `(ki % s, kj % s)` shifted by `(ki / s)·pw + kj / s`, so each tap is one contiguous read
//! over the whole plane, flattened (outputs past `ow` in a row are computed and dropped).
//! The loops vectorize with one tail per plane instead of a scalar tail per row (a 28-wide
//! row is 3 vectors and 4 scalar steps) or scalar strided reads at stride 2.
//!
//! Every output folds its taps in row-major order, as the reference kernels do, so the
//! results are the same bits.

use super::Window;

/// A plane's window geometry on phase planes.
pub(super) struct Phases {
    hw: [usize; 2],
    out: [usize; 2],
    kernel: [usize; 2],
    stride: usize,
    pad: [usize; 2],
    /// Row length and row count of each phase plane.
    pw: usize,
    rows: usize,
}

/// Scratch a task reuses across planes.
#[derive(Default)]
pub(super) struct Scratch {
    phases: Vec<f32>,
    acc: Vec<f32>,
}

impl Phases {
    /// The geometry for `[h, w]` planes and `window`, when its strides are equal and it has
    /// no dilation (otherwise the callers' general loops apply).
    pub fn new(hw: [usize; 2], out: [usize; 2], window: &Window) -> Option<Phases> {
        let [sy, sx] = window.stride;
        if sy != sx
            || sy == 0
            || window.dilation != [1, 1]
            || window.kernel.contains(&0)
            || hw.contains(&0)
            || out.contains(&0)
        {
            return None;
        }
        let s = sy;
        let [kh, kw] = window.kernel;
        let [py, px] = window.padding;
        // Wide and tall enough that no tap wraps into the next row or runs off the end.
        let pw = (hw[1] + 2 * px).div_ceil(s).max(out[1] + (kw - 1) / s);
        let rows = (hw[0] + 2 * py).div_ceil(s).max(out[0] + (kh - 1) / s);
        Some(Phases {
            hw,
            out,
            kernel: [kh, kw],
            stride: s,
            pad: [py, px],
            pw,
            rows,
        })
    }

    /// Whether every window lies inside the bordered plane (a pool's windows must: cells
    /// past the border are not excluded as padding is).
    pub fn windows_fit(&self) -> bool {
        let s = self.stride;
        (0..2).all(|a| (self.out[a] - 1) * s + self.kernel[a] <= self.hw[a] + 2 * self.pad[a])
    }

    /// Floats of one plane's phase planes.
    pub fn len(&self) -> usize {
        self.stride * self.stride * self.rows * self.pw
    }

    /// Row length of the phase planes (and of the flattened output).
    pub fn pw(&self) -> usize {
        self.pw
    }

    /// Copies plane `xs` into `buf`'s phase planes (`buf.len()` ≥ [`len`](Self::len)),
    /// bordered with `fill`.
    #[inline(always)]
    pub fn split(&self, xs: &[f32], fill: f32, buf: &mut [f32]) {
        let ([h, wd], s, [py, px], pw) = (self.hw, self.stride, self.pad, self.pw);
        let plane = self.rows * pw;
        // Without a border every float of `buf` is some input's (the map is one to one).
        if buf.len() != h * wd {
            buf.fill(fill);
        }
        for (y, row) in xs.chunks_exact(wd).take(h).enumerate() {
            let yy = y + py;
            let base = (yy % s) * s * plane + (yy / s) * pw;
            if s == 1 {
                buf[base + px..][..wd].copy_from_slice(row);
                continue;
            }
            if s == 2 {
                // Even and odd input columns to their phases (no division per element).
                let (even, odd) = (wd.div_ceil(2), wd / 2);
                let (ce, co) = (px / 2, px.div_ceil(2));
                let (lo, hi) = buf[base..].split_at_mut(plane);
                let (de, dod) = if px % 2 == 0 { (lo, hi) } else { (hi, lo) };
                let (de, dod) = (&mut de[ce..][..even], &mut dod[co..][..odd]);
                for (i, pair) in row.chunks_exact(2).enumerate() {
                    de[i] = pair[0];
                    dod[i] = pair[1];
                }
                if wd % 2 == 1 {
                    de[even - 1] = row[wd - 1];
                }
                continue;
            }
            for (x, &v) in row.iter().enumerate() {
                let xx = x + px;
                buf[base + (xx % s) * plane + xx / s] = v;
            }
        }
    }

    /// Start of tap `k` (row-major) in the phase buffer.
    pub fn tap(&self, k: usize) -> usize {
        let (s, kw) = (self.stride, self.kernel[1]);
        let (ki, kj) = (k / kw, k % kw);
        ((ki % s) * s + kj % s) * self.rows * self.pw + (ki / s) * self.pw + kj / s
    }

    /// Length of the flattened output (rows of `pw`, the last cut at `ow`).
    pub fn flat(&self) -> usize {
        (self.out[0] - 1) * self.pw + self.out[1]
    }

    /// Copies the flattened result's valid columns into `dst` (`[oh, ow]`).
    fn gather_out(&self, acc: &[f32], dst: &mut [f32]) {
        let ow = self.out[1];
        for (d, a) in dst.chunks_exact_mut(ow).zip(acc.chunks(self.pw)) {
            d.copy_from_slice(&a[..ow]);
        }
    }

    /// One depthwise output plane from input plane `xs` and its `kh·kw` weights `wc`:
    /// `Σ_k wc[k]·tap_k`, summed left to right in tap order (no fused multiply-add).
    pub fn depthwise(&self, xs: &[f32], wc: &[f32], sc: &mut Scratch, dst: &mut [f32]) {
        #[cfg(target_arch = "x86_64")]
        if avx2() {
            // SAFETY: the CPU supports AVX2 and FMA (checked by `avx2`).
            unsafe { self.depthwise_avx2(xs, wc, sc, dst) };
            return;
        }
        self.depthwise_body(xs, wc, sc, dst);
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn depthwise_avx2(&self, xs: &[f32], wc: &[f32], sc: &mut Scratch, dst: &mut [f32]) {
        self.depthwise_body(xs, wc, sc, dst);
    }

    #[inline(always)]
    fn depthwise_body(&self, xs: &[f32], wc: &[f32], sc: &mut Scratch, dst: &mut [f32]) {
        sc.phases.resize(self.len(), 0.0);
        self.split(xs, 0.0, &mut sc.phases);
        let n = self.flat();
        sc.acc.resize(n, 0.0);
        let (buf, acc) = (&sc.phases, &mut sc.acc[..n]);
        if self.kernel == [3, 3] {
            let t: [&[f32]; 9] = std::array::from_fn(|k| &buf[self.tap(k)..][..n]);
            let w: [f32; 9] = std::array::from_fn(|k| wc[k]);
            fold(acc, &t, |v| w[0] * v, |a, k, v| a + w[k] * v);
        } else {
            passes(acc, buf, (0..wc.len()).map(|k| self.tap(k)), |k, a, v| {
                if k == 0 {
                    wc[0] * v
                } else {
                    a + wc[k] * v
                }
            });
        }
        self.gather_out(acc, dst);
    }

    /// One unpadded average-pooled output plane (see
    /// [`windows_fit`](Self::windows_fit) and the caller).
    pub fn avg_pool(&self, xs: &[f32], sc: &mut Scratch, dst: &mut [f32]) {
        #[cfg(target_arch = "x86_64")]
        if avx2() {
            // SAFETY: the CPU supports AVX2 and FMA (checked by `avx2`).
            unsafe { self.avg_pool_avx2(xs, sc, dst) };
            return;
        }
        self.avg_pool_body(xs, sc, dst);
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn avg_pool_avx2(&self, xs: &[f32], sc: &mut Scratch, dst: &mut [f32]) {
        self.avg_pool_body(xs, sc, dst);
    }

    #[inline(always)]
    fn avg_pool_body(&self, xs: &[f32], sc: &mut Scratch, dst: &mut [f32]) {
        sc.phases.resize(self.len(), 0.0);
        self.split(xs, 0.0, &mut sc.phases);
        let n = self.flat();
        sc.acc.resize(n, 0.0);
        let (buf, acc) = (&sc.phases, &mut sc.acc[..n]);
        let taps = self.kernel[0] * self.kernel[1];
        match self.kernel {
            [2, 2] => {
                let t: [&[f32]; 4] = std::array::from_fn(|k| &buf[self.tap(k)..][..n]);
                fold(acc, &t, |v| v, |a, _, v| a + v);
            }
            [3, 3] => {
                let t: [&[f32]; 9] = std::array::from_fn(|k| &buf[self.tap(k)..][..n]);
                fold(acc, &t, |v| v, |a, _, v| a + v);
            }
            _ => passes(acc, buf, (0..taps).map(|k| self.tap(k)), |k, a, v| {
                if k == 0 {
                    v
                } else {
                    a + v
                }
            }),
        }
        let count = taps as f32;
        acc.iter_mut().for_each(|a| *a /= count);
        self.gather_out(acc, dst);
    }
}

#[cfg(target_arch = "x86_64")]
fn avx2() -> bool {
    crate::ops::simd::level() >= crate::ops::simd::SimdLevel::Avx2
}

/// `acc[i] = step(…step(first(t[0][i]), 1, t[1][i])…, N-1, t[N-1][i])`: all `N` taps in
/// one pass (N known to the compiler, so the loop vectorizes with the taps in registers).
#[inline(always)]
fn fold<const N: usize>(
    acc: &mut [f32],
    t: &[&[f32]; N],
    first: impl Fn(f32) -> f32,
    step: impl Fn(f32, usize, f32) -> f32,
) {
    let n = acc.len();
    let t: [&[f32]; N] = std::array::from_fn(|k| &t[k][..n]);
    for (i, o) in acc.iter_mut().enumerate() {
        let mut a = first(t[0][i]);
        for (k, tk) in t.iter().enumerate().skip(1) {
            a = step(a, k, tk[i]);
        }
        *o = a;
    }
}

/// The taps one pass each (any window size): `acc[i] = f(k, acc[i], buf[start_k + i])`.
#[inline(always)]
fn passes(
    acc: &mut [f32],
    buf: &[f32],
    starts: impl Iterator<Item = usize>,
    f: impl Fn(usize, f32, f32) -> f32,
) {
    let n = acc.len();
    for (k, s) in starts.enumerate() {
        for (a, &v) in acc.iter_mut().zip(&buf[s..s + n]) {
            *a = f(k, *a, v);
        }
    }
}
