//! u8 × s8 quads on AMX tiles: the layout of [`Quads`](super::Quads) (B's panels are
//! `[K/4, 32]` words, A's rows `K/4` words), read 16 rows at a time. One `tdpbusd` adds a
//! 16 × 16 block of sums of 64 u8 × s8 products into a tile, exact and wrapping as
//! `vpdpbusd` is, sixteen times as many products per instruction.
//!
//! A block is 32 × 32 of C in four tiles (`tmm0`–`tmm3`), two A tiles (`tmm4`, `tmm5`:
//! rows 0–15 and 16–31, 64 bytes of K) and two B tiles (`tmm6`, `tmm7`: columns 0–15 and
//! 16–31, 16 words of K). Rows of A past the block's `rb` are read from the padding
//! [`gemm`](super::gemm) leaves and their sums discarded; K is padded to 16 words.

use super::{portable, Flavour};

pub(super) struct Tiles;

impl Flavour for Tiles {
    const PACK: usize = 4;
    const A_LO: i32 = 0;
    const A_HI: i32 = 255;
    const B_LO: i32 = -128;
    const B_HI: i32 = 127;
    const MR: usize = 32;
    const NR: usize = 32;
    /// 64 KiB of B (2,048 values of K), in L2.
    const KC: usize = 512;
    const KALIGN: usize = 16;

    fn block(rb: usize, a: &[u32], kp: usize, pc: usize, bp: &[u32], acc: &mut [u32], first: bool) {
        #[cfg(target_arch = "x86_64")]
        {
            if crate::ops::simd::level() >= crate::ops::simd::SimdLevel::Amx {
                // SAFETY: the CPU has AMX-INT8 and the process its tile state (checked just
                // above), and the caller configured the tiles (`enter`, as `Job::sums`
                // does); `amx` asserts every bound its loads and stores need.
                unsafe { amx(rb, a, kp, pc, bp, acc, first) };
                return;
            }
        }
        portable::<Self>(rb, a, kp, pc, bp, acc, first)
    }

    fn enter() -> impl Sized {
        Configured::new()
    }
}

/// The tile configuration loaded on this thread for as long as it lives (loading it per
/// block cost 10–15% of a 32 × 32 × 768 block).
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
struct Configured(bool, std::marker::PhantomData<*const ()>);

impl Configured {
    fn new() -> Self {
        #[cfg(target_arch = "x86_64")]
        {
            if crate::ops::simd::level() >= crate::ops::simd::SimdLevel::Amx {
                // SAFETY: the CPU has AMX and the process its tile state (checked just
                // above); the configuration is valid.
                unsafe {
                    std::arch::asm!(
                        "ldtilecfg [{cfg}]",
                        cfg = in(reg) CONFIG.0.as_ptr(),
                        options(nostack, readonly)
                    )
                };
                return Configured(true, std::marker::PhantomData);
            }
        }
        Configured(false, std::marker::PhantomData)
    }
}

impl Drop for Configured {
    fn drop(&mut self) {
        #[cfg(target_arch = "x86_64")]
        if self.0 {
            // SAFETY: tiles were configured by `new` on this thread (a guard is not Send).
            unsafe { std::arch::asm!("tilerelease", options(nomem, nostack)) };
        }
    }
}

// B's panels are read by either kernel: `pack_b` packs them once for both.
const _: () = assert!(Tiles::NR == super::Quads::NR && Tiles::PACK == super::Quads::PACK);

/// The tile configuration (palette 1): eight tiles of 16 rows × 64 bytes.
#[cfg(target_arch = "x86_64")]
#[repr(C, align(64))]
struct Config([u8; 64]);

#[cfg(target_arch = "x86_64")]
impl Config {
    const fn new() -> Self {
        let mut c = [0u8; 64];
        c[0] = 1;
        let mut t = 0;
        while t < 8 {
            // Bytes per row (u16 at 16 + 2t) and rows (u8 at 48 + t).
            c[16 + 2 * t] = 64;
            c[48 + t] = 16;
            t += 1;
        }
        Config(c)
    }
}

#[cfg(target_arch = "x86_64")]
static CONFIG: Config = Config::new();

/// The 32 × 32 sums as the tiles store them.
#[cfg(target_arch = "x86_64")]
#[repr(C, align(64))]
struct Sums([u32; 32 * 32]);

/// `rb ≤ 32` rows of `acc` (`[rb, 32]`) plus `A · B-panel` over `pc` words, or set to it
/// when `first`. `a` holds 32 rows of `kp` words from `a[0]` (rows past `rb` are padding).
/// On a partial block the 32 × 32 sums are stored aside and `rb` rows added in.
#[cfg(target_arch = "x86_64")]
unsafe fn amx(
    rb: usize,
    a: &[u32],
    kp: usize,
    pc: usize,
    bp: &[u32],
    acc: &mut [u32],
    first: bool,
) {
    use std::arch::asm;
    assert!(rb <= 32 && pc.is_multiple_of(16) && kp >= pc);
    assert!(bp.len() >= pc * 32 && acc.len() >= rb * 32);
    assert!(pc == 0 || a.len() >= 31 * kp + pc);
    let mut sums = std::mem::MaybeUninit::<Sums>::uninit();
    // A whole block's sums live in `acc` as the tiles lay them out (rows of 32 words):
    // read and written there. A partial one goes through `sums`.
    let whole = rb == 32;
    let o = if whole {
        acc.as_mut_ptr()
    } else {
        sums.as_mut_ptr() as *mut u32
    };
    let (a_stride, b_stride, c_stride): (usize, usize, usize) = (kp * 4, 32 * 4, 32 * 4);
    // SAFETY (every block below): the configuration is valid; each load reads 16 rows of
    // 64 bytes, rows `stride` apart: A's from word `s` of rows 0–15 or 16–31 (inside
    // `a`, asserted above), B's from words `s*32 (+16)` of rows `s..s+16` of the panel
    // (inside `bp`); C's loads and stores the 4 KiB at `o` (`acc`'s 32 rows, asserted
    // above, or `sums`). The tiles are configured (the caller holds `Configured`), and
    // ours: nothing compiled from Rust touches them.
    if whole && !first {
        asm!(
            "tileloadd tmm0, [{c0} + {sc} * 1]",
            "tileloadd tmm1, [{c1} + {sc} * 1]",
            "tileloadd tmm2, [{c2} + {sc} * 1]",
            "tileloadd tmm3, [{c3} + {sc} * 1]",
            c0 = in(reg) o,
            c1 = in(reg) o.add(16),
            c2 = in(reg) o.add(16 * 32),
            c3 = in(reg) o.add(16 * 32 + 16),
            sc = in(reg) c_stride,
            options(nostack, readonly),
        );
    } else {
        asm!(
            "tilezero tmm0",
            "tilezero tmm1",
            "tilezero tmm2",
            "tilezero tmm3",
            options(nomem, nostack)
        );
    }
    let (ap, bpp) = (a.as_ptr(), bp.as_ptr());
    for s in (0..pc).step_by(16) {
        asm!(
            "tileloadd tmm4, [{a0} + {sa} * 1]",
            "tileloadd tmm5, [{a1} + {sa} * 1]",
            "tileloadd tmm6, [{b0} + {sb} * 1]",
            "tileloadd tmm7, [{b1} + {sb} * 1]",
            "tdpbusd tmm0, tmm4, tmm6",
            "tdpbusd tmm1, tmm4, tmm7",
            "tdpbusd tmm2, tmm5, tmm6",
            "tdpbusd tmm3, tmm5, tmm7",
            a0 = in(reg) ap.add(s),
            a1 = in(reg) ap.add(16 * kp + s),
            b0 = in(reg) bpp.add(s * 32),
            b1 = in(reg) bpp.add(s * 32 + 16),
            sa = in(reg) a_stride,
            sb = in(reg) b_stride,
            options(nostack, readonly),
        );
    }
    asm!(
        "tilestored [{c0} + {sc} * 1], tmm0",
        "tilestored [{c1} + {sc} * 1], tmm1",
        "tilestored [{c2} + {sc} * 1], tmm2",
        "tilestored [{c3} + {sc} * 1], tmm3",
        c0 = in(reg) o,
        c1 = in(reg) o.add(16),
        c2 = in(reg) o.add(16 * 32),
        c3 = in(reg) o.add(16 * 32 + 16),
        sc = in(reg) c_stride,
        options(nostack),
    );
    if whole {
        return;
    }
    // SAFETY: the four tile stores wrote all of it.
    let sums = sums.assume_init_ref();
    for (row, s) in acc
        .chunks_exact_mut(32)
        .zip(sums.0.chunks_exact(32))
        .take(rb)
    {
        if first {
            row.copy_from_slice(s);
        } else {
            for (x, &y) in row.iter_mut().zip(s) {
                *x = x.wrapping_add(y);
            }
        }
    }
}
