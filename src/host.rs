//! Host-side tensors: what users feed in and what `Session::run` returns.

use crate::{DType, Error, HostKind, Result, Shape};
use std::fmt;

/// A Rust scalar type that maps to a wgflow [`DType`].
pub trait Element: Copy + fmt::Debug + PartialEq + 'static {
    const DTYPE: DType;
    fn to_word(self) -> u32;
    fn from_word(w: u32) -> Self;
}

impl Element for f32 {
    const DTYPE: DType = DType::F32;
    fn to_word(self) -> u32 {
        self.to_bits()
    }
    fn from_word(w: u32) -> Self {
        f32::from_bits(w)
    }
}

impl Element for i32 {
    const DTYPE: DType = DType::I32;
    fn to_word(self) -> u32 {
        self as u32
    }
    fn from_word(w: u32) -> Self {
        w as i32
    }
}

impl Element for u32 {
    const DTYPE: DType = DType::U32;
    fn to_word(self) -> u32 {
        self
    }
    fn from_word(w: u32) -> Self {
        w
    }
}

impl Element for half::f16 {
    const DTYPE: DType = DType::F16;
    fn to_word(self) -> u32 {
        self.to_bits() as u32
    }
    fn from_word(w: u32) -> Self {
        half::f16::from_bits(w as u16)
    }
}

impl Element for bool {
    const DTYPE: DType = DType::Bool;
    fn to_word(self) -> u32 {
        self as u32
    }
    fn from_word(w: u32) -> Self {
        w != 0
    }
}

/// Bytes above which [`fresh_vec`] asks for huge pages. Smaller allocations often reuse heap
/// memory that is already faulted in (glibc serves up to 32 MiB from the heap once such sizes
/// have been freed), where the advice only costs a system call: filling a fresh 16 MiB vector
/// took 1.64 ms plain and 1.81 ms advised, 24 MiB 4.9 ms plain and 3.0 ms advised.
#[cfg(target_os = "linux")]
const HUGE_PAGE_ABOVE: usize = 16 << 20;

/// An empty vector with room for `n` values, reserved fallibly (`None` when the allocator
/// refuses), for a caller about to fill all of it once.
///
/// A large allocation is fresh memory from the kernel, and writing it costs a page fault per
/// page touched; that, not the copy itself, dominates fetching a tensor of tens of MiB. On
/// Linux the allocation's 2 MiB-aligned interior is therefore advised for transparent huge
/// pages (one fault per 2 MiB instead of per 4 KiB): filling a fresh 64 MiB vector took 145
/// ms with 4 KiB pages and 30 ms with the advice on the 2-core bench VM. Elsewhere, or with
/// THP disabled, the advice is a no-op.
pub(crate) fn fresh_vec<T>(n: usize) -> Option<Vec<T>> {
    let mut v: Vec<T> = Vec::new();
    v.try_reserve_exact(n).ok()?;
    advise_huge_pages(
        v.as_mut_ptr().cast(),
        n.saturating_mul(std::mem::size_of::<T>()),
    );
    Some(v)
}

#[cfg(target_os = "linux")]
fn advise_huge_pages(ptr: *mut u8, bytes: usize) {
    const HUGE: usize = 2 << 20;
    if bytes <= HUGE_PAGE_ABOVE {
        return;
    }
    let (start, end) = (ptr as usize, ptr as usize + bytes);
    let (from, to) = (start.next_multiple_of(HUGE), end / HUGE * HUGE);
    if to > from {
        // SAFETY: `from..to` lies inside the allocation of `bytes` bytes at `ptr` that the
        // caller owns, and is page-aligned. MADV_HUGEPAGE is advice on how to back the range: it
        // changes neither its contents nor its validity, so no Rust value is affected. A
        // failure (THP disabled, an old kernel) only leaves 4 KiB pages, so it is ignored.
        unsafe {
            libc::madvise(from as *mut libc::c_void, to - from, libc::MADV_HUGEPAGE);
        }
    }
}

#[cfg(not(target_os = "linux"))]
fn advise_huge_pages(_ptr: *mut u8, _bytes: usize) {}

/// A copy of `words` in a [`fresh_vec`], or `None` when it cannot be allocated.
pub(crate) fn copy_of(words: &[u32]) -> Option<Vec<u32>> {
    let mut v = fresh_vec(words.len())?;
    v.extend_from_slice(words);
    Some(v)
}

/// Words that another owner keeps alive and a [`HostTensor`] reads in place: a NumPy array
/// fed to a session, which is then not copied on the way in.
///
/// The owner must not change the words while a tensor over them is in use (a run reads them
/// once, at its start). A tensor over shared words never keeps them past that use: cloning
/// it copies them, so nothing a session retains (a cached import's fed values, a constant)
/// aliases memory its owner may later write.
// RefUnwindSafe keeps HostTensor unwind-safe, as it was when it only owned its words.
pub trait SharedWords: Send + Sync + std::panic::RefUnwindSafe {
    /// The words, one per element in the device layout.
    fn words(&self) -> &[u32];
}

/// Where a tensor's words live: its own (shared by its clones, as a tensor never changes its
/// words), or another owner's.
enum Words {
    Owned(std::sync::Arc<Vec<u32>>),
    Shared(std::sync::Arc<dyn SharedWords>),
}

impl Words {
    fn as_slice(&self) -> &[u32] {
        match self {
            Words::Owned(v) => v,
            Words::Shared(s) => s.words(),
        }
    }

    fn into_vec(self) -> Vec<u32> {
        match self {
            Words::Owned(v) => std::sync::Arc::unwrap_or_clone(v),
            Words::Shared(s) => s.words().to_vec(),
        }
    }
}

impl Clone for Words {
    /// The same words for a tensor's own (a graph, its sessions and their plans hold one
    /// copy of a constant); an owned copy of another owner's (see [`SharedWords`]).
    fn clone(&self) -> Self {
        match self {
            Words::Owned(v) => Words::Owned(v.clone()),
            Words::Shared(s) => s.words().to_vec().into(),
        }
    }
}

impl std::ops::Deref for Words {
    type Target = [u32];
    fn deref(&self) -> &[u32] {
        self.as_slice()
    }
}

impl From<Vec<u32>> for Words {
    fn from(v: Vec<u32>) -> Self {
        Words::Owned(std::sync::Arc::new(v))
    }
}

impl FromIterator<u32> for Words {
    fn from_iter<I: IntoIterator<Item = u32>>(iter: I) -> Self {
        iter.into_iter().collect::<Vec<u32>>().into()
    }
}

/// A dense row-major tensor in host memory.
///
/// Storage is one 32-bit word per element whatever the dtype, matching the device layout, so
/// uploads and downloads are plain byte copies. The words are the tensor's own, or another
/// owner's read in place ([`HostTensor::from_shared`]).
#[derive(Clone)]
pub struct HostTensor {
    shape: Shape,
    dtype: DType,
    words: Words,
}

impl PartialEq for HostTensor {
    fn eq(&self, other: &Self) -> bool {
        self.shape == other.shape
            && self.dtype == other.dtype
            && self.words.as_slice() == other.words.as_slice()
    }
}

impl HostTensor {
    /// A tensor from a shape and row-major values; errors if the lengths disagree.
    pub fn new<T: Element>(shape: impl Into<Shape>, values: Vec<T>) -> Result<Self> {
        let shape = shape.into();
        if shape.numel() != values.len() {
            return Err(Error::host(
                HostKind::Shape,
                format!(
                    "shape {shape} holds {} elements but {} values were given",
                    shape.numel(),
                    values.len()
                ),
            ));
        }
        Ok(HostTensor {
            shape,
            dtype: T::DTYPE,
            words: values.into_iter().map(Element::to_word).collect(),
        })
    }

    /// An i32 tensor from int64 values (an ONNX model's `input_ids`, NumPy's default
    /// integers): wgflow holds int64 as i32, so a value outside i32's range is an error naming
    /// its flat index, never a wrapped number.
    ///
    /// ```
    /// # use wgflow::HostTensor;
    /// let ids = HostTensor::from_i64([1, 3], &[101, 2023, 102]).unwrap();
    /// assert_eq!(ids.to_vec::<i32>().unwrap(), [101, 2023, 102]);
    /// let e = HostTensor::from_i64([2], &[0, 1 << 40]).unwrap_err();
    /// assert!(e.to_string().contains("index 1"));
    /// ```
    pub fn from_i64(shape: impl Into<Shape>, values: &[i64]) -> Result<Self> {
        let narrowed = values
            .iter()
            .enumerate()
            .map(|(i, &v)| {
                i32::try_from(v).map_err(|_| {
                    Error::host(HostKind::Value, format!(
                        "int64 value {v} at index {i} does not fit int32 (wgflow holds int64 as i32)"
                    ))
                })
            })
            .collect::<Result<Vec<i32>>>()?;
        HostTensor::new(shape, narrowed)
    }

    /// An i32 tensor's values widened to int64 (an ONNX model's int64 output as onnxruntime
    /// gives it).
    pub fn to_i64_vec(&self) -> Result<Vec<i64>> {
        Ok(self.to_vec::<i32>()?.into_iter().map(i64::from).collect())
    }

    /// A 0-d tensor.
    pub fn scalar<T: Element>(v: T) -> Self {
        HostTensor {
            shape: Shape::scalar(),
            dtype: T::DTYPE,
            words: vec![v.to_word()].into(),
        }
    }

    /// A tensor filled with zeros of `dtype`.
    pub fn zeros(shape: impl Into<Shape>, dtype: DType) -> Self {
        let shape = shape.into();
        let n = shape.numel();
        HostTensor {
            shape,
            dtype,
            words: vec![0; n].into(),
        }
    }

    /// Build from raw 32-bit words (the device layout).
    pub fn from_words(shape: Shape, dtype: DType, words: Vec<u32>) -> Result<Self> {
        if shape.numel() != words.len() {
            return Err(Error::host(
                HostKind::Shape,
                format!(
                    "shape {shape} holds {} elements but {} words were given",
                    shape.numel(),
                    words.len()
                ),
            ));
        }
        Ok(HostTensor {
            shape,
            dtype,
            words: words.into(),
        })
    }

    /// A tensor over words another owner keeps alive, read in place (see [`SharedWords`]):
    /// how the Python package feeds a NumPy array without copying it.
    pub fn from_shared(
        shape: Shape,
        dtype: DType,
        words: std::sync::Arc<dyn SharedWords>,
    ) -> Result<Self> {
        let n = words.words().len();
        if shape.numel() != n {
            return Err(Error::host(
                HostKind::Shape,
                format!(
                    "shape {shape} holds {} elements but {n} words were given",
                    shape.numel()
                ),
            ));
        }
        Ok(HostTensor {
            shape,
            dtype,
            words: Words::Shared(words),
        })
    }

    /// Whether the words are another owner's, read in place ([`HostTensor::from_shared`]).
    pub fn is_shared(&self) -> bool {
        matches!(self.words, Words::Shared(_))
    }

    pub fn shape(&self) -> &Shape {
        &self.shape
    }

    pub fn dims(&self) -> &[usize] {
        self.shape.dims()
    }

    pub fn dtype(&self) -> DType {
        self.dtype
    }

    pub fn len(&self) -> usize {
        self.words.len()
    }

    pub fn is_empty(&self) -> bool {
        self.words.is_empty()
    }

    /// The raw words (device layout).
    pub fn words(&self) -> &[u32] {
        &self.words
    }

    /// The raw bytes of the words (one word per element, native endianness; a GPU stores f16
    /// in 2 bytes, see `backend::gpu::bytes::device_bytes`).
    pub fn bytes(&self) -> &[u8] {
        bytemuck::cast_slice(&self.words)
    }

    /// Same data, new shape of the same element count.
    pub fn reshaped(mut self, shape: impl Into<Shape>) -> Result<Self> {
        let shape = shape.into();
        if shape.numel() != self.words.len() {
            return Err(Error::host(
                HostKind::Shape,
                format!("cannot reshape {} elements to {shape}", self.words.len()),
            ));
        }
        self.shape = shape;
        Ok(self)
    }

    /// An error unless `T` is this tensor's dtype.
    fn read_as<T: Element>(&self) -> Result<()> {
        if T::DTYPE == self.dtype {
            return Ok(());
        }
        Err(Error::host(
            HostKind::DType,
            format!(
                "tensor has dtype {} but was read as {}",
                self.dtype,
                T::DTYPE
            ),
        ))
    }

    /// The values as a `Vec<T>`; errors if `T` is not this tensor's dtype.
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        self.read_as::<T>()?;
        let mut out = fresh_vec(self.words.len()).ok_or_else(|| {
            Error::host(
                HostKind::Alloc,
                format!(
                    "cannot allocate {} values of {}",
                    self.words.len(),
                    self.dtype
                ),
            )
        })?;
        out.extend(self.words.iter().map(|&w| T::from_word(w)));
        Ok(out)
    }

    /// The values as a `Vec<T>`, consuming the tensor; errors if `T` is not its dtype. For
    /// 4-byte types (`f32`, `i32`, `u32`) the words' allocation is reused, so this copies
    /// nothing.
    pub fn into_vec<T: Element>(self) -> Result<Vec<T>> {
        self.read_as::<T>()?;
        // `Vec`'s in-place collection reuses the buffer when `T` has the size and alignment
        // of `u32`, and the map is a bit cast for those types.
        Ok(self
            .words
            .into_vec()
            .into_iter()
            .map(T::from_word)
            .collect())
    }

    /// The values as f32: `to_vec::<f32>`, or f16 values widened exactly.
    pub fn to_f32(&self) -> Result<Vec<f32>> {
        if self.dtype == DType::F16 {
            return Ok(self
                .words
                .iter()
                .map(|&w| f32::from_bits(crate::dtype::f16_to_f32_word(w)))
                .collect());
        }
        self.to_vec()
    }

    /// The single value of a one-element tensor.
    pub fn item<T: Element>(&self) -> Result<T> {
        if self.words.len() != 1 {
            return Err(Error::host(
                HostKind::Shape,
                format!("item() needs one element, tensor has shape {}", self.shape),
            ));
        }
        Ok(self.to_vec::<T>()?[0])
    }

    fn fmt_elem(&self, f: &mut fmt::Formatter<'_>, w: u32) -> fmt::Result {
        match self.dtype {
            DType::F32 => write!(f, "{}", f32::from_bits(w)),
            DType::F16 => write!(f, "{}", half::f16::from_bits(w as u16)),
            DType::I32 => write!(f, "{}", w as i32),
            DType::U32 => write!(f, "{w}"),
            DType::Bool => write!(f, "{}", w != 0),
        }
    }

    fn fmt_nested(&self, f: &mut fmt::Formatter<'_>, dim: usize, start: usize) -> fmt::Result {
        if dim == self.shape.rank() {
            return self.fmt_elem(f, self.words[start]);
        }
        let stride: usize = self.shape.dims()[dim + 1..].iter().product();
        write!(f, "[")?;
        for i in 0..self.shape.dims()[dim] {
            if i > 0 {
                write!(f, ", ")?;
            }
            self.fmt_nested(f, dim + 1, start + i * stride)?;
        }
        write!(f, "]")
    }
}

/// NumPy-like nested lists: `[[1, 2], [3, 4]]`.
impl fmt::Display for HostTensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.words.is_empty() {
            return write!(f, "[]");
        }
        self.fmt_nested(f, 0, 0)
    }
}

impl fmt::Debug for HostTensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "HostTensor({}, shape={}, {})",
            self.dtype, self.shape, self
        )
    }
}

impl<T: Element> From<T> for HostTensor {
    fn from(v: T) -> Self {
        HostTensor::scalar(v)
    }
}

impl<T: Element> From<Vec<T>> for HostTensor {
    fn from(v: Vec<T>) -> Self {
        let n = v.len();
        HostTensor {
            shape: Shape::from([n]),
            dtype: T::DTYPE,
            words: v.into_iter().map(Element::to_word).collect(),
        }
    }
}

impl<T: Element> From<&[T]> for HostTensor {
    fn from(v: &[T]) -> Self {
        HostTensor::from(v.to_vec())
    }
}

impl<T: Element, const N: usize> From<[T; N]> for HostTensor {
    fn from(v: [T; N]) -> Self {
        HostTensor::from(v.to_vec())
    }
}

impl<T: Element, const N: usize, const M: usize> From<[[T; N]; M]> for HostTensor {
    fn from(v: [[T; N]; M]) -> Self {
        HostTensor {
            shape: Shape::from([M, N]),
            dtype: T::DTYPE,
            words: v.iter().flatten().map(|x| x.to_word()).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_is_nested() {
        let t = HostTensor::from([[1.0f32, 2.5], [3.0, 4.0]]);
        assert_eq!(t.to_string(), "[[1, 2.5], [3, 4]]");
        assert_eq!(
            HostTensor::from(vec![true, false]).to_string(),
            "[true, false]"
        );
        assert_eq!(HostTensor::scalar(-3i32).to_string(), "-3");
    }

    struct Outside(Vec<u32>);
    impl SharedWords for Outside {
        fn words(&self) -> &[u32] {
            &self.0
        }
    }

    #[test]
    fn shared_words_are_read_in_place_and_copied_on_clone() {
        let outside = std::sync::Arc::new(Outside(vec![1.5f32.to_bits(), (-2.0f32).to_bits()]));
        let at = outside.0.as_ptr();
        let t = HostTensor::from_shared(Shape::from([2]), DType::F32, outside).unwrap();
        assert!(t.is_shared());
        assert_eq!(t.words().as_ptr(), at, "read in place");
        assert_eq!(t.to_vec::<f32>().unwrap(), [1.5, -2.0]);
        let c = t.clone();
        assert!(
            !c.is_shared() && c.words().as_ptr() != at,
            "a clone owns a copy"
        );
        assert_eq!(c, t);
        assert_eq!(
            t.reshaped([1, 2]).unwrap().into_vec::<f32>().unwrap(),
            [1.5, -2.0]
        );
        let short = std::sync::Arc::new(Outside(vec![0; 3]));
        let e = HostTensor::from_shared(Shape::from([2, 2]), DType::F32, short).unwrap_err();
        assert!(e.to_string().contains("4 elements but 3 words"), "{e}");
    }

    #[test]
    fn clones_of_an_owned_tensor_share_its_words_until_one_is_taken() {
        // A graph, its sessions and their plans each hold a constant: one copy in memory.
        let t = HostTensor::from(vec![1.0f32, 2.0, 3.0]);
        let c = t.clone();
        assert_eq!(c.words().as_ptr(), t.words().as_ptr(), "shared, not copied");
        // Taking the words out of one copies them while another still holds them.
        let v = c.into_vec::<f32>().unwrap();
        assert_ne!(v.as_ptr() as usize, t.words().as_ptr() as usize);
        assert_eq!(v, [1.0, 2.0, 3.0]);
        assert_eq!(t.to_vec::<f32>().unwrap(), [1.0, 2.0, 3.0]);
        let r = t.clone().reshaped([3, 1]).unwrap();
        assert_eq!(r.words().as_ptr(), t.words().as_ptr());
    }

    #[test]
    fn into_vec_reuses_the_words_of_four_byte_types() {
        let t = HostTensor::from(vec![1.5f32, -0.0, f32::NAN]);
        let ptr = t.words().as_ptr() as usize;
        let v = t.into_vec::<f32>().unwrap();
        assert_eq!(v.as_ptr() as usize, ptr, "no copy");
        assert_eq!(v[0], 1.5);
        assert_eq!(v[1].to_bits(), 0x8000_0000);
        assert!(v[2].is_nan());
        let t = HostTensor::from(vec![true, false]);
        assert!(t.clone().into_vec::<i32>().is_err());
        assert_eq!(t.into_vec::<bool>().unwrap(), [true, false]);
        let h = HostTensor::from(vec![half::f16::from_f32(-2.5)]);
        assert_eq!(h.into_vec::<half::f16>().unwrap()[0].to_f32(), -2.5);
    }

    #[test]
    fn fresh_vectors_have_room_and_no_values() {
        // The last is past `HUGE_PAGE_ABOVE`, so advised on Linux.
        for n in [0, 1, 3, (16 << 20) / 4 + 5] {
            let v: Vec<u32> = fresh_vec(n).unwrap();
            assert!(v.is_empty() && v.capacity() >= n, "{n}");
        }
        let words: Vec<u32> = (0..(5 << 20)).collect();
        assert_eq!(copy_of(&words).unwrap(), words);
        assert_eq!(copy_of(&[]).unwrap(), Vec::<u32>::new());
    }

    #[test]
    fn typed_views_check_dtype() {
        let t = HostTensor::from(vec![1i32, 2]);
        assert!(t.to_vec::<f32>().is_err());
        assert_eq!(t.to_vec::<i32>().unwrap(), vec![1, 2]);
        assert!(HostTensor::new([2, 2], vec![1.0f32]).is_err());
    }
}
