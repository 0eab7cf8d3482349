//! The JSON side of GraphDef: the file envelope and a node's common fields, through serde.
//! Writing puts one node per line (its attributes come from the op's family,
//! [`Family::write_attrs`](crate::ops::Family::write_attrs)); reading gives every error a
//! precise place and dispatches the attributes to the families by op name ([`Op::read`]).
//! The format itself is documented in the parent module.

use super::attrs::{located, quote, short, List, NodeIn, NodeOut};
use super::{
    check_declared, err, needs_version, node_at, GraphDef, NodeDef, FORMAT, MAX_ELEMENTS,
    RUN_TIME_DIMS_VERSION, STATELESS_VERSION, VERSION,
};
use crate::device::DeviceSpec;
use crate::graph::Dim;
use crate::ops::{Arity, Op};
use crate::{DType, Error, Result, Shape};
use serde::de::{DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde::{de, Deserialize, Deserializer, Serialize};
use serde_json::error::Category;
use serde_json::{Map, Value};
use std::fmt;
use std::io;

// ---------------------------------------------------------------- writing

/// serde_json's compact layout with a space after `,` and `:`, and f32 values written
/// short and bit-exact.
struct FileFormatter;

impl serde_json::ser::Formatter for FileFormatter {
    fn begin_array_value<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> io::Result<()> {
        if first {
            Ok(())
        } else {
            w.write_all(b", ")
        }
    }

    fn begin_object_key<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> io::Result<()> {
        self.begin_array_value(w, first)
    }

    fn begin_object_value<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        w.write_all(b": ")
    }

    fn write_f32<W: ?Sized + io::Write>(&mut self, w: &mut W, x: f32) -> io::Result<()> {
        w.write_all(f32_text(x).as_bytes())
    }
}

/// A finite float as JSON that reads back (as f64, then rounded to f32) to the same bits.
fn f32_text(x: f32) -> String {
    let short = format!("{x:?}");
    if short
        .parse::<f64>()
        .is_ok_and(|v| (v as f32).to_bits() == x.to_bits())
    {
        short
    } else {
        format!("{:?}", x as f64)
    }
}

/// `value` as graph-file JSON text (one line).
pub(super) fn to_text<T: Serialize + ?Sized>(value: &T) -> Result<String> {
    let mut buf = Vec::new();
    let mut ser = serde_json::Serializer::with_formatter(&mut buf, FileFormatter);
    value
        .serialize(&mut ser)
        .map_err(|e| Error::Internal(format!("cannot write a graph file: {e}")))?;
    String::from_utf8(buf).map_err(|e| Error::Internal(e.to_string()))
}

/// A node's common fields, in file order.
#[derive(Serialize)]
struct CommonOut<'a> {
    name: &'a str,
    op: &'a str,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    inputs: &'a [String],
    shape: Vec<DimOut>,
    dtype: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    device: Option<String>,
}

/// A `shape` entry: a size, or (version 3) a run-time dimension's name or product.
#[derive(Serialize)]
#[serde(untagged)]
enum DimOut {
    Size(usize),
    Name(String),
}

/// One node as a line of JSON: the common fields, then the family's attributes.
fn node_line(i: usize, nd: &NodeDef) -> Result<String> {
    let family = nd.op.family();
    let mut text = to_text(&CommonOut {
        name: &nd.name,
        op: family.name(),
        inputs: &nd.inputs,
        shape: match &nd.dims {
            None => nd.shape.dims().iter().map(|&d| DimOut::Size(d)).collect(),
            Some(dims) => dims
                .iter()
                .map(|d| match d {
                    crate::graph::Dim::Known(n) => DimOut::Size(*n),
                    other => DimOut::Name(other.to_string()),
                })
                .collect(),
        },
        dtype: nd.dtype.to_string(),
        device: nd.device.map(|d| d.to_string()),
    })?;
    let mut attrs = NodeOut::default();
    family.write_attrs(&mut attrs).map_err(|e| match e {
        Error::GraphDef { at, message } if at.is_empty() => err(node_at(i, &nd.name), message),
        other => other,
    })?;
    text.pop(); // the closing brace
    text.push_str(&attrs.text);
    text.push('}');
    Ok(text)
}

/// The text of an op's attributes, for messages.
pub(super) fn attrs_text(op: &Op) -> String {
    let mut out = NodeOut::default();
    match op.family().write_attrs(&mut out) {
        Ok(()) if out.text.is_empty() => "no attributes".into(),
        Ok(()) => {
            let text = out.text.trim_start_matches(", ");
            match text.char_indices().nth(200) {
                Some((cut, _)) => format!("{}…", &text[..cut]),
                None => text.to_string(),
            }
        }
        Err(e) => e.to_string(),
    }
}

/// JSON text of a definition: one node per line, constants inline or as base64.
pub fn def_to_json(def: &GraphDef) -> Result<String> {
    let version = def.version();
    let mut s =
        format!("{{\n  \"format\": \"{FORMAT}\",\n  \"version\": {version},\n  \"nodes\": [\n");
    for (i, nd) in def.nodes.iter().enumerate() {
        s.push_str("    ");
        s.push_str(&node_line(i, nd)?);
        if i + 1 < def.nodes.len() {
            s.push(',');
        }
        s.push('\n');
    }
    s.push_str("  ]\n}\n");
    Ok(s)
}

// ---------------------------------------------------------------- reading

/// The file envelope; each field is checked by hand for a precise message.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Envelope {
    format: Option<Value>,
    version: Option<Value>,
    nodes: Option<Value>,
}

/// Parse JSON text into a definition, checking everything a file can get wrong locally
/// (fields, types, sizes, constant data); cross-node checks happen in [`Graph::from_def`](crate::Graph::from_def).
pub fn def_from_json(text: &str) -> Result<GraphDef> {
    let root = parse(text).map_err(|e| {
        let full = e.to_string();
        let message = match full.rfind(" at line ") {
            Some(p) => full[..p].to_string(),
            None => full,
        };
        // A repeated key is the one data error parsing gives; the rest are syntax.
        let message = match e.classify() {
            Category::Data => message,
            _ => format!("invalid JSON: {message}"),
        };
        err(format!("line {}, column {}", e.line(), e.column()), message)
    })?;
    if !root.is_object() {
        return Err(err("top level", "expected a JSON object"));
    }
    let env: Envelope =
        serde_path_to_error::deserialize(&root).map_err(|e| located("top level", e, 0))?;
    match env.format {
        Some(Value::String(f)) if f == FORMAT => {}
        Some(other) => {
            return Err(err(
                "format",
                format!("expected \"{FORMAT}\", found {}", short(&other)),
            ))
        }
        None => {
            return Err(err(
                "format",
                format!("missing; a graph file starts with \"format\": \"{FORMAT}\""),
            ))
        }
    }
    let version = match env.version {
        Some(v) => match v.as_u64() {
            Some(n) if (STATELESS_VERSION..=VERSION).contains(&n) => n,
            _ => {
                return Err(err(
                    "version",
                    format!(
                        "unsupported version {}; this build of wgflow reads versions {STATELESS_VERSION} to {VERSION}",
                        short(&v)
                    ),
                ))
            }
        },
        None => return Err(err("version", "missing")),
    };
    let nodes = match env.nodes {
        Some(Value::Array(nodes)) => nodes,
        Some(_) => return Err(err("nodes", "expected an array of nodes")),
        None => return Err(err("nodes", "missing")),
    };
    let nodes = nodes
        .iter()
        .enumerate()
        .map(|(i, v)| read_node(i, v))
        .collect::<Result<Vec<_>>>()?;
    // A file says which version it needs, so an older build rejects it at the top rather
    // than at an unknown op; a node newer than its file's version is an error too.
    if let Some((i, nd)) = nodes
        .iter()
        .enumerate()
        .find(|(_, nd)| nd.dims.is_some() && version < RUN_TIME_DIMS_VERSION)
    {
        return Err(err(
            format!("{}.shape", node_at(i, &nd.name)),
            format!("dimensions known only at run time need \"version\": {RUN_TIME_DIMS_VERSION} (the file says {version})"),
        ));
    }
    if let Some((i, nd)) = nodes
        .iter()
        .enumerate()
        .find(|(_, nd)| needs_version(&nd.op) > version)
    {
        return Err(err(
            format!("{}.op", node_at(i, &nd.name)),
            format!(
                "'{}' nodes need \"version\": {} (the file says {version})",
                nd.op.name(),
                needs_version(&nd.op)
            ),
        ));
    }
    Ok(GraphDef { nodes })
}

/// The JSON text of a graph file as a [`Value`], rejecting a key repeated in any object.
/// (serde_json's own `Value` keeps the last of repeated keys silently, and a derived struct
/// may take either, so a file could say two things at once; the format has one meaning per
/// file.) The parser is serde_json's, with its syntax errors and its nesting limit (128).
fn parse(text: &str) -> serde_json::Result<Value> {
    let mut de = serde_json::Deserializer::from_str(text);
    let root = Checked(&Place::Top).deserialize(&mut de)?;
    de.end()?;
    Ok(root)
}

/// Where a value sits in the file, for the message about a repeated key: a chain up to
/// the top level, built on the stack as parsing descends (nothing is stored per value).
enum Place<'a> {
    Top,
    Key(&'a Place<'a>, &'a str),
    Index(&'a Place<'a>, usize),
}

impl fmt::Display for Place<'_> {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            Place::Top => f.write_str("the top-level object"),
            Place::Key(up, key) => {
                if !matches!(up, Place::Top) {
                    write!(f, "{up}.")?;
                }
                // A key in a place is cut like a node's name (`nodes[3] 'aaaa…'`).
                match super::attrs::cut(key, 64) {
                    (key, 0) => f.write_str(key),
                    (head, _) => write!(f, "{head}…"),
                }
            }
            Place::Index(Place::Top, i) => write!(f, "[{i}]"),
            Place::Index(up, i) => write!(f, "{up}[{i}]"),
        }
    }
}

/// Deserializes one JSON value as serde_json's `Value` does, but an object with a repeated
/// key is an error naming the key and the object.
struct Checked<'a>(&'a Place<'a>);

impl<'de> DeserializeSeed<'de> for Checked<'_> {
    type Value = Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> std::result::Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Checked<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E: de::Error>(self, b: bool) -> std::result::Result<Value, E> {
        Ok(Value::Bool(b))
    }
    fn visit_i64<E: de::Error>(self, n: i64) -> std::result::Result<Value, E> {
        Ok(Value::from(n))
    }
    fn visit_u64<E: de::Error>(self, n: u64) -> std::result::Result<Value, E> {
        Ok(Value::from(n))
    }
    fn visit_f64<E: de::Error>(self, x: f64) -> std::result::Result<Value, E> {
        // As serde_json's `Value` does (JSON numbers are finite, so this is always a number).
        Ok(serde_json::Number::from_f64(x).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E: de::Error>(self, s: &str) -> std::result::Result<Value, E> {
        Ok(Value::String(s.to_string()))
    }
    fn visit_string<E: de::Error>(self, s: String) -> std::result::Result<Value, E> {
        Ok(Value::String(s))
    }
    fn visit_unit<E: de::Error>(self) -> std::result::Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<Value, A::Error> {
        let mut out = Vec::new();
        while let Some(v) = seq.next_element_seed(Checked(&Place::Index(self.0, out.len())))? {
            out.push(v);
        }
        Ok(Value::Array(out))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            // Checked before the value is read, so the error's line and column are the key's.
            if out.contains_key(&key) {
                return Err(de::Error::custom(format!(
                    "duplicate key {} in {}; a key may appear once per object",
                    quote(&key),
                    self.0
                )));
            }
            let v = map.next_value_seed(Checked(&Place::Key(self.0, &key)))?;
            out.insert(key, v);
        }
        Ok(Value::Object(out))
    }
}

/// A node's common fields as read; the rest are the op's attributes.
#[derive(Deserialize)]
struct CommonIn {
    op: String,
    #[serde(default)]
    inputs: Vec<String>,
    shape: List<DimIn>,
    #[serde(deserialize_with = "dtype")]
    dtype: DType,
    #[serde(default, deserialize_with = "device")]
    device: Option<DeviceSpec>,
    #[serde(flatten)]
    attrs: Map<String, Value>,
}

/// A `shape` entry as read: a size, or a run-time dimension (`"batch"`, `"784*batch"`).
enum DimIn {
    Size(usize),
    Dim(Dim),
}

/// The longest run-time dimension text a file may hold.
const DIM_TEXT_MAX: usize = 256;

impl<'de> Deserialize<'de> for DimIn {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        match Value::deserialize(d)? {
            Value::Number(n) => match n.as_u64() {
                Some(v) if v <= MAX_ELEMENTS as u64 => Ok(DimIn::Size(v as usize)),
                _ => Err(de::Error::custom(format!(
                    "expected an integer in 0..={MAX_ELEMENTS}, found {n} (or a run-time dimension's name)"
                ))),
            },
            Value::String(s) => parse_dim(&s).map(DimIn::Dim).map_err(de::Error::custom),
            other => Err(de::Error::custom(format!(
                "expected an integer in 0..={MAX_ELEMENTS}, found {} (or a run-time dimension's name)",
                short(&other)
            ))),
        }
    }
}

/// `batch` or `784*batch*seq`: a known factor and names of run-time dimensions.
fn parse_dim(s: &str) -> std::result::Result<Dim, String> {
    if s.len() > DIM_TEXT_MAX {
        return Err(format!(
            "a run-time dimension {} is longer than {DIM_TEXT_MAX} bytes",
            quote(s)
        ));
    }
    let mut factor: usize = 1;
    let mut names = Vec::new();
    for part in s.split('*') {
        if let Ok(n) = part.parse::<usize>() {
            factor = factor
                .checked_mul(n)
                .filter(|&f| f <= MAX_ELEMENTS)
                .ok_or_else(|| format!("dimension {} is too large", quote(s)))?;
            continue;
        }
        let ok = part
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && part
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "_.-/:".contains(c));
        if !ok {
            return Err(format!(
                "{} is not a run-time dimension (a name such as \"batch\", or a product such as \"784*batch\")",
                quote(s)
            ));
        }
        names.push(part.to_string());
    }
    Ok(match (factor, names.len()) {
        (_, 0) => Dim::Known(factor),
        (1, 1) => Dim::Named(names.remove(0)),
        _ => Dim::Product(factor, names),
    })
}

fn dtype<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<DType, D::Error> {
    let s = String::deserialize(d)?;
    DType::parse(&s).ok_or_else(|| {
        de::Error::custom(format!(
            "unknown dtype {} (expected f32, f16, i32, u32 or bool)",
            quote(&s)
        ))
    })
}

fn device<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Option<DeviceSpec>, D::Error> {
    match Option::<String>::deserialize(d)? {
        None => Ok(None),
        Some(s) => DeviceSpec::parse(&s).map(Some).map_err(|e| {
            // The device error repeats the spec whole; quote it bounded instead.
            let message = match e {
                Error::Device { message, .. } => message,
                other => other.to_string(),
            };
            de::Error::custom(format!("device {}: {message}", quote(&s)))
        }),
    }
}

/// The node's name, before anything else: every later error names the node.
fn node_name(i: usize, v: &Value) -> Result<&str> {
    let obj = v
        .as_object()
        .ok_or_else(|| err(format!("nodes[{i}]"), "expected an object"))?;
    let at = format!("nodes[{i}].name");
    match obj.get("name") {
        Some(Value::String(s)) if !s.is_empty() => Ok(s),
        Some(Value::String(_)) => Err(err(at, "is empty")),
        Some(other) => Err(err(
            at,
            format!("expected a string, found {}", short(other)),
        )),
        None => Err(err(at, "missing")),
    }
}

fn read_node(i: usize, v: &Value) -> Result<NodeDef> {
    let name = node_name(i, v)?;
    let at = node_at(i, name);
    let mut c: CommonIn = serde_path_to_error::deserialize(v).map_err(|e| located(&at, e, 0))?;
    let run_time = c.shape.0.iter().any(|d| matches!(d, DimIn::Dim(_)));
    let dims: Option<Vec<Dim>> = run_time.then(|| {
        c.shape
            .0
            .iter()
            .map(|d| match d {
                DimIn::Size(n) => Dim::Known(*n),
                DimIn::Dim(d) => d.clone(),
            })
            .collect()
    });
    // The families read a stand-in shape: a run-time dimension counts as 1.
    let shape = Shape(
        c.shape
            .0
            .iter()
            .map(|d| match d {
                DimIn::Size(n) => *n,
                DimIn::Dim(_) => 1,
            })
            .collect(),
    );
    check_declared(&at, &shape)?;
    // Read already (it names the node); the flattened map caught it.
    c.attrs.remove("name");
    let attrs = Value::Object(c.attrs);
    let node = NodeIn {
        op: &c.op,
        shape: &shape,
        dtype: c.dtype,
        at: &at,
        attrs: &attrs,
    };
    let op = Op::read(&node)?;
    let arity = op.family().arity();
    if !arity.admits(c.inputs.len()) {
        let takes = match arity {
            Arity::AtLeast(k) => format!("{k} or more inputs"),
            other => format!("{other} input(s)"),
        };
        return Err(node.error(
            "inputs",
            format!("{} takes {takes}, {} given", quote(&c.op), c.inputs.len()),
        ));
    }
    Ok(NodeDef {
        name: name.to_string(),
        op,
        inputs: c.inputs,
        shape,
        dims,
        dtype: c.dtype,
        device: c.device,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_are_written_short_and_read_back_exactly() {
        for x in [
            0.1f32,
            1.0 / 3.0,
            -0.0,
            1e-45,
            f32::MAX,
            16777216.0,
            2.5e-38,
        ] {
            let s = f32_text(x);
            let back = (s.parse::<f64>().unwrap()) as f32;
            assert_eq!(back.to_bits(), x.to_bits(), "{x} written as {s}");
        }
        assert_eq!(f32_text(0.1), "0.1");
        assert_eq!(f32_text(1.0), "1.0");
        use super::super::attrs::F32;
        let list = [F32(f32::NAN), F32(f32::NEG_INFINITY), F32(0.1)];
        assert_eq!(to_text(&list).unwrap(), "[\"nan\", \"-inf\", 0.1]");
    }
}
