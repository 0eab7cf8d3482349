//! NumPy `.npy` files: read and write [`HostTensor`]s.
//!
//! Supported: format versions 1.0, 2.0 and 3.0 headers, C order, and the dtypes wgflow has:
//! `<f4` (f32), `<f2` (f16), `<i4` (i32), `<u4` (u32) and `|b1` (bool, one byte per element).
//! `<i8` (int64, NumPy's default integer and the type of ONNX models' ids) is read as i32,
//! the way wgflow holds int64 everywhere: a value outside i32's range is an error naming its
//! index, never a wrapped number. [`write_i64`] writes an i32 tensor back as `<i8`. Anything
//! else (big-endian, Fortran order, other widths) is a clear error rather than a silent
//! conversion.
//! Writing always produces version 1.0 with a header padded to 64 bytes, as NumPy does.

use crate::{DType, Error, HostKind, HostTensor, Result, Shape};
use std::path::Path;

mod header;

const MAGIC: &[u8; 6] = b"\x93NUMPY";
/// The most elements a `.npy` file may declare (2^31), checked before anything is allocated.
pub const MAX_ELEMENTS: usize = 1 << 31;
/// The largest `.npy` file [`read`] accepts: [`MAX_ELEMENTS`] 4-byte elements and a header
/// (checked before anything is read; FIFOs and devices are refused).
pub const MAX_FILE_BYTES: u64 = (MAX_ELEMENTS as u64) * 4 + (1 << 20);

fn bad(what: &str, kind: HostKind, message: impl std::fmt::Display) -> Error {
    Error::host(kind, format!("{what}: {message}"))
}

/// Read a `.npy` file.
pub fn read(path: impl AsRef<Path>) -> Result<HostTensor> {
    let path = path.as_ref();
    let what = path.display().to_string();
    let bytes = crate::files::read_regular(path, MAX_FILE_BYTES, ".npy file")
        .map_err(|e| bad(&what, HostKind::File, format!("cannot read: {e}")))?;
    from_bytes(&bytes).map_err(|e| match e {
        Error::Host { message, kind } => bad(&what, kind, message),
        other => other,
    })
}

/// Write a `.npy` file (version 1.0), replacing `path` atomically (see
/// [`crate::files::write_atomic`]: never through a link, never a half-written file).
pub fn write(path: impl AsRef<Path>, t: &HostTensor) -> Result<()> {
    let path = path.as_ref();
    crate::files::write_atomic(path, &to_bytes(t)).map_err(|e| {
        bad(
            &path.display().to_string(),
            HostKind::File,
            format!("cannot write: {e}"),
        )
    })
}

/// Write an i32 tensor as an int64 (`<i8`) `.npy` file, as a model that declares an int64
/// output (ArgMax, TopK's indices, Shape) gives it in onnxruntime; atomically, as [`write`].
pub fn write_i64(path: impl AsRef<Path>, t: &HostTensor) -> Result<()> {
    let path = path.as_ref();
    let bytes = to_bytes_i64(t)?;
    crate::files::write_atomic(path, &bytes).map_err(|e| {
        bad(
            &path.display().to_string(),
            HostKind::File,
            format!("cannot write: {e}"),
        )
    })
}

/// The bytes of an int64 (`<i8`) `.npy` file holding the i32 tensor `t`, widened.
pub fn to_bytes_i64(t: &HostTensor) -> Result<Vec<u8>> {
    to_bytes_int(t, "<i8")
}

/// The bytes of a `.npy` file of integer type `descr` (`<i8`, `<i2`, `<u2`, `|i1` or `|u1`:
/// int64, and the 8/16-bit types an ONNX model's quantized outputs have) holding the i32
/// tensor `t`, or of `<u8` (uint64) holding the u32 tensor `t`; a value outside the type's
/// range is an error naming its index.
pub fn to_bytes_int(t: &HostTensor, descr: &str) -> Result<Vec<u8>> {
    if descr == "<u8" && t.dtype() == DType::U32 {
        let mut out = header_bytes(descr, t.dims(), t.len() * 8);
        for &w in t.words() {
            out.extend_from_slice(&u64::from(w).to_le_bytes());
        }
        return Ok(out);
    }
    if t.dtype() != DType::I32 {
        return Err(Error::host(
            HostKind::DType,
            format!(
                "only an i32 tensor is written as {descr}, not {}",
                t.dtype()
            ),
        ));
    }
    let (size, lo, hi): (usize, i64, i64) = match descr {
        "<i8" => (8, i64::MIN, i64::MAX),
        "<i2" => (2, i16::MIN.into(), i16::MAX.into()),
        "<u2" => (2, 0, u16::MAX.into()),
        "|i1" => (1, i8::MIN.into(), i8::MAX.into()),
        "|u1" => (1, 0, u8::MAX.into()),
        other => {
            return Err(Error::host(
                HostKind::DType,
                format!("cannot write integers as '{other}'"),
            ))
        }
    };
    let mut out = header_bytes(descr, t.dims(), t.len() * size);
    for (i, &w) in t.words().iter().enumerate() {
        let v = i64::from(w as i32);
        if v < lo || v > hi {
            return Err(Error::host(
                HostKind::Value,
                format!("value {v} at index {i} does not fit {descr}"),
            ));
        }
        out.extend_from_slice(&v.to_le_bytes()[..size]);
    }
    Ok(out)
}

/// Magic, version 1.0 and the padded header of an array of `descr` and `dims`, with room
/// reserved for `data` more bytes.
fn header_bytes(descr: &str, dims: &[usize], data: usize) -> Vec<u8> {
    let shape = match dims {
        [] => "()".to_string(),
        [d] => format!("({d},)"),
        dims => format!(
            "({})",
            dims.iter()
                .map(usize::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    // Magic (6) + version (2) + length (2) + header + '\n' is a multiple of 64.
    let unpadded = 10 + header.len() + 1;
    header.push_str(&" ".repeat(unpadded.next_multiple_of(64) - unpadded));
    header.push('\n');
    let mut out = Vec::with_capacity(10 + header.len() + data);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&[1, 0]);
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    out
}

/// The bytes of a `.npy` file holding `t`.
pub fn to_bytes(t: &HostTensor) -> Vec<u8> {
    let descr = match t.dtype() {
        DType::F32 => "<f4",
        DType::F16 => "<f2",
        DType::I32 => "<i4",
        DType::U32 => "<u4",
        DType::Bool => "|b1",
    };
    let mut out = header_bytes(descr, t.dims(), t.len() * 4);
    for &w in t.words() {
        match t.dtype() {
            DType::Bool => out.push(u8::from(w != 0)),
            DType::F16 => out.extend_from_slice(&(w as u16).to_le_bytes()),
            _ => out.extend_from_slice(&w.to_le_bytes()),
        }
    }
    out
}

/// Parse the bytes of a `.npy` file.
pub fn from_bytes(b: &[u8]) -> Result<HostTensor> {
    if b.len() < 10 || &b[..6] != MAGIC {
        return Err(Error::host(
            HostKind::File,
            "not a .npy file (missing the \\x93NUMPY magic)",
        ));
    }
    let (major, minor) = (b[6], b[7]);
    let (hlen, start): (usize, usize) = match major {
        1 => (usize::from(u16::from_le_bytes([b[8], b[9]])), 10),
        2 | 3 if b.len() >= 12 => (u32::from_le_bytes([b[8], b[9], b[10], b[11]]) as usize, 12),
        _ => {
            return Err(Error::host(
                HostKind::File,
                format!("unsupported .npy version {major}.{minor} (1.0, 2.0 and 3.0 are read)"),
            ))
        }
    };
    let end = start
        .checked_add(hlen)
        .filter(|&e| e <= b.len())
        .ok_or_else(|| Error::host(HostKind::File, "truncated header"))?;
    let header = std::str::from_utf8(&b[start..end])
        .map_err(|_| Error::host(HostKind::File, "header is not text"))?;
    let header = header::parse(header).map_err(|m| Error::host(HostKind::File, m))?;
    let descr = header.descr.as_str();
    let (dtype, item) = match descr {
        "<f4" => (DType::F32, 4),
        "<f2" => (DType::F16, 2),
        "<i4" => (DType::I32, 4),
        "<u4" => (DType::U32, 4),
        "|b1" => (DType::Bool, 1),
        "<i8" => (DType::I32, 8),
        "<u8" => (DType::U32, 8),
        // 8/16-bit integers (quantized tensors) widen exactly to i32.
        "|u1" | "|i1" | "<u2" | "<i2" => (DType::I32, 0),
        other => {
            return Err(Error::host(HostKind::DType, format!(
                "dtype '{other}' is not supported (expected <f4, <f2, <i4, <i8, <u4, <u8, |b1, or <i2, <u2, |i1, |u1 read as i32; convert with arr.astype(np.float32) etc.)"
            )))
        }
    };
    if header.fortran_order {
        return Err(Error::host(
            HostKind::File,
            "Fortran-order arrays are not supported; save np.ascontiguousarray(arr)",
        ));
    }
    let widen = item == 0;
    let item = match descr {
        "<u2" | "<i2" if widen => 2,
        _ if widen => 1,
        _ => item,
    };
    let shape = Shape(header.shape);
    let n = shape
        .checked_numel()
        .filter(|&n| n <= MAX_ELEMENTS)
        .ok_or_else(|| {
            Error::host(
                HostKind::Shape,
                format!("shape {shape} has more than 2^31 elements"),
            )
        })?;
    let data = &b[end..];
    if data.len() != n * item {
        return Err(Error::host(
            HostKind::File,
            format!(
                "shape {shape} of {descr} needs {} data bytes, the file has {}",
                n * item,
                data.len()
            ),
        ));
    }
    // The data is already in memory, but its words are a second copy as large: fallible.
    let words = if item == 8 {
        narrow_64(data, dtype == DType::U32)?
    } else {
        let mut words: Vec<u32> = crate::host::fresh_vec(n).ok_or_else(|| {
            Error::host(
                HostKind::Alloc,
                format!("cannot allocate {n} elements for {shape}"),
            )
        })?;
        match (widen, item) {
            (true, _) => words.extend(data.chunks_exact(item).map(|c| match descr {
                "|u1" => i32::from(c[0]),
                "|i1" => i32::from(c[0] as i8),
                "<u2" => i32::from(u16::from_le_bytes([c[0], c[1]])),
                _ => i32::from(i16::from_le_bytes([c[0], c[1]])),
            } as u32)),
            (false, 1) => words.extend(data.iter().map(|&x| u32::from(x != 0))),
            (false, 2) => words.extend(
                data.chunks_exact(2)
                    .map(|c| u32::from(u16::from_le_bytes([c[0], c[1]]))),
            ),
            _ => words.extend(
                data.chunks_exact(4)
                    .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])),
            ),
        }
        words
    };
    HostTensor::from_words(shape, dtype, words)
}

/// Little-endian 64-bit integers (int64, or uint64 when `unsigned`) as the 32-bit words
/// wgflow holds them in (i32 or u32); the first value outside that range is an error naming
/// its (flat) index.
fn narrow_64(data: &[u8], unsigned: bool) -> Result<Vec<u32>> {
    let (from, to, held) = if unsigned {
        ("uint64", "uint32", "u32")
    } else {
        ("int64", "int32", "i32")
    };
    let mut words = Vec::new();
    words.try_reserve_exact(data.len() / 8).map_err(|_| {
        Error::host(
            HostKind::Alloc,
            format!("no memory for {} {from} values", data.len() / 8),
        )
    })?;
    for (i, c) in data.chunks_exact(8).enumerate() {
        let b = [c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]];
        let word = if unsigned {
            let v = u64::from_le_bytes(b);
            u32::try_from(v).map_err(|_| v.to_string())
        } else {
            let v = i64::from_le_bytes(b);
            i32::try_from(v)
                .map(|n| n as u32)
                .map_err(|_| v.to_string())
        };
        words.push(word.map_err(|v| {
            Error::host(
                HostKind::Value,
                format!(
                "{from} value {v} at index {i} does not fit {to} (wgflow holds {from} as {held})"
            ),
            )
        })?);
    }
    Ok(words)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_every_dtype_and_rank() {
        for t in [
            HostTensor::from([[1.5f32, -2.0], [f32::NAN, 4.0]]),
            HostTensor::from(vec![1i32, -2, 3]),
            HostTensor::scalar(7u32),
            HostTensor::from(vec![true, false, true]),
        ] {
            let b = to_bytes(&t);
            let header_end = 10 + usize::from(u16::from_le_bytes([b[8], b[9]]));
            assert_eq!(header_end % 64, 0);
            let back = from_bytes(&b).unwrap();
            assert_eq!(back.shape(), t.shape());
            assert_eq!(back.dtype(), t.dtype());
            assert_eq!(back.words(), t.words());
        }
    }

    fn npy(major: u8, header: &str, data: &[u8]) -> Vec<u8> {
        let mut b = MAGIC.to_vec();
        b.extend_from_slice(&[major, 0]);
        if major == 1 {
            b.extend_from_slice(&(header.len() as u16).to_le_bytes());
        } else {
            b.extend_from_slice(&(header.len() as u32).to_le_bytes());
        }
        b.extend_from_slice(header.as_bytes());
        b.extend_from_slice(data);
        b
    }

    #[test]
    fn reads_numpy_v1_and_v2_headers() {
        let data: Vec<u8> = [1i32, 2, 3].iter().flat_map(|x| x.to_le_bytes()).collect();
        // The header np.save writes for np.array([[1, 2, 3]], dtype=np.int32).
        let h = "{'descr': '<i4', 'fortran_order': False, 'shape': (1, 3), }";
        for major in [1, 2] {
            let t = from_bytes(&npy(major, &format!("{h}          \n"), &data)).unwrap();
            assert_eq!(t.dims(), &[1, 3]);
            assert_eq!(t.to_vec::<i32>().unwrap(), vec![1, 2, 3]);
        }
        let t = from_bytes(&npy(
            1,
            "{'descr': '|b1', 'fortran_order': False, 'shape': (), }\n",
            &[1],
        ))
        .unwrap();
        assert!(t.item::<bool>().unwrap());
    }

    #[test]
    fn int64_is_read_as_i32_and_written_back() {
        let v = [0i32, -1, i32::MIN, i32::MAX, 7];
        let t = HostTensor::new([5], v.to_vec()).unwrap();
        let bytes = to_bytes_i64(&t).unwrap();
        // NumPy's layout: 8 little-endian bytes per value after a 64-byte-aligned header.
        assert_eq!((bytes.len() - 5 * 8) % 64, 0);
        assert_eq!(&bytes[bytes.len() - 8..], &7i64.to_le_bytes());
        let back = from_bytes(&bytes).unwrap();
        assert_eq!((back.dtype(), back.dims()), (DType::I32, &[5usize][..]));
        assert_eq!(back.to_vec::<i32>().unwrap(), v);
        // One value past i32's range is an error naming it and its index.
        let mut wide = bytes.clone();
        let at = wide.len() - 2 * 8;
        wide[at..at + 8].copy_from_slice(&(1i64 << 31).to_le_bytes());
        let e = from_bytes(&wide).unwrap_err().to_string();
        assert!(e.contains("2147483648 at index 3"), "{e}");
        let f = HostTensor::from(vec![1.0f32]);
        assert!(to_bytes_i64(&f).is_err());
        // 8/16-bit: written in their width, read back widened; out of range is an error.
        let q = HostTensor::new([3], vec![0i32, 200, 255]).unwrap();
        let b = to_bytes_int(&q, "|u1").unwrap();
        assert_eq!(&b[b.len() - 3..], &[0, 200, 255]);
        assert_eq!(
            from_bytes(&b).unwrap().to_vec::<i32>().unwrap(),
            [0, 200, 255]
        );
        let e = to_bytes_int(&q, "|i1").unwrap_err().to_string();
        assert!(e.contains("200 at index 1"), "{e}");
        let s = HostTensor::new([2], vec![-300i32, 40000]).unwrap();
        assert!(to_bytes_int(&s, "<i2").is_err());
        let b = to_bytes_int(&HostTensor::new([2], vec![-300i32, 300]).unwrap(), "<i2").unwrap();
        assert_eq!(
            from_bytes(&b).unwrap().to_vec::<i32>().unwrap(),
            [-300, 300]
        );
        // uint64: u32 written as 8 bytes each, read back as u32; past u32::MAX is an error.
        let u = HostTensor::new([3], vec![0u32, 7, u32::MAX]).unwrap();
        let b = to_bytes_int(&u, "<u8").unwrap();
        assert_eq!(&b[b.len() - 8..], &u64::from(u32::MAX).to_le_bytes());
        let back = from_bytes(&b).unwrap();
        assert_eq!(back.dtype(), DType::U32);
        assert_eq!(back.to_vec::<u32>().unwrap(), [0, 7, u32::MAX]);
        let mut wide = b.clone();
        let at = wide.len() - 8;
        wide[at..].copy_from_slice(&(1u64 << 32).to_le_bytes());
        let e = from_bytes(&wide).unwrap_err().to_string();
        assert!(e.contains("4294967296 at index 2"), "{e}");
    }

    #[test]
    fn rejects_what_it_cannot_read() {
        let t = HostTensor::from(vec![1.0f32, 2.0]);
        let good = to_bytes(&t);
        let msg = |b: &[u8]| from_bytes(b).unwrap_err().to_string();
        assert!(msg(&good[..good.len() - 1]).contains("needs 8 data bytes"));
        assert!(msg(b"hello").contains("magic"));
        let swap = |from: &str, to: &str| {
            let (f, t) = (from.as_bytes(), to.as_bytes());
            let i = good.windows(f.len()).position(|w| w == f).unwrap();
            let mut b = good.clone();
            b[i..i + f.len()].copy_from_slice(t);
            b
        };
        // Same-length substitutions keep the header length valid.
        assert!(msg(&swap("<f4", ">f4")).contains("'>f4' is not supported"));
        assert!(msg(&swap("<f4", "<f8")).contains("'<f8' is not supported"));
        assert!(msg(&swap("False", "True ")).contains("Fortran-order"));
        let huge = "{'descr': '<f4', 'fortran_order': False, 'shape': (100000, 100000), }\n";
        assert!(msg(&npy(1, huge, &[])).contains("more than 2^31"));
        let overflow =
            "{'descr': '<f4', 'fortran_order': False, 'shape': (18446744073709551615, 2), }\n";
        assert!(msg(&npy(1, overflow, &[])).contains("more than 2^31"));
        assert!(msg(&npy(9, "{}", &[])).contains("unsupported .npy version 9.0"));
        let mut cut = good.clone();
        cut.truncate(20);
        assert!(msg(&cut).contains("truncated header"));
    }
}
