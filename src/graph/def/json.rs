//! The JSON side of GraphDef: writing one node per line, and reading with a precise place for
//! every error. The format itself is documented in the parent module.

use super::{
    binary_name, check_declared, err, node_at, op_name, reduce_name, unary_name, GraphDef, NodeDef,
    BINARY, FORMAT, INLINE_MAX, MAX_ELEMENTS, MAX_RANK, REDUCE, UNARY, VERSION,
};
use crate::device::DeviceSpec;
use crate::ops::custom::{CustomElementwise, Invocations, OutputRule, RawWgsl};
use crate::ops::{Custom, Elementwise, Leaf, MatMul, Movement, Nn, Reduce};
use crate::ops::{Expr, Node, Op};
use crate::{DType, HostTensor, Result, Shape};
use serde_json::{Map, Value};
use std::fmt::Write as _;

mod attrs;

use attrs::{parse_new_op, CONCAT};

// ---------------------------------------------------------------- writing

/// JSON text of a definition: one node per line, constants inline or as base64.
pub fn def_to_json(def: &GraphDef) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{{\n  \"format\": \"{FORMAT}\",\n  \"version\": {VERSION},\n  \"nodes\": ["
    );
    for (i, nd) in def.nodes.iter().enumerate() {
        s.push_str("    {");
        let _ = write!(
            s,
            "\"name\": {}, \"op\": {}",
            json_str(&nd.name),
            json_str(op_name(&nd.op))
        );
        if !nd.inputs.is_empty() {
            let list: Vec<String> = nd.inputs.iter().map(|n| json_str(n)).collect();
            let _ = write!(s, ", \"inputs\": [{}]", list.join(", "));
        }
        let _ = write!(
            s,
            ", \"shape\": {}, \"dtype\": \"{}\"",
            usize_list(nd.shape.dims()),
            nd.dtype
        );
        if let Some(d) = nd.device {
            let _ = write!(s, ", \"device\": \"{d}\"");
        }
        match &nd.op {
            Op::Reduce(Reduce { axes, .. }) => {
                let _ = write!(s, ", \"axes\": {}", usize_list(axes));
            }
            Op::Movement(Movement::Permute(perm)) => {
                let _ = write!(s, ", \"perm\": {}", usize_list(perm));
            }
            Op::Leaf(Leaf::Constant(value)) => write_data(&mut s, value),
            Op::Movement(Movement::Strided {
                offset, strides, ..
            }) => {
                let st: Vec<String> = strides.iter().map(i64::to_string).collect();
                let _ = write!(
                    s,
                    ", \"offset\": {offset}, \"strides\": [{}]",
                    st.join(", ")
                );
            }
            Op::Movement(Movement::Concat(axis)) | Op::Movement(Movement::Gather(axis)) => {
                let _ = write!(s, ", \"axis\": {axis}");
            }
            Op::Movement(Movement::Pad { before, value }) => {
                let _ = write!(
                    s,
                    ", \"before\": {}, \"value_bits\": {value}",
                    usize_list(before)
                );
            }
            Op::Nn(Nn::Conv2d { window, groups }) => {
                write_window(&mut s, window);
                let _ = write!(s, ", \"groups\": {groups}");
            }
            Op::Nn(Nn::Pool { window, .. }) => write_window(&mut s, window),
            Op::Random(spec) => {
                let (a, b) = match spec.dist {
                    crate::ops::Distribution::Uniform { low, high } => (low, high),
                    crate::ops::Distribution::Normal { mean, std } => (mean, std),
                };
                let _ = write!(
                    s,
                    ", \"seed\": {}, \"params\": [{}, {}]",
                    spec.seed,
                    f32_json(a),
                    f32_json(b)
                );
            }
            Op::Custom(Custom::Elementwise(c)) => {
                let _ = write!(
                    s,
                    ", \"kernel\": {}, \"expr\": {}",
                    json_str(&c.name),
                    expr_json(&c.expr)
                );
            }
            Op::Custom(Custom::Raw(r)) => {
                let _ = write!(
                    s,
                    ", \"kernel\": {}, \"entry_point\": {}, \"source\": {}",
                    json_str(&r.name),
                    json_str(&r.entry_point),
                    json_str(&r.source)
                );
                if let OutputRule::LikeInput(k) = r.output {
                    let _ = write!(s, ", \"output_like_input\": {k}");
                }
                if let Invocations::Fixed(n) = r.invocations {
                    let _ = write!(s, ", \"invocations\": {n}");
                }
            }
            Op::Leaf(Leaf::Placeholder)
            | Op::Elementwise(Elementwise::Unary(_))
            | Op::Elementwise(Elementwise::Binary(_))
            | Op::Elementwise(Elementwise::Select)
            | Op::Elementwise(Elementwise::Cast(_))
            | Op::MatMul(MatMul)
            | Op::Movement(Movement::Reshape) => {}
        }
        s.push('}');
        if i + 1 < def.nodes.len() {
            s.push(',');
        }
        s.push('\n');
    }
    s.push_str("  ]\n}\n");
    s
}

fn write_window(s: &mut String, w: &crate::ops::Window) {
    let _ = write!(
        s,
        ", \"kernel\": {}, \"stride\": {}, \"padding\": {}, \"dilation\": {}",
        usize_list(&w.kernel),
        usize_list(&w.stride),
        usize_list(&w.padding),
        usize_list(&w.dilation)
    );
}

/// A typed expression as nested JSON arrays (format in the parent module); a shared node is
/// written out at each of its uses.
fn expr_json(e: &Expr) -> String {
    let mut text: Vec<String> = Vec::with_capacity(e.nodes().len());
    for n in e.nodes() {
        let t = match *n {
            Node::Input(i) => format!("[\"in\", {i}]"),
            Node::Lit(d, w) => format!("[\"lit\", \"{d}\", {w}]"),
            Node::Unary(op, a) => format!("[\"unary\", \"{}\", {}]", unary_name(op), text[a]),
            Node::Binary(op, a, b) => format!(
                "[\"binary\", \"{}\", {}, {}]",
                binary_name(op),
                text[a],
                text[b]
            ),
            Node::Select(c, a, b) => {
                format!("[\"where\", {}, {}, {}]", text[c], text[a], text[b])
            }
            Node::Cast(d, a) => format!("[\"cast\", \"{d}\", {}]", text[a]),
        };
        text.push(t);
    }
    text.pop().unwrap_or_default()
}

/// Parse [`expr_json`]'s form; serde_json's recursion limit bounds the depth.
fn parse_expr(v: &Value, at: &str) -> Result<Expr> {
    let bad = |m: &str| err(at, format!("{m}, found {}", short(v)));
    let a = v
        .as_array()
        .ok_or_else(|| bad("expected an expression array"))?;
    let tag = a.first().and_then(Value::as_str).unwrap_or("");
    let word = |k: usize| {
        a.get(k)
            .and_then(Value::as_u64)
            .and_then(|w| u32::try_from(w).ok())
    };
    let dtype = |k: usize| a.get(k).and_then(Value::as_str).and_then(DType::parse);
    let sub = |k: usize| match a.get(k) {
        Some(x) => parse_expr(x, &format!("{at}[{k}]")),
        None => Err(bad("missing operand")),
    };
    let e = match (tag, a.len()) {
        ("in", 2) => Expr::input(
            a[1].as_u64()
                .and_then(|i| usize::try_from(i).ok())
                .ok_or_else(|| bad("expected an input index"))?,
        ),
        ("lit", 3) => {
            let d = dtype(1).ok_or_else(|| bad("unknown literal dtype"))?;
            let w = word(2).ok_or_else(|| bad("expected a 32-bit word"))?;
            if d == DType::Bool && w > 1 {
                return Err(bad("a bool literal's word is 0 or 1"));
            }
            Expr::lit(d, w)
        }
        ("unary", 3) => {
            let name = a[1].as_str().unwrap_or("");
            let op = UNARY
                .iter()
                .find(|u| unary_name(**u) == name)
                .ok_or_else(|| bad("unknown unary op"))?;
            Expr::unary(*op, sub(2)?)
        }
        ("binary", 4) => {
            let name = a[1].as_str().unwrap_or("");
            let op = BINARY
                .iter()
                .find(|b| binary_name(**b) == name)
                .ok_or_else(|| bad("unknown binary op"))?;
            Expr::binary(*op, sub(2)?, sub(3)?)
        }
        ("where", 4) => Expr::select(sub(1)?, sub(2)?, sub(3)?),
        ("cast", 3) => Expr::cast(dtype(1).ok_or_else(|| bad("unknown cast dtype"))?, sub(2)?),
        _ => {
            return Err(bad(
                "expected [\"in\"|\"lit\"|\"unary\"|\"binary\"|\"where\"|\"cast\", ...]",
            ))
        }
    };
    Ok(e)
}

fn json_str(s: &str) -> String {
    Value::String(s.to_string()).to_string()
}

fn usize_list(v: &[usize]) -> String {
    let items: Vec<String> = v.iter().map(usize::to_string).collect();
    format!("[{}]", items.join(", "))
}

fn write_data(s: &mut String, value: &HostTensor) {
    let words = value.words();
    if words.len() > INLINE_MAX {
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        let _ = write!(s, ", \"data_base64\": \"{}\"", base64_encode(&bytes));
        return;
    }
    let items: Vec<String> = words
        .iter()
        .map(|&w| match value.dtype() {
            DType::F32 => f32_json(f32::from_bits(w)),
            DType::F16 => f32_json(f32::from_bits(crate::dtype::f16_to_f32_word(w))),
            DType::I32 => (w as i32).to_string(),
            DType::U32 => w.to_string(),
            DType::Bool => (w != 0).to_string(),
        })
        .collect();
    let _ = write!(s, ", \"data\": [{}]", items.join(", "));
}

/// A float as JSON that reads back (as f64, then rounded to f32) to the same bits.
fn f32_json(x: f32) -> String {
    if x.is_nan() {
        return "\"nan\"".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "\"inf\"" } else { "\"-inf\"" }.into();
    }
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

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Standard base64 with padding.
pub(crate) fn base64_encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for k in 0..4 {
            if k <= chunk.len() {
                out.push(B64[((n >> (18 - 6 * k)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Decode standard base64 with padding; `Err` says what is wrong.
pub(crate) fn base64_decode(text: &str) -> std::result::Result<Vec<u8>, String> {
    let t = text.as_bytes();
    if !t.len().is_multiple_of(4) {
        return Err(format!("base64 length {} is not a multiple of 4", t.len()));
    }
    let mut out = Vec::with_capacity(t.len() / 4 * 3);
    let nchunks = t.len() / 4;
    for (ci, chunk) in t.chunks(4).enumerate() {
        let mut n = 0u32;
        let mut pad = 0;
        for (k, &c) in chunk.iter().enumerate() {
            let v = match c {
                b'A'..=b'Z' => c - b'A',
                b'a'..=b'z' => c - b'a' + 26,
                b'0'..=b'9' => c - b'0' + 52,
                b'+' => 62,
                b'/' => 63,
                b'=' if ci + 1 == nchunks && k >= 2 => {
                    pad += 1;
                    0
                }
                _ => return Err(format!("invalid base64 character at offset {}", ci * 4 + k)),
            };
            if pad > 0 && c != b'=' {
                return Err(format!(
                    "base64 padding at offset {} is not at the end",
                    ci * 4 + k
                ));
            }
            n = (n << 6) | u32::from(v);
        }
        let bytes = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        out.extend_from_slice(&bytes[..3 - pad]);
    }
    Ok(out)
}

// ---------------------------------------------------------------- reading

/// Parse JSON text into a definition, checking everything a file can get wrong locally
/// (fields, types, sizes, constant data); cross-node checks happen in [`Graph::from_def`](crate::Graph::from_def).
pub fn def_from_json(text: &str) -> Result<GraphDef> {
    let root: Value = serde_json::from_str(text).map_err(|e| {
        let full = e.to_string();
        let message = match full.rfind(" at line ") {
            Some(p) => full[..p].to_string(),
            None => full,
        };
        err(
            format!("line {}, column {}", e.line(), e.column()),
            format!("invalid JSON: {message}"),
        )
    })?;
    let obj = root
        .as_object()
        .ok_or_else(|| err("top level", "expected a JSON object"))?;
    check_fields(obj, "top level", &["format", "version", "nodes"])?;
    match obj.get("format") {
        Some(Value::String(f)) if f == FORMAT => {}
        Some(other) => {
            return Err(err(
                "format",
                format!("expected \"{FORMAT}\", found {}", short(other)),
            ))
        }
        None => {
            return Err(err(
                "format",
                format!("missing; a graph file starts with \"format\": \"{FORMAT}\""),
            ))
        }
    }
    match obj.get("version") {
        Some(v) if v.as_u64() == Some(VERSION) => {}
        Some(v) => {
            return Err(err(
                "version",
                format!(
                    "unsupported version {}; this build of wgflow reads version {VERSION}",
                    short(v)
                ),
            ))
        }
        None => return Err(err("version", "missing")),
    }
    let nodes = obj
        .get("nodes")
        .ok_or_else(|| err("nodes", "missing"))?
        .as_array()
        .ok_or_else(|| err("nodes", "expected an array of nodes"))?;
    let nodes = nodes
        .iter()
        .enumerate()
        .map(|(i, v)| parse_node(i, v))
        .collect::<Result<Vec<_>>>()?;
    Ok(GraphDef { nodes })
}

fn short(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() > 40 {
        s.chars().take(40).collect::<String>() + "…"
    } else {
        s
    }
}

fn check_fields(obj: &Map<String, Value>, at: &str, allowed: &[&str]) -> Result<()> {
    for k in obj.keys() {
        if !allowed.contains(&k.as_str()) {
            return Err(err(
                format!("{at}.{k}"),
                format!("unknown field (expected one of: {})", allowed.join(", ")),
            ));
        }
    }
    Ok(())
}

fn parse_node(i: usize, v: &Value) -> Result<NodeDef> {
    let obj = v
        .as_object()
        .ok_or_else(|| err(format!("nodes[{i}]"), "expected an object"))?;
    let name = match obj.get("name") {
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        Some(Value::String(_)) => return Err(err(format!("nodes[{i}].name"), "is empty")),
        Some(other) => {
            return Err(err(
                format!("nodes[{i}].name"),
                format!("expected a string, found {}", short(other)),
            ))
        }
        None => return Err(err(format!("nodes[{i}].name"), "missing")),
    };
    let at = node_at(i, &name);
    let field = |f: &str| format!("{at}.{f}");
    let opname = match obj.get("op") {
        Some(Value::String(s)) => s.as_str(),
        Some(other) => {
            return Err(err(
                field("op"),
                format!("expected a string, found {}", short(other)),
            ))
        }
        None => return Err(err(field("op"), "missing")),
    };
    let shape = Shape(usize_array(obj.get("shape"), &field("shape"), true)?);
    check_declared(&at, &shape)?;
    let dtype = match obj.get("dtype") {
        Some(Value::String(s)) => DType::parse(s).ok_or_else(|| {
            err(
                field("dtype"),
                format!("unknown dtype '{s}' (expected f32, i32, u32 or bool)"),
            )
        })?,
        Some(other) => {
            return Err(err(
                field("dtype"),
                format!("expected a string, found {}", short(other)),
            ))
        }
        None => return Err(err(field("dtype"), "missing")),
    };
    let device = match obj.get("device") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => {
            Some(DeviceSpec::parse(s).map_err(|e| err(field("device"), e.to_string()))?)
        }
        Some(other) => {
            return Err(err(
                field("device"),
                format!(
                    "expected a device spec string such as \"gpu:0\", found {}",
                    short(other)
                ),
            ))
        }
    };
    let inputs = match obj.get("inputs") {
        None => Vec::new(),
        Some(Value::Array(a)) => a
            .iter()
            .enumerate()
            .map(|(k, x)| {
                x.as_str().map(str::to_string).ok_or_else(|| {
                    err(
                        format!("{at}.inputs[{k}]"),
                        format!("expected a node name, found {}", short(x)),
                    )
                })
            })
            .collect::<Result<Vec<_>>>()?,
        Some(other) => {
            return Err(err(
                field("inputs"),
                format!("expected an array of node names, found {}", short(other)),
            ))
        }
    };
    const COMMON: [&str; 6] = ["name", "op", "inputs", "shape", "dtype", "device"];
    let with = |extra: &[&'static str]| -> Vec<&'static str> {
        COMMON.iter().chain(extra).copied().collect()
    };
    let (op, allowed, arity) = if let Some(&u) = UNARY.iter().find(|u| unary_name(**u) == opname) {
        (Op::Elementwise(Elementwise::Unary(u)), with(&[]), 1)
    } else if let Some(&b) = BINARY.iter().find(|b| binary_name(**b) == opname) {
        (Op::Elementwise(Elementwise::Binary(b)), with(&[]), 2)
    } else if let Some(&r) = REDUCE.iter().find(|r| reduce_name(**r) == opname) {
        let axes = usize_array(obj.get("axes"), &field("axes"), false)?;
        (Op::Reduce(Reduce { op: r, axes }), with(&["axes"]), 1)
    } else if let Some(op) = parse_new_op(obj, opname, &field)? {
        let (allowed, arity): (&[&'static str], usize) = match &op {
            Op::Movement(Movement::Strided { .. }) => (&["offset", "strides"], 1),
            Op::Movement(Movement::Concat(_)) => (&["axis"], CONCAT),
            Op::Movement(Movement::Gather(_)) => (&["axis"], 2),
            Op::Movement(Movement::Pad { .. }) => (&["before", "value_bits"], 1),
            Op::Nn(Nn::Conv2d { .. }) => {
                (&["kernel", "stride", "padding", "dilation", "groups"], 2)
            }
            Op::Nn(Nn::Pool { .. }) => (&["kernel", "stride", "padding", "dilation"], 1),
            _ => (&["seed", "params"], 0),
        };
        (op, with(allowed), arity)
    } else {
        match opname {
            "constant" => {
                let value = parse_data(obj, &at, &shape, dtype)?;
                (
                    Op::Leaf(Leaf::Constant(value)),
                    with(&["data", "data_base64"]),
                    0,
                )
            }
            "placeholder" => (Op::Leaf(Leaf::Placeholder), with(&[]), 0),
            "where" => (Op::Elementwise(Elementwise::Select), with(&[]), 3),
            "cast" => (Op::Elementwise(Elementwise::Cast(dtype)), with(&[]), 1),
            "matmul" => (Op::MatMul(MatMul), with(&[]), 2),
            "reshape" => (Op::Movement(Movement::Reshape), with(&[]), 1),
            "transpose" => {
                let perm = usize_array(obj.get("perm"), &field("perm"), false)?;
                (Op::Movement(Movement::Permute(perm)), with(&["perm"]), 1)
            }
            "custom" => {
                let name = string_field(obj, "kernel", &field("kernel"))?;
                let expr = match obj.get("expr") {
                    Some(v) => parse_expr(v, &field("expr"))?,
                    None => return Err(err(field("expr"), "missing")),
                };
                let c = CustomElementwise { name, expr };
                (
                    Op::Custom(Custom::Elementwise(Box::new(c))),
                    with(&["kernel", "expr"]),
                    inputs.len(),
                )
            }
            "raw_wgsl" => {
                let name = string_field(obj, "kernel", &field("kernel"))?;
                let source = string_field(obj, "source", &field("source"))?;
                let entry = string_field(obj, "entry_point", &field("entry_point"))?;
                let output = match obj.get("output_like_input") {
                    None => OutputRule::Fixed(shape.clone(), dtype),
                    Some(v) => OutputRule::LikeInput(
                        v.as_u64()
                            .and_then(|k| usize::try_from(k).ok())
                            .ok_or_else(|| {
                                err(field("output_like_input"), "expected an input index")
                            })?,
                    ),
                };
                let invocations = match obj.get("invocations") {
                    None => Invocations::PerOutputElement,
                    Some(v) => Invocations::Fixed(
                        v.as_u64()
                            .ok_or_else(|| err(field("invocations"), "expected a count"))?,
                    ),
                };
                let r = RawWgsl::new(&name, &source, &entry, output, invocations);
                let extra = [
                    "kernel",
                    "source",
                    "entry_point",
                    "output_like_input",
                    "invocations",
                ];
                (
                    Op::Custom(Custom::Raw(std::sync::Arc::new(r))),
                    with(&extra),
                    inputs.len(),
                )
            }
            other => {
                return Err(err(
                    field("op"),
                    format!(
                        "unknown op '{}'",
                        other.chars().take(40).collect::<String>()
                    ),
                ))
            }
        }
    };
    check_fields(obj, &at, &allowed)?;
    if arity == CONCAT {
        if inputs.len() < 2 {
            return Err(err(
                field("inputs"),
                format!("'{opname}' takes 2 or more inputs, {} given", inputs.len()),
            ));
        }
    } else if inputs.len() != arity {
        return Err(err(
            field("inputs"),
            format!("'{opname}' takes {arity} input(s), {} given", inputs.len()),
        ));
    }
    Ok(NodeDef {
        name,
        op,
        inputs,
        shape,
        dtype,
        device,
    })
}

fn string_field(obj: &Map<String, Value>, key: &str, at: &str) -> Result<String> {
    match obj.get(key) {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(other) => Err(err(
            at,
            format!("expected a string, found {}", short(other)),
        )),
        None => Err(err(at, "missing")),
    }
}

/// A JSON array of non-negative integers; dims (`is_shape`) are capped at [`MAX_ELEMENTS`],
/// axes at [`MAX_RANK`].
fn usize_array(v: Option<&Value>, at: &str, is_shape: bool) -> Result<Vec<usize>> {
    let a = match v {
        Some(Value::Array(a)) => a,
        Some(other) => {
            return Err(err(
                at,
                format!("expected an array of integers, found {}", short(other)),
            ))
        }
        None => return Err(err(at, "missing")),
    };
    if a.len() > MAX_RANK {
        return Err(err(
            at,
            format!("{} entries; at most {MAX_RANK} are allowed", a.len()),
        ));
    }
    let cap = if is_shape { MAX_ELEMENTS } else { MAX_RANK };
    a.iter()
        .enumerate()
        .map(|(k, x)| match x.as_u64() {
            Some(n) if n <= cap as u64 => Ok(n as usize),
            _ => Err(err(
                format!("{at}[{k}]"),
                format!("expected an integer in 0..={cap}, found {}", short(x)),
            )),
        })
        .collect()
}

fn parse_data(
    obj: &Map<String, Value>,
    at: &str,
    shape: &Shape,
    dtype: DType,
) -> Result<HostTensor> {
    // `check_declared` has bounded this, so allocating `n` words is safe.
    let n = shape.numel();
    let words = match (obj.get("data"), obj.get("data_base64")) {
        (Some(_), Some(_)) => {
            return Err(err(
                format!("{at}.data"),
                "give either data or data_base64, not both",
            ))
        }
        (None, None) => {
            return Err(err(
                format!("{at}.data"),
                "missing; a constant needs data or data_base64",
            ))
        }
        (Some(Value::Array(a)), None) => {
            if a.len() != n {
                return Err(err(
                    format!("{at}.data"),
                    format!("{} values but shape {shape} holds {n}", a.len()),
                ));
            }
            a.iter()
                .enumerate()
                .map(|(k, x)| {
                    json_word(x, dtype).ok_or_else(|| {
                        err(
                            format!("{at}.data[{k}]"),
                            format!("{} is not a valid {dtype} value", short(x)),
                        )
                    })
                })
                .collect::<Result<Vec<u32>>>()?
        }
        (Some(other), None) => {
            return Err(err(
                format!("{at}.data"),
                format!("expected an array of values, found {}", short(other)),
            ))
        }
        (None, Some(Value::String(b64))) => {
            let want = (n * 4).div_ceil(3) * 4;
            if b64.len() != want {
                return Err(err(
                    format!("{at}.data_base64"),
                    format!(
                        "{} characters but shape {shape} needs {want} ({n} elements of 4 bytes)",
                        b64.len()
                    ),
                ));
            }
            let bytes = base64_decode(b64).map_err(|m| err(format!("{at}.data_base64"), m))?;
            if bytes.len() != n * 4 {
                return Err(err(
                    format!("{at}.data_base64"),
                    format!("{} bytes but shape {shape} needs {}", bytes.len(), n * 4),
                ));
            }
            let words: Vec<u32> = bytes
                .chunks_exact(4)
                .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect();
            if dtype == DType::Bool {
                if let Some(k) = words.iter().position(|&w| w > 1) {
                    return Err(err(
                        format!("{at}.data_base64"),
                        format!("element {k} is {} but a bool word must be 0 or 1", words[k]),
                    ));
                }
            }
            words
        }
        (None, Some(other)) => {
            return Err(err(
                format!("{at}.data_base64"),
                format!("expected a base64 string, found {}", short(other)),
            ))
        }
    };
    HostTensor::from_words(shape.clone(), dtype, words).map_err(|e| err(at, e.to_string()))
}

fn json_word(x: &Value, dtype: DType) -> Option<u32> {
    match dtype {
        // Written as the f32 of the same value; anything that is not exactly an f16 (or out
        // of its range) is rejected rather than rounded.
        DType::F16 => json_word(x, DType::F32).and_then(|w| {
            let h = crate::dtype::f32_to_f16_word(w);
            let back = crate::dtype::f16_to_f32_word(h);
            let nan = f32::from_bits(w).is_nan();
            (back == w || nan).then_some(h)
        }),
        DType::F32 => match x {
            // A finite number beyond f32's range is rejected rather than read as infinity.
            Value::Number(n) => n
                .as_f64()
                .filter(|v| (*v as f32).is_finite())
                .map(|v| (v as f32).to_bits()),
            Value::String(s) => match s.as_str() {
                "nan" => Some(f32::NAN.to_bits()),
                "inf" => Some(f32::INFINITY.to_bits()),
                "-inf" => Some(f32::NEG_INFINITY.to_bits()),
                _ => None,
            },
            _ => None,
        },
        DType::I32 => x
            .as_i64()
            .and_then(|v| i32::try_from(v).ok())
            .map(|v| v as u32),
        DType::U32 => x.as_u64().and_then(|v| u32::try_from(v).ok()),
        DType::Bool => x.as_bool().map(u32::from),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_round_trips_every_padding() {
        let data: Vec<u8> = (0..=255u8).rev().collect();
        for n in 0..12 {
            let enc = base64_encode(&data[..n]);
            assert_eq!(enc.len(), n.div_ceil(3) * 4);
            assert_eq!(base64_decode(&enc).unwrap(), &data[..n], "{n} bytes");
        }
        // RFC 4648 test vectors.
        assert_eq!(base64_encode(b"foob"), "Zm9vYg==");
        assert_eq!(base64_encode(b"fooba"), "Zm9vYmE=");
        assert_eq!(base64_decode("Zm9vYmFy").unwrap(), b"foobar");
        assert!(base64_decode("Zm9").unwrap_err().contains("multiple of 4"));
        assert!(base64_decode("Zg==Zg==").unwrap_err().contains("offset 2"));
        assert!(base64_decode("Z=9v").unwrap_err().contains("offset 1"));
        assert!(base64_decode("Zm9v\n").is_err());
    }

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
            let s = f32_json(x);
            let back = (s.parse::<f64>().unwrap()) as f32;
            assert_eq!(back.to_bits(), x.to_bits(), "{x} written as {s}");
        }
        assert_eq!(f32_json(0.1), "0.1");
        assert_eq!(f32_json(1.0), "1.0");
        assert_eq!(f32_json(f32::NAN), "\"nan\"");
        assert_eq!(f32_json(f32::NEG_INFINITY), "\"-inf\"");
    }
}
