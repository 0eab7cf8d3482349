//! ONNX `TensorProto`s to host values under the dtype policy (see the module docs): sizes are
//! checked against the declared shape and the element cap before anything is allocated.

use super::proto::tensor_proto::{DataLocation, DataType};
use super::proto::TensorProto;
use super::{fail, ImportOptions};
use super::{wrong_dtype, Refused};
use crate::ops::SmallFloat;
use crate::{f16, DType, HostTensor, Result};
use std::path::{Component, Path};

/// An ONNX tensor's value on the host: integers (and bools) exact as `i64` so that shape
/// arithmetic folded at import never loses a value, everything else as a [`HostTensor`].
#[derive(Debug, Clone)]
pub(crate) enum HostValue {
    /// Integer or bool values with the dtype they take in a graph (i32, u32 or bool).
    Ints {
        shape: Vec<usize>,
        v: Vec<i64>,
        dtype: DType,
    },
    /// Floating-point values.
    Floats(HostTensor),
}

/// The wgflow dtype an ONNX element type maps to, or why it has none.
pub(crate) fn map_dtype(elem: i32, opts: &ImportOptions) -> std::result::Result<DType, Refused> {
    let dt = DataType::try_from(elem).map_err(|_| format!("unknown element type {elem}"))?;
    Ok(match dt {
        DataType::Float => DType::F32,
        DataType::Float16 => DType::F16,
        // Computed in f32, rounded to bfloat16 (float8, float4) after every op
        // (`build/narrow.rs`).
        DataType::Bfloat16 => DType::F32,
        _ if small_float(elem).is_some() => DType::F32,
        DataType::Int4 | DataType::Uint4 | DataType::Int2 | DataType::Uint2 => DType::I32,
        // 8- and 16-bit integers (quantized models' tensors) are held in i32 too: exactly,
        // with the import wrapping results of arithmetic that leaves their range (`narrow`).
        DataType::Int32
        | DataType::Int64
        | DataType::Int8
        | DataType::Uint8
        | DataType::Int16
        | DataType::Uint16 => DType::I32,
        // uint64 is held in u32 as int64 is in i32: range-checked where values enter.
        DataType::Uint32 | DataType::Uint64 => DType::U32,
        DataType::Bool => DType::Bool,
        DataType::Double if opts.f64_as_f32 => DType::F32,
        DataType::Double => {
            return Err(wrong_dtype(
                "float64 is unsupported (set ImportOptions::f64_as_f32 to compute it in f32)",
            ))
        }
        other => {
            return Err(wrong_dtype(format!(
                "element type {} is unsupported",
                other.as_str_name()
            )))
        }
    })
}

/// The range of an 8- or 16-bit integer element type (held in i32), or `None` for others.
pub(crate) fn narrow_range(elem: i32) -> Option<(i64, i64)> {
    match DataType::try_from(elem).ok()? {
        DataType::Uint8 => Some((0, 255)),
        DataType::Int8 => Some((-128, 127)),
        DataType::Uint16 => Some((0, 65535)),
        DataType::Int16 => Some((-32768, 32767)),
        DataType::Uint4 => Some((0, 15)),
        DataType::Int4 => Some((-8, 7)),
        DataType::Uint2 => Some((0, 3)),
        DataType::Int2 => Some((-2, 1)),
        _ => None,
    }
}

/// The float8/float4 format of ONNX element type `elem` (held in f32), or `None`.
pub(crate) fn small_float(elem: i32) -> Option<SmallFloat> {
    Some(match DataType::try_from(elem).ok()? {
        DataType::Float8e4m3fn => SmallFloat::F8E4M3Fn,
        DataType::Float8e4m3fnuz => SmallFloat::F8E4M3FnUz,
        DataType::Float8e5m2 => SmallFloat::F8E5M2,
        DataType::Float8e5m2fnuz => SmallFloat::F8E5M2FnUz,
        DataType::Float4e2m1 => SmallFloat::F4E2M1,
        _ => return None,
    })
}

/// Bits per element of the types ONNX packs below a byte (int4, uint4, float4: two to a
/// byte, low bits first; int2, uint2: four), or `None`.
fn packed_bits(dt: DataType) -> Option<usize> {
    match dt {
        DataType::Int4 | DataType::Uint4 | DataType::Float4e2m1 => Some(4),
        DataType::Int2 | DataType::Uint2 => Some(2),
        _ => None,
    }
}

/// The value of a float8/float4 code (`bits` wide, sign in the top bit), exact in f32.
fn small_float_value(to: SmallFloat, code: u32) -> f32 {
    let (e_bits, m_bits, bias) = match to {
        SmallFloat::F8E4M3Fn => (4, 3, 7),
        SmallFloat::F8E4M3FnUz => (4, 3, 8),
        SmallFloat::F8E5M2 => (5, 2, 15),
        SmallFloat::F8E5M2FnUz => (5, 2, 16),
        SmallFloat::F4E2M1 => (2, 1, 1),
    };
    let width = 1 + e_bits + m_bits;
    let negative = code >> (width - 1) & 1 == 1;
    let e = (code >> m_bits) & ((1 << e_bits) - 1);
    let m = code & ((1 << m_bits) - 1);
    let all_ones = (1 << e_bits) - 1;
    let special = match to {
        SmallFloat::F8E4M3Fn => (e == all_ones && m == (1 << m_bits) - 1).then_some(f32::NAN),
        SmallFloat::F8E5M2 if e == all_ones => Some(if m == 0 { f32::INFINITY } else { f32::NAN }),
        SmallFloat::F8E4M3FnUz | SmallFloat::F8E5M2FnUz => {
            (negative && e == 0 && m == 0).then_some(f32::NAN)
        }
        _ => None,
    };
    let magnitude = special.unwrap_or_else(|| {
        let frac = m as f32 / (1 << m_bits) as f32;
        if e == 0 {
            frac * 2f32.powi(1 - bias)
        } else {
            (1.0 + frac) * 2f32.powi(e as i32 - bias)
        }
    });
    if negative && !magnitude.is_nan() {
        -magnitude
    } else {
        magnitude
    }
}

/// The `n` values of a float8, float4 or sub-byte integer tensor from its bytes (`raw`, or
/// one byte per `int32_data` word), as f32 or i64 values.
fn small_values(
    dt: DataType,
    bytes: &[u8],
    n: usize,
    shape: Vec<usize>,
    dtype: DType,
) -> std::result::Result<HostValue, String> {
    let bits = packed_bits(dt).unwrap_or(8);
    let per_byte = 8 / bits;
    if bytes.len() != n.div_ceil(per_byte) {
        return Err(format!(
            "declares shape {shape:?} ({n} elements) but holds {} bytes of {bits}-bit values",
            bytes.len()
        ));
    }
    let mask = (1u32 << bits) - 1;
    let codes = (0..n).map(|i| (u32::from(bytes[i / per_byte]) >> (bits * (i % per_byte))) & mask);
    if let Some(to) = small_float(dt as i32) {
        return floats(&shape, codes.map(|c| small_float_value(to, c)).collect());
    }
    let signed = matches!(dt, DataType::Int4 | DataType::Int2);
    let v = codes.map(|c| {
        if signed && c >> (bits - 1) == 1 {
            i64::from(c) - (1 << bits)
        } else {
            i64::from(c)
        }
    });
    Ok(ints(shape, v.collect(), dtype))
}

/// Whether `dt` is stored as [`small_values`] reads it.
fn is_small(dt: DataType) -> bool {
    packed_bits(dt).is_some() || small_float(dt as i32).is_some()
}

/// `dims` as sizes, refusing negative ones and more than `opts.max_elements` elements.
pub(crate) fn checked_dims(
    dims: &[i64],
    opts: &ImportOptions,
) -> std::result::Result<Vec<usize>, String> {
    let mut n: usize = 1;
    let mut out = Vec::with_capacity(dims.len());
    for &d in dims {
        let d = usize::try_from(d).map_err(|_| format!("negative dimension {d} in {dims:?}"))?;
        n = n
            .checked_mul(d)
            .filter(|&n| n <= opts.max_elements)
            .ok_or_else(|| format!("shape {dims:?} has more than the {} elements allowed (ImportOptions::max_elements)", opts.max_elements))?;
        out.push(d);
    }
    Ok(out)
}

/// Decode `t` (its data inline, or external in a file under `dir`).
pub(crate) fn decode(
    t: &TensorProto,
    dir: Option<&Path>,
    opts: &ImportOptions,
) -> Result<HostValue> {
    let name = t.name.clone().unwrap_or_default();
    let at = || format!("tensor '{name}'");
    decode_inner(t, dir, opts).map_err(|m| fail(at(), m))
}

fn decode_inner(
    t: &TensorProto,
    dir: Option<&Path>,
    opts: &ImportOptions,
) -> std::result::Result<HostValue, Refused> {
    let elem = t.data_type.unwrap_or(0);
    let dt = DataType::try_from(elem).map_err(|_| format!("unknown element type {elem}"))?;
    let dtype = map_dtype(elem, opts)?;
    let shape = checked_dims(&t.dims, opts)?;
    let n: usize = shape.iter().product();
    if t.segment.is_some() {
        return Err(super::unsupported("segmented tensors are unsupported"));
    }
    let external;
    let raw: Option<&[u8]> = if t.data_location == Some(DataLocation::External as i32) {
        let want = match packed_bits(dt) {
            Some(bits) => n.div_ceil(8 / bits),
            None => n * elem_bytes(dt),
        };
        external = read_external(t, dir, want, opts)?;
        Some(&external)
    } else {
        t.raw_data.as_deref()
    };
    let count_err = |got: usize| format!("declares shape {shape:?} ({n} elements) but holds {got}");
    if is_small(dt) {
        let bytes: Vec<u8> = match raw {
            Some(raw) => raw.to_vec(),
            None => t.int32_data.iter().map(|&w| w as u8).collect(),
        };
        return Ok(small_values(dt, &bytes, n, shape, dtype)?);
    }
    if let Some(raw) = raw {
        let size = elem_bytes(dt);
        if raw.len() != n * size {
            return Err(count_err(raw.len() / size.max(1)).into());
        }
        let chunks = raw.chunks_exact(size);
        return Ok(match dt {
            DataType::Float => floats(
                &shape,
                chunks
                    .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                    .collect(),
            )?,
            DataType::Double => floats(
                &shape,
                chunks
                    .map(|c| f64::from_le_bytes(c.try_into().unwrap_or([0; 8])) as f32)
                    .collect(),
            )?,
            DataType::Bfloat16 => floats(
                &shape,
                chunks
                    .map(|c| bf16_to_f32(u16::from_le_bytes([c[0], c[1]])))
                    .collect(),
            )?,
            DataType::Float16 => {
                let v: Vec<f16> = chunks
                    .map(|c| f16::from_bits(u16::from_le_bytes([c[0], c[1]])))
                    .collect();
                HostValue::Floats(HostTensor::new(shape, v).map_err(|e| e.to_string())?)
            }
            DataType::Int32 => ints(
                shape,
                chunks
                    .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]) as i64)
                    .collect(),
                dtype,
            ),
            DataType::Uint32 => ints(
                shape,
                chunks
                    .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]) as i64)
                    .collect(),
                dtype,
            ),
            DataType::Int64 => ints(
                shape,
                chunks
                    .map(|c| i64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
                    .collect(),
                dtype,
            ),
            DataType::Uint64 => ints(
                shape,
                chunks
                    .map(|c| u64_value(u64::from_le_bytes(c.try_into().unwrap_or([0; 8]))))
                    .collect::<std::result::Result<_, _>>()?,
                dtype,
            ),
            DataType::Bool => ints(shape, chunks.map(|c| (c[0] != 0) as i64).collect(), dtype),
            DataType::Uint8 => ints(shape, chunks.map(|c| c[0] as i64).collect(), dtype),
            DataType::Int8 => ints(shape, chunks.map(|c| c[0] as i8 as i64).collect(), dtype),
            DataType::Uint16 => ints(
                shape,
                chunks
                    .map(|c| u16::from_le_bytes([c[0], c[1]]) as i64)
                    .collect(),
                dtype,
            ),
            DataType::Int16 => ints(
                shape,
                chunks
                    .map(|c| i16::from_le_bytes([c[0], c[1]]) as i64)
                    .collect(),
                dtype,
            ),
            _ => {
                return Err(wrong_dtype(format!(
                    "element type {} is unsupported",
                    dt.as_str_name()
                )))
            }
        });
    }
    let check = |len: usize| {
        if len == n {
            Ok(())
        } else {
            Err(count_err(len))
        }
    };
    Ok(match dt {
        DataType::Float => {
            check(t.float_data.len())?;
            floats(&shape, t.float_data.clone())?
        }
        DataType::Double => {
            check(t.double_data.len())?;
            floats(&shape, t.double_data.iter().map(|&x| x as f32).collect())?
        }
        DataType::Bfloat16 => {
            check(t.int32_data.len())?;
            let v = t.int32_data.iter().map(|&b| bf16_to_f32(b as u16));
            floats(&shape, v.collect())?
        }
        DataType::Float16 => {
            check(t.int32_data.len())?;
            let v: Vec<f16> = t
                .int32_data
                .iter()
                .map(|&b| f16::from_bits(b as u16))
                .collect();
            HostValue::Floats(HostTensor::new(shape, v).map_err(|e| e.to_string())?)
        }
        DataType::Int32 | DataType::Bool => {
            check(t.int32_data.len())?;
            let v = t.int32_data.iter().map(|&x| {
                if dt == DataType::Bool {
                    (x != 0) as i64
                } else {
                    x as i64
                }
            });
            ints(shape, v.collect(), dtype)
        }
        DataType::Int64 => {
            check(t.int64_data.len())?;
            ints(shape, t.int64_data.clone(), dtype)
        }
        // Stored one per int32 word; a value outside the type's range is malformed.
        DataType::Int8 | DataType::Uint8 | DataType::Int16 | DataType::Uint16 => {
            check(t.int32_data.len())?;
            let (lo, hi) = narrow_range(elem).unwrap_or((i64::MIN, i64::MAX));
            let v: Vec<i64> = t.int32_data.iter().map(|&x| x as i64).collect();
            if let Some(x) = v.iter().find(|&&x| x < lo || x > hi) {
                return Err(format!("holds {x}, outside {}", dt.as_str_name()).into());
            }
            ints(shape, v, dtype)
        }
        DataType::Uint64 => {
            check(t.uint64_data.len())?;
            let v = t.uint64_data.iter().map(|&x| u64_value(x));
            ints(shape, v.collect::<std::result::Result<_, _>>()?, dtype)
        }
        DataType::Uint32 => {
            check(t.uint64_data.len())?;
            ints(
                shape,
                t.uint64_data.iter().map(|&x| x as i64).collect(),
                dtype,
            )
        }
        _ => {
            return Err(wrong_dtype(format!(
                "element type {} is unsupported",
                dt.as_str_name()
            )))
        }
    })
}

/// A bfloat16 (its bits) as the f32 it is exactly.
fn bf16_to_f32(b: u16) -> f32 {
    f32::from_bits(u32::from(b) << 16)
}

/// A uint64 value as the exact `i64` integers are carried in; beyond `i64::MAX` it could
/// never fit the u32 it is held in.
fn u64_value(x: u64) -> std::result::Result<i64, String> {
    i64::try_from(x)
        .map_err(|_| format!("value {x} does not fit u32 (uint64 values are narrowed to 32 bits)"))
}

fn floats(shape: &[usize], v: Vec<f32>) -> std::result::Result<HostValue, String> {
    Ok(HostValue::Floats(
        HostTensor::new(shape.to_vec(), v).map_err(|e| e.to_string())?,
    ))
}

fn ints(shape: Vec<usize>, v: Vec<i64>, dtype: DType) -> HostValue {
    HostValue::Ints { shape, v, dtype }
}

fn elem_bytes(dt: DataType) -> usize {
    match dt {
        DataType::Double | DataType::Int64 | DataType::Uint64 | DataType::Complex64 => 8,
        DataType::Float16 | DataType::Bfloat16 | DataType::Int16 | DataType::Uint16 => 2,
        DataType::Bool | DataType::Int8 | DataType::Uint8 => 1,
        _ if small_float(dt as i32).is_some() => 1,
        _ => 4,
    }
}

/// The bytes of an external-data tensor: `location` must be a relative path inside the
/// model's directory (no `..`, no absolute path), and `offset`/`length` inside the file.
fn read_external(
    t: &TensorProto,
    dir: Option<&Path>,
    want: usize,
    opts: &ImportOptions,
) -> std::result::Result<Vec<u8>, String> {
    let dir =
        dir.ok_or("external data needs the model's directory, and the model was given as bytes (onnx::import_bytes with dir None)")?;
    let mut location = None;
    let (mut offset, mut length) = (0u64, None);
    for kv in &t.external_data {
        let value = kv.value.as_deref().unwrap_or("");
        match kv.key.as_deref() {
            Some("location") => location = Some(value.to_string()),
            Some("offset") => {
                offset = value
                    .parse()
                    .map_err(|_| format!("bad external offset '{value}'"))?
            }
            Some("length") => {
                length = Some(
                    value
                        .parse::<u64>()
                        .map_err(|_| format!("bad external length '{value}'"))?,
                )
            }
            _ => {}
        }
    }
    let location = location.ok_or("external data without a location")?;
    let rel = Path::new(&location);
    if !rel
        .components()
        .all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
    {
        return Err(format!(
            "external data path '{location}' leaves the model's directory"
        ));
    }
    // Only the tensor's bytes are read: a model may keep all its weights in one file.
    if let Some(len) = length.filter(|&l| l != want as u64) {
        return Err(format!(
            "external data '{location}' holds {len} bytes, the shape needs {want}"
        ));
    }
    let bytes = crate::files::read_range_inside(
        dir,
        rel,
        offset,
        Some(length.unwrap_or(want as u64)),
        opts.max_file_bytes,
    )
    .map_err(|e| format!("external data '{location}': {e}"))?;
    Ok(bytes)
}

impl HostValue {
    pub(crate) fn shape(&self) -> &[usize] {
        match self {
            HostValue::Ints { shape, .. } => shape,
            HostValue::Floats(h) => h.dims(),
        }
    }

    pub(crate) fn dtype(&self) -> DType {
        match self {
            HostValue::Ints { dtype, .. } => *dtype,
            HostValue::Floats(h) => h.dtype(),
        }
    }

    /// As a host tensor of the graph's dtype: int64 values must fit it (the policy's range
    /// check), `what` names the value in the error.
    pub(crate) fn to_host(&self, what: &str) -> Result<HostTensor> {
        match self {
            HostValue::Floats(h) => Ok(h.clone()),
            HostValue::Ints { shape, v, dtype } => {
                let range = |lo: i64, hi: i64| {
                    v.iter().find(|&&x| x < lo || x > hi).map_or(Ok(()), |x| {
                        Err(crate::onnx::fail(
                            what,
                            format!("value {x} does not fit {dtype} (64-bit integers are narrowed to 32 bits)"),
                        ))
                    })
                };
                match dtype {
                    DType::U32 => {
                        range(0, u32::MAX as i64)?;
                        HostTensor::new(shape.clone(), v.iter().map(|&x| x as u32).collect())
                    }
                    DType::Bool => {
                        HostTensor::new(shape.clone(), v.iter().map(|&x| x != 0).collect())
                    }
                    _ => {
                        range(i32::MIN as i64, i32::MAX as i64)?;
                        HostTensor::new(shape.clone(), v.iter().map(|&x| x as i32).collect())
                    }
                }
            }
        }
    }

    /// A host tensor's values as a [`HostValue`] (ints read back exactly).
    pub(crate) fn from_host(h: HostTensor) -> Result<HostValue> {
        let shape = h.dims().to_vec();
        Ok(match h.dtype() {
            DType::I32 => HostValue::Ints {
                shape,
                v: h.to_vec::<i32>()?.into_iter().map(i64::from).collect(),
                dtype: DType::I32,
            },
            DType::U32 => HostValue::Ints {
                shape,
                v: h.to_vec::<u32>()?.into_iter().map(i64::from).collect(),
                dtype: DType::U32,
            },
            DType::Bool => HostValue::Ints {
                shape,
                v: h.to_vec::<bool>()?.into_iter().map(i64::from).collect(),
                dtype: DType::Bool,
            },
            DType::F32 | DType::F16 => HostValue::Floats(h),
        })
    }
}
