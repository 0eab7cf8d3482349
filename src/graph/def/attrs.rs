//! What op families use to write and read their graph-file attributes (the fields beside a
//! node's common ones): [`NodeOut`] and [`NodeIn`], and serde field types that cap what a
//! hostile file can declare before anything is computed from it.
//!
//! A family describes its attributes with `#[derive(Serialize, Deserialize)]` types,
//! `#[serde(deny_unknown_fields)]`, built from the capped types here ([`UInt`], [`Int`],
//! [`List`], [`Pair`], [`F32`]); either a struct per op, or one enum for the whole family
//! tagged `#[serde(tag = "op", content = "attrs", rename_all = "snake_case")]` whose variant
//! names are the ops' names. Errors name the field (`nodes[3] 's'.strides[1]`).

use super::{err, MAX_RANK};
use crate::{DType, Error, Result, Shape};
use serde::de::value::MapDeserializer;
use serde::de::{self, DeserializeOwned, Deserializer, IgnoredAny, SeqAccess, Visitor};
use serde::{Deserialize, Serialize, Serializer};
use serde_json::Value;
use serde_path_to_error::Segment;
use std::fmt;

/// The common fields of every node, named in the message of an unknown attribute.
pub(super) const COMMON: &str = "name, op, inputs, shape, dtype, device";

/// A node's attributes being written: what [`Family::write_attrs`](crate::ops::Family::write_attrs)
/// adds after the node's common fields.
#[derive(Debug, Default)]
pub struct NodeOut {
    /// `"key": value` pairs separated by `, `, as they appear in the file.
    pub(super) text: String,
}

impl NodeOut {
    /// Write `attrs`, a struct serialized as a JSON object; its fields follow the node's
    /// common fields in declaration order.
    pub fn attrs<T: Serialize>(&mut self, attrs: &T) -> Result<()> {
        let text = super::json::to_text(attrs)?;
        let inner = text.strip_prefix('{').and_then(|t| t.strip_suffix('}'));
        self.push(inner, &text)
    }

    /// Write `attrs`, a family's enum tagged `#[serde(tag = "op", content = "attrs")]`, for
    /// the op named `op`; it is an error for the enum to tag the value with another name.
    pub fn tagged<T: Serialize>(&mut self, op: &str, attrs: &T) -> Result<()> {
        let text = super::json::to_text(attrs)?;
        let head = format!("{{\"op\": {}, \"attrs\": {{", super::json::to_text(&op)?);
        let inner = text.strip_prefix(&head).and_then(|t| t.strip_suffix("}}"));
        self.push(inner, &text)
    }

    fn push(&mut self, inner: Option<&str>, text: &str) -> Result<()> {
        let inner = inner.ok_or_else(|| {
            Error::Internal(format!(
                "graph-file attributes must be a JSON object tagged with the op's name, got {text}"
            ))
        })?;
        if !inner.is_empty() {
            self.text.push_str(", ");
            self.text.push_str(inner);
        }
        Ok(())
    }
}

/// A node being read from a graph file, for its family to decode its attributes: the op's
/// name, the node's declared output (where the format takes an attribute from it: a cast's
/// target, a reshape's shape, a constant's element count) and the remaining fields.
#[derive(Debug)]
pub struct NodeIn<'a> {
    pub op: &'a str,
    pub shape: &'a Shape,
    pub dtype: DType,
    /// `nodes[i] 'name'`.
    pub(super) at: &'a str,
    /// The fields other than the common ones, as a JSON object.
    pub(super) attrs: &'a Value,
}

/// Attributes of an op that has none: any field beyond the common ones is an error.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NoAttrs {}

impl NodeIn<'_> {
    /// The attributes as `T` (a `#[serde(deny_unknown_fields)]` struct).
    pub fn attrs<T: DeserializeOwned>(&self) -> Result<T> {
        serde_path_to_error::deserialize(self.attrs).map_err(|e| self.serde_error(e, 0))
    }

    /// The attributes as `T`, a family's enum tagged `#[serde(tag = "op", content =
    /// "attrs")]`; `None` when `T` has no variant named like the node's op.
    pub fn tagged<T: DeserializeOwned>(&self) -> Option<Result<T>> {
        let op = Value::String(self.op.to_string());
        // The tag first, so that serde reads the attributes directly (errors keep their path).
        let entries = [("op", &op), ("attrs", self.attrs)];
        let de = MapDeserializer::<_, serde_json::Error>::new(entries.into_iter());
        match serde_path_to_error::deserialize(de) {
            Ok(t) => Some(Ok(t)),
            Err(e) if matches!(e.path().iter().next(), Some(Segment::Map { key }) if key == "op") => {
                None
            }
            Err(e) => Some(Err(self.serde_error(e, 1))),
        }
    }

    /// An error about the node's field `field` (a path such as `data[3]`; empty: the node).
    pub fn error(&self, field: &str, message: impl Into<String>) -> Error {
        if field.is_empty() {
            err(self.at, message)
        } else {
            err(format!("{}.{field}", self.at), message)
        }
    }

    /// A serde error at its path below the attributes (after `skip` leading segments).
    fn serde_error(&self, e: serde_path_to_error::Error<serde_json::Error>, skip: usize) -> Error {
        let e = located(self.at, e, skip);
        match e {
            Error::GraphDef { at, mut message } if message.starts_with("unknown field") => {
                message.push_str(&format!(" (nor one of the common fields {COMMON})"));
                err(at, message)
            }
            other => other,
        }
    }
}

/// A serde error as an [`Error::GraphDef`] at `at` followed by the error's path (less its
/// first `skip` segments); a missing field is named in the place (`.expr: missing`).
pub(super) fn located(
    at: &str,
    e: serde_path_to_error::Error<serde_json::Error>,
    skip: usize,
) -> Error {
    let path = path_text(e.path(), skip);
    // serde quotes the file's text (an unknown field or variant, a string of the wrong
    // type) whole.
    let message = bound_quotes(&e.into_inner().to_string());
    let missing = message
        .strip_prefix("missing field `")
        .and_then(|m| m.strip_suffix('`'));
    match missing {
        Some(field) => err(format!("{at}{path}.{field}"), "missing"),
        None => err(format!("{at}{path}"), message),
    }
}

/// `.key[3].other` from a serde path, leaving out its first `skip` segments.
fn path_text(path: &serde_path_to_error::Path, skip: usize) -> String {
    let mut s = String::new();
    for seg in path.iter().skip(skip) {
        match seg {
            Segment::Seq { index } => s.push_str(&format!("[{index}]")),
            Segment::Map { key } => match cut(key, QUOTE_MAX) {
                (key, 0) => s.push_str(&format!(".{key}")),
                (key, _) => s.push_str(&format!(".{key}…")),
            },
            Segment::Enum { .. } => {}
            Segment::Unknown => s.push_str(".?"),
        }
    }
    s
}

/// A JSON value as shown in messages: cut short after 40 characters (and the number of
/// bytes left out), so that a hostile multi-megabyte value is not echoed whole.
pub fn short(v: &Value) -> String {
    let s = v.to_string();
    match cut(&s, 40) {
        (head, 0) => head.to_string(),
        (head, more) => format!("{head}… ({more} more bytes)"),
    }
}

/// The most characters of one piece of a file's text (a name, an input, a key, a string
/// value) that a message quotes.
pub const QUOTE_MAX: usize = 80;

/// `s` as a message quotes it: `'s'`, or its first [`QUOTE_MAX`] characters and how many
/// bytes were left out (`'aaaa…' (10485680 more bytes)`). Every piece of a graph file that
/// an error message repeats goes through this (or [`short`]), so a hostile file cannot make
/// a message as long as itself.
pub fn quote(s: &str) -> String {
    match cut(s, QUOTE_MAX) {
        (head, 0) => format!("'{head}'"),
        (head, more) => format!("'{head}…' ({more} more bytes)"),
    }
}

/// The first `max` characters of `s` and the number of bytes after them (0: all of `s`).
pub(super) fn cut(s: &str, max: usize) -> (&str, usize) {
    match s.char_indices().nth(max) {
        Some((end, _)) => (&s[..end], s.len() - end),
        None => (s, 0),
    }
}

/// A message built by serde (or by another crate) with every quoted span in it (between
/// backticks, or a Rust-escaped string between double quotes, as serde's `unknown field
/// `…``, `unknown variant `…`` and `invalid type: string "…"` quote a file's text) cut to
/// [`QUOTE_MAX`] characters. Text outside quotes is kept; [`err`] caps the whole message.
pub(super) fn bound_quotes(message: &str) -> String {
    let mut out = String::with_capacity(message.len().min(4 * QUOTE_MAX));
    let mut rest = message;
    while let Some(open) = rest.find(['`', '"']) {
        let q = rest.as_bytes()[open];
        out.push_str(&rest[..=open]);
        let body = &rest[open + 1..];
        // The closing quote: the next backtick, or the next unescaped double quote.
        let close = if q == b'`' {
            body.find('`')
        } else {
            let mut escaped = false;
            body.char_indices()
                .find(|&(_, c)| {
                    let end = c == '"' && !escaped;
                    escaped = c == '\\' && !escaped;
                    end
                })
                .map(|(k, _)| k)
        };
        let (inner, after) = match close {
            Some(k) => (&body[..k], &body[k..]),
            None => (body, ""),
        };
        match cut(inner, QUOTE_MAX) {
            (head, 0) => out.push_str(head),
            (head, more) => {
                out.push_str(head);
                out.push('…');
                if let Some(c) = after.chars().next() {
                    out.push(c);
                }
                out.push_str(&format!(" ({more} more bytes)"));
                rest = after.get(1..).unwrap_or("");
                continue;
            }
        }
        match after.chars().next() {
            Some(c) => {
                out.push(c);
                rest = &after[c.len_utf8()..];
            }
            None => rest = "",
        }
    }
    out.push_str(rest);
    out
}

fn number_text(x: f64) -> String {
    serde_json::Number::from_f64(x).map_or_else(|| x.to_string(), |n| n.to_string())
}

/// A non-negative integer at most `CAP`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct UInt<const CAP: u64>(pub u64);

impl<'de, const CAP: u64> Deserialize<'de> for UInt<CAP> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V<const CAP: u64>;
        impl<const CAP: u64> V<CAP> {
            fn bad<E: de::Error>(found: impl fmt::Display) -> E {
                E::custom(format!("expected an integer in 0..={CAP}, found {found}"))
            }
        }
        impl<const CAP: u64> Visitor<'_> for V<CAP> {
            type Value = UInt<CAP>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                write!(f, "an integer in 0..={CAP}")
            }
            fn visit_u64<E: de::Error>(self, n: u64) -> std::result::Result<Self::Value, E> {
                if n <= CAP {
                    Ok(UInt(n))
                } else {
                    Err(Self::bad(n))
                }
            }
            fn visit_i64<E: de::Error>(self, n: i64) -> std::result::Result<Self::Value, E> {
                u64::try_from(n)
                    .map_err(|_| Self::bad(n))
                    .and_then(|n| self.visit_u64(n))
            }
            fn visit_f64<E: de::Error>(self, x: f64) -> std::result::Result<Self::Value, E> {
                Err(Self::bad(number_text(x)))
            }
        }
        d.deserialize_any(V::<CAP>)
    }
}

impl<const CAP: u64> UInt<CAP> {
    /// The value as a `usize` (caps are chosen to fit).
    pub fn get(self) -> usize {
        usize::try_from(self.0).unwrap_or(usize::MAX)
    }
}

/// A signed integer of magnitude at most `CAP`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct Int<const CAP: i64>(pub i64);

impl<'de, const CAP: i64> Deserialize<'de> for Int<CAP> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V<const CAP: i64>;
        impl<const CAP: i64> V<CAP> {
            fn bad<E: de::Error>(found: impl fmt::Display) -> E {
                E::custom(format!(
                    "expected an integer in -{CAP}..={CAP}, found {found}"
                ))
            }
        }
        impl<const CAP: i64> Visitor<'_> for V<CAP> {
            type Value = Int<CAP>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                write!(f, "an integer in -{CAP}..={CAP}")
            }
            fn visit_i64<E: de::Error>(self, n: i64) -> std::result::Result<Self::Value, E> {
                match n.checked_abs() {
                    Some(m) if m <= CAP => Ok(Int(n)),
                    _ => Err(Self::bad(n)),
                }
            }
            fn visit_u64<E: de::Error>(self, n: u64) -> std::result::Result<Self::Value, E> {
                i64::try_from(n)
                    .map_err(|_| Self::bad(n))
                    .and_then(|n| self.visit_i64(n))
            }
            fn visit_f64<E: de::Error>(self, x: f64) -> std::result::Result<Self::Value, E> {
                Err(Self::bad(number_text(x)))
            }
        }
        d.deserialize_any(V::<CAP>)
    }
}

/// A JSON array of at most [`MAX_RANK`] entries (shapes, axes, strides): longer arrays are
/// counted, not stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct List<T>(pub Vec<T>);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for List<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V<T>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = List<T>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                write!(f, "an array of at most {MAX_RANK} entries")
            }
            fn visit_seq<A: SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> std::result::Result<List<T>, A::Error> {
                let mut out = Vec::new();
                while out.len() < MAX_RANK {
                    match seq.next_element()? {
                        Some(x) => out.push(x),
                        None => return Ok(List(out)),
                    }
                }
                let mut n = out.len();
                while seq.next_element::<IgnoredAny>()?.is_some() {
                    n += 1;
                }
                if n > MAX_RANK {
                    return Err(de::Error::custom(format!(
                        "{n} entries; at most {MAX_RANK} are allowed"
                    )));
                }
                Ok(List(out))
            }
        }
        d.deserialize_seq(V(std::marker::PhantomData))
    }
}

/// Exactly two entries (a 2-D window's `[h, w]`, a distribution's two parameters).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct Pair<T>(pub [T; 2]);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Pair<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let List(v) = List::<T>::deserialize(d)?;
        let n = v.len();
        <[T; 2]>::try_from(v)
            .map(Pair)
            .map_err(|_| de::Error::custom(format!("expected 2 entries ([h, w]), found {n}")))
    }
}

/// An f32 as graph files write it: a number that reads back (as f64 rounded to f32) to the
/// same bits, or `"nan"`, `"inf"`, `"-inf"`. A finite number beyond f32's range is an error
/// rather than infinity.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct F32(pub f32);

impl Serialize for F32 {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let x = self.0;
        if x.is_nan() {
            s.serialize_str("nan")
        } else if x.is_infinite() {
            s.serialize_str(if x > 0.0 { "inf" } else { "-inf" })
        } else {
            // The graph-file formatter writes it short and exact.
            s.serialize_f32(x)
        }
    }
}

impl<'de> Deserialize<'de> for F32 {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        fn bad<E: de::Error>(found: impl fmt::Display) -> E {
            E::custom(format!("{found} is not a valid f32 value"))
        }
        impl Visitor<'_> for V {
            type Value = F32;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an f32 value (a number, \"nan\", \"inf\" or \"-inf\")")
            }
            fn visit_f64<E: de::Error>(self, x: f64) -> std::result::Result<F32, E> {
                let v = x as f32;
                if v.is_finite() {
                    Ok(F32(v))
                } else {
                    Err(bad(number_text(x)))
                }
            }
            fn visit_u64<E: de::Error>(self, n: u64) -> std::result::Result<F32, E> {
                self.visit_f64(n as f64)
            }
            fn visit_i64<E: de::Error>(self, n: i64) -> std::result::Result<F32, E> {
                self.visit_f64(n as f64)
            }
            fn visit_str<E: de::Error>(self, s: &str) -> std::result::Result<F32, E> {
                match s {
                    "nan" => Ok(F32(f32::NAN)),
                    "inf" => Ok(F32(f32::INFINITY)),
                    "-inf" => Ok(F32(f32::NEG_INFINITY)),
                    _ => Err(bad(short(&Value::String(s.to_string())))),
                }
            }
            fn visit_bool<E: de::Error>(self, b: bool) -> std::result::Result<F32, E> {
                Err(bad(b))
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_are_cut_on_character_boundaries_with_the_bytes_left_out() {
        assert_eq!(quote("add"), "'add'");
        let long = "é".repeat(100);
        assert_eq!(
            quote(&long),
            format!("'{}…' (40 more bytes)", "é".repeat(80))
        );
        assert_eq!(cut("abc", 3), ("abc", 0));
        assert_eq!(cut("abcd", 3), ("abc", 1));
    }

    #[test]
    fn serde_messages_keep_short_quotes_and_cut_long_ones() {
        let short_msg = "unknown field `x`, expected one of `a`, `b`";
        assert_eq!(bound_quotes(short_msg), short_msg);
        let a = "a".repeat(1000);
        assert_eq!(
            bound_quotes(&format!("unknown variant `{a}`, expected `b`")),
            format!(
                "unknown variant `{}…` (920 more bytes), expected `b`",
                &a[..80]
            )
        );
        // A Rust-escaped string: an escaped quote does not end it.
        let s = format!("x\\\"{a}");
        let m = bound_quotes(&format!("invalid type: string \"{s}\", expected an array"));
        assert!(
            m.starts_with("invalid type: string \"x\\\"")
                && m.ends_with("…\" (923 more bytes), expected an array"),
            "{m}"
        );
        // An unterminated quote is cut too.
        assert_eq!(
            bound_quotes(&format!("odd `{a}")),
            format!("odd `{}… (920 more bytes)", &a[..80])
        );
    }
}
