//! Checkpoints: a session's variables in a [safetensors](https://huggingface.co/docs/safetensors)
//! file, the format Python's `safetensors`, PyTorch and JAX tools read and write.
//!
//! Each variable is one tensor named by its node name (scopes included, e.g. `dense/w`),
//! row-major and little-endian, with dtypes mapped one to one:
//!
//! | wgflow | safetensors | bytes per element |
//! |---|---|---|
//! | `f32` | `F32` | 4 |
//! | `f16` | `F16` | 2 |
//! | `i32` | `I32` | 4 |
//! | `u32` | `U32` | 4 |
//! | `bool` | `BOOL` | 1 (0 or 1) |
//!
//! No conversions happen on restore: a tensor must have its variable's dtype and shape
//! exactly, and a file tensor of another dtype (`F64`, `BF16`, `I64`, …) is an error naming it.
//! No `__metadata__` is written, so a file is byte for byte what Python's
//! `safetensors.numpy.save_file` writes for the same arrays.
//!
//! Which variables a restore needs (TensorFlow's `Saver.restore` fails on a variable missing
//! from the checkpoint, and so do we):
//! * [`Session::restore`] expects the file and the graph to hold the same variables: a variable
//!   missing from the file **and** a tensor in the file that names no variable are errors, so a
//!   checkpoint of another model (or one saved under other scope names) never loads half-way.
//! * [`Session::restore_only`] restores the variables it is given (each must be in the file)
//!   and ignores every other tensor: for a checkpoint that also holds optimizer state, or to
//!   load part of a model.
//!
//! A save replaces the file atomically ([`crate::files::write_atomic`]: a unique temporary,
//! fsync, rename, fsync of the directory), so a crash or a concurrent save leaves the old
//! checkpoint or the whole new one; links and special files are refused as targets. The
//! name `__metadata__` is safetensors' own key, so no variable may have it.
//!
//! A restore is all or nothing: the whole file is checked (names, dtypes, shapes, `BOOL`
//! bytes, placement) and missing storage allocated before any variable is written. A malformed file (truncated, a bad header, offsets
//! that do not cover the data) is an [`Error::Checkpoint`], never a panic.

use crate::graph::{Tensor, RESERVED_VARIABLE_NAME};
use crate::session::Session;
use crate::{DType, Error, HostTensor, Result, Shape};
use safetensors::tensor::{Dtype, SafeTensorError, SafeTensors, TensorView};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

fn err(at: &str, message: impl Into<String>) -> Error {
    Error::Checkpoint {
        path: at.to_string(),
        message: message.into(),
    }
}

/// The safetensors dtype of a wgflow dtype.
pub fn safetensors_dtype(dtype: DType) -> Dtype {
    match dtype {
        DType::F32 => Dtype::F32,
        DType::F16 => Dtype::F16,
        DType::I32 => Dtype::I32,
        DType::U32 => Dtype::U32,
        DType::Bool => Dtype::BOOL,
    }
}

/// The wgflow dtype of a safetensors dtype, if wgflow has one.
pub fn wgflow_dtype(dtype: Dtype) -> Option<DType> {
    Some(match dtype {
        Dtype::F32 => DType::F32,
        Dtype::F16 => DType::F16,
        Dtype::I32 => DType::I32,
        Dtype::U32 => DType::U32,
        Dtype::BOOL => DType::Bool,
        _ => return None,
    })
}

/// A tensor's elements as the file stores them (little-endian, `f16` in 2 bytes, `bool` in 1).
fn file_bytes(t: &HostTensor) -> Vec<u8> {
    let words = t.words();
    match t.dtype() {
        DType::F32 | DType::I32 | DType::U32 => {
            words.iter().flat_map(|w| w.to_le_bytes()).collect()
        }
        // The host keeps an f16's bits in the low half of its word.
        DType::F16 => words
            .iter()
            .flat_map(|&w| (w as u16).to_le_bytes())
            .collect(),
        DType::Bool => words.iter().map(|&w| u8::from(w != 0)).collect(),
    }
}

/// The safetensors bytes of `tensors` (names must be distinct).
pub fn encode(tensors: &[(&str, &HostTensor)]) -> Result<Vec<u8>> {
    let mut seen = BTreeSet::new();
    let data: Vec<(&str, Vec<u8>, &HostTensor)> = tensors
        .iter()
        .map(|&(name, t)| {
            if !seen.insert(name) {
                return Err(err(
                    "(being written)",
                    format!("two tensors are named '{name}'"),
                ));
            }
            if name == RESERVED_VARIABLE_NAME {
                return Err(err(
                    "(being written)",
                    format!("a tensor cannot be named '{name}': safetensors keeps that key for the file's metadata"),
                ));
            }
            Ok((name, file_bytes(t), t))
        })
        .collect::<Result<_>>()?;
    let views = data
        .iter()
        .map(|(name, bytes, t)| {
            TensorView::new(safetensors_dtype(t.dtype()), t.dims().to_vec(), bytes)
                .map(|v| (*name, v))
        })
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| Error::Internal(format!("a checkpoint tensor's bytes: {e}")))?;
    safetensors::tensor::serialize(views, None)
        .map_err(|e| err("(being written)", format!("cannot serialize: {e}")))
}

/// Parse safetensors bytes (`at` names them in errors).
fn parse<'a>(bytes: &'a [u8], at: &str) -> Result<SafeTensors<'a>> {
    SafeTensors::deserialize(bytes).map_err(|e| {
        let why = match e {
            SafeTensorError::HeaderTooSmall => {
                "the file is shorter than the 8-byte header length".to_string()
            }
            SafeTensorError::InvalidHeaderLength => {
                "the header length runs past the end of the file (truncated?)".to_string()
            }
            SafeTensorError::MetadataIncompleteBuffer => {
                "the tensors' data offsets do not end where the file ends (truncated, or trailing bytes)"
                    .to_string()
            }
            other => other.to_string(),
        };
        err(at, format!("not a valid safetensors file: {why}"))
    })
}

/// One file tensor as a host tensor of `name`.
fn host_tensor(view: &TensorView<'_>, name: &str, at: &str) -> Result<HostTensor> {
    let dtype = wgflow_dtype(view.dtype()).ok_or_else(|| {
        err(
            at,
            format!(
                "tensor '{name}' is {}, which has no wgflow dtype (F32, F16, I32, U32, BOOL)",
                view.dtype()
            ),
        )
    })?;
    let data = view.data();
    let words: Vec<u32> = match dtype {
        DType::F32 | DType::I32 | DType::U32 => data
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect(),
        DType::F16 => data
            .chunks_exact(2)
            .map(|c| u32::from(u16::from_le_bytes([c[0], c[1]])))
            .collect(),
        DType::Bool => {
            if let Some(k) = data.iter().position(|&b| b > 1) {
                return Err(err(
                    at,
                    format!(
                        "tensor '{name}': BOOL element {k} is the byte {}, not 0 or 1",
                        data[k]
                    ),
                ));
            }
            data.iter().map(|&b| u32::from(b)).collect()
        }
    };
    HostTensor::from_words(Shape::new(view.shape().to_vec()), dtype, words)
        .map_err(|e| err(at, format!("tensor '{name}': {e}")))
}

/// Every tensor of safetensors bytes, sorted by name. Dtypes without a wgflow equivalent are
/// errors.
pub fn decode(bytes: &[u8]) -> Result<Vec<(String, HostTensor)>> {
    decode_at(bytes, "(bytes)")
}

fn decode_at(bytes: &[u8], at: &str) -> Result<Vec<(String, HostTensor)>> {
    let st = parse(bytes, at)?;
    let mut names = st.names();
    names.sort_unstable();
    names
        .into_iter()
        .map(|name| {
            let view = st
                .tensor(name)
                .map_err(|e| Error::Internal(format!("a listed tensor is missing: {e}")))?;
            Ok((name.to_string(), host_tensor(&view, name, at)?))
        })
        .collect()
}

/// Every tensor of a safetensors file, sorted by name.
pub fn read(path: impl AsRef<Path>) -> Result<Vec<(String, HostTensor)>> {
    let path = path.as_ref();
    let at = path.display().to_string();
    decode_at(&read_bytes(path, &at)?, &at)
}

/// The largest checkpoint [`read`] and [`Session::restore`] accept: 2^40 bytes (1 TiB). A
/// file's size is checked before anything is read, and the memory for it is allocated
/// fallibly.
pub const MAX_FILE_BYTES: u64 = 1 << 40;

/// Write `tensors` as a safetensors file (see [`encode`]), replacing `path` atomically
/// ([`crate::files::write_atomic`]): a reader, a crash or a concurrent `write` to the same
/// path sees the old file or a whole new one, never a mix; when this returns `Ok` the file is
/// on disk. A `path` that is a symbolic link, a directory or a special file is refused.
pub fn write(path: impl AsRef<Path>, tensors: &[(&str, &HostTensor)]) -> Result<()> {
    let path = path.as_ref();
    let at = path.display().to_string();
    let bytes = encode(tensors).map_err(|e| match e {
        Error::Checkpoint { message, .. } => err(&at, message),
        other => other,
    })?;
    crate::files::write_atomic(path, &bytes).map_err(|e| err(&at, format!("cannot write: {e}")))
}

fn read_bytes(path: &Path, at: &str) -> Result<Vec<u8>> {
    crate::files::read_regular(path, MAX_FILE_BYTES, "checkpoint")
        .map_err(|e| err(at, format!("cannot read: {e}")))
}

/// `v`'s node name, if it is a variable of the session's graph.
fn variable_name(session: &Session, v: Tensor, at: &str) -> Result<String> {
    let node = session.graph().node(v)?;
    if !node.op.is_variable() {
        return Err(err(
            at,
            format!("'{}' is a {}, not a variable", node.name, node.op.name()),
        ));
    }
    Ok(node.name.clone())
}

/// [`Session::save`]: `variables`, or every variable of the graph, to `path`.
pub(crate) fn save(session: &mut Session, path: &Path, variables: Option<&[Tensor]>) -> Result<()> {
    let at = path.display().to_string();
    let tensors: Vec<Tensor> = match variables {
        Some(vs) => vs.to_vec(),
        None => session.graph().variables(),
    };
    if tensors.is_empty() {
        // An empty file would replace a good checkpoint with one no restore accepts.
        return Err(err(
            &at,
            match variables {
                Some(_) => "no variables were given to save; nothing was written",
                None => "the graph has no variables to save; nothing was written",
            },
        ));
    }
    // By name, so a variable listed twice is written once.
    let mut values = BTreeMap::new();
    for v in tensors {
        let name = variable_name(session, v, &at)?;
        if let std::collections::btree_map::Entry::Vacant(slot) = values.entry(name) {
            slot.insert(session.read_variable(v)?);
        }
    }
    let list: Vec<(&str, &HostTensor)> = values.iter().map(|(n, t)| (n.as_str(), t)).collect();
    write(path, &list)
}

/// [`Session::restore`] (`only` is `None`) and [`Session::restore_only`].
pub(crate) fn restore(session: &mut Session, path: &Path, only: Option<&[Tensor]>) -> Result<()> {
    let at = path.display().to_string();
    let bytes = read_bytes(path, &at)?;
    let st = parse(&bytes, &at)?;
    let wanted: Vec<Tensor> = match only {
        Some(vs) => vs.to_vec(),
        None => session.graph().variables(),
    };
    let mut values: Vec<(Tensor, HostTensor)> = Vec::with_capacity(wanted.len());
    let mut missing = Vec::new();
    let mut seen = BTreeSet::new();
    for v in wanted {
        let name = variable_name(session, v, &at)?;
        if !seen.insert(name.clone()) {
            continue;
        }
        let view = match st.tensor(&name) {
            Ok(view) => view,
            Err(_) => {
                missing.push(name);
                continue;
            }
        };
        let node = session.graph().node(v)?;
        let file_shape = Shape::new(view.shape().to_vec());
        let expected = safetensors_dtype(node.dtype);
        if view.dtype() != expected || file_shape != node.shape {
            return Err(err(
                &at,
                format!(
                    "tensor '{name}' is {} {file_shape} in the file, but the variable is {} {} ({expected} {})",
                    view.dtype(),
                    node.dtype,
                    node.shape,
                    node.shape
                ),
            ));
        }
        values.push((v, host_tensor(&view, &name, &at)?));
    }
    if !missing.is_empty() {
        return Err(err(
            &at,
            format!(
                "no tensor for variable(s) {}; the file holds {}",
                quoted(missing.iter().map(String::as_str)),
                listing(st.names())
            ),
        ));
    }
    if only.is_none() {
        let mut unknown: Vec<&str> = st
            .names()
            .into_iter()
            .filter(|n| !seen.contains(*n))
            .collect();
        if !unknown.is_empty() {
            unknown.sort_unstable();
            return Err(err(
                &at,
                format!(
                    "tensor(s) {} name no variable of the graph; restore_only restores a subset and ignores the rest",
                    quoted(unknown.into_iter())
                ),
            ));
        }
    }
    let list: Vec<(Tensor, &HostTensor)> = values.iter().map(|(v, t)| (*v, t)).collect();
    session.write_variables(&list)
}

/// `'a', 'b', 'c'`, cut after 10 names.
fn quoted<'a>(names: impl Iterator<Item = &'a str>) -> String {
    let names: Vec<&str> = names.collect();
    let mut s = names
        .iter()
        .take(10)
        .map(|n| format!("'{n}'"))
        .collect::<Vec<_>>()
        .join(", ");
    if names.len() > 10 {
        s.push_str(&format!(" and {} more", names.len() - 10));
    }
    s
}

/// The file's tensor names for a message, sorted.
fn listing(mut names: Vec<&str>) -> String {
    if names.is_empty() {
        return "no tensors".into();
    }
    names.sort_unstable();
    quoted(names.into_iter())
}
