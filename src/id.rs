//! Typed indices: a node of a graph, a value of a plan and a step of a plan are different
//! things, so each has its own index type and cannot be used for another.
//!
//! A collection indexed by one of them is an [`IdVec`] keyed by that id type (as naga's
//! `HandleVec` is), not a `Vec`: `plan.steps[value_id]` and `plan.values[3]` do not compile,
//! and a table kept beside a collection (`IdVec<ValueId, Lifetime>`) says what indexes it.

use std::fmt;
use std::marker::PhantomData;

/// An index type: a position in an [`IdVec`] keyed by it.
pub trait Id: Copy {
    /// The id of the element at position `i`.
    fn from_index(i: usize) -> Self;
    /// Its position in the collection it indexes.
    fn to_index(self) -> usize;
}

/// Declare an index newtype over `usize`, the key of an [`IdVec`].
macro_rules! typed_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
        pub struct $name(usize);

        impl $name {
            /// The id of the element at position `i`.
            pub const fn new(i: usize) -> Self {
                $name(i)
            }

            /// Its position in the collection it indexes.
            pub const fn index(self) -> usize {
                self.0
            }
        }

        impl $crate::id::Id for $name {
            fn from_index(i: usize) -> Self {
                $name(i)
            }
            fn to_index(self) -> usize {
                self.0
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                self.0.fmt(f)
            }
        }
    };
}

pub(crate) use typed_id;

typed_id!(
    /// Index of a value in a compiled plan's values (`compile::Plan::values`). Declared
    /// here, below both, so that a lowering's [`crate::ops::family::Arg`] can hold one
    /// without the ops layer depending on the compiler.
    ValueId
);

/// A vector indexed by the id type `I` only.
pub struct IdVec<I, T> {
    raw: Vec<T>,
    // `fn(I) -> I`: the key is only a type tag; it does not affect auto traits or variance.
    _id: PhantomData<fn(I) -> I>,
}

impl<I: Id, T> IdVec<I, T> {
    /// An empty vector.
    pub const fn new() -> Self {
        IdVec {
            raw: Vec::new(),
            _id: PhantomData,
        }
    }

    /// An empty vector with room for `n` elements.
    pub fn with_capacity(n: usize) -> Self {
        Self::from_vec(Vec::with_capacity(n))
    }

    /// The elements of `raw`, the one at position `i` keyed by `I::from_index(i)`.
    pub fn from_vec(raw: Vec<T>) -> Self {
        IdVec {
            raw,
            _id: PhantomData,
        }
    }

    /// `n` copies of `value`, one per id `0..n`.
    pub fn filled(value: T, n: usize) -> Self
    where
        T: Clone,
    {
        Self::from_vec(vec![value; n])
    }

    /// Appends `value` and returns its id.
    pub fn push(&mut self, value: T) -> I {
        self.raw.push(value);
        I::from_index(self.raw.len() - 1)
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        self.raw.len()
    }

    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.raw.is_empty()
    }

    /// The element with id `i`, if there is one.
    pub fn get(&self, i: I) -> Option<&T> {
        self.raw.get(i.to_index())
    }

    /// The id the next [`IdVec::push`] returns.
    pub fn next_id(&self) -> I {
        I::from_index(self.raw.len())
    }

    /// The ids, in order.
    pub fn ids(&self) -> impl DoubleEndedIterator<Item = I> + ExactSizeIterator + use<I, T> {
        (0..self.raw.len()).map(I::from_index)
    }

    /// The elements, in id order.
    pub fn iter(&self) -> std::slice::Iter<'_, T> {
        self.raw.iter()
    }

    /// The elements, mutably, in id order.
    pub fn iter_mut(&mut self) -> std::slice::IterMut<'_, T> {
        self.raw.iter_mut()
    }

    /// The elements with their ids.
    pub fn iter_enumerated(
        &self,
    ) -> impl DoubleEndedIterator<Item = (I, &T)> + ExactSizeIterator + '_ {
        self.raw
            .iter()
            .enumerate()
            .map(|(i, v)| (I::from_index(i), v))
    }

    /// The elements with their ids, by value.
    pub fn into_iter_enumerated(
        self,
    ) -> impl DoubleEndedIterator<Item = (I, T)> + ExactSizeIterator {
        self.raw
            .into_iter()
            .enumerate()
            .map(|(i, v)| (I::from_index(i), v))
    }

    /// Keeps the elements for which `keep(id, element)` holds. The kept ones are renumbered
    /// from 0 in order, so ids taken before no longer name them.
    pub fn retain(&mut self, mut keep: impl FnMut(I, &T) -> bool) {
        let mut i = 0;
        self.raw.retain(|v| {
            i += 1;
            keep(I::from_index(i - 1), v)
        });
    }

    /// The elements as a slice, by position (for code that works on positions, not ids).
    pub fn as_slice(&self) -> &[T] {
        &self.raw
    }
}

impl<I: Id, T> Default for IdVec<I, T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<I, T: Clone> Clone for IdVec<I, T> {
    fn clone(&self) -> Self {
        IdVec {
            raw: self.raw.clone(),
            _id: PhantomData,
        }
    }
}

impl<I, T: PartialEq> PartialEq for IdVec<I, T> {
    fn eq(&self, other: &Self) -> bool {
        self.raw == other.raw
    }
}

impl<I, T: fmt::Debug> fmt::Debug for IdVec<I, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.raw.fmt(f)
    }
}

impl<I: Id, T> std::ops::Index<I> for IdVec<I, T> {
    type Output = T;
    fn index(&self, i: I) -> &T {
        &self.raw[i.to_index()]
    }
}

impl<I: Id, T> std::ops::IndexMut<I> for IdVec<I, T> {
    fn index_mut(&mut self, i: I) -> &mut T {
        &mut self.raw[i.to_index()]
    }
}

impl<I: Id, T> FromIterator<T> for IdVec<I, T> {
    fn from_iter<It: IntoIterator<Item = T>>(iter: It) -> Self {
        Self::from_vec(iter.into_iter().collect())
    }
}

impl<I: Id, T> Extend<T> for IdVec<I, T> {
    fn extend<It: IntoIterator<Item = T>>(&mut self, iter: It) {
        self.raw.extend(iter)
    }
}

impl<'a, I: Id, T> IntoIterator for &'a IdVec<I, T> {
    type Item = &'a T;
    type IntoIter = std::slice::Iter<'a, T>;
    fn into_iter(self) -> Self::IntoIter {
        self.raw.iter()
    }
}

impl<'a, I: Id, T> IntoIterator for &'a mut IdVec<I, T> {
    type Item = &'a mut T;
    type IntoIter = std::slice::IterMut<'a, T>;
    fn into_iter(self) -> Self::IntoIter {
        self.raw.iter_mut()
    }
}

impl<I: Id, T> IntoIterator for IdVec<I, T> {
    type Item = T;
    type IntoIter = std::vec::IntoIter<T>;
    fn into_iter(self) -> Self::IntoIter {
        self.raw.into_iter()
    }
}

#[cfg(test)]
mod tests {
    use super::IdVec;

    typed_id!(A);
    typed_id!(B);

    #[test]
    fn ids_key_their_own_vector() {
        let mut v: IdVec<A, &str> = IdVec::new();
        let x = v.push("x");
        let y = v.push("y");
        assert_eq!((x.index(), y), (0, A::new(1)));
        assert_eq!(v[y], "y");
        assert_eq!(v.next_id(), A::new(2));
        let pairs: Vec<(A, &&str)> = v.iter_enumerated().collect();
        assert_eq!(pairs, [(A::new(0), &"x"), (A::new(1), &"y")]);
        assert_eq!(v.ids().rev().collect::<Vec<_>>(), [A::new(1), A::new(0)]);
        let w: IdVec<B, usize> = IdVec::filled(7, 3);
        assert_eq!(w[B::new(2)], 7);
        assert_eq!(w.ids().map(B::index).sum::<usize>(), 3);
        assert!(w.get(B::new(3)).is_none());
    }
}
