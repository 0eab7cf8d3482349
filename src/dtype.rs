//! Element types.

use std::fmt;

/// The element type of a tensor.
///
/// On the host and on `cpu:0` every element is one 32-bit word (`bool` a `u32` 0 or 1, `f16`
/// its bits in the low half). GPUs store `f32`, `i32`, `u32` and `bool` in 4 bytes and `f16`
/// in 2 (a WGSL `array<f16>`, which needs the adapter's `shader-f16` feature).
///
/// `f16` arithmetic is computed in f32 and rounded to f16 after every op, on every device
/// (NumPy's float16 loops do the same); reductions and matmul accumulate in f32 and round once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DType {
    F32,
    I32,
    U32,
    Bool,
    F16,
}

impl DType {
    /// Bytes per element on the host and on `cpu:0` (always one word).
    pub const fn size(self) -> usize {
        4
    }

    /// Bytes per element in GPU storage.
    pub const fn gpu_size(self) -> usize {
        match self {
            DType::F16 => 2,
            _ => 4,
        }
    }

    /// The dtype arithmetic on this dtype is carried out in: f32 for f16, itself otherwise.
    pub const fn compute(self) -> DType {
        match self {
            DType::F16 => DType::F32,
            d => d,
        }
    }

    /// Short lowercase name, as used in graph files and error messages.
    pub const fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::I32 => "i32",
            DType::U32 => "u32",
            DType::Bool => "bool",
            DType::F16 => "f16",
        }
    }

    /// Parse a name produced by [`DType::name`].
    pub fn parse(s: &str) -> Option<DType> {
        Some(match s {
            "f32" | "float32" => DType::F32,
            "i32" | "int32" => DType::I32,
            "u32" | "uint32" => DType::U32,
            "bool" => DType::Bool,
            "f16" | "float16" => DType::F16,
            _ => return None,
        })
    }

    /// The WGSL type of a value of this dtype inside a kernel (f16 values are computed as f32).
    pub const fn wgsl(self) -> &'static str {
        match self {
            DType::F32 | DType::F16 => "f32",
            DType::I32 => "i32",
            DType::U32 => "u32",
            DType::Bool => "bool",
        }
    }

    /// The WGSL element type of a storage array holding this dtype.
    pub const fn wgsl_storage(self) -> &'static str {
        match self {
            DType::Bool => "u32",
            DType::F16 => "f16",
            other => other.wgsl(),
        }
    }

    pub const fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F16)
    }

    pub const fn is_int(self) -> bool {
        matches!(self, DType::I32 | DType::U32)
    }

    /// Numeric dtypes support arithmetic; `bool` does not.
    pub const fn is_numeric(self) -> bool {
        !matches!(self, DType::Bool)
    }

    pub const fn is_signed(self) -> bool {
        matches!(self, DType::F32 | DType::I32 | DType::F16)
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// f16 bits (in a word's low half) → the f32 word of the same value.
pub fn f16_to_f32_word(w: u32) -> u32 {
    half::f16::from_bits(w as u16).to_f32().to_bits()
}

/// f32 word → f16 bits in a word, rounded to nearest even (overflow to ±inf, NaN stays NaN).
pub fn f32_to_f16_word(w: u32) -> u32 {
    half::f16::from_f32(f32::from_bits(w)).to_bits() as u32
}
