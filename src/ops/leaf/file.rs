//! Graph files: a placeholder has no attributes (it is fed by its `name`); a constant holds
//! its value, decoded against the node's `shape` and `dtype`; a variable (graph-file version
//! 2) holds how its first value is made, [`Initializer`].
//!
//! | `op` | inputs | attributes |
//! |---|---|---|
//! | `constant` | 0 | `data` or `data_base64` |
//! | `placeholder` | 0 | — |
//! | `variable` | 0 | `init`, and that initializer's fields (below) |
//!
//! A variable's `name` is the name its checkpoint tensor and the session know it by. Its
//! `init` is one of:
//!
//! | `init` | fields | first value |
//! |---|---|---|
//! | `value` | `data` or `data_base64` (as a constant's) | exactly that tensor |
//! | `zeros` | — | zeros (any dtype) |
//! | `ones` | — | ones (numeric dtypes) |
//! | `uniform` | `low`, `high` (f32), `seed` (u64) | uniform in `[low, high)` |
//! | `normal` | `mean`, `std` (f32), `seed` (u64) | normal `N(mean, std²)` |
//! | `glorot_uniform` | `seed` (u64) | `U(-l, l)`, `l = sqrt(6 / (fan_in + fan_out))` |
//! | `he_normal` | `seed` (u64) | `N(0, 2 / fan_in)` |
//!
//! The random initializers need `f32` or `f16` and draw with the random ops' Philox
//! generator, so a loaded graph starts from the same values as the graph that was saved, e.g.
//! `{"name": "w", "op": "variable", "shape": [4, 3], "dtype": "f32", "init": "glorot_uniform", "seed": 7}`.
//!
//! A constant of at most [`INLINE_MAX`] elements is written inline as `data`, a flat
//! row-major JSON array: numbers for `f32`/`f16`/`i32`/`u32` (floats written so that they read
//! back bit-exactly; non-finite floats as the strings `"nan"`, `"inf"`, `"-inf"`),
//! `true`/`false` for `bool`. A larger constant is written as `data_base64`: standard base64
//! (RFC 4648, with padding) of its elements as 4-byte little-endian words (`bool` as the words
//! 0 or 1). Either form is read whatever the size; the element count must match `shape`.
//!
//! Both forms are bit-exact: `-0.0`, infinities and subnormals are written inline like any
//! other value, but `"nan"` reads as a single NaN (f32 `0x7fc00000`, f16 `0x7e00`), so a
//! value holding any other NaN (another payload, the sign bit set, a signalling NaN such as
//! f32 `0x7f800001`) is written as `data_base64` whatever its size. A file without such NaNs
//! is written exactly as before.

use super::{Initializer, Leaf};
use crate::dtype::{f16_to_f32_word, f32_to_f16_word};
use crate::graph::def::{short, NoAttrs, NodeDef, NodeIn, NodeOut, UInt, F32, INLINE_MAX};
use crate::graph::{Graph, Tensor};
use crate::ops::Family;
use crate::{DType, Error, HostTensor, Result};
use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig};
use base64::engine::DecodePaddingMode;
use base64::{alphabet, DecodeError, Engine as _};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Standard base64 with padding; like the first reader, trailing bits are not checked.
const BASE64: GeneralPurpose = GeneralPurpose::new(
    &alphabet::STANDARD,
    GeneralPurposeConfig::new()
        .with_decode_padding_mode(DecodePaddingMode::RequireCanonical)
        .with_decode_allow_trailing_bits(true),
);

/// One element of inline `data`.
#[derive(Serialize)]
#[serde(untagged)]
enum Datum {
    Float(F32),
    Int(i32),
    UInt(u32),
    Bool(bool),
}

/// A constant's attributes as written: one of the two forms.
#[derive(Serialize)]
struct ConstantOut {
    #[serde(skip_serializing_if = "Option::is_none")]
    data: Option<Vec<Datum>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    data_base64: Option<String>,
}

/// A constant's attributes as read: `data` stays JSON until the dtype says how to read it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ConstantIn {
    data: Option<Vec<Value>>,
    data_base64: Option<String>,
}

/// A seed as files write it (any u64).
type Seed = UInt<{ u64::MAX }>;

/// A variable's attributes as written: the initializer, tagged by `init`.
#[derive(Serialize)]
#[serde(tag = "init", rename_all = "snake_case")]
enum InitOut {
    Value(ConstantOut),
    Zeros {},
    Ones {},
    Uniform { low: F32, high: F32, seed: Seed },
    Normal { mean: F32, std: F32, seed: Seed },
    GlorotUniform { seed: Seed },
    HeNormal { seed: Seed },
}

/// A variable's attributes as read. Variants without fields are empty structs so that
/// `deny_unknown_fields` rejects stray fields beside them too.
#[derive(Deserialize)]
#[serde(tag = "init", rename_all = "snake_case", deny_unknown_fields)]
enum InitIn {
    Value {
        data: Option<Vec<Value>>,
        data_base64: Option<String>,
    },
    Zeros {},
    Ones {},
    Uniform {
        low: F32,
        high: F32,
        seed: Seed,
    },
    Normal {
        mean: F32,
        std: F32,
        seed: Seed,
    },
    GlorotUniform {
        seed: Seed,
    },
    HeNormal {
        seed: Seed,
    },
}

pub(super) fn write_attrs(leaf: &Leaf, out: &mut NodeOut) -> Result<()> {
    match leaf {
        Leaf::Constant(value) => out.attrs(&constant_out(value)),
        Leaf::Placeholder => out.attrs(&NoAttrs {}),
        Leaf::Variable(init) => out.attrs(&match *init {
            Initializer::Value(ref value) => InitOut::Value(constant_out(value)),
            Initializer::Zeros => InitOut::Zeros {},
            Initializer::Ones => InitOut::Ones {},
            Initializer::Uniform { low, high, seed } => InitOut::Uniform {
                low: F32(low),
                high: F32(high),
                seed: UInt(seed),
            },
            Initializer::Normal { mean, std, seed } => InitOut::Normal {
                mean: F32(mean),
                std: F32(std),
                seed: UInt(seed),
            },
            Initializer::GlorotUniform { seed } => InitOut::GlorotUniform { seed: UInt(seed) },
            Initializer::HeNormal { seed } => InitOut::HeNormal { seed: UInt(seed) },
        }),
    }
}

/// A tensor's value as a constant writes it: inline `data` up to [`INLINE_MAX`] elements
/// when that reads back as the same words, else `data_base64`. Inline `data` writes every
/// NaN as `"nan"`, which reads as one NaN (f32 `0x7fc00000`, f16 `0x7e00`), so a tensor
/// with any other NaN (a payload, a sign, a signalling NaN) is written as base64, which
/// keeps every bit; every other tensor is written as before.
fn constant_out(value: &HostTensor) -> ConstantOut {
    let words = value.words();
    let dtype = value.dtype();
    let datum = |w: u32| match dtype {
        DType::F32 => Datum::Float(F32(f32::from_bits(w))),
        DType::F16 => Datum::Float(F32(f32::from_bits(f16_to_f32_word(w)))),
        DType::I32 => Datum::Int(w as i32),
        DType::U32 => Datum::UInt(w),
        DType::Bool => Datum::Bool(w != 0),
    };
    let inline = (words.len() <= INLINE_MAX)
        .then(|| words.iter().map(|&w| datum(w)).collect::<Vec<_>>())
        .filter(|data| {
            // Read each float back as a loader does (`word`) rather than reasoning about
            // which bit patterns survive, so no pattern can be lost silently. (Integers and
            // bools always read back; a bool word other than 0 or 1 is not a valid value,
            // and base64 would write it as a file that does not load.)
            !matches!(dtype, DType::F32 | DType::F16)
                || data.iter().zip(words).all(|(d, &w)| {
                    serde_json::to_value(d).ok().and_then(|v| word(&v, dtype)) == Some(w)
                })
        });
    match inline {
        Some(data) => ConstantOut {
            data: Some(data),
            data_base64: None,
        },
        None => {
            let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
            ConstantOut {
                data: None,
                data_base64: Some(BASE64.encode(bytes)),
            }
        }
    }
}

pub(super) fn read(node: &NodeIn<'_>) -> Option<Result<Leaf>> {
    // The names are the family's own ([`Family::name`]).
    if node.op == Leaf::Placeholder.name() {
        return Some(node.attrs::<NoAttrs>().map(|_| Leaf::Placeholder));
    }
    if node.op == "variable" {
        return Some(node.attrs::<InitIn>().and_then(|attrs| {
            Ok(Leaf::Variable(match attrs {
                InitIn::Value { data, data_base64 } => {
                    Initializer::Value(constant(node, ConstantIn { data, data_base64 })?)
                }
                InitIn::Zeros {} => Initializer::Zeros,
                InitIn::Ones {} => Initializer::Ones,
                InitIn::Uniform { low, high, seed } => Initializer::Uniform {
                    low: low.0,
                    high: high.0,
                    seed: seed.0,
                },
                InitIn::Normal { mean, std, seed } => Initializer::Normal {
                    mean: mean.0,
                    std: std.0,
                    seed: seed.0,
                },
                InitIn::GlorotUniform { seed } => Initializer::GlorotUniform { seed: seed.0 },
                InitIn::HeNormal { seed } => Initializer::HeNormal { seed: seed.0 },
            }))
        }));
    }
    (node.op == "constant").then(|| {
        let attrs: ConstantIn = node.attrs()?;
        Ok(Leaf::Constant(constant(node, attrs)?))
    })
}

fn constant(node: &NodeIn<'_>, attrs: ConstantIn) -> Result<HostTensor> {
    let (shape, dtype) = (node.shape, node.dtype);
    // The declared shape is capped (`MAX_ELEMENTS`); nothing is allocated for it before the
    // data (at most the file's size) is seen to match it.
    let n = shape.numel();
    let words = match (attrs.data, attrs.data_base64) {
        (Some(_), Some(_)) => {
            return Err(node.error("data", "give either data or data_base64, not both"))
        }
        (None, None) => {
            return Err(node.error("data", "missing; a constant needs data or data_base64"))
        }
        (Some(data), None) => {
            if data.len() != n {
                return Err(node.error(
                    "data",
                    format!("{} values but shape {shape} holds {n}", data.len()),
                ));
            }
            data.iter()
                .enumerate()
                .map(|(k, x)| {
                    word(x, dtype).ok_or_else(|| {
                        node.error(
                            &format!("data[{k}]"),
                            format!("{} is not a valid {dtype} value", short(x)),
                        )
                    })
                })
                .collect::<Result<Vec<u32>>>()?
        }
        (None, Some(b64)) => base64_words(node, &b64, n)?,
    };
    HostTensor::from_words(shape.clone(), dtype, words).map_err(|e| node.error("", e.to_string()))
}

fn base64_words(node: &NodeIn<'_>, b64: &str, n: usize) -> Result<Vec<u32>> {
    let at = "data_base64";
    let want = (n * 4).div_ceil(3) * 4;
    if b64.len() != want {
        return Err(node.error(
            at,
            format!(
                "{} characters but shape {} needs {want} ({n} elements of 4 bytes)",
                b64.len(),
                node.shape
            ),
        ));
    }
    let bytes = BASE64
        .decode(b64)
        .map_err(|e| node.error(at, base64_message(e)))?;
    if bytes.len() != n * 4 {
        return Err(node.error(
            at,
            format!(
                "{} bytes but shape {} needs {}",
                bytes.len(),
                node.shape,
                n * 4
            ),
        ));
    }
    let words: Vec<u32> = bytes
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    if node.dtype == DType::Bool {
        if let Some(k) = words.iter().position(|&w| w > 1) {
            return Err(node.error(
                at,
                format!("element {k} is {} but a bool word must be 0 or 1", words[k]),
            ));
        }
    }
    Ok(words)
}

fn base64_message(e: DecodeError) -> String {
    match e {
        DecodeError::InvalidByte(at, b'=') => {
            format!("base64 padding at offset {at} is not at the end")
        }
        DecodeError::InvalidByte(at, _) => format!("invalid base64 character at offset {at}"),
        DecodeError::InvalidLength(n) => format!("base64 length {n} is not a multiple of 4"),
        DecodeError::InvalidLastSymbol(at, _) => format!("invalid base64 symbol at offset {at}"),
        DecodeError::InvalidPadding => "invalid base64 padding".to_string(),
    }
}

/// One `data` value as a word of `dtype`.
fn word(x: &Value, dtype: DType) -> Option<u32> {
    match dtype {
        // Written as the f32 of the same value; anything that is not exactly an f16 (or out
        // of its range) is rejected rather than rounded.
        DType::F16 => word(x, DType::F32).and_then(|w| {
            let h = f32_to_f16_word(w);
            let back = f16_to_f32_word(h);
            let nan = f32::from_bits(w).is_nan();
            (back == w || nan).then_some(h)
        }),
        DType::F32 => F32::deserialize(x).ok().map(|v| v.0.to_bits()),
        DType::I32 => x
            .as_i64()
            .and_then(|v| i32::try_from(v).ok())
            .map(|v| v as u32),
        DType::U32 => x.as_u64().and_then(|v| u32::try_from(v).ok()),
        DType::Bool => x.as_bool().map(u32::from),
    }
}

pub(super) fn rebuild(leaf: &Leaf, g: &mut Graph, node: &NodeDef) -> Result<Tensor> {
    match leaf {
        Leaf::Constant(value) => {
            if value.shape() != &node.shape || value.dtype() != node.dtype {
                return Err(Error::GraphDef {
                    at: String::new(),
                    message: format!(
                        "constant data is {} {} but the node declares {} {}",
                        value.dtype(),
                        value.shape(),
                        node.dtype,
                        node.shape
                    ),
                });
            }
            g.constant(value.clone())
        }
        Leaf::Placeholder => g.placeholder(&node.name, node.shape.clone(), node.dtype),
        // The initializer's own rule (dtype, finite parameters) runs in the builder.
        Leaf::Variable(init) => {
            g.variable_with(&node.name, node.shape.clone(), node.dtype, init.clone())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_round_trips_every_padding() {
        let data: Vec<u8> = (0..=255u8).rev().collect();
        for n in 0..12 {
            let enc = BASE64.encode(&data[..n]);
            assert_eq!(enc.len(), n.div_ceil(3) * 4);
            assert_eq!(BASE64.decode(&enc).unwrap(), &data[..n], "{n} bytes");
        }
        // RFC 4648 test vectors.
        assert_eq!(BASE64.encode(b"foob"), "Zm9vYg==");
        assert_eq!(BASE64.encode(b"fooba"), "Zm9vYmE=");
        assert_eq!(BASE64.decode("Zm9vYmFy").unwrap(), b"foobar");
        let msg = |t: &str| base64_message(BASE64.decode(t).unwrap_err());
        assert!(msg("Zm9").contains("multiple of 4") || msg("Zm9").contains("padding"));
        assert!(msg("Zg==Zg==").contains("offset 2"), "{}", msg("Zg==Zg=="));
        assert!(msg("Z=9v").contains("offset 1"), "{}", msg("Z=9v"));
        assert!(BASE64.decode("Zm9v\n").is_err());
    }
}
