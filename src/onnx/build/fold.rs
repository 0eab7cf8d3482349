//! A convolution and the inference `BatchNormalization` that alone reads it, folded into
//! one convolution at import.

use super::Cx;
use crate::onnx::proto::{GraphProto, NodeProto};
use crate::onnx::tensor::HostValue;
use crate::HostTensor;
use std::collections::HashMap;

/// What the node loop does with a node that takes part in a convolution + batch
/// normalization pair (see [`batch_norm_folds`]).
pub(super) enum Fold {
    /// A `Conv` whose only reader is the `BatchNormalization` node at this index.
    Conv(usize),
    /// That `BatchNormalization`: translated with its convolution, not on its own.
    Skip,
}

/// Inference-mode `BatchNormalization` nodes that read only a `Conv`'s output, where the
/// convolution's weights and bias and the normalization's statistics are constant
/// initializers (not trainable): the pair becomes one convolution with scaled weights and a
/// shifted bias, as onnxruntime's optimizer does, so the graph runs no normalization at all.
/// The pair must be adjacent in the node list (as exporters write it), so no node between
/// them could read the normalization's output early.
pub(super) fn batch_norm_folds(cx: &Cx, graph: &GraphProto) -> HashMap<usize, Fold> {
    let mut readers: HashMap<&str, usize> = HashMap::new();
    for n in &graph.node {
        for i in n.input.iter().filter(|i| !i.is_empty()) {
            *readers.entry(i.as_str()).or_default() += 1;
        }
    }
    for o in &graph.output {
        *readers.entry(o.name.as_deref().unwrap_or("")).or_default() += 1;
    }
    let plain = |n: &NodeProto| matches!(n.domain.as_deref().unwrap_or(""), "" | "ai.onnx");
    // Trainable initializers stay variables; whether the rest are constant is known only
    // when the convolution is reached (a weight may be computed, e.g. by ConstantOfShape).
    let fixed = |name: &str| !cx.weights.contains(name);
    let mut folds = HashMap::new();
    for (i, pair) in graph.node.windows(2).enumerate() {
        let (conv, bn) = (&pair[0], &pair[1]);
        let training = bn
            .attribute
            .iter()
            .any(|a| a.name.as_deref() == Some("training_mode") && a.i.unwrap_or(0) != 0);
        let ok = plain(conv)
            && plain(bn)
            && conv.op_type.as_deref() == Some("Conv")
            && bn.op_type.as_deref() == Some("BatchNormalization")
            && conv.output.len() == 1
            && bn.output.len() == 1
            && !training
            && bn.input.len() == 5
            && bn.input[0] == conv.output[0]
            && readers.get(conv.output[0].as_str()) == Some(&1)
            && conv.input.len() >= 2
            && conv.input.iter().skip(1).all(|n| n.is_empty() || fixed(n))
            && bn.input[1..].iter().all(|n| fixed(n));
        if ok {
            folds.insert(i, Fold::Conv(i + 1));
            folds.insert(i + 1, Fold::Skip);
        }
    }
    folds
}

/// `conv` with weights `W·scale[o]` and bias `(B - mean)·scale + beta`, where
/// `scale = gamma / sqrt(var + eps)` (in float64, rounded once), writing `bn`'s output;
/// `None` when the values do not fit that form (the pair is then translated as it is).
pub(super) fn fold_batch_norm(cx: &mut Cx, conv: &NodeProto, bn: &NodeProto) -> Option<NodeProto> {
    let mut names: Vec<&str> = vec![&conv.input[1]];
    names.extend(bn.input[1..5].iter().map(String::as_str));
    names.extend(
        conv.input
            .get(2)
            .map(String::as_str)
            .filter(|n| !n.is_empty()),
    );
    let mut values = cx.constant_f32s(&names)?.into_iter();
    let (wd, w) = values.next()?;
    let o = *wd.first()?;
    // gamma, beta, mean, var, then the bias if the convolution has one.
    let vectors: Vec<Vec<f32>> = values.map(|(_, v)| v).filter(|v| v.len() == o).collect();
    if vectors.len() != names.len() - 1 {
        return None;
    }
    let mut vectors = vectors.into_iter();
    let stats: Vec<Vec<f32>> = vectors.by_ref().take(4).collect();
    let bias = vectors.next().unwrap_or_else(|| vec![0.0; o]);
    if o == 0 || w.len() % o != 0 {
        return None;
    }
    let eps = bn
        .attribute
        .iter()
        .find(|a| a.name.as_deref() == Some("epsilon"))
        .and_then(|a| a.f)
        .unwrap_or(1e-5) as f64;
    let (gamma, beta, mean, var) = (&stats[0], &stats[1], &stats[2], &stats[3]);
    let scale: Vec<f64> = (0..o)
        .map(|c| gamma[c] as f64 / (var[c] as f64 + eps).sqrt())
        .collect();
    let per = w.len() / o;
    let w2: Vec<f32> = w
        .iter()
        .enumerate()
        .map(|(i, &v)| (v as f64 * scale[i / per]) as f32)
        .collect();
    let b2: Vec<f32> = (0..o)
        .map(|c| ((bias[c] as f64 - mean[c] as f64) * scale[c] + beta[c] as f64) as f32)
        .collect();
    let out = bn.output[0].clone();
    let mut put = |what: &str, dims: Vec<usize>, v: Vec<f32>| -> Option<String> {
        let name = format!("{out}/folded_{what}");
        if cx.vals.contains_key(&name) {
            return None;
        }
        let t = HostTensor::new(dims, v).ok()?;
        cx.vals.insert(name.clone(), HostValue::Floats(t).into());
        Some(name)
    };
    let (wn, bn_name) = (put("weight", wd, w2)?, put("bias", vec![o], b2)?);
    let mut folded = conv.clone();
    folded.input = vec![conv.input[0].clone(), wn, bn_name];
    folded.output = vec![out];
    Some(folded)
}
