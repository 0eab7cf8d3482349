//! Sizes read from a model (attributes, shape inputs, scales) are checked here before
//! anything is allocated: against [`ImportOptions::max_elements`], and for values folded on
//! the host (shape arithmetic, held as `i64`) against [`MAX_HOST_ELEMENTS`]. The allocation
//! itself is fallible, so a model cannot abort the process by asking for memory.

use super::build::bad;
use super::ImportOptions;
use crate::Result;

/// The most elements one value folded on the host may have. Shape arithmetic is small; a
/// larger constant (`ConstantOfShape` of a big shape) is built in the graph instead, and a
/// larger `Range` is refused.
pub(super) const MAX_HOST_ELEMENTS: usize = 1 << 24;

/// The element count of `dims`, refused past [`ImportOptions::max_elements`] (`what` names
/// the value).
pub(super) fn count(dims: &[usize], opts: &ImportOptions, what: &str) -> Result<usize> {
    dims.iter()
        .try_fold(1usize, |n, &d| n.checked_mul(d))
        .filter(|&n| n <= opts.max_elements)
        .ok_or_else(|| {
            bad(format!(
                "{what} of shape {dims:?} has more than the {} elements allowed (ImportOptions::max_elements)",
                opts.max_elements
            ))
        })
}

/// A length computed in floating point (a `Resize` output, a `Range` count), refused when it
/// is not finite, negative, or past [`ImportOptions::max_elements`].
pub(super) fn length(x: f64, opts: &ImportOptions, what: &str) -> Result<usize> {
    if !x.is_finite() || x < 0.0 || x > opts.max_elements as f64 {
        return Err(bad(format!(
            "{what} is {x}, not a length of at most {} (ImportOptions::max_elements)",
            opts.max_elements
        )));
    }
    Ok(x as usize)
}

/// An empty vector with room for `n` values folded on the host, refused past
/// [`MAX_HOST_ELEMENTS`] or when the memory cannot be had.
pub(super) fn host_vec<T>(n: usize, what: &str) -> Result<Vec<T>> {
    if n > MAX_HOST_ELEMENTS {
        return Err(bad(format!(
            "unsupported: {what} has {n} elements, more than the {MAX_HOST_ELEMENTS} computed at import"
        )));
    }
    room(n, what)
}

/// An empty vector with room for `n` values, or an error when the memory cannot be had.
pub(super) fn room<T>(n: usize, what: &str) -> Result<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(n)
        .map_err(|_| bad(format!("cannot allocate {n} elements for {what}")))?;
    Ok(v)
}
