//! NumPy arrays ↔ [`HostTensor`]. Feeds of float32, int32 and uint32 that are
//! C-contiguous, aligned and native-order are read in place ([`feed_from_array`]); other
//! feeds, constants and variables are copied once. Out, the tensor's own buffer is handed to
//! NumPy (no copy for 32-bit dtypes).
//!
//! The Python layer normalises what it can (lists, non-contiguous and byte-swapped arrays)
//! before calling here; this side still checks everything, so a hostile array is an
//! exception, never undefined behaviour.

use crate::errors::IntoPy;
use numpy::{
    Element, PyArray1, PyArrayDescrMethods, PyArrayDyn, PyArrayMethods, PyUntypedArray,
    PyUntypedArrayMethods,
};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use wgflow::{f16, DType, HostTensor, Shape};

/// The NumPy name of a wgflow dtype.
pub fn numpy_name(d: DType) -> &'static str {
    match d {
        DType::F32 => "float32",
        DType::I32 => "int32",
        DType::U32 => "uint32",
        DType::Bool => "bool",
        DType::F16 => "float16",
    }
}

/// A dtype from its NumPy or wgflow name.
pub fn parse_dtype(name: &str) -> PyResult<DType> {
    let d = match name {
        "float32" | "f32" => Some(DType::F32),
        "int32" | "i32" => Some(DType::I32),
        "uint32" | "u32" => Some(DType::U32),
        "bool" => Some(DType::Bool),
        "float16" | "f16" => Some(DType::F16),
        other => DType::parse(other),
    };
    d.ok_or_else(|| {
        PyTypeError::new_err(format!(
            "dtype '{name}' is not supported: wgflow has float32, float16, int32, uint32 and bool"
        ))
    })
}

fn slice<'a, T: Element>(
    a: &'a Bound<'_, PyUntypedArray>,
) -> PyResult<numpy::PyReadonlyArrayDyn<'a, T>> {
    let typed = a
        .cast::<PyArrayDyn<T>>()
        .map_err(|_| PyTypeError::new_err("array dtype does not match its data"))?;
    typed
        .try_readonly()
        .map_err(|e| PyValueError::new_err(format!("array is being written elsewhere: {e}")))
}

fn words<T: Element + Copy>(
    a: &Bound<'_, PyUntypedArray>,
    word: impl Fn(T) -> u32,
) -> PyResult<Vec<u32>> {
    let ro = slice::<T>(a)?;
    let s = ro
        .as_slice()
        .map_err(|_| PyValueError::new_err("array is not C-contiguous and aligned"))?;
    Ok(s.iter().map(|&v| word(v)).collect())
}

/// `a` (a C-contiguous array in native byte order) as a host tensor. int64 values are
/// narrowed to int32 with a range check (wgflow holds int64 as int32).
pub fn host_from_array(py: Python<'_>, a: &Bound<'_, PyUntypedArray>) -> PyResult<HostTensor> {
    if !a.is_c_contiguous() {
        return Err(PyValueError::new_err("array is not C-contiguous"));
    }
    let descr = a.dtype();
    if descr.is_native_byteorder() == Some(false) {
        return Err(PyValueError::new_err("array is not in native byte order"));
    }
    let shape = Shape::new(a.shape().to_vec());
    let is = |other: Bound<'_, numpy::PyArrayDescr>| descr.is_equiv_to(&other);
    let (dtype, w) = if is(numpy::dtype::<f32>(py)) {
        (DType::F32, words::<f32>(a, f32::to_bits)?)
    } else if is(numpy::dtype::<i32>(py)) {
        (DType::I32, words::<i32>(a, |v| v as u32)?)
    } else if is(numpy::dtype::<u32>(py)) {
        (DType::U32, words::<u32>(a, |v| v)?)
    } else if is(numpy::dtype::<bool>(py)) {
        (DType::Bool, words::<bool>(a, u32::from)?)
    } else if is(numpy::dtype::<f16>(py)) {
        (DType::F16, words::<f16>(a, |v| u32::from(v.to_bits()))?)
    } else if is(numpy::dtype::<i64>(py)) {
        let ro = slice::<i64>(a)?;
        let s = ro
            .as_slice()
            .map_err(|_| PyValueError::new_err("array is not C-contiguous and aligned"))?;
        return HostTensor::from_i64(shape, s).py_err(py);
    } else {
        return Err(PyTypeError::new_err(format!(
            "arrays of dtype {} are not supported: wgflow takes float32, float16, int32, uint32, bool (and int64 within int32's range)",
            descr.str().map(|s| s.to_string()).unwrap_or_else(|_| "?".into())
        )));
    };
    HostTensor::from_words(shape, dtype, w).py_err(py)
}

/// A C-contiguous, aligned, native-order NumPy array of a 4-byte dtype, read in place by a
/// run: the array's memory, kept alive by a reference to the array.
struct ArrayWords {
    _owner: Py<PyUntypedArray>,
    ptr: *const u32,
    len: usize,
}

// SAFETY: the pointer is into the array that `_owner` keeps alive (NumPy does not move an
// array's data while it is referenced), and only shared reads go through it. `Py` itself
// is Send and Sync (a drop without the GIL is deferred by PyO3).
unsafe impl Send for ArrayWords {}
// SAFETY: as above; `words` hands out shared slices only.
unsafe impl Sync for ArrayWords {}

// Only the words are read across a panic boundary, never the Python object (the reference
// just keeps it alive), so a panic cannot expose a half-changed Python value through it.
impl std::panic::RefUnwindSafe for ArrayWords {}

impl wgflow::SharedWords for ArrayWords {
    fn words(&self) -> &[u32] {
        // SAFETY: `ptr` is 4-byte aligned and points at `len` initialized 4-byte elements of
        // the live array (checked in `feed_from_array`); u32 accepts every bit pattern.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

/// The array's data pointer, when `a` is a `T` array not mutably borrowed by Rust code.
fn data_of<T: Element>(a: &Bound<'_, PyUntypedArray>) -> PyResult<*const u32> {
    let ro = slice::<T>(a)?;
    Ok(ro.data() as *const u32)
}

/// `a` as a feed for one run: float32, int32 and uint32 arrays that are C-contiguous, aligned
/// and in native byte order are read in place (no copy on the way in: the run reads them once,
/// at its start, with the GIL released, so the caller must not write them from another thread
/// meanwhile, as with any NumPy operation that releases the GIL); anything else through
/// [`host_from_array`]'s copy. Only for feeds: a constant or variable must own its values.
pub fn feed_from_array(py: Python<'_>, a: &Bound<'_, PyUntypedArray>) -> PyResult<HostTensor> {
    let descr = a.dtype();
    let plain = a.len() > 0 && a.is_c_contiguous() && descr.is_native_byteorder() != Some(false);
    let is = |other: Bound<'_, numpy::PyArrayDescr>| descr.is_equiv_to(&other);
    let found = if !plain {
        None
    } else if is(numpy::dtype::<f32>(py)) {
        Some((DType::F32, data_of::<f32>(a)?))
    } else if is(numpy::dtype::<i32>(py)) {
        Some((DType::I32, data_of::<i32>(a)?))
    } else if is(numpy::dtype::<u32>(py)) {
        Some((DType::U32, data_of::<u32>(a)?))
    } else {
        None
    };
    match found {
        Some((dtype, ptr)) if ptr.is_aligned() && !ptr.is_null() => {
            let words = ArrayWords {
                _owner: a.clone().unbind(),
                ptr,
                len: a.len(),
            };
            HostTensor::from_shared(
                Shape::new(a.shape().to_vec()),
                dtype,
                std::sync::Arc::new(words),
            )
            .py_err(py)
        }
        _ => host_from_array(py, a),
    }
}

fn shaped<'py, T: Element>(
    py: Python<'py>,
    v: Vec<T>,
    dims: &[usize],
) -> PyResult<Bound<'py, PyAny>> {
    Ok(PyArray1::from_vec(py, v).reshape(dims.to_vec())?.into_any())
}

/// `h` as a NumPy array of its dtype (`int64`: widen an int32 tensor, as an ONNX model's
/// int64 output is read).
pub fn array_from_host(py: Python<'_>, h: HostTensor, int64: bool) -> PyResult<Bound<'_, PyAny>> {
    let dims = h.dims().to_vec();
    match h.dtype() {
        DType::I32 if int64 => shaped(py, h.to_i64_vec().py_err(py)?, &dims),
        DType::F32 => shaped(py, h.into_vec::<f32>().py_err(py)?, &dims),
        DType::I32 => shaped(py, h.into_vec::<i32>().py_err(py)?, &dims),
        DType::U32 => shaped(py, h.into_vec::<u32>().py_err(py)?, &dims),
        DType::Bool => shaped(py, h.into_vec::<bool>().py_err(py)?, &dims),
        DType::F16 => shaped(py, h.into_vec::<f16>().py_err(py)?, &dims),
    }
}
