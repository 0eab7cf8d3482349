//! The ONNX ops the importer translates: one row per op type, with its domain, the opsets it
//! exists in, its arity (from the ONNX schema; onnxruntime's for `com.microsoft`) and its
//! translator. Translation looks the node up here, checks it against the row and calls the
//! translator; nothing depends on the order of the rows. The ONNX ops that are one unary
//! or binary primitive each (`Exp`, `Not`, `Add`, `LessOrEqual`, …) are not listed here:
//! their rows come from the elementwise table ([`crate::ops::elementwise::table`]), unless a
//! row here handles attributes, operand counts or types the primitive cannot (`IsInf`,
//! `BitwiseNot`, `Max`, `Min`, `Pow`). `wgflow validate --list-onnx-ops`
//! and `docs/onnx-ops.md` print this table ([`supported_ops`]).

use super::build::{bad, Cx, Node, Val};
use super::ops_elementwise::{activation, fold_inputs, where_};
use super::{
    ops_attention as attention, ops_control as control, ops_einsum as einsum,
    ops_elementwise as ew, ops_host as host, ops_index as index, ops_loss as loss, ops_nn as nn,
    ops_norm as norm, ops_pool as pool, ops_quant as quant, ops_recurrent as recurrent,
    ops_resize as resize, ops_scatter as scatter, ops_shape as shape, ops_spatial as spatial,
};
use crate::{Graph, Result, Tensor};
use std::collections::HashMap;
use std::sync::OnceLock;

/// How a translator hands back what it made.
#[derive(Clone, Copy)]
enum Tr {
    /// One tensor: the node's single output.
    One(fn(&mut Cx, &Node) -> Result<Tensor>),
    /// Tensors, one per output.
    Tensors(fn(&mut Cx, &Node) -> Result<Vec<Tensor>>),
    /// Values, host or graph, one per output.
    Vals(fn(&mut Cx, &Node) -> Result<Vec<Val>>),
}
use Tr::{One, Tensors, Vals};

/// No upper bound on an input or output count.
const V: usize = usize::MAX;
const MS: &str = "com.microsoft";
const PREVIEW: &str = "ai.onnx.preview";

/// One op type the importer translates.
struct OpDef {
    domain: &'static str,
    op: &'static str,
    /// The opset the op first appeared in (informative: onnxruntime runs some ops in models
    /// of older opsets, so the importer does not refuse them).
    since: i64,
    /// The last opset the op exists in, for ops ONNX removed; a model of a later opset using
    /// it is refused.
    until: Option<i64>,
    inputs: (usize, usize),
    outputs: (usize, usize),
    family: &'static str,
    tr: Tr,
}

const fn def(
    op: &'static str,
    since: i64,
    inputs: [usize; 2],
    outputs: [usize; 2],
    tr: Tr,
) -> OpDef {
    OpDef {
        domain: "",
        op,
        since,
        until: None,
        inputs: (inputs[0], inputs[1]),
        outputs: (outputs[0], outputs[1]),
        family: "",
        tr,
    }
}

impl OpDef {
    const fn until(mut self, last: i64) -> Self {
        self.until = Some(last);
        self
    }

    const fn domain(mut self, domain: &'static str) -> Self {
        self.domain = domain;
        self
    }

    const fn family(mut self, family: &'static str) -> Self {
        self.family = family;
        self
    }
}

/// The rows, grouped by the `ops_*.rs` file that translates them.
macro_rules! ops {
    ($($family:literal: [$($row:expr,)*])*) => {
        &[$($($row.family($family),)*)*]
    };
}

const ONE: [usize; 2] = [1, 1];

#[rustfmt::skip]
const OPS: &[OpDef] = ops! {
    "shape": [
        def("Identity", 1, ONE, ONE, Vals(shape::one_val)),
        def("Dropout", 1, [1, 3], [1, 2], Vals(shape::dropout)),
        def("Constant", 1, [0, 0], ONE, Vals(shape::constant)),
        def("Shape", 1, ONE, ONE, Vals(shape::shape)),
        def("Size", 1, ONE, ONE, Vals(shape::size)),
        def("ConstantOfShape", 9, ONE, ONE, Vals(shape::constant_of_shape)),
        def("Range", 11, [3, 3], ONE, Vals(shape::range)),
        def("Cast", 1, ONE, ONE, Vals(shape::cast)),
        def("CastLike", 15, [2, 2], ONE, Vals(shape::cast)),
        def("BitCast", 26, ONE, ONE, Vals(shape::bit_cast)),
        def("CenterCropPad", 18, [2, 2], ONE, Vals(shape::center_crop_pad)),
        def("Reshape", 1, [1, 2], ONE, Vals(shape::reshape)),
        def("Flatten", 1, ONE, ONE, Vals(shape::flatten)),
        def("Transpose", 1, ONE, ONE, Vals(shape::transpose)),
        def("Squeeze", 1, [1, 2], ONE, Vals(shape::squeeze)),
        def("Unsqueeze", 1, [1, 2], ONE, Vals(shape::unsqueeze)),
        def("Expand", 8, [2, 2], ONE, Vals(shape::expand)),
        def("Concat", 1, [1, V], ONE, Vals(shape::concat)),
        def("Split", 1, [1, 2], [1, V], Vals(shape::split)),
        def("Slice", 1, [1, 5], ONE, Vals(shape::slice)),
        def("Pad", 1, [1, 4], ONE, Vals(shape::pad)),
        def("Gather", 1, [2, 2], ONE, Vals(shape::gather)),
        def("Tile", 1, [2, 3], ONE, Vals(shape::tile)),
    ]
    "elementwise": [
        def("Sum", 1, [1, V], ONE, Vals(|cx, n| fold_inputs(cx, n, Graph::add))),
        def("Mean", 1, [1, V], ONE, Vals(|cx, n| fold_inputs(cx, n, Graph::add))),
        def("Max", 1, [1, V], ONE, Vals(|cx, n| fold_inputs(cx, n, Graph::maximum))),
        def("Min", 1, [1, V], ONE, Vals(|cx, n| fold_inputs(cx, n, Graph::minimum))),
        def("Pow", 1, [2, 2], ONE, Vals(ew::pow)),
        def("Mod", 10, [2, 2], ONE, Vals(ew::modulo)),
        def("Where", 9, [3, 3], ONE, One(where_)),
        def("Clip", 1, [1, 3], ONE, Vals(ew::clip)),
        def("IsInf", 10, ONE, ONE, Vals(ew::is_inf)),
        def("BitShift", 11, [2, 2], ONE, Vals(ew::bit_shift)),
        def("BitwiseNot", 18, ONE, ONE, Vals(ew::bitwise_not)),
        def("LeakyRelu", 1, ONE, ONE, One(activation)),
        def("Elu", 1, ONE, ONE, One(activation)),
        def("Selu", 1, ONE, ONE, One(activation)),
        def("Celu", 12, ONE, ONE, One(activation)),
        def("ThresholdedRelu", 10, ONE, ONE, One(activation)),
        def("HardSigmoid", 1, ONE, ONE, One(activation)),
        def("HardSwish", 14, ONE, ONE, One(activation)),
        def("Gelu", 20, ONE, ONE, One(activation)),
        def("PRelu", 1, [2, 2], ONE, One(activation)),
        def("Mish", 18, ONE, ONE, One(activation)),
        def("Sinh", 9, ONE, ONE, One(activation)),
        def("Cosh", 9, ONE, ONE, One(activation)),
        def("Shrink", 9, ONE, ONE, One(activation)),
    ]
    "nn": [
        def("MatMul", 1, [2, 2], ONE, One(nn::matmul)),
        def("Gemm", 1, [2, 3], ONE, One(nn::gemm)),
        def("Conv", 1, [2, 3], ONE, One(nn::conv)),
        def("ConvTranspose", 1, [2, 3], ONE, One(nn::conv_transpose)),
        def("AveragePool", 1, ONE, ONE, One(nn::pool)),
        def("LpPool", 1, ONE, ONE, One(nn::pool)),
        def("GlobalAveragePool", 1, ONE, ONE, One(nn::global_pool)),
        def("GlobalMaxPool", 1, ONE, ONE, One(nn::global_pool)),
        def("Softmax", 1, ONE, ONE, One(nn::softmax)),
        def("LogSoftmax", 1, ONE, ONE, One(nn::softmax)),
        def("ArgMax", 1, ONE, ONE, One(nn::arg)),
        def("ArgMin", 1, ONE, ONE, One(nn::arg)),
        def("CumSum", 11, [2, 2], ONE, One(nn::cumsum)),
        def("CumProd", 26, [2, 2], ONE, One(nn::cumsum)),
        def("ReduceSum", 1, [1, 2], ONE, One(nn::reduce)),
        def("ReduceMean", 1, [1, 2], ONE, One(nn::reduce)),
        def("ReduceMax", 1, [1, 2], ONE, One(nn::reduce)),
        def("ReduceMin", 1, [1, 2], ONE, One(nn::reduce)),
        def("ReduceProd", 1, [1, 2], ONE, One(nn::reduce)),
        def("ReduceL1", 1, [1, 2], ONE, One(nn::reduce)),
        def("ReduceL2", 1, [1, 2], ONE, One(nn::reduce)),
        def("ReduceSumSquare", 1, [1, 2], ONE, One(nn::reduce)),
        def("ReduceLogSum", 1, [1, 2], ONE, One(nn::reduce)),
        def("ReduceLogSumExp", 1, [1, 2], ONE, One(nn::reduce)),
    ]
    "pool": [
        def("MaxPool", 1, ONE, [1, 2], Vals(pool::max_pool)),
    ]
    "norm": [
        def("BatchNormalization", 1, [5, 5], [1, 5], Vals(norm::batch_norm)),
        def("LayerNormalization", 17, [2, 3], [1, 3], Vals(norm::layer_norm)),
        def("RMSNormalization", 23, [2, 2], ONE, One(norm::rms_norm)),
        def("InstanceNormalization", 1, [3, 3], ONE, One(norm::instance_norm)),
        def("GroupNormalization", 18, [3, 3], ONE, One(norm::group_norm)),
        def("LpNormalization", 1, ONE, ONE, One(norm::lp_norm)),
        def("LRN", 1, ONE, ONE, One(norm::lrn)),
        def("MeanVarianceNormalization", 9, ONE, ONE, One(norm::mvn)),
    ]
    "index": [
        def("TopK", 1, [1, 2], [2, 2], Vals(index::top_k)),
        def("Unique", 11, ONE, [1, 4], Vals(index::unique)),
        def("GatherElements", 11, [2, 2], ONE, One(index::gather_elements)),
        def("ScatterElements", 11, [3, 3], ONE, One(index::scatter_elements)),
        def("Scatter", 9, [3, 3], ONE, One(index::scatter_elements)).until(10),
        def("GatherND", 11, [2, 2], ONE, One(index::gather_nd)),
        def("ScatterND", 11, [3, 3], ONE, One(index::scatter_nd)),
        def("Trilu", 14, [1, 2], ONE, One(index::trilu)),
        def("Hardmax", 1, ONE, ONE, One(index::hardmax)),
        def("OneHot", 9, [3, 3], ONE, One(index::one_hot)),
        def("DepthToSpace", 1, ONE, ONE, One(index::depth_space)),
        def("SpaceToDepth", 1, ONE, ONE, One(index::depth_space)),
        def("ReverseSequence", 10, [2, 2], ONE, One(index::reverse_sequence)),
        def("MaxUnpool", 9, [2, 3], ONE, One(index::max_unpool)),
        def("Swish", 24, ONE, ONE, One(index::swish)),
    ]
    "loss": [
        def("NegativeLogLikelihoodLoss", 12, [2, 3], ONE, One(loss::nll_loss)),
        def("SoftmaxCrossEntropyLoss", 12, [2, 3], [1, 2], Vals(loss::softmax_cross_entropy)),
    ]
    "resize": [
        def("Resize", 10, [1, 4], ONE, One(resize::resize)),
        def("Upsample", 7, [1, 2], ONE, One(resize::resize)).until(9),
    ]
    "recurrent": [
        def("RNN", 1, [3, 6], [0, 2], Tensors(recurrent::rnn)),
        def("GRU", 1, [3, 6], [0, 2], Tensors(recurrent::gru)),
        def("LSTM", 1, [3, 8], [0, 3], Tensors(recurrent::lstm)),
        def("CausalConvWithState", 27, [2, 4], [2, 2], Tensors(recurrent::causal_conv)),
    ]
    "control": [
        def("Scan", 8, [1, V], [1, V], Vals(control::scan)),
        def("If", 1, ONE, [1, V], Vals(control::if_)),
        def("Loop", 1, [2, V], [1, V], Vals(control::loop_)),
    ]
    "attention": [
        def("Attention", 23, [3, 7], [1, 4], Vals(attention::attention)),
        def("RotaryEmbedding", 23, [3, 4], ONE, One(attention::rotary)),
        def("SwiGLU", 28, [2, 2], ONE, One(attention::swiglu)),
        def("LinearAttention", 27, [3, 6], [2, 2], Vals(attention::linear_attention)),
        def("FlexAttention", 1, [3, 3], ONE, One(attention::flex_attention)).domain(PREVIEW),
    ]
    "spatial": [
        def("GridSample", 16, [2, 2], ONE, One(spatial::grid_sample)),
        def("AffineGrid", 20, [2, 2], ONE, One(spatial::affine_grid)),
        def("DFT", 17, [1, 3], ONE, One(spatial::dft)),
        def("Det", 11, ONE, ONE, One(spatial::det)),
        def("DeformConv", 19, [3, 5], ONE, One(spatial::deform_conv)),
    ]
    "quant": [
        def("QuantizeLinear", 10, [2, 3], ONE, One(quant::quantize)),
        def("DequantizeLinear", 10, [2, 3], ONE, One(quant::dequantize)),
        def("DynamicQuantizeLinear", 11, ONE, [3, 3], Vals(quant::dynamic_quantize)),
        def("MatMulInteger", 10, [2, 4], ONE, One(quant::matmul_integer_op)),
        def("ConvInteger", 10, [2, 4], ONE, One(quant::conv_integer_op)),
        def("QLinearMatMul", 10, [8, 8], ONE, One(quant::qlinear_matmul)),
        def("QLinearConv", 10, [8, 9], ONE, One(quant::qlinear_conv)),
        def("QGemm", 1, [6, 9], ONE, One(quant::qgemm)).domain(MS),
        def("QLinearGlobalAveragePool", 1, [5, 5], ONE, One(quant::qlinear_global_average_pool)).domain(MS),
        def("QLinearAdd", 1, [7, 8], ONE, One(quant::qlinear_binary)).domain(MS),
        def("QLinearMul", 1, [7, 8], ONE, One(quant::qlinear_binary)).domain(MS),
    ]
    "host": [
        def("NonZero", 9, ONE, ONE, Vals(host::non_zero)),
        def("Compress", 9, [2, 2], ONE, Vals(host::compress)),
        def("NonMaxSuppression", 10, [2, 5], ONE, Vals(host::non_max_suppression)),
        def("HannWindow", 17, ONE, ONE, Vals(host::window)),
        def("HammingWindow", 17, ONE, ONE, Vals(host::window)),
        def("BlackmanWindow", 17, ONE, ONE, Vals(host::window)),
        def("EyeLike", 9, ONE, ONE, Vals(host::eye_like)),
        def("OptionalHasElement", 15, [0, 1], ONE, Vals(host::optional_has_element)),
        def("OptionalGetElement", 15, ONE, ONE, Vals(host::optional_get_element)),
    ]
    "einsum": [
        def("Einsum", 12, [1, V], ONE, One(einsum::einsum)),
    ]
    "scatter": [
        def("TensorScatter", 24, [2, 3], ONE, One(scatter::tensor_scatter)),
        def("Col2Im", 18, [3, 3], ONE, One(scatter::col2im)),
    ]
};

/// The rows of the elementwise primitives that are ONNX ops 1:1 and have no row in [`OPS`].
fn primitive_rows() -> &'static [OpDef] {
    static ROWS: OnceLock<Vec<OpDef>> = OnceLock::new();
    ROWS.get_or_init(|| {
        use crate::ops::elementwise::table::{BINARY, UNARY};
        let hand = |op: &str| OPS.iter().any(|d| d.domain.is_empty() && d.op == op);
        let unary = UNARY
            .iter()
            .filter_map(|u| u.onnx)
            .map(|(op, since)| def(op, since, ONE, ONE, One(ew::primitive)));
        let binary = BINARY
            .iter()
            .filter_map(|b| b.onnx)
            .map(|(op, since)| def(op, since, [2, 2], ONE, Vals(ew::binary_primitive)));
        unary
            .chain(binary)
            .filter(|d| !hand(d.op))
            .map(|d| d.family("elementwise"))
            .collect()
    })
}

/// Every row: [`OPS`] and the elementwise primitives'.
fn rows() -> impl Iterator<Item = &'static OpDef> {
    OPS.iter().chain(primitive_rows())
}

fn table() -> &'static HashMap<(&'static str, &'static str), &'static OpDef> {
    static TABLE: OnceLock<HashMap<(&str, &str), &OpDef>> = OnceLock::new();
    TABLE.get_or_init(|| rows().map(|d| ((d.domain, d.op), d)).collect())
}

/// The row for `op` in `domain` (`""` and `"ai.onnx"` are the same domain).
fn lookup(domain: &str, op: &str) -> Option<&'static OpDef> {
    let domain = if domain == "ai.onnx" { "" } else { domain };
    table().get(&(domain, op)).copied()
}

fn count(range: (usize, usize)) -> String {
    match range {
        (a, b) if a == b => a.to_string(),
        (a, V) => format!("{a} or more"),
        (a, b) => format!("{a} to {b}"),
    }
}

/// Translates one node: finds its row, checks the node against it, runs the translator.
pub(super) fn translate(cx: &mut Cx, n: &Node) -> Result<Vec<Val>> {
    let Some(d) = lookup(n.domain, n.op) else {
        if !matches!(n.domain, "" | "ai.onnx") {
            let known: Vec<String> = OPS
                .iter()
                .filter(|d| !d.domain.is_empty())
                .map(|d| format!("{}'s {}", d.domain, d.op))
                .collect();
            return Err(bad(crate::onnx::unsupported(format!(
                "domain '{}' is unsupported (only ai.onnx, {})",
                n.domain,
                known.join(", ")
            ))));
        }
        return Err(bad(crate::onnx::unsupported(
            "unsupported op (`wgflow validate --list-onnx-ops` lists the supported ones)",
        )));
    };
    if let Some(last) = d.until.filter(|&l| d.domain.is_empty() && n.opset > l) {
        return Err(bad(format!(
            "{} was removed from ONNX after opset {last}",
            d.op
        )));
    }
    let (i, o) = (n.inputs.len(), n.n_outputs);
    if i < d.inputs.0 || i > d.inputs.1 {
        return Err(bad(format!(
            "{} takes {} inputs, the node has {i}",
            d.op,
            count(d.inputs)
        )));
    }
    // Fewer outputs than the schema's are accepted, as onnxruntime accepts them: the rest
    // are not computed.
    if o > d.outputs.1 {
        return Err(bad(format!(
            "{} has {} outputs, the node has {o}",
            d.op,
            count(d.outputs)
        )));
    }
    match d.tr {
        One(f) => f(cx, n).map(|t| vec![Val::T(t)]),
        Tensors(f) => f(cx, n).map(|v| v.into_iter().map(Val::T).collect()),
        Vals(f) => f(cx, n),
    }
}

/// One ONNX op type the importer translates (a row of [`supported_ops`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpSupport {
    /// `""` for the default `ai.onnx` domain, else `com.microsoft` or `ai.onnx.preview`.
    pub domain: &'static str,
    /// The op type, as a `NodeProto` names it.
    pub op: &'static str,
    /// The opset the op first appeared in.
    pub since: i64,
    /// The last opset it exists in, for ops ONNX removed.
    pub until: Option<i64>,
    /// Fewest and most inputs (`usize::MAX`: any number).
    pub inputs: (usize, usize),
    /// Fewest and most outputs (`usize::MAX`: any number).
    pub outputs: (usize, usize),
    /// The importer file that translates it (`src/onnx/ops_<family>.rs`).
    pub family: &'static str,
}

/// Every op type the importer translates, sorted by domain and op type.
pub fn supported_ops() -> Vec<OpSupport> {
    let mut v: Vec<OpSupport> = rows()
        .map(|d| OpSupport {
            domain: d.domain,
            op: d.op,
            since: d.since,
            until: d.until,
            inputs: d.inputs,
            outputs: d.outputs,
            family: d.family,
        })
        .collect();
    v.sort_by(|a, b| (a.domain, a.op).cmp(&(b.domain, b.op)));
    v
}

/// [`supported_ops`] as a Markdown table (what `docs/onnx-ops.md` holds).
pub fn supported_ops_markdown() -> String {
    let mut s = String::from(
        "| op | domain | opsets | inputs | outputs | translated in |\n|---|---|---|---|---|---|\n",
    );
    for d in supported_ops() {
        let domain = if d.domain.is_empty() {
            "ai.onnx"
        } else {
            d.domain
        };
        let opsets = match d.until {
            Some(u) => format!("{}–{u}", d.since),
            None => format!("{}+", d.since),
        };
        s.push_str(&format!(
            "| {} | {domain} | {opsets} | {} | {} | `ops_{}.rs` |\n",
            d.op,
            count(d.inputs),
            count(d.outputs),
            d.family
        ));
    }
    s
}
