//! cpu:0's integer GEMM for i32 matmuls whose operands are narrow: the quantized models'
//! products (`MatMulInteger`, `QLinearMatMul`, the dynamic quantizer's zero-point-shifted
//! 8-bit operands).
//!
//! Two kernels, both exact modulo 2^32, so the result equals the WGSL kernels' wrapping i32
//! loop word for word whatever the blocking (integer sums do not depend on their order):
//!
//! * **u8 × s8 quads** ([`Quads`], AVX-512 VNNI): when each operand spans at most 256
//!   consecutive values, A is shifted into u8 and B into s8, four K values share a word, and
//!   one `vpdpbusd` multiplies 64 pairs and adds them into 16 wrapping i32 sums (its
//!   products, at most 255 · 128, and their four-term sums fit i32: nothing saturates). The
//!   shifts come back as `(A'+oa)(B'+ob) = A'B' + ob·ΣA' + oa·ΣB' + K·oa·ob`, an identity of
//!   wrapping arithmetic. onnxruntime's AVX-512 kernel multiplies the same u8 × s8 quads.
//! * **i16 pairs** ([`Pairs`], AVX2): operands within i16, two K values per word, one
//!   `vpmaddwd` into 8 sums (its one overflowing case, both pairs −32768², wraps to the same
//!   value) and a `vpaddd` beside it.
//!
//! Operands outside both make [`igemm`] return `false` and the caller takes its exact
//! general path.
//!
//! Layout: A is packed once as `[m, ⌈k/PACK⌉]` words; B per panel of `NR` columns and `KC`
//! words of K (in L1 while every row block of A streams past it), each thread packing the
//! panels it computes.

use rayon::prelude::*;
use std::sync::atomic::{AtomicBool, Ordering};

/// An i32 matrix read in place: element (r, c) is `data[off + r * rs + c * cs]` as i32.
#[derive(Clone, Copy)]
pub(crate) struct IMat<'a> {
    pub data: &'a [u32],
    pub off: usize,
    pub rs: usize,
    pub cs: usize,
}

impl IMat<'_> {
    #[inline(always)]
    fn at(&self, r: usize, c: usize) -> i32 {
        self.data[self.off + r * self.rs + c * self.cs] as i32
    }

    /// The smallest and largest of the `rows × cols` values (on the pool when large).
    fn span(&self, rows: usize, cols: usize) -> (i32, i32) {
        let row = |r: usize| {
            let (mut lo, mut hi) = (i32::MAX, i32::MIN);
            if self.cs == 1 {
                for &v in &self.data[self.off + r * self.rs..][..cols] {
                    lo = lo.min(v as i32);
                    hi = hi.max(v as i32);
                }
            } else {
                for c in 0..cols {
                    let v = self.at(r, c);
                    lo = lo.min(v);
                    hi = hi.max(v);
                }
            }
            (lo, hi)
        };
        let both = |(a, b): (i32, i32), (c, d): (i32, i32)| (a.min(c), b.max(d));
        if rows * cols >= PAR_PACK && rows > 1 && rayon::current_num_threads() > 1 {
            (0..rows)
                .into_par_iter()
                .map(row)
                .reduce(|| (i32::MAX, i32::MIN), both)
        } else {
            (0..rows).map(row).fold((i32::MAX, i32::MIN), both)
        }
    }
}

/// One kernel's packing and micro-kernel. Operands are shifted by [`Shift`] into the lane
/// ranges `A_LO..=A_HI` and `B_LO..=B_HI`, and `PACK` lanes of `32 / PACK` bits share a word,
/// the first K value in the low bits.
trait Flavour: Sync {
    const PACK: usize;
    const A_LO: i32;
    const A_HI: i32;
    const B_LO: i32;
    const B_HI: i32;
    /// Rows of C per micro-kernel call.
    const MR: usize;
    /// Columns of C per panel.
    const NR: usize;
    /// Packed words of K per panel block.
    const KC: usize;
    /// What a row's packed words are padded to (with zeros, which add nothing), and
    /// divides `KC`.
    const KALIGN: usize = 1;
    /// `rb ≤ MR` rows of the accumulator (`[rb, NR]`) plus `A-words · B-panel`, or set to it
    /// on the `first` K block. `a` holds row r's words from `a[r * kp]`, `bp` `pc` rows of
    /// `NR` words.
    fn block(rb: usize, a: &[u32], kp: usize, pc: usize, bp: &[u32], acc: &mut [u32], first: bool);
    /// Readies this thread for a panel's blocks (AMX loads its tile configuration once per
    /// panel, not per block); the guard it returns undoes that when dropped.
    fn enter() -> impl Sized {}
}

/// Packed words per row of A (and of B's panels) for `k` values.
fn words<F: Flavour>(k: usize) -> usize {
    k.div_ceil(F::PACK).next_multiple_of(F::KALIGN)
}

/// What the operands were shifted by: A' = A − oa, B' = B − ob.
#[derive(Clone, Copy, Default)]
struct Shift {
    oa: i32,
    ob: i32,
}

/// `C = A · B` (`[m, k] · [k, n]`, C row-major `[m, n]`, fully written) in wrapping i32, when
/// both operands span at most 256 values and the CPU has VNNI, or both fit in i16; `false`
/// otherwise (C then holds anything). The caller has checked that every index the shapes
/// imply lies inside A's and B's data. Spreads panels of columns (or, for a narrow C, blocks
/// of rows) over rayon's pool above `par_macs` multiply-adds.
pub(crate) fn igemm(
    m: usize,
    k: usize,
    n: usize,
    a: IMat<'_>,
    b: IMat<'_>,
    c: &mut [u32],
    par_macs: usize,
) -> bool {
    let c = &mut c[..m * n];
    if m == 0 || n == 0 {
        return true;
    }
    if k == 0 {
        c.fill(0);
        return true;
    }
    if quads_available() {
        if let Some(oa) = u8_shift(a, m, k) {
            // B tried unshifted first, since quantized weights are s8, and shifted by its
            // own span when that fails.
            let quads = |sh: Shift, c: &mut [u32]| {
                let b = BSrc::Mat(b);
                if use_tiles(m) {
                    gemm::<Tiles>(m, k, n, a, b, c, par_macs, sh)
                } else {
                    gemm::<Quads>(m, k, n, a, b, c, par_macs, sh)
                }
            };
            if quads(Shift { oa, ob: 0 }, c) {
                return true;
            }
            if let Some(ob) = s8_shift(b, k, n) {
                return quads(Shift { oa, ob }, c);
            }
        }
    }
    gemm::<Pairs>(m, k, n, a, BSrc::Mat(b), c, par_macs, Shift::default())
}

/// B packed once for every product that reads it (a constant weight), over all of K for
/// each panel of columns: what [`igemm`] packs per call, with the sums its shift needs.
pub(crate) struct PackedB {
    quads: bool,
    ob: i32,
    k: usize,
    n: usize,
    /// Packed words of K per panel.
    kp: usize,
    /// Per panel, `kp` rows of `NR` words.
    words: Vec<u32>,
    /// B's column sums after its shift, `NR` per panel.
    csum: Vec<i32>,
}

impl PackedB {
    /// The host memory it holds.
    pub(crate) fn bytes(&self) -> u64 {
        (std::mem::size_of_val(&self.words[..]) + std::mem::size_of_val(&self.csum[..])) as u64
    }

    /// Whether it is the packing of a `[k, n]` B.
    pub(crate) fn fits(&self, k: usize, n: usize) -> bool {
        (self.k, self.n) == (k, n)
    }
}

/// `[k, n]` B packed for the kernel [`igemm`] would pick for it (u8 × s8 quads where the
/// CPU has VNNI and B spans at most 256 values, in AMX's K alignment where it has AMX, so
/// that either kernel reads it; else i16 pairs); `None` when B fits neither or is empty.
pub(crate) fn pack_b(k: usize, n: usize, b: IMat<'_>) -> Option<PackedB> {
    if k == 0 || n == 0 {
        return None;
    }
    if quads_available() {
        if let Some(ob) = s8_shift(b, k, n) {
            return if tiles_available() {
                pack_all::<Tiles>(k, n, b, ob)
            } else {
                pack_all::<Quads>(k, n, b, ob)
            };
        }
    }
    pack_all::<Pairs>(k, n, b, 0)
}

fn pack_all<F: Flavour>(k: usize, n: usize, b: IMat<'_>, ob: i32) -> Option<PackedB> {
    let kp = words::<F>(k);
    let panels = n.div_ceil(F::NR);
    let mut words = vec![0u32; panels * kp * F::NR];
    let mut csum = vec![0i32; panels * F::NR];
    for (jp, (w, cs)) in words
        .chunks_exact_mut(kp * F::NR)
        .zip(csum.chunks_exact_mut(F::NR))
        .enumerate()
    {
        pack_rows::<F>(b, k, n, jp, 0, w, cs, ob)?;
    }
    Some(PackedB {
        quads: F::PACK == 4,
        ob,
        k,
        n,
        kp,
        words,
        csum,
    })
}

/// [`igemm`] with B from [`pack_b`]; `false` when A does not fit the packing's kernel.
pub(crate) fn igemm_packed(
    m: usize,
    a: IMat<'_>,
    b: &PackedB,
    c: &mut [u32],
    par_macs: usize,
) -> bool {
    let (k, n) = (b.k, b.n);
    let c = &mut c[..m * n];
    if m == 0 {
        return true;
    }
    if b.quads {
        let Some(oa) = u8_shift(a, m, k) else {
            return false;
        };
        let sh = Shift { oa, ob: b.ob };
        if use_tiles(m) && b.kp.is_multiple_of(Tiles::KALIGN) {
            return gemm::<Tiles>(m, k, n, a, BSrc::Packed(b), c, par_macs, sh);
        }
        return gemm::<Quads>(m, k, n, a, BSrc::Packed(b), c, par_macs, sh);
    }
    gemm::<Pairs>(m, k, n, a, BSrc::Packed(b), c, par_macs, Shift::default())
}

/// Whether [`Quads`]' instruction is there (and not capped by `WGFLOW_CPU_SIMD`).
fn quads_available() -> bool {
    cfg!(target_arch = "x86_64")
        && crate::ops::simd::level() >= crate::ops::simd::SimdLevel::Avx512Vnni
}

/// Whether AMX's tiles are there (and not capped by `WGFLOW_CPU_SIMD`).
fn tiles_available() -> bool {
    cfg!(target_arch = "x86_64") && crate::ops::simd::level() >= crate::ops::simd::SimdLevel::Amx
}

/// Whether an `m`-row product takes AMX's tiles over VNNI's quads: a tile has 16 rows, so
/// fewer would multiply padding.
fn use_tiles(m: usize) -> bool {
    m >= 16 && tiles_available()
}

/// What to subtract from `[rows, cols]` x to bring it into u8 (0 when it is), or `None`
/// when it spans more than 256 values.
fn u8_shift(x: IMat<'_>, rows: usize, cols: usize) -> Option<i32> {
    let (lo, hi) = x.span(rows, cols);
    ((hi as i64) - (lo as i64) <= 255).then_some(if lo >= 0 && hi <= 255 { 0 } else { lo })
}

/// What to subtract from `[rows, cols]` x to bring it into s8 (0 when it is), or `None`
/// when it spans more than 256 values.
fn s8_shift(x: IMat<'_>, rows: usize, cols: usize) -> Option<i32> {
    let (lo, hi) = x.span(rows, cols);
    ((hi as i64) - (lo as i64) <= 255).then_some(if lo >= -128 && hi <= 127 {
        0
    } else {
        lo.wrapping_add(128)
    })
}

/// `v − off` as a lane, or `None` outside `lo..=hi`.
#[inline(always)]
fn lane(v: i32, off: i32, lo: i32, hi: i32, bits: usize) -> Option<u32> {
    let s = v as i64 - off as i64;
    (lo as i64 <= s && s <= hi as i64).then(|| (s as u32) & (u32::MAX >> (32 - bits)))
}

/// Where a product's B comes from.
#[derive(Clone, Copy)]
enum BSrc<'a> {
    /// Read in place and packed per panel as it is needed.
    Mat(IMat<'a>),
    Packed(&'a PackedB),
}

#[allow(clippy::too_many_arguments)]
fn gemm<F: Flavour>(
    m: usize,
    k: usize,
    n: usize,
    a: IMat<'_>,
    b: BSrc<'_>,
    c: &mut [u32],
    par_macs: usize,
    sh: Shift,
) -> bool {
    let kp = match b {
        BSrc::Packed(p) => p.kp,
        BSrc::Mat(_) => words::<F>(k),
    };
    debug_assert!(kp >= words::<F>(k) && kp.is_multiple_of(F::KALIGN));
    // Rows padded to a whole block: a kernel may read (and discard) a full block. The
    // buffer is kept for the thread's next product (taken, so a nested one gets its own).
    let mut ap = PACKED_A.with_borrow_mut(std::mem::take);
    ap.clear();
    ap.resize(m.next_multiple_of(F::MR) * kp, 0);
    let done = products::<F>(m, k, n, a, b, c, par_macs, sh, kp, &mut ap);
    PACKED_A.with_borrow_mut(|keep| *keep = ap);
    done
}

thread_local! {
    /// The last product's packed A, reused: a fresh one each call was an `mmap` and a
    /// page fault per 4 KiB.
    static PACKED_A: std::cell::RefCell<Vec<u32>> = const { std::cell::RefCell::new(Vec::new()) };
    /// A panel's sums (see [`Job::panel`]).
    static PANEL: std::cell::RefCell<Vec<u32>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// [`gemm`] into the zeroed, padded `ap`.
#[allow(clippy::too_many_arguments)]
fn products<F: Flavour>(
    m: usize,
    k: usize,
    n: usize,
    a: IMat<'_>,
    b: BSrc<'_>,
    c: &mut [u32],
    par_macs: usize,
    sh: Shift,
    kp: usize,
    ap: &mut [u32],
) -> bool {
    // Row sums of A', for B's shift (read only when it is not 0).
    let mut rsum = vec![0i32; m];
    let pack = |(i, (row, sum)): (usize, (&mut [u32], &mut i32))| {
        pack_a_row::<F>(a, i, k, sh.oa, row)
            .map(|s| *sum = s)
            .is_some()
    };
    // The packing reads all of A: on the pool too when A is large (a quantized FFN's
    // 128 × 3072 took 50 µs on one thread).
    let fits = if m * k >= PAR_PACK && m > 1 && rayon::current_num_threads() > 1 {
        ap[..m * kp]
            .par_chunks_exact_mut(kp)
            .zip(&mut rsum)
            .enumerate()
            .all(pack)
    } else {
        let rows = ap[..m * kp].chunks_exact_mut(kp).zip(&mut rsum);
        rows.enumerate().all(pack)
    };
    if !fits {
        return false;
    }
    let job = Job::<F> {
        k,
        n,
        kp,
        ap,
        rsum: &rsum,
        b,
        sh,
        flavour: std::marker::PhantomData,
    };
    let panels = n.div_ceil(F::NR);
    let par = m * k * n >= par_macs && rayon::current_num_threads() > 1;
    // Writes a panel's columns into C (rows of `c` from its first); `false` when the panel
    // met a value of B outside its lanes.
    let put = |c: &mut [u32], jp: usize, i0: usize| {
        job.panel(jp, i0, c.len() / n, |acc| {
            let (j0, w) = (jp * F::NR, F::NR.min(n - jp * F::NR));
            for (row, a) in c.chunks_exact_mut(n).zip(acc.chunks_exact(F::NR)) {
                row[j0..j0 + w].copy_from_slice(&a[..w]);
            }
        })
    };
    if par && panels >= 2 * rayon::current_num_threads() {
        // Tasks own panels of columns; C's columns are strided, so each writes its
        // columns through a shared pointer.
        let cp = SharedC(c.as_mut_ptr());
        let wide = AtomicBool::new(false);
        (0..panels).into_par_iter().for_each(|jp| {
            let cp = &cp;
            if wide.load(Ordering::Relaxed) {
                return;
            }
            let fits = job.panel(jp, 0, m, |acc| {
                let (j0, w) = (jp * F::NR, F::NR.min(n - jp * F::NR));
                for (r, a) in acc.chunks_exact(F::NR).enumerate() {
                    // SAFETY: row r's columns j0..j0+w lie inside the m×n C and belong to
                    // panel jp alone; C outlives the parallel loop, and no reference to it
                    // is live. A whole panel's row is a copy of constant length, inlined.
                    unsafe {
                        let to = cp.0.add(r * n + j0);
                        if w == F::NR {
                            std::ptr::copy_nonoverlapping(a.as_ptr(), to, F::NR);
                        } else {
                            std::ptr::copy_nonoverlapping(a.as_ptr(), to, w);
                        }
                    }
                }
            });
            if !fits {
                wide.store(true, Ordering::Relaxed);
            }
        });
        return !wide.load(Ordering::Relaxed);
    }
    if par {
        // Few columns: tasks own blocks of rows, each running every panel.
        let rows = m
            .div_ceil(rayon::current_num_threads() * 2)
            .next_multiple_of(F::MR);
        return c
            .par_chunks_mut(rows * n)
            .enumerate()
            .all(|(t, c)| (0..panels).all(|jp| put(c, jp, t * rows)));
    }
    (0..panels).all(|jp| put(c, jp, 0))
}

/// Values of A from which its packing and span run on the pool.
const PAR_PACK: usize = 1 << 16;

/// Packs row `i` of A (shifted by `oa`) into `row` (zeroed, `kp` words); its sum of A', or
/// `None` when a value does not fit its lane.
fn pack_a_row<F: Flavour>(
    a: IMat<'_>,
    i: usize,
    k: usize,
    oa: i32,
    row: &mut [u32],
) -> Option<i32> {
    let bits = 32 / F::PACK;
    let mask = u32::MAX >> (32 - bits);
    let mut sum = 0i32;
    if a.cs == 1 {
        // Row-major A: whole words in a loop the compiler vectorizes, the half-filled last
        // one below.
        let src = &a.data[a.off + i * a.rs..][..k];
        let whole = k / F::PACK;
        let mut fits = true;
        // In i32, which vectorizes twice as wide as i64: `v − oa` does not wrap, since oa
        // is 0 or A's smallest value.
        let range = (F::A_HI - F::A_LO) as u32;
        for (w, vs) in row.iter_mut().zip(src.chunks_exact(F::PACK)) {
            let mut x = 0u32;
            for (t, &v) in vs.iter().enumerate() {
                let d = (v as i32).wrapping_sub(oa);
                fits &= (d.wrapping_sub(F::A_LO) as u32) <= range;
                sum = sum.wrapping_add(d);
                x |= ((d as u32) & mask) << (t * bits);
            }
            *w = x;
        }
        if !fits {
            return None;
        }
        // Empty when PACK divides k.
        for (t, &v) in src[whole * F::PACK..].iter().enumerate() {
            let l = lane(v as i32, oa, F::A_LO, F::A_HI, bits)?;
            sum = sum.wrapping_add((v as i32).wrapping_sub(oa));
            row[whole] |= l << (t * bits);
        }
        return Some(sum);
    }
    for (p, w) in row.iter_mut().enumerate() {
        for t in 0..F::PACK.min(k.saturating_sub(p * F::PACK)) {
            let v = a.at(i, p * F::PACK + t);
            *w |= lane(v, oa, F::A_LO, F::A_HI, bits)? << (t * bits);
            sum = sum.wrapping_add(v.wrapping_sub(oa));
        }
    }
    Some(sum)
}

struct SharedC(*mut u32);
// SAFETY: tasks write disjoint elements through it (see `gemm`).
unsafe impl Sync for SharedC {}

/// One product's packed A and what every panel needs.
struct Job<'a, F> {
    k: usize,
    n: usize,
    kp: usize,
    ap: &'a [u32],
    rsum: &'a [i32],
    b: BSrc<'a>,
    sh: Shift,
    flavour: std::marker::PhantomData<F>,
}

impl<F: Flavour> Job<'_, F> {
    /// Columns `jp*NR..` of rows `i0..i0+mm` of C over all of K, as `[mm, NR]` handed to
    /// `out`; `false` when a value of B does not fit its lane.
    fn panel(&self, jp: usize, i0: usize, mm: usize, out: impl FnOnce(&[u32])) -> bool {
        // Taken, as `PACKED_A` is; every word is written by the first K block.
        let mut acc = PANEL.with_borrow_mut(std::mem::take);
        if acc.len() < mm * F::NR {
            acc.resize(mm * F::NR, 0);
        }
        let done = self.sums(jp, i0, &mut acc[..mm * F::NR]);
        if done {
            out(&acc[..mm * F::NR]);
        }
        PANEL.with_borrow_mut(|keep| *keep = acc);
        done
    }

    fn sums(&self, jp: usize, i0: usize, acc: &mut [u32]) -> bool {
        let (k, kp, sh) = (self.k, self.kp, self.sh);
        let mm = acc.len() / F::NR;
        let _state = F::enter();
        let (mut own, mut own_csum) = (Vec::new(), Vec::new());
        if let BSrc::Mat(_) = self.b {
            own = vec![0u32; F::KC.min(kp) * F::NR];
            // Column sums of B', for A's shift.
            own_csum = vec![0i32; if sh.oa != 0 { F::NR } else { 0 }];
        }
        for p0 in (0..kp).step_by(F::KC) {
            let pc = F::KC.min(kp - p0);
            let bp: &[u32] = match self.b {
                BSrc::Packed(p) => &p.words[(jp * kp + p0) * F::NR..][..pc * F::NR],
                BSrc::Mat(b) => {
                    let bp = &mut own[..pc * F::NR];
                    if pack_rows::<F>(b, k, self.n, jp, p0, bp, &mut own_csum, sh.ob).is_none() {
                        return false;
                    }
                    bp
                }
            };
            let first = p0 == 0;
            for r0 in (0..mm).step_by(F::MR) {
                let rb = F::MR.min(mm - r0);
                let a = &self.ap[(i0 + r0) * kp + p0..];
                let acc = &mut acc[r0 * F::NR..(r0 + rb) * F::NR];
                F::block(rb, a, kp, pc, bp, acc, first);
            }
        }
        if sh.oa != 0 || sh.ob != 0 {
            let csum = match self.b {
                BSrc::Packed(p) => &p.csum[jp * F::NR..][..F::NR],
                BSrc::Mat(_) => &own_csum[..],
            };
            // (A'+oa)(B'+ob) summed over K, in wrapping i32: per column oa·ΣB' + K·oa·ob
            // (`csum` is empty when oa is 0), per row ob·ΣA'.
            let kab = (k as i32).wrapping_mul(sh.oa).wrapping_mul(sh.ob);
            let mut col = [kab; 64];
            let col = &mut col[..F::NR];
            for (c, &s) in col.iter_mut().zip(csum) {
                *c = c.wrapping_add(s.wrapping_mul(sh.oa));
            }
            for (r, row) in acc.chunks_exact_mut(F::NR).enumerate() {
                let ra = self.rsum.get(i0 + r).map_or(0, |&s| s.wrapping_mul(sh.ob));
                for (x, &c) in row.iter_mut().zip(col.iter()) {
                    *x = (*x as i32).wrapping_add(ra.wrapping_add(c)) as u32;
                }
            }
        }
        true
    }
}

/// Packs B's words `p0..p0 + bp.len()/NR` of panel `jp` (shifted by `ob`) into `bp`, columns
/// past n as 0, adding each column's shifted values into `csum` (when it is not empty);
/// `None` when a value does not fit its lane.
#[allow(clippy::too_many_arguments)]
fn pack_rows<F: Flavour>(
    b: IMat<'_>,
    k: usize,
    n: usize,
    jp: usize,
    p0: usize,
    bp: &mut [u32],
    csum: &mut [i32],
    ob: i32,
) -> Option<()> {
    let bits = 32 / F::PACK;
    let j0 = jp * F::NR;
    let w = F::NR.min(n - j0);
    for (q, row) in bp.chunks_exact_mut(F::NR).enumerate() {
        let kk = F::PACK * (p0 + q);
        // 0 in the padding past K.
        let full = F::PACK.min(k.saturating_sub(kk));
        row.fill(0);
        if b.cs == 1 && w == F::NR && full == F::PACK {
            // Row-major B, a full panel: PACK rows of NR contiguous values, in a loop the
            // compiler vectorizes.
            let mut fits = true;
            for t in 0..F::PACK {
                let src = &b.data[b.off + (kk + t) * b.rs + j0..][..F::NR];
                for (x, &v) in row.iter_mut().zip(src) {
                    // No wrap: B is unshifted, or its span was checked.
                    let s = (v as i32).wrapping_sub(ob);
                    fits &= (F::B_LO <= s) & (s <= F::B_HI);
                    *x |= ((s as u32) & (u32::MAX >> (32 - bits))) << (t * bits);
                }
                for (cs, &v) in csum.iter_mut().zip(src) {
                    *cs = cs.wrapping_add((v as i32).wrapping_sub(ob));
                }
            }
            if !fits {
                return None;
            }
            continue;
        }
        for (j, x) in row.iter_mut().enumerate().take(w) {
            for t in 0..full {
                let v = b.at(kk + t, j0 + j);
                *x |= lane(v, ob, F::B_LO, F::B_HI, bits)? << (t * bits);
                if let Some(cs) = csum.get_mut(j) {
                    *cs = cs.wrapping_add(v.wrapping_sub(ob));
                }
            }
        }
    }
    Some(())
}

mod tiles;
use tiles::Tiles;

/// Calls `$f::<RB>` for the run-time row count `$rb` (1 to 8).
#[cfg(target_arch = "x86_64")]
macro_rules! rows {
    ($rb:expr, $f:ident($($arg:expr),*)) => {
        match $rb {
            1 => $f::<1>($($arg),*),
            2 => $f::<2>($($arg),*),
            3 => $f::<3>($($arg),*),
            4 => $f::<4>($($arg),*),
            5 => $f::<5>($($arg),*),
            6 => $f::<6>($($arg),*),
            7 => $f::<7>($($arg),*),
            8 => $f::<8>($($arg),*),
            _ => unreachable!("at most MR rows per block"),
        }
    };
}

/// i16 pairs: `vpmaddwd` on AVX2.
struct Pairs;

impl Flavour for Pairs {
    const PACK: usize = 2;
    const A_LO: i32 = i16::MIN as i32;
    const A_HI: i32 = i16::MAX as i32;
    const B_LO: i32 = i16::MIN as i32;
    const B_HI: i32 = i16::MAX as i32;
    /// 6 × 16 keeps 12 accumulators, two B vectors, the broadcast and the product in the
    /// 16 ymm registers: measured on a 2-core AVX2 EPYC, `[128,768]@[768,3072]` at 50 GMAC/s
    /// on one thread against 39–49 for 4 × 24, 5 × 16, 4 × 16, 3 × 24 and 2 × 32.
    const MR: usize = 6;
    const NR: usize = 16;
    /// 16 KiB of B.
    const KC: usize = 256;

    fn block(rb: usize, a: &[u32], kp: usize, pc: usize, bp: &[u32], acc: &mut [u32], first: bool) {
        #[cfg(target_arch = "x86_64")]
        {
            if crate::ops::simd::level() >= crate::ops::simd::SimdLevel::Avx2 {
                // SAFETY: the CPU has AVX2 (checked just above); the slices are
                // bounds-checked by `pairs_avx2`'s asserts.
                unsafe { rows!(rb, pairs_avx2(a, kp, pc, bp, acc, first)) };
                return;
            }
        }
        portable::<Self>(rb, a, kp, pc, bp, acc, first)
    }
}

/// u8 × s8 quads: `vpdpbusd` on AVX-512 VNNI.
struct Quads;

impl Flavour for Quads {
    const PACK: usize = 4;
    const A_LO: i32 = 0;
    const A_HI: i32 = 255;
    const B_LO: i32 = -128;
    const B_HI: i32 = 127;
    /// 8 × 32: 16 zmm accumulators, two B vectors and the broadcast of 32 registers (12 ×
    /// 32 measured no faster on the quantized bench's products).
    const MR: usize = 8;
    const NR: usize = 32;
    /// 32 KiB of B (1,024 values of K).
    const KC: usize = 256;

    fn block(rb: usize, a: &[u32], kp: usize, pc: usize, bp: &[u32], acc: &mut [u32], first: bool) {
        #[cfg(target_arch = "x86_64")]
        {
            if crate::ops::simd::level() >= crate::ops::simd::SimdLevel::Avx512Vnni {
                // SAFETY: the CPU has AVX-512 BW and VNNI (checked just above); the slices
                // are bounds-checked by `quads_vnni`'s asserts.
                unsafe { rows!(rb, quads_vnni(a, kp, pc, bp, acc, first)) };
                return;
            }
        }
        portable::<Self>(rb, a, kp, pc, bp, acc, first)
    }
}

/// Any flavour's block without vector instructions: lanes sign-extended (B's, and A's
/// when A's range is signed) and multiplied in wrapping i32.
fn portable<F: Flavour>(
    rb: usize,
    a: &[u32],
    kp: usize,
    pc: usize,
    bp: &[u32],
    acc: &mut [u32],
    first: bool,
) {
    let bits = 32 / F::PACK;
    let get = |w: u32, t: usize, signed: bool| {
        let x = w << (32 - bits * (t + 1));
        if signed {
            (x as i32) >> (32 - bits)
        } else {
            (x >> (32 - bits)) as i32
        }
    };
    for r in 0..rb {
        let out = &mut acc[r * F::NR..][..F::NR];
        if first {
            out.fill(0);
        }
        for (p, brow) in bp.chunks_exact(F::NR).take(pc).enumerate() {
            let aw = a[r * kp + p];
            for (o, &bw) in out.iter_mut().zip(brow) {
                let mut s = *o as i32;
                for t in 0..F::PACK {
                    let x = get(aw, t, F::A_LO < 0).wrapping_mul(get(bw, t, F::B_LO < 0));
                    s = s.wrapping_add(x);
                }
                *o = s as u32;
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn pairs_avx2<const RB: usize>(
    a: &[u32],
    kp: usize,
    pc: usize,
    bp: &[u32],
    acc: &mut [u32],
    first: bool,
) {
    use std::arch::x86_64::*;
    const NV: usize = Pairs::NR / 8;
    assert!(bp.len() >= pc * Pairs::NR && acc.len() >= RB * Pairs::NR);
    assert!(pc == 0 || a.len() > (RB - 1) * kp + pc - 1);
    let mut s = [[_mm256_setzero_si256(); NV]; RB];
    let (ap, bpp) = (a.as_ptr(), bp.as_ptr());
    for p in 0..pc {
        // SAFETY: p < pc, so the loads read bp[p*NR..(p+1)*NR] (asserted above) and the
        // broadcast reads a[r*kp + p] ≤ a[(RB-1)*kp + pc - 1] (asserted above).
        let mut bv = [_mm256_setzero_si256(); NV];
        for (v, x) in bv.iter_mut().enumerate() {
            *x = _mm256_loadu_si256(bpp.add(p * Pairs::NR + 8 * v) as *const __m256i);
        }
        for (r, s) in s.iter_mut().enumerate() {
            let av = _mm256_set1_epi32(*ap.add(r * kp + p) as i32);
            for (x, &b) in s.iter_mut().zip(&bv) {
                *x = _mm256_add_epi32(*x, _mm256_madd_epi16(av, b));
            }
        }
    }
    let o = acc.as_mut_ptr();
    for (r, s) in s.iter().enumerate() {
        for (v, &x) in s.iter().enumerate() {
            // SAFETY: row r of acc is acc[r*NR..(r+1)*NR], inside it (asserted above).
            let o = o.add(r * Pairs::NR + 8 * v) as *mut __m256i;
            let x = if first {
                x
            } else {
                _mm256_add_epi32(_mm256_loadu_si256(o), x)
            };
            _mm256_storeu_si256(o, x);
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
unsafe fn quads_vnni<const RB: usize>(
    a: &[u32],
    kp: usize,
    pc: usize,
    bp: &[u32],
    acc: &mut [u32],
    first: bool,
) {
    use std::arch::x86_64::*;
    const NV: usize = Quads::NR / 16;
    assert!(bp.len() >= pc * Quads::NR && acc.len() >= RB * Quads::NR);
    assert!(pc == 0 || a.len() > (RB - 1) * kp + pc - 1);
    let mut s = [[_mm512_setzero_si512(); NV]; RB];
    let (ap, bpp) = (a.as_ptr(), bp.as_ptr());
    for p in 0..pc {
        // SAFETY: as in `pairs_avx2`: the asserts above bound every load.
        let mut bv = [_mm512_setzero_si512(); NV];
        for (v, x) in bv.iter_mut().enumerate() {
            *x = _mm512_loadu_si512(bpp.add(p * Quads::NR + 16 * v) as *const _);
        }
        for (r, s) in s.iter_mut().enumerate() {
            let av = _mm512_set1_epi32(*ap.add(r * kp + p) as i32);
            for (x, &b) in s.iter_mut().zip(&bv) {
                *x = _mm512_dpbusd_epi32(*x, av, b);
            }
        }
    }
    let o = acc.as_mut_ptr();
    for (r, s) in s.iter().enumerate() {
        for (v, &x) in s.iter().enumerate() {
            // SAFETY: row r of acc is acc[r*NR..(r+1)*NR], inside it (asserted above).
            let o = o.add(r * Quads::NR + 16 * v);
            let x = if first {
                x
            } else {
                _mm512_add_epi32(_mm512_loadu_si512(o as *const _), x)
            };
            _mm512_storeu_si512(o as *mut _, x);
        }
    }
}
