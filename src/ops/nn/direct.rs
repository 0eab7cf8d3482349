//! cpu:0's direct convolution: no im2col, each tap of a tile of outputs read where it lies.
//!
//! Each input plane is split once into phase planes ([`Phases`]; the plane itself for a
//! 1x1 at stride 1), where every tap of consecutive (flattened) outputs is one contiguous
//! read. Two micro-kernels multiply blocks of output channels by those reads:
//!
//! - **AVX-512** (`tile_wide`): 8 output channels by 48 positions, the sums in 24 registers;
//!   per tap three unaligned loads straight from the planes, eight weights broadcast from
//!   `w`'s rows in place and 24 fused multiply-adds; the last pass over the taps stores the
//!   sums straight into the output's rows. Nothing is packed per call, so it pays
//!   on any layer whose flattened output wastes few positions ([`WIDE_MIN_USE`]): the 3x3s
//!   of ResNet, DenseNet and Inception at 14x14 and more, SqueezeNet's at 13x13, and first
//!   layers over RGB.
//! - **AVX2** (`tile`): a tile's taps are copied into an aligned panel, and 4 output
//!   channels by 24 positions are summed in twelve registers: per tap three loads, four
//!   broadcast weights and twelve fused multiply-adds (4 rows waste no channels of the
//!   usual 16 to 128; 6 by 16 computed 36 for 32).
// Elsewhere (wasm32, aarch64) the vector kernels are compiled out and the portable path
// leaves some of these helpers unused.
#![cfg_attr(not(target_arch = "x86_64"), allow(unused))]
use super::cpu::SendPtr;
use super::maxpool::{max_band, RowScratch};
use super::planes::Phases;
#[cfg(target_arch = "x86_64")]
use super::tiles::{gather, tile, tile_wide, Line, Scatter};
use super::{dims4, Conv2dKernel, PoolKernel};
use crate::ops::elementwise::RangeProgram;
use rayon::prelude::*;

/// Taps per output above which im2col + GEMM is used instead: measured on the 2-core
/// development machine with the GEMM's AVX2 kernels, the direct kernel matched or beat it up to 256 taps (ResNet's 7x7
/// over RGB: 147 vs 147 GFLOP/s; 1x1 over 16–256 channels: 10% faster) and lost beyond
/// (3x3 over 512 channels at 7x7: 53 vs 121), where it packs each tile's taps per task.
pub(super) const MAX_TAPS: usize = 256;
/// On a CPU with AVX-512 (where the GEMM uses it too), the most input channels for which
/// the direct kernel is used whatever its waste (a first layer over RGB).
const WIDE_MAX_CIN: usize = 4;
/// The least share of computed positions that are outputs for which the AVX-512 kernel
/// beats im2col + GEMM. Measured on the development machine (Xeon, AVX-512, 2 cores) by
/// `wgflow profile` of the light models: 0.70–0.89x the GEMM's time on 3x3s with outputs of
/// 14x14 and more (0.81 to 0.98 used); at 13x13 (0.704 used) 0.88x in SqueezeNet once the
/// kernel stored its sums straight into the output (1.05x before); 7x7 (0.51) stays with
/// the GEMM.
const WIDE_MIN_USE: f64 = 0.7;
/// Without AVX-512, the direct kernel beats the GEMM (which packs every tap of every column
/// per call) up to this many output channels and taps over outputs of at least
/// `SMALL_M_POSITIONS`. Measured by `wgflow profile` of single 3x3 convolutions with ReLU on
/// the 2-core AVX2 EPYC: 64 channels at 16x16, batch 8, 1.61 ms against 2.27; 128 at 28x28
/// 2.12 against 2.21; 96 at 28x28 1.10 against 1.23; 256 at 14x14 2.64 against 1.89 (so
/// not there). A batch-1 1x1 to more channels than this goes to the GEMM whatever its taps:
/// 160 -> 960 channels at 7x7 took 0.156 ms there against 0.238 direct, 96 -> 576 at 14x14
/// 0.189 against 0.279, 32 -> 192 at 28x28 0.139 against 0.170 (MobileNetV2 at batch 1:
/// 13.2-14.4 -> 12.1-12.4 ms; at batch 8 the direct kernel was as fast or faster).
const SMALL_M: usize = 128;
const SMALL_M_TAPS: usize = 1152;
const SMALL_M_POSITIONS: usize = 196;
/// Output channels and flattened positions of one micro-kernel tile.
pub(super) use crate::ops::matmul::panel::{MR, NR};
/// Output channels and flattened positions of one AVX-512 tile (24 of the 32 registers
/// hold its sums), and the taps summed per pass (a tile's 144 x 48 inputs fill 40% of L1
/// and serve every block of its run; 64 was 5% slower on a 3x3 over 64 channels at 56x56,
/// 256 no faster). 144 is 16 channels of 3x3 taps: a 3x3 over 16 channels (SqueezeNet's)
/// takes one pass, with no partial sums stored and reloaded, and 3-5% less time than 128
/// on SqueezeNet's 3x3s.
pub(super) const WMR: usize = 8;
pub(super) const WNR: usize = 48;
const WKC: usize = 144;
/// Taps per pass of the AVX-512 kernel: [`WKC`], or all of them when they are at most a
/// quarter more (ResNet's 7x7 over RGB has 147: a second pass of 3 taps reloaded and stored
/// all 24 sums of every tile for 3 multiply-adds each).
fn wide_kc(taps: usize) -> usize {
    if taps <= WKC + WKC / 4 {
        taps
    } else {
        WKC
    }
}

/// Floats of partial sums one AVX-512 task holds (1 MiB, half this machine's L2).
const WIDE_ACC_FLOATS: usize = 1 << 18;
/// Taps summed per pass over the channel blocks: their 16-position slices (16 KiB) stay
/// in L1 while every block of weights is multiplied by them.
const KC: usize = 256;
/// Most floats of phase planes a thread keeps for its next call (16 MiB).
const KEEP_FLOATS: usize = 1 << 22;
/// Most floats of phase planes split for the images of one parallel loop (16 MiB).
const PLANE_CHUNK: usize = 1 << 22;
/// Floats of phase planes from which an image's planes are split in parallel.
const SPLIT_PARALLEL: usize = 1 << 18;
/// Floats of a task's band of convolution rows that it pools (1 MiB, half this machine's
/// L2). Smaller bands cost more than they save: SqueezeNet's first layer with its pool,
/// alone on 2 threads, took 0.41 ms in bands of 256 KiB, 0.52 in 128 KiB and 0.37 in
/// 1 MiB (its tasks' whole ranges), against 0.37 for the convolution without the pool.
const BAND_FLOATS: usize = 1 << 18;

thread_local! {
    /// The direct kernel's phase planes, reused by the next call on this thread.
    static PLANES: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
    /// One image's phase planes, split by the task that reads them.
    static OWN_PLANES: std::cell::RefCell<Vec<f32>> =
        const { std::cell::RefCell::new(Vec::new()) };
    /// A task's partial sums and gathered panel, kept so that a call does not map and
    /// fault in fresh pages for them.
    #[cfg(target_arch = "x86_64")]
    static SCRATCH: std::cell::RefCell<(Vec<f32>, Vec<Line>)> =
        const { std::cell::RefCell::new((Vec::new(), Vec::new())) };
    /// A pooled convolution task's band of rows and the pool's scratch.
    static BAND: std::cell::RefCell<(Vec<f32>, RowScratch)> =
        std::cell::RefCell::new(Default::default());
}

/// The AVX-512 kernel's tasks: (channel blocks per run, output rows per band, bands), at
/// least two per thread. A run of channel blocks reads the whole band's inputs once, and a
/// band reads the run's weights once; a band also ends in a partial tile. So the split
/// that costs least in multiply-adds computed (32 per cycle) plus floats read (4 per cycle)
/// wins: a 1x1 over 256 channels at 56x56 splits rows (its inputs are the bulk), a 3x3
/// over 512 at 7x7 splits channels. A task's sums (when it has dropped columns) stay
/// within [`WIDE_ACC_FLOATS`].
fn wide_tasks(
    blocks: usize,
    taps: usize,
    [oh, ow, pw]: [usize; 3],
    threads: usize,
) -> (usize, usize, usize) {
    let want = 2 * threads;
    let mut best = (f64::INFINITY, 1, 1, oh);
    for runs in 1..=blocks.min(4 * want) {
        let group = blocks.div_ceil(runs);
        let runs = blocks.div_ceil(group);
        let mut rows_cap = oh;
        if pw != ow {
            rows_cap = (WIDE_ACC_FLOATS / (group * WMR * pw)).max(1);
        }
        let fewest = oh.div_ceil(rows_cap);
        for bands in fewest..=oh.min(4 * want).max(fewest) {
            let rows = oh.div_ceil(bands);
            let bands = oh.div_ceil(rows);
            if runs * bands < want.min(blocks * oh) {
                continue;
            }
            let last = oh - (bands - 1) * rows;
            // A band's last tile computes only the 16-position vectors it needs.
            let vecs = |r: usize| ((r - 1) * pw + ow).div_ceil(16) as f64;
            let computed = ((bands - 1) as f64 * vecs(rows) + vecs(last)) * 16.0;
            let macs = computed * (blocks * WMR * taps) as f64;
            let reads = (taps * (runs * oh * pw + bands * blocks * WMR)) as f64;
            let cost = macs / 32.0 + reads / 4.0;
            if cost < best.0 {
                best = (cost, group, rows, bands);
            }
        }
    }
    (best.1, best.2, best.3)
}

/// Whether this CPU runs the AVX-512 kernel.
fn wide_cpu() -> bool {
    crate::ops::simd::level() >= crate::ops::simd::SimdLevel::Avx512
}

impl Conv2dKernel {
    /// The convolution (before the epilogue) into `out` by a direct kernel; `false`
    /// (nothing written) when none applies (grouped, channel-chunked, dilated or unequally
    /// strided, or a CPU without AVX2 and FMA) or when the GEMM is faster
    /// ([`Conv2dKernel::direct_pays`]). With a pool (`self.pool`), whatever the GEMM would
    /// do: the convolution band of rows by band, each pooled after `epi` into `out`.
    pub(super) fn direct(
        &self,
        x: &[f32],
        w: &[f32],
        out: &mut [f32],
        epi: Option<&RangeProgram<'_>>,
    ) -> bool {
        (self.pool.is_some() || self.direct_pays()) && self.direct_any(x, w, out, epi, wide_cpu())
    }

    /// Whether the direct kernel beats im2col + GEMM on this layer (see [`MAX_TAPS`],
    /// [`WIDE_MIN_USE`] and [`WIDE_MAX_CIN`]).
    fn direct_pays(&self) -> bool {
        let [_, cin, _, _] = dims4(&self.x);
        let [m, _, kh, kw] = dims4(&self.w);
        let [_, _, oh, ow] = dims4(&self.out);
        let taps = cin * kh * kw;
        if wide_cpu() {
            // The AVX-512 kernel computes whole tiles of the flattened output, dropped
            // columns included: it wins where few are wasted. A 1x1 (in place) stays with
            // the GEMM, which packs its inputs for the cache.
            let Some(ph) = Phases::new(
                dims4(&self.x)[2..].try_into().unwrap_or([0, 0]),
                [oh, ow],
                &self.window,
            ) else {
                return false;
            };
            let flat = (oh - 1) * ph.pw() + ow;
            let used = (oh * ow) as f64 / (flat.next_multiple_of(WNR)) as f64;
            (kh * kw > 1 && used >= WIDE_MIN_USE) || (taps <= MAX_TAPS && cin <= WIDE_MAX_CIN)
        } else {
            // One image's 1x1 to many channels is a plain product, where the GEMM's tiles
            // of output channels beat the direct kernel's (see [`SMALL_M`]); a batch's
            // images give the direct kernel its parallelism.
            let n = dims4(&self.x)[0];
            (taps <= MAX_TAPS && (kh * kw > 1 || m <= SMALL_M || n > 1))
                || (m <= SMALL_M && taps <= SMALL_M_TAPS && oh * ow >= SMALL_M_POSITIONS)
        }
    }

    /// The direct convolution of `x` by `w` (no epilogue) whenever it applies, whatever
    /// the GEMM would do: `None` when it does not (see [`Conv2dKernel::direct`]). `wide`
    /// picks the AVX-512 kernel (`None` on a CPU without it), else the AVX2 one. For tests
    /// of both kernels on every geometry.
    #[doc(hidden)]
    pub fn run_direct(&self, x: &[f32], w: &[f32], wide: bool) -> Option<Vec<f32>> {
        let mut out = vec![0.0; self.out_shape().numel()];
        (x.len() >= self.x.numel() && w.len() >= self.w.numel() && (!wide || wide_cpu()))
            .then_some(())
            .filter(|_| self.direct_any(x, w, &mut out, None, wide))
            .map(|_| out)
    }

    /// Whether the CPU computes this convolution by a direct kernel, band of rows by band,
    /// so that a max pool after it reads each band while it is in cache (see
    /// [`KernelDef::absorb`](crate::ops::family::KernelDef::absorb)).
    pub(super) fn pools_by_bands(&self) -> bool {
        let [_, _, h, wd] = dims4(&self.x);
        let [_, _, oh, ow] = dims4(&self.out);
        self.groups == 1
            && self.c_chunk.is_none()
            && direct_cpu()
            && Phases::new([h, wd], [oh, ow], &self.window).is_some()
            && self.direct_pays()
    }

    fn direct_any(
        &self,
        x: &[f32],
        w: &[f32],
        out: &mut [f32],
        epi: Option<&RangeProgram<'_>>,
        wide: bool,
    ) -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            let [n_all, cin, h, wd] = dims4(&self.x);
            let [m, _, kh, kw] = dims4(&self.w);
            let [_, _, oh, ow] = dims4(&self.out);
            let taps = cin * kh * kw;
            if self.groups != 1 || self.c_chunk.is_some() || taps == 0 || !direct_cpu() {
                return false;
            }
            let Some(ph) = Phases::new([h, wd], [oh, ow], &self.window) else {
                return false;
            };
            let chan = ph.len();
            let offsets: Vec<usize> = (0..taps)
                .map(|t| (t / (kh * kw)) * chan + ph.tap(t % (kh * kw)))
                .collect();
            // The AVX2 kernel reads weights packed as [block][tap][MR] (zero rows past `m`);
            // the AVX-512 one broadcasts them from `w`'s rows in place (packing a late
            // layer's weights on every call would cost a tenth of its multiply-adds).
            let mr = if wide { WMR } else { MR };
            let blocks = m.div_ceil(mr);
            let mut wp = Vec::new();
            if !wide {
                wp = vec![0.0f32; blocks * taps * MR];
                for (o, row) in w.chunks_exact(taps).take(m).enumerate() {
                    let (b, r) = (o / MR, o % MR);
                    for (t, &v) in row.iter().enumerate() {
                        wp[(b * taps + t) * MR + r] = v;
                    }
                }
            }
            let pw = ph.pw();
            // Tasks of (a run of channel blocks, a band of output rows), at least three per
            // thread (the AVX2 kernel sums straight into the output's rows). Rows are split
            // before channel blocks: a tile's taps (gathered, or in L1) serve every block
            // of its run, and with few output channels (a 1x1 squeeze to 16) a run of one
            // block would pay for them for a few channels' work.
            let threads = rayon::current_num_threads().max(1);
            // Stride 1 without padding: the phase plane is the input plane itself.
            let in_place = chan == h * wd && ph.pw() == wd;
            // Images whose planes are split together and whose tasks run in one parallel
            // loop (a join per image cost a tenth of a batch-8 3x3 over 64 channels at
            // 16x16), their planes within PLANE_CHUNK floats. A pool runs image by image
            // (its tasks split each image's pool rows).
            let per_img = if in_place { 0 } else { cin * chan };
            let chunk = if self.pool.is_some() {
                1
            } else {
                (PLANE_CHUNK / per_img.max(1)).clamp(1, n_all.max(1))
            };
            let (group, rows_per_band, bands) = if wide {
                wide_tasks(blocks, taps, [oh, ow, pw], threads)
            } else {
                // Tasks enough for three per thread over the chunk's images.
                let want = (3 * threads).div_ceil(chunk);
                let mut group = blocks;
                loop {
                    let runs = blocks.div_ceil(group);
                    let rows = oh.div_ceil(want.div_ceil(runs)).max(1);
                    let bands = oh.div_ceil(rows);
                    if group == 1 || bands * runs >= want {
                        break (group, rows, bands);
                    }
                    group = group.div_ceil(2);
                }
            };
            let groups = blocks.div_ceil(group);
            let own = !in_place && self.pool.is_none() && groups * bands == 1 && n_all > 1;
            // Kept across calls on this thread: a fresh buffer of this size is mapped and
            // faulted in page by page on every call.
            let mut planes = if in_place || own {
                Vec::new()
            } else {
                PLANES.with_borrow_mut(std::mem::take)
            };
            // A tile reads up to NR - 1 positions past the flattened output's end.
            // `split` writes every float of its planes; only growth needs initialising.
            if !in_place && planes.len() < chunk * per_img + NR && !own {
                planes.resize(chunk * per_img + NR, 0.0);
            }
            let image = self.out_shape().numel() / n_all.max(1);
            let xlen = cin * h * wd;
            let template = Layer {
                src: &[],
                w,
                wp: &wp,
                offsets: &offsets,
                taps,
                m,
                out: [oh, ow, pw],
                wide,
                // Without dropped columns (a 1x1 at stride 1 without padding) the
                // flattened output is `out`'s own layout: the AVX-512 tiles sum into it
                // in place.
                straight: wide && pw == ow,
                // Tiles whose panels are gathered together (at most 128 KiB of lines).
                sup: (2048 / taps).clamp(1, 16),
                epi,
                image: 0,
            };
            let base = SendPtr(out.as_mut_ptr());
            // One task per image (a batch on few threads): each splits its own image's
            // planes just before reading them, while they fit in its L2, instead of all
            // of them being split first (eight images at 32x32 over 32 channels are 1.2 MB).
            if own {
                let dest = |img: usize| Dest {
                    base: SendPtr(base.get().wrapping_add(img * image)),
                    plane: oh * ow,
                    row0: 0,
                };
                (0..n_all).into_par_iter().for_each(|img| {
                    OWN_PLANES.with_borrow_mut(|buf| {
                        if buf.len() < per_img + NR {
                            buf.resize(per_img + NR, 0.0);
                        }
                        let xs = x[img * xlen..][..xlen].chunks(h * wd);
                        for (b, plane) in buf.chunks_mut(chan).zip(xs) {
                            ph.split(plane, 0.0, b);
                        }
                        let layer = Layer {
                            src: &buf[..],
                            image: img * m * oh * ow,
                            ..template
                        };
                        // SAFETY: `dest(img)` is image `img`'s output, `[m, oh, ow]`, this
                        // task's alone.
                        unsafe { layer.rows(0..blocks, [0, oh], dest(img)) };
                    })
                });
            }
            for c0 in (0..n_all).step_by(chunk).filter(|_| !own) {
                let c1 = (c0 + chunk).min(n_all);
                if !in_place {
                    let xs = &x[c0 * xlen..c1 * xlen];
                    let dst = &mut planes[..(c1 - c0) * per_img];
                    let split = |(buf, plane): (&mut [f32], &[f32])| ph.split(plane, 0.0, buf);
                    if dst.len() >= SPLIT_PARALLEL {
                        dst.par_chunks_mut(chan)
                            .zip(xs.par_chunks(h * wd))
                            .for_each(split);
                    } else {
                        dst.chunks_mut(chan).zip(xs.chunks(h * wd)).for_each(split);
                    }
                }
                let planes = &planes[..];
                let layer = |img: usize| Layer {
                    src: if in_place {
                        &x[img * xlen..][..xlen]
                    } else {
                        &planes[(img - c0) * per_img..]
                    },
                    image: img * m * oh * ow,
                    ..template
                };
                if let Some(pool) = &self.pool {
                    let at = SendPtr(base.get().wrapping_add(c0 * image));
                    layer(c0).pooled(pool, at, group, threads);
                    continue;
                }
                let per = groups * bands;
                (0..(c1 - c0) * per).into_par_iter().for_each(|task| {
                    let img = c0 + task / per;
                    let (g, band) = ((task % per) / bands, task % bands);
                    let blk = g * group..((g + 1) * group).min(blocks);
                    let oy0 = band * rows_per_band;
                    let oy1 = (oy0 + rows_per_band).min(oh);
                    let dest = Dest {
                        base: SendPtr(base.get().wrapping_add(img * image)),
                        plane: oh * ow,
                        row0: 0,
                    };
                    // SAFETY: `dest` is image `img`'s output, `[m, oh, ow]`; tasks are
                    // disjoint (image, channel blocks, band) triples, so no two write one
                    // element.
                    unsafe { layer(img).rows(blk, [oy0, oy1], dest) };
                });
            }
            if !in_place && !own && planes.len() <= KEEP_FLOATS {
                PLANES.with_borrow_mut(|p| *p = planes);
            }
            true
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = (x, w, out, epi, wide);
            false
        }
    }
}

/// Whether this CPU runs a direct kernel at all (AVX2 and FMA).
fn direct_cpu() -> bool {
    crate::ops::simd::level() >= crate::ops::simd::SimdLevel::Avx2
}

#[cfg(target_arch = "x86_64")]
/// Where a task's rows of the convolution go: row `oy` of channel `o` at
/// `base + o·plane + (oy - row0)·ow` (the output itself, or a band's scratch).
#[derive(Clone, Copy)]
struct Dest {
    base: SendPtr,
    plane: usize,
    row0: usize,
}

#[cfg(target_arch = "x86_64")]
impl Dest {
    /// Row `oy` of channel `o` (the pointer is only computed here, with wrapping arithmetic,
    /// as a scratch's base sits before its first channel's rows).
    fn at(&self, o: usize, oy: usize, ow: usize) -> *mut f32 {
        self.base
            .get()
            .wrapping_add(o * self.plane + oy * ow)
            .wrapping_sub(self.row0 * ow)
    }
}

/// One image of a layer, as the direct kernels read it.
#[cfg(target_arch = "x86_64")]
struct Layer<'a, 'p> {
    /// The phase planes (or the input planes, read in place).
    src: &'a [f32],
    w: &'a [f32],
    /// `w` packed for the AVX2 kernel (empty for the AVX-512 one).
    wp: &'a [f32],
    /// Each tap's offset into `src` from a flattened output position.
    offsets: &'a [usize],
    taps: usize,
    /// Output channels.
    m: usize,
    /// Output rows and columns, and the phase planes' row length.
    out: [usize; 3],
    wide: bool,
    straight: bool,
    sup: usize,
    epi: Option<&'a RangeProgram<'p>>,
    /// This image's first word in the convolution's output (where the epilogue reads).
    image: usize,
}

#[cfg(target_arch = "x86_64")]
impl Layer<'_, '_> {
    /// Rows `oy0..oy1` of channel blocks `blk` into `dest`, the epilogue applied.
    ///
    /// # Safety
    /// `dest` holds rows `oy0..oy1` of every channel of `blk` below `m`, writable, and no
    /// other thread touches them meanwhile.
    unsafe fn rows(&self, blk: std::ops::Range<usize>, [oy0, oy1]: [usize; 2], dest: Dest) {
        let (mr, nr, kc) = if self.wide {
            (WMR, WNR, wide_kc(self.taps))
        } else {
            (MR, NR, KC)
        };
        let (w, taps, m, straight) = (self.w, self.taps, self.m, self.straight);
        let [oh, ow, pw] = self.out;
        SCRATCH.with_borrow_mut(|(acc, panel)| {
            let j0 = oy0 * pw;
            let len = (oy1 - oy0 - 1) * pw + ow;
            let stride = len.next_multiple_of(nr);
            // Every element is written before it is read (k0 = 0 stores).
            // An AVX-512 layer in one pass stores straight into `dest`.
            let partial = self.wide && !straight && taps > kc;
            if partial && acc.len() < blk.len() * mr * stride {
                acc.resize(blk.len() * mr * stride, 0.0);
            }
            let mut scatter = Scatter {
                out: dest.base.get(),
                plane: dest.plane,
                runs: Default::default(),
            };
            // An epilogue that adds one bias per channel (then maybe ReLU), the commonest,
            // is applied to the AVX-512 tiles' sums in registers as they are stored: no
            // second pass over the rows (5% of a 3x3 over 16 channels at 55x55).
            let fin = self
                .epi
                .and_then(|e| e.bias_in_place())
                .filter(|&(run, _, _)| self.wide && oh * ow > 0 && run % (oh * ow) == 0)
                .map(|(_, relu, at)| {
                    let bias: Vec<[f32; WMR]> = blk
                        .clone()
                        .map(|b| {
                            std::array::from_fn(|r| {
                                at(self.image + (b * WMR + r).min(m - 1) * oh * ow)
                            })
                        })
                        .collect();
                    (bias, relu)
                });
            if self.wide {
                for k0 in (0..taps).step_by(kc) {
                    let k1 = (k0 + kc).min(taps);
                    for t0 in (0..len).step_by(nr) {
                        let valid = (len - t0).min(nr);
                        let last = k1 == taps && !straight;
                        if last {
                            scatter.set(j0 + t0, valid, [pw, ow]);
                        }
                        for (i, b) in blk.clone().enumerate() {
                            // Rows past `m` repeat the last (computed, never stored).
                            let rows: [*const f32; WMR] = std::array::from_fn(|r| {
                                w[(b * WMR + r).min(m - 1) * taps + k0..].as_ptr()
                            });
                            let nrows = WMR.min(m - b * WMR);
                            let (at, stride) = if straight {
                                (dest.at(b * WMR, oy0, ow).wrapping_add(t0), dest.plane)
                            } else {
                                let at = (i * WMR * stride + t0) as isize;
                                (acc.as_mut_ptr().wrapping_offset(at), stride)
                            };
                            // SAFETY: AVX-512F was detected (`wide`); each row pointer
                            // reads k1 - k0 weights of one row of `w` ([m, taps]). Reads
                            // are `src[j0 + t0 + off + c]` for c < valid: inside this
                            // image's phase planes (or input), as a flattened output
                            // position (< oh·pw) plus a tap's offset stays in its plane.
                            // Writes are `acc[(i·WMR + r)·stride + t0 + c]`, r < WMR,
                            // c < WNR ≤ stride - t0; or, `straight`, this task's own
                            // channels b·WMR + r < m and positions j0 + t0 + c < j0 + len
                            // of `dest` (pw = ow), as a partial tile stores c < valid
                            // only. The final pass of a layer with dropped columns (`last`)
                            // writes instead, through `scatter`, the positions among
                            // j0 + t0 + c, c < valid, that are outputs, rows oy0..oy1 of
                            // channels b·WMR + r < m of `dest`: this task's own again.
                            unsafe {
                                let src = self.src.as_ptr().add(j0 + t0);
                                let off = &self.offsets[k0..k1];
                                let add = k0 > 0;
                                let sc = last.then(|| {
                                    scatter.out = dest.at(b * WMR, 0, ow);
                                    &scatter
                                });
                                let f = fin
                                    .as_ref()
                                    .filter(|_| k1 == taps)
                                    .map(|(bias, relu)| (&bias[i], *relu));
                                // A partial tile (a band's last) computes only the vectors
                                // that hold its positions: at 13x13 (193 flattened
                                // positions) 208 rather than 240.
                                macro_rules! tile {
                                    ($masked:literal, $v:literal) => {
                                        tile_wide::<$masked, $v>(
                                            &rows, src, off, at, stride, add, valid, nrows, sc, f,
                                        )
                                    };
                                }
                                match valid.div_ceil(16) {
                                    3 if valid == WNR => tile!(false, 3),
                                    3 => tile!(true, 3),
                                    2 => tile!(true, 2),
                                    _ => tile!(true, 1),
                                }
                            }
                        }
                    }
                }
            } else {
                // Positions counted over outputs only (`(oy - oy0)·ow + ox`), not the
                // flattened planes' rows: the dropped columns (an eighth of a 3x3 at 16x16)
                // are not computed, and a full tile of a full block sums straight into
                // `dest`'s rows.
                let len = (oy1 - oy0) * ow;
                let mut local = vec![[[0.0f32; NR]; MR]; blk.len()];
                for s0 in (0..len).step_by(NR * self.sup) {
                    let nt = (len - s0).div_ceil(NR).min(self.sup);
                    // Every line it uses is written below.
                    if panel.len() < nt * taps {
                        panel.resize(nt * taps, Line([0.0; NR]));
                    }
                    let from = [oy0 * ow + s0, oy0 * ow + len];
                    // SAFETY: AVX2 was detected (`direct_cpu`); `panel` holds nt·taps lines.
                    unsafe { gather(panel, self.src, from, [ow, pw], self.offsets, nt) };
                    for j in 0..nt {
                        let t0 = s0 + j * NR;
                        let valid = (len - t0).min(NR);
                        let lines = &panel[j * taps..][..taps];
                        // Blocks inside the passes over taps: a pass's lines stay in L1
                        // for every block (the other way round was a quarter slower on a
                        // 3x3 over 64 channels).
                        for k0 in (0..taps).step_by(KC) {
                            let k1 = (k0 + KC).min(taps);
                            for (i, b) in blk.clone().enumerate() {
                                let nrows = MR.min(m - b * MR);
                                let (at, stride) = if valid == NR && nrows == MR {
                                    (dest.at(b * MR, oy0, ow).wrapping_add(t0), dest.plane)
                                } else {
                                    (local[i].as_mut_ptr().cast::<f32>(), NR)
                                };
                                let wb = &self.wp[(b * taps + k0) * MR..(b * taps + k1) * MR];
                                // SAFETY: AVX2 and FMA were detected (`direct_cpu`); `wb`
                                // holds MR weights per line of `lines[k0..k1]`. Writes are
                                // `local[i]` (MR rows of NR) or, for a full tile of a full
                                // block, positions t0..t0 + NR ≤ len of rows oy0..oy1 of
                                // channels b·MR + r < m of `dest`: this task's own.
                                unsafe { tile(&lines[k0..k1], wb, at, stride, k0 > 0) };
                            }
                        }
                        for (i, b) in blk.clone().enumerate() {
                            let nrows = MR.min(m - b * MR);
                            if valid == NR && nrows == MR {
                                continue;
                            }
                            for (r, row) in local[i].iter().enumerate().take(nrows) {
                                // SAFETY: positions t0..t0 + valid ≤ len of rows oy0..oy1
                                // of channel b·MR + r < m of `dest`: this task's own.
                                unsafe {
                                    let d = dest.at(b * MR + r, oy0, ow).add(t0);
                                    std::ptr::copy_nonoverlapping(row.as_ptr(), d, valid);
                                }
                            }
                        }
                    }
                }
            }
            for b in blk.clone() {
                for r in 0..mr.min(m - b * mr) {
                    let o = b * mr + r;
                    if let Some(e) = self.epi.filter(|_| fin.is_none()) {
                        // SAFETY: rows oy0..oy1 of channel o of `dest`, just written by
                        // this task alone (the caller's).
                        let rows = unsafe {
                            std::slice::from_raw_parts_mut(
                                dest.at(o, oy0, ow).cast::<u32>(),
                                (oy1 - oy0) * ow,
                            )
                        };
                        e.apply(self.image + (o * oh + oy0) * ow, rows);
                    }
                }
            }
        })
    }

    /// The convolution's rows band by band into each task's scratch, each band max-pooled
    /// into `out` (this image's pool output, `[m, poh, pow]`) while it is in cache. A task
    /// takes a run of `group` channel blocks and a range of the pool's rows, and moves the
    /// rows its next band shares with the last to the front of its scratch: only where two
    /// tasks' ranges meet are rows computed twice.
    fn pooled(&self, pool: &PoolKernel, out: SendPtr, group: usize, threads: usize) {
        let mr = if self.wide { WMR } else { MR };
        let blocks = self.m.div_ceil(mr);
        let groups = blocks.div_ceil(group);
        let [oh, ow, _] = self.out;
        let [_, _, poh, pow] = dims4(&pool.out);
        let win = &pool.window;
        let (kh, sy, py) = (win.kernel[0], win.stride[0], win.padding[0]);
        // The convolution's rows pool row r reads.
        let lo = |r: usize| (r * sy).saturating_sub(py).min(oh);
        let hi = |r: usize| (r * sy + kh).saturating_sub(py).min(oh);
        // Three tasks per thread: SqueezeNet's first layer and pool took 0.45-0.46 ms in the
        // model in 6 ranges of pool rows, 0.48-0.51 in 4 (each range recomputes the
        // convolution's rows it shares with the one before).
        let per = poh.div_ceil((3 * threads).div_ceil(groups)).max(1);
        let chunks = poh.div_ceil(per);
        (0..groups * chunks).into_par_iter().for_each(|task| {
            let (g, c) = (task / chunks, task % chunks);
            let blk = g * group..((g + 1) * group).min(blocks);
            let (c0, c1) = (blk.start * mr, (blk.end * mr).min(self.m));
            let chans = c1 - c0;
            let cap = (BAND_FLOATS / (chans * ow).max(1)).max(kh);
            let plane = cap * ow;
            BAND.with_borrow_mut(|(scratch, rs)| {
                if scratch.len() < chans * plane {
                    scratch.resize(chans * plane, 0.0);
                }
                let (a, b) = (c * per, ((c + 1) * per).min(poh));
                let mut have = 0..0;
                let mut r = a;
                while r < b {
                    let first = lo(r);
                    let mut q = r + 1;
                    while q < b && hi(q) - first <= cap {
                        q += 1;
                    }
                    let end = hi(q - 1);
                    let mut from = first;
                    if have.start <= first && first < have.end {
                        let keep = (have.end - first) * ow;
                        for ch in 0..chans {
                            let at = ch * plane + (first - have.start) * ow;
                            scratch.copy_within(at..at + keep, ch * plane);
                        }
                        from = have.end;
                    }
                    if from < end {
                        let dest = Dest {
                            base: SendPtr(scratch.as_mut_ptr().wrapping_sub(c0 * plane)),
                            plane,
                            row0: first,
                        };
                        // SAFETY: channel c0 + ch's rows first..end are scratch's
                        // ch·plane + (row - first)·ow, within its chans·plane floats
                        // (end - first ≤ cap); the scratch is this thread's own.
                        unsafe { self.rows(blk.clone(), [from, end], dest) };
                    }
                    for ch in 0..chans {
                        let o = c0 + ch;
                        let xs = &scratch[ch * plane..][..(end - first) * ow];
                        // SAFETY: rows r..q of channel o of `out` ([m, poh, pow]): this
                        // task's own (channel run, pool rows).
                        let dst = unsafe {
                            std::slice::from_raw_parts_mut(
                                out.get().add((o * poh + r) * pow),
                                (q - r) * pow,
                            )
                        };
                        let geometry = [[oh, ow], [poh, pow], [first, r]];
                        max_band(xs, geometry, win, rs, dst, true);
                    }
                    have = first..end;
                    r = q;
                }
            })
        });
    }
}
