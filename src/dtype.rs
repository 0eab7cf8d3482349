//! Element types.

use std::fmt;

/// The element type of a tensor.
///
/// Every dtype occupies 4 bytes on every device (`bool` is stored as a `u32` 0 or 1) so that
/// all tensors bind as WGSL `array<u32|i32|f32>` without packing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DType {
    F32,
    I32,
    U32,
    Bool,
}

impl DType {
    /// Bytes per element on host and device.
    pub const fn size(self) -> usize {
        4
    }

    /// Short lowercase name, as used in graph files and error messages.
    pub const fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::I32 => "i32",
            DType::U32 => "u32",
            DType::Bool => "bool",
        }
    }

    /// Parse a name produced by [`DType::name`].
    pub fn parse(s: &str) -> Option<DType> {
        Some(match s {
            "f32" | "float32" => DType::F32,
            "i32" | "int32" => DType::I32,
            "u32" | "uint32" => DType::U32,
            "bool" => DType::Bool,
            _ => return None,
        })
    }

    /// The WGSL type of a value of this dtype inside a kernel.
    pub const fn wgsl(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::I32 => "i32",
            DType::U32 => "u32",
            DType::Bool => "bool",
        }
    }

    /// The WGSL element type of a storage array holding this dtype.
    pub const fn wgsl_storage(self) -> &'static str {
        match self {
            DType::Bool => "u32",
            other => other.wgsl(),
        }
    }

    pub const fn is_float(self) -> bool {
        matches!(self, DType::F32)
    }

    pub const fn is_int(self) -> bool {
        matches!(self, DType::I32 | DType::U32)
    }

    /// Numeric dtypes support arithmetic; `bool` does not.
    pub const fn is_numeric(self) -> bool {
        !matches!(self, DType::Bool)
    }

    pub const fn is_signed(self) -> bool {
        matches!(self, DType::F32 | DType::I32)
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
