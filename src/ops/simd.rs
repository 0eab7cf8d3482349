//! The one place cpu:0's kernels learn which vector instructions they may use: each asks
//! [`level`] and picks its AVX-512 (with VNNI), AVX2+FMA or portable body. The level is found
//! once per process; `WGFLOW_CPU_SIMD=portable|avx2|avx512|avx512vnni|amx` caps it, so that every
//! body can be tested (and compared) on one machine. On wasm32 there is nothing to detect: the web
//! crate builds with SIMD128 on (`web/.cargo/config.toml`), so the portable bodies are
//! vectorized to 128-bit lanes at compile time and the GEMM crate takes its SIMD128
//! micro-kernels (a module with SIMD128 instructions does not load where they are missing,
//! and every browser with WebGPU has them).

use std::sync::OnceLock;

/// The vector instructions cpu:0's kernels may use, ordered: a higher level implies the
/// lower ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum SimdLevel {
    /// No explicit vector code (what the compiler vectorizes on its own).
    Portable,
    /// AVX2 with FMA.
    Avx2,
    /// AVX-512F (with AVX2 and FMA).
    Avx512,
    /// AVX-512 with BW and VNNI: the quantized products' `vpdpbusd` (u8 × s8, four per
    /// 32-bit lane, exact and wrapping).
    Avx512Vnni,
    /// AMX tiles with INT8 (Sapphire Rapids and later), with Linux's permission for this
    /// process: the quantized products' `tdpbusd` (a 16 × 16 block of sums, 64 u8 × s8
    /// products each, per instruction).
    Amx,
}

impl SimdLevel {
    /// The name `WGFLOW_CPU_SIMD` takes.
    pub fn name(self) -> &'static str {
        match self {
            SimdLevel::Portable => "portable",
            SimdLevel::Avx2 => "avx2",
            SimdLevel::Avx512 => "avx512",
            SimdLevel::Avx512Vnni => "avx512vnni",
            SimdLevel::Amx => "amx",
        }
    }
}

/// What this CPU has, capped by `WGFLOW_CPU_SIMD` (an unknown value is ignored, with a
/// warning in the log).
pub fn level() -> SimdLevel {
    static LEVEL: OnceLock<SimdLevel> = OnceLock::new();
    *LEVEL.get_or_init(|| {
        let have = detected();
        let cap = std::env::var("WGFLOW_CPU_SIMD").ok().and_then(|v| {
            let cap = [
                SimdLevel::Portable,
                SimdLevel::Avx2,
                SimdLevel::Avx512,
                SimdLevel::Avx512Vnni,
                SimdLevel::Amx,
            ]
            .into_iter()
            .find(|l| l.name() == v.trim());
            if cap.is_none() {
                log::warn!(
                    "WGFLOW_CPU_SIMD={v} is not portable, avx2, avx512, avx512vnni or amx: ignored"
                );
            }
            cap
        });
        cap.map_or(have, |c| c.min(have))
    })
}

fn detected() -> SimdLevel {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::is_x86_feature_detected as has;
        if has!("avx2") && has!("fma") {
            return if has!("avx512f") && has!("avx512bw") && has!("avx512vnni") {
                if amx_granted() {
                    SimdLevel::Amx
                } else {
                    SimdLevel::Avx512Vnni
                }
            } else if has!("avx512f") {
                SimdLevel::Avx512
            } else {
                SimdLevel::Avx2
            };
        }
    }
    SimdLevel::Portable
}

/// Whether the CPU has AMX-TILE and AMX-INT8 and Linux lets this process use their state
/// (it is off until asked for, being 8 KiB per thread; a kernel without AMX refuses).
#[cfg(target_arch = "x86_64")]
fn amx_granted() -> bool {
    // CPUID leaf 7 exists: AVX-512 was found in it.
    let l = std::arch::x86_64::__cpuid_count(7, 0);
    if (l.edx >> 24) & 1 == 0 || (l.edx >> 25) & 1 == 0 {
        return false;
    }
    #[cfg(target_os = "linux")]
    {
        const ARCH_REQ_XCOMP_PERM: libc::c_long = 0x1023;
        const XFEATURE_XTILEDATA: libc::c_long = 18;
        // SAFETY: this request only grants the process the tile state; it reads and writes
        // no memory of ours.
        let r = unsafe {
            libc::syscall(
                libc::SYS_arch_prctl,
                ARCH_REQ_XCOMP_PERM,
                XFEATURE_XTILEDATA,
            )
        };
        r == 0
    }
    #[cfg(not(target_os = "linux"))]
    false
}
