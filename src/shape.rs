//! Shapes, NumPy broadcasting and row-major strides.

use std::fmt;

/// A tensor shape: a list of dimension sizes, row-major. `[]` is a scalar.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub struct Shape(pub Vec<usize>);

impl Shape {
    pub fn new(dims: impl Into<Vec<usize>>) -> Self {
        Shape(dims.into())
    }

    pub fn scalar() -> Self {
        Shape(Vec::new())
    }

    pub fn dims(&self) -> &[usize] {
        &self.0
    }

    pub fn rank(&self) -> usize {
        self.0.len()
    }

    /// Number of elements (1 for a scalar).
    pub fn numel(&self) -> usize {
        self.0.iter().product()
    }

    /// Element count, or `None` if it overflows `usize`.
    pub fn checked_numel(&self) -> Option<usize> {
        self.0.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d))
    }

    /// Row-major strides in elements.
    pub fn strides(&self) -> Vec<usize> {
        let mut s = vec![0; self.rank()];
        let mut acc = 1usize;
        for i in (0..self.rank()).rev() {
            s[i] = acc;
            // The product past the first axis (the element count) is not a stride: left
            // uncomputed, it cannot overflow where every stride fits.
            if i > 0 {
                acc = acc.saturating_mul(self.0[i]);
            }
        }
        s
    }

    /// NumPy broadcasting of two shapes; `None` if they are incompatible.
    pub fn broadcast(a: &Shape, b: &Shape) -> Option<Shape> {
        let rank = a.rank().max(b.rank());
        let mut out = vec![0; rank];
        for (i, o) in out.iter_mut().enumerate() {
            let da = dim_from_right(a, rank - 1 - i);
            let db = dim_from_right(b, rank - 1 - i);
            *o = match (da, db) {
                (x, y) if x == y => x,
                (1, y) => y,
                (x, 1) => x,
                _ => return None,
            };
        }
        Some(Shape(out))
    }

    /// Strides for reading `self` as if broadcast to `out` (0 on broadcast axes).
    /// `out` must be a broadcast of `self`.
    pub fn broadcast_strides(&self, out: &Shape) -> Vec<usize> {
        let own = self.strides();
        let offset = out.rank() - self.rank();
        (0..out.rank())
            .map(|i| {
                if i < offset || self.0[i - offset] == 1 {
                    0
                } else {
                    own[i - offset]
                }
            })
            .collect()
    }

    /// Resolve a possibly negative axis against this rank.
    pub fn axis(&self, axis: isize) -> Option<usize> {
        let r = self.rank() as isize;
        let a = if axis < 0 { axis + r } else { axis };
        (0..r).contains(&a).then_some(a as usize)
    }
}

fn dim_from_right(s: &Shape, k: usize) -> usize {
    if k < s.rank() {
        s.0[s.rank() - 1 - k]
    } else {
        1
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[")?;
        for (i, d) in self.0.iter().enumerate() {
            if i > 0 {
                write!(f, ", ")?;
            }
            write!(f, "{d}")?;
        }
        write!(f, "]")
    }
}

impl From<Vec<usize>> for Shape {
    fn from(v: Vec<usize>) -> Self {
        Shape(v)
    }
}

impl From<&[usize]> for Shape {
    fn from(v: &[usize]) -> Self {
        Shape(v.to_vec())
    }
}

impl<const N: usize> From<[usize; N]> for Shape {
    fn from(v: [usize; N]) -> Self {
        Shape(v.to_vec())
    }
}

/// `dims` read with `strides` (in elements, signed) as the fewest axes that read the same
/// elements in the same order: size-1 axes dropped, and each axis merged into the one before
/// it when that one steps exactly over it. Empty when every axis has size 1.
pub(crate) fn coalesce(dims: &[usize], strides: &[i64]) -> (Vec<usize>, Vec<i64>) {
    let (mut d, mut st): (Vec<usize>, Vec<i64>) = (Vec::new(), Vec::new());
    for (&n, &s) in dims.iter().zip(strides) {
        if n == 1 {
            continue;
        }
        match (d.last_mut(), st.last_mut()) {
            (Some(pd), Some(ps)) if *ps == s * n as i64 => {
                *pd *= n;
                *ps = s;
            }
            _ => {
                d.push(n);
                st.push(s);
            }
        }
    }
    (d, st)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broadcasting_follows_numpy() {
        let b = |x: &[usize], y: &[usize]| Shape::broadcast(&Shape::from(x), &Shape::from(y));
        assert_eq!(b(&[2, 3], &[3]), Some(Shape::from([2, 3])));
        assert_eq!(b(&[4, 1, 3], &[2, 1]), Some(Shape::from([4, 2, 3])));
        assert_eq!(b(&[], &[2]), Some(Shape::from([2])));
        assert_eq!(b(&[3], &[4]), None);
        assert_eq!(
            Shape::from([3]).broadcast_strides(&Shape::from([2, 3])),
            vec![0, 1]
        );
        assert_eq!(
            Shape::from([2, 1]).broadcast_strides(&Shape::from([2, 5])),
            vec![1, 0]
        );
    }
}
