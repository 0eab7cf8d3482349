//! `Einsum` as transposes, diagonals, sums and batched matmuls: each operand's repeated
//! labels become a diagonal and its private labels a sum, then operands are folded pairwise
//! into `[batch.., M, K] @ [batch.., K, N]` (batch labels kept as matmul batch axes, so a
//! run-time batch or sequence passes through untouched), and the result is transposed to
//! the output's labels.

use super::build::{bad, Cx, Node};
use crate::graph::Dim;
use crate::{DType, Result, Tensor};

/// A label: a letter, or one axis of the ellipsis (numbered from the right).
type Label = u32;
const ELLIPSIS: Label = 1000;

/// One side's terms: `a`-`z`, `A`-`Z` and at most one `...` each.
fn parse_term(term: &str, rank: Option<usize>, ell_rank: usize) -> Result<Vec<Label>> {
    let term = term.trim();
    let letters = term.chars().filter(|c| c.is_ascii_alphabetic()).count();
    let mut out = Vec::new();
    let mut rest = term;
    let mut seen_ellipsis = false;
    while let Some(c) = rest.chars().next() {
        if let Some(r) = rest.strip_prefix("...") {
            if seen_ellipsis {
                return Err(bad(format!("term '{term}' has two ellipses")));
            }
            seen_ellipsis = true;
            let e = match rank {
                Some(rank) => rank.checked_sub(letters).ok_or_else(|| {
                    bad(format!(
                        "term '{term}' has more labels than its operand's rank {rank}"
                    ))
                })?,
                None => ell_rank,
            };
            out.extend((0..e).rev().map(|k| ELLIPSIS + k as Label));
            rest = r;
        } else if c.is_ascii_alphabetic() {
            out.push(c as Label);
            rest = &rest[1..];
        } else if c == ' ' {
            rest = &rest[1..];
        } else {
            return Err(bad(format!("term '{term}' has the character {c:?}")));
        }
    }
    if let Some(rank) = rank {
        if out.len() != rank {
            return Err(bad(format!(
                "term '{term}' names {} axes of an operand of rank {rank}",
                out.len()
            )));
        }
    }
    Ok(out)
}

pub(super) fn einsum(cx: &mut Cx, n: &Node) -> Result<Tensor> {
    let eq = n
        .string("equation")
        .ok_or_else(|| bad("the equation attribute is required"))?;
    let eq: String = eq.chars().filter(|c| !c.is_whitespace()).collect();
    let (lhs, rhs) = match eq.split_once("->") {
        Some((l, r)) => (l, Some(r)),
        None => (eq.as_str(), None),
    };
    let terms: Vec<&str> = lhs.split(',').collect();
    if terms.len() != n.inputs.len() {
        return Err(bad(format!(
            "the equation has {} operands, the node {}",
            terms.len(),
            n.inputs.len()
        )));
    }
    let mut ops: Vec<(Tensor, Vec<Label>)> = Vec::new();
    let mut ell_rank = 0;
    for (i, term) in terms.iter().enumerate() {
        let t = cx.t(n, i)?;
        let labels = parse_term(term, Some(cx.g.dims(t)?.len()), 0)?;
        ell_rank = ell_rank.max(labels.iter().filter(|&&l| l >= ELLIPSIS).count());
        ops.push((t, labels));
    }
    let out: Vec<Label> = match rhs {
        Some(r) => parse_term(r, None, ell_rank)?,
        // Implicit output: the ellipsis, then the labels used once, alphabetically.
        None => {
            let mut once: Vec<Label> = Vec::new();
            let all: Vec<Label> = ops.iter().flat_map(|(_, l)| l.clone()).collect();
            for &l in &all {
                if l < ELLIPSIS && all.iter().filter(|&&m| m == l).count() == 1 {
                    once.push(l);
                }
            }
            once.sort_unstable();
            let mut o: Vec<Label> = (0..ell_rank as Label).rev().map(|k| ELLIPSIS + k).collect();
            o.extend(once);
            o
        }
    };
    let dtype = cx.g.dtype(ops[0].0)?;
    if !dtype.is_numeric() {
        return Err(bad(crate::onnx::wrong_dtype(format!("Einsum of {dtype}"))));
    }
    // Each operand alone: diagonals of repeated labels, sums of labels no one else needs.
    for i in 0..ops.len() {
        let (mut t, mut labels) = ops[i].clone();
        while let Some((p, q)) = repeated(&labels) {
            t = diagonal(cx, t, p, q, dtype)?;
            labels.remove(q);
        }
        let needed = |l: Label, ops: &[(Tensor, Vec<Label>)]| {
            out.contains(&l)
                || ops
                    .iter()
                    .enumerate()
                    .any(|(j, o)| j != i && o.1.contains(&l))
        };
        let private: Vec<usize> = (0..labels.len())
            .filter(|&a| !needed(labels[a], &ops))
            .collect();
        if !private.is_empty() {
            let axes: Vec<isize> = private.iter().map(|&a| a as isize).collect();
            t = cx.g.sum(t, axes, false)?;
            labels = (0..labels.len())
                .filter(|a| !private.contains(a))
                .map(|a| labels[a])
                .collect();
        }
        ops[i] = (t, labels);
    }
    let (mut acc, mut acc_l) = ops[0].clone();
    for i in 1..ops.len() {
        let (b, b_l) = ops[i].clone();
        let later: Vec<Label> = ops[i + 1..].iter().flat_map(|o| o.1.clone()).collect();
        let keep = |l: &Label| out.contains(l) || later.contains(l);
        let batch: Vec<Label> = acc_l
            .iter()
            .copied()
            .filter(|l| b_l.contains(l) && keep(l))
            .collect();
        let contract: Vec<Label> = acc_l
            .iter()
            .copied()
            .filter(|l| b_l.contains(l) && !keep(l))
            .collect();
        let a_only: Vec<Label> = acc_l.iter().copied().filter(|l| !b_l.contains(l)).collect();
        let b_only: Vec<Label> = b_l.iter().copied().filter(|l| !acc_l.contains(l)).collect();
        // All but the last of the left operand's own labels ride as matmul batch axes (the
        // right operand broadcast over them), so they are never merged.
        let extra = a_only.len().saturating_sub(1);
        let (a_batch, a_rows) = a_only.split_at(extra);
        let lead: Vec<Label> = batch.iter().chain(a_batch).copied().collect();
        let a = arrange(cx, acc, &acc_l, &lead, a_rows, &contract)?;
        let mut bm = arrange(cx, b, &b_l, &batch, &contract, &b_only)?;
        for _ in 0..extra {
            bm = cx.g.expand_dims(bm, batch.len() as isize)?;
        }
        let y = cx.g.matmul(a, bm)?;
        // [lead.., M, N] back to one axis per label.
        let (m_dims, n_dims) = (
            dims_of(cx, acc, &acc_l, a_rows)?,
            dims_of(cx, b, &b_l, &b_only)?,
        );
        let mut shape: Vec<Dim> = cx.g.dims(y)?[..lead.len()].to_vec();
        shape.extend(m_dims);
        shape.extend(n_dims);
        acc = if a_rows.len() == 1 && b_only.len() == 1 {
            y
        } else {
            cx.g.reshape_dims(y, shape)?
        };
        acc_l = batch
            .iter()
            .chain(&a_only)
            .chain(&b_only)
            .copied()
            .collect();
    }
    if let Some(l) = out.iter().find(|l| !acc_l.contains(l)) {
        return Err(bad(format!(
            "the output label {} is not in any operand",
            show(*l)
        )));
    }
    if acc_l.len() != out.len() {
        return Err(bad("a label repeats in the output"));
    }
    let perm: Vec<isize> = out
        .iter()
        .map(|l| acc_l.iter().position(|m| m == l).unwrap_or(0) as isize)
        .collect();
    transposed(cx, acc, &perm)
}

/// `t` with its axes in `perm`'s order, unchanged when `perm` is the identity.
fn transposed(cx: &mut Cx, t: Tensor, perm: &[isize]) -> Result<Tensor> {
    if perm.iter().enumerate().all(|(i, &p)| i as isize == p) {
        return Ok(t);
    }
    cx.g.transpose(t, perm)
}

fn show(l: Label) -> String {
    if l >= ELLIPSIS {
        "...".into()
    } else {
        char::from_u32(l).map_or_else(|| l.to_string(), String::from)
    }
}

/// The first label at two axes `(p, q)`, `p < q`.
fn repeated(labels: &[Label]) -> Option<(usize, usize)> {
    (0..labels.len()).find_map(|q| (0..q).find(|&p| labels[p] == labels[q]).map(|p| (p, q)))
}

/// The diagonal over axes `p < q` (kept at `p`, `q` dropped): the tensor times an identity
/// on those axes, summed over `q`.
fn diagonal(cx: &mut Cx, t: Tensor, p: usize, q: usize, dtype: DType) -> Result<Tensor> {
    let dims = cx.g.dims(t)?;
    let (Some(dp), Some(dq)) = (dims[p].known(), dims[q].known()) else {
        return Err(bad(crate::onnx::unsupported(
            "the diagonal of a run-time dimension is unsupported",
        )));
    };
    if dp != dq {
        return Err(bad(format!("a repeated label spans sizes {dp} and {dq}")));
    }
    let eye = cx.g.eye(dp, dq, 0, dtype)?;
    let mut shape = vec![1isize; dims.len()];
    shape[p] = dp as isize;
    shape[q] = dq as isize;
    let eye = cx.g.reshape(eye, &shape)?;
    let masked = cx.g.mul(t, eye)?;
    cx.g.sum(masked, q as isize, false)
}

/// The dimensions of `labels`' axes in `t`.
fn dims_of(cx: &Cx, t: Tensor, all: &[Label], labels: &[Label]) -> Result<Vec<Dim>> {
    let dims = cx.g.dims(t)?;
    Ok(labels
        .iter()
        .filter_map(|l| all.iter().position(|m| m == l))
        .map(|a| dims[a].clone())
        .collect())
}

/// `t` as `[batch.., rows, cols]`: transposed to that label order, then the row and column
/// groups each merged into one axis (a group of none is an axis of 1).
fn arrange(
    cx: &mut Cx,
    t: Tensor,
    labels: &[Label],
    batch: &[Label],
    rows: &[Label],
    cols: &[Label],
) -> Result<Tensor> {
    let order: Vec<Label> = batch.iter().chain(rows).chain(cols).copied().collect();
    let perm: Vec<isize> = order
        .iter()
        .map(|l| labels.iter().position(|m| m == l).unwrap_or(0) as isize)
        .collect();
    let t = transposed(cx, t, &perm)?;
    if rows.len() == 1 && cols.len() == 1 {
        return Ok(t);
    }
    let dims = cx.g.dims(t)?;
    let merge = |ds: &[Dim]| -> Result<Dim> {
        if let [d] = ds {
            return Ok(d.clone());
        }
        let mut n = 1usize;
        for d in ds {
            n *= d.known().ok_or_else(|| {
                bad(format!(
                    "Einsum merges the run-time dimension {d} with others; pin it (--dim {d}=SIZE)"
                ))
            })?;
        }
        Ok(Dim::from(n))
    };
    let (nb, nr) = (batch.len(), rows.len());
    let mut shape: Vec<Dim> = dims[..nb].to_vec();
    shape.push(merge(&dims[nb..nb + nr])?);
    shape.push(merge(&dims[nb + nr..])?);
    cx.g.reshape_dims(t, shape)
}
