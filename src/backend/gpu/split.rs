//! Tensors larger than one storage binding (`max_storage_buffer_binding_size`, 128 MiB on
//! lavapipe and llvmpipe) are bound as several consecutive windows of the same buffer. A
//! generated kernel indexes each binding as `NAME[i]` (loads) and `NAME[i] = v` (stores);
//! [`split_bindings`] rewrites those into accessor functions that pick the window holding
//! element `i`, so every kernel kind works on any tensor that fits in a buffer without
//! knowing about windows.

use crate::{Error, Result};

/// One binding to split: its index, the element count of every window but the last, and
/// the binding index of its second window (the rest follow consecutively).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Split {
    pub binding: usize,
    pub window_elems: u64,
    pub windows: usize,
    pub first_extra: usize,
}

/// Bytes of one element of a storage array of WGSL type `t`.
pub fn element_bytes(t: &str) -> Option<u64> {
    let scalar = |s: &str| match s {
        "f32" | "i32" | "u32" => Some(4),
        "f16" => Some(2),
        _ => None,
    };
    match t.strip_prefix("vec4<").and_then(|r| r.strip_suffix('>')) {
        Some(inner) => scalar(inner).map(|b| 4 * b),
        None => scalar(t),
    }
}

/// The name and element type of `@binding(index)` in `wgsl`, declared as
/// `var<storage, read_write> NAME: array<T>;`.
pub fn binding_decl(wgsl: &str, index: usize) -> Option<(String, String)> {
    let tag = format!("@binding({index}) var<storage, read_write> ");
    let line = wgsl.lines().find(|l| l.contains(&tag))?;
    let rest = &line[line.find(&tag)? + tag.len()..];
    let (name, ty) = rest.split_once(':')?;
    let ty = ty.trim().strip_prefix("array<")?.strip_suffix(">;")?;
    Some((name.trim().to_string(), ty.to_string()))
}

/// `wgsl` with each split binding declared once per window and every `NAME[i]` load or
/// `NAME[i] = v;` store going through `wgf_NAME_get(i)` / `wgf_NAME_set(i, v)`.
pub fn split_bindings(wgsl: &str, splits: &[Split]) -> Result<String> {
    let mut out = wgsl.to_string();
    let mut helpers = String::new();
    for s in splits {
        let (name, ty) = binding_decl(&out, s.binding).ok_or_else(|| {
            Error::Internal(format!("binding {} is not a storage array", s.binding))
        })?;
        if out.contains(&format!("arrayLength(&{name})")) {
            return Err(Error::Internal(format!(
                "binding '{name}' uses arrayLength and cannot be split"
            )));
        }
        let decl = format!(
            "@group(0) @binding({}) var<storage, read_write> {name}: array<{ty}>;",
            s.binding
        );
        let mut decls = Vec::new();
        for w in 0..s.windows {
            let b = if w == 0 {
                s.binding
            } else {
                s.first_extra + w - 1
            };
            decls.push(format!(
                "@group(0) @binding({b}) var<storage, read_write> {name}_w{w}: array<{ty}>;"
            ));
        }
        out = out.replacen(&decl, &decls.join("\n"), 1);
        out = rewrite_accesses(&out, &name)?;
        let p = s.window_elems;
        let mut get = format!("fn wgf_{name}_get(i: u32) -> {ty} {{\n");
        let mut set = format!("fn wgf_{name}_set(i: u32, v: {ty}) {{\n");
        for w in 0..s.windows {
            let lo = p * w as u64;
            if w + 1 < s.windows {
                get.push_str(&format!(
                    "    if (i < {}u) {{ return {name}_w{w}[i - {lo}u]; }}\n",
                    lo + p
                ));
                set.push_str(&format!(
                    "    if (i < {}u) {{ {name}_w{w}[i - {lo}u] = v; return; }}\n",
                    lo + p
                ));
            } else {
                get.push_str(&format!("    return {name}_w{w}[i - {lo}u];\n"));
                set.push_str(&format!("    {name}_w{w}[i - {lo}u] = v;\n"));
            }
        }
        get.push_str("}\n");
        set.push_str("}\n");
        helpers.push_str(&get);
        helpers.push_str(&set);
    }
    // Helpers go after the declarations (WGSL allows any order of module-scope items).
    out.push('\n');
    out.push_str(&helpers);
    Ok(out)
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// Rewrite `name[idx]` loads and `name[idx] = value;` stores.
fn rewrite_accesses(src: &str, name: &str) -> Result<String> {
    let b = src.as_bytes();
    let pat = format!("{name}[");
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    while i < b.len() {
        if src[i..].starts_with("//") {
            // Comments may show `out[i] = ...` too; copy them as they are.
            let end = src[i..].find('\n').map_or(b.len(), |e| i + e);
            out.push_str(&src[i..end]);
            i = end;
            continue;
        }
        let here = src[i..].starts_with(&pat) && (i == 0 || !is_ident(b[i - 1]));
        if !here {
            let c = src[i..].chars().next().unwrap_or(' ');
            out.push(c);
            i += c.len_utf8();
            continue;
        }
        let open = i + name.len();
        let close = matching(b, open, b'[', b']')
            .ok_or_else(|| Error::Internal(format!("unbalanced index of '{name}'")))?;
        let idx = rewrite_accesses(&src[open + 1..close], name)?;
        let mut j = close + 1;
        while j < b.len() && b[j] == b' ' {
            j += 1;
        }
        let store = j < b.len() && b[j] == b'=' && b.get(j + 1) != Some(&b'=');
        if store {
            let end = statement_end(b, j + 1)
                .ok_or_else(|| Error::Internal(format!("unterminated store to '{name}'")))?;
            let value = rewrite_accesses(src[j + 1..end].trim(), name)?;
            out.push_str(&format!("wgf_{name}_set({idx}, {value})"));
            i = end;
        } else {
            out.push_str(&format!("wgf_{name}_get({idx})"));
            i = close + 1;
        }
    }
    Ok(out)
}

/// Index of the bracket closing the one at `open`.
fn matching(b: &[u8], open: usize, l: u8, r: u8) -> Option<usize> {
    let mut depth = 0usize;
    for (k, &c) in b.iter().enumerate().skip(open) {
        if c == l {
            depth += 1;
        } else if c == r {
            depth -= 1;
            if depth == 0 {
                return Some(k);
            }
        }
    }
    None
}

/// Index of the `;` ending the statement that continues at `from` (outside any brackets).
fn statement_end(b: &[u8], from: usize) -> Option<usize> {
    let mut depth = 0i32;
    for (k, &c) in b.iter().enumerate().skip(from) {
        match c {
            b'(' | b'[' => depth += 1,
            b')' | b']' => depth -= 1,
            b';' if depth == 0 => return Some(k),
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loads_and_stores_go_through_accessors() {
        let src = "@group(0) @binding(0) var<storage, read_write> in0: array<f32>;\n\
                   @group(0) @binding(1) var<storage, read_write> out: array<vec4<f32>>;\n\
                   // out[i] = f(in0[i]) in a comment stays\n\
                   fn main() { let x = in0[in0[2u] + 1u] * xin0[3]; out[o] = vec4<f32>(x, in0[o], 0.0, f(a[1], 2)); }";
        let s = split_bindings(
            src,
            &[
                Split {
                    binding: 0,
                    window_elems: 100,
                    windows: 3,
                    first_extra: 2,
                },
                Split {
                    binding: 1,
                    window_elems: 25,
                    windows: 2,
                    first_extra: 4,
                },
            ],
        )
        .unwrap();
        assert!(
            s.contains("let x = wgf_in0_get(wgf_in0_get(2u) + 1u) * xin0[3];"),
            "{s}"
        );
        assert!(
            s.contains("wgf_out_set(o, vec4<f32>(x, wgf_in0_get(o), 0.0, f(a[1], 2)));"),
            "{s}"
        );
        assert!(s.contains("@binding(3) var<storage, read_write> in0_w2: array<f32>;"));
        assert!(s.contains("@binding(4) var<storage, read_write> out_w1: array<vec4<f32>>;"));
        assert!(
            s.contains("if (i < 200u) { return in0_w1[i - 100u]; }"),
            "{s}"
        );
    }
}
