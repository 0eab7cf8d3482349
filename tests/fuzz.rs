//! Structured fuzzing of everything wgflow reads from untrusted files (issue 44): the ONNX
//! decoder and importer (single ops with random attributes, dims and dtypes; byte mutations
//! of valid models), the graph-file loader and the `.npy` reader. The property: every input
//! ends in `Ok` or `Err`, never a panic, within a time budget, and no single allocation
//! passes [`MAX_ALLOC`] (a global allocator here records the largest). About 60 s in CI
//! (`cargo test --release --features cli --test fuzz`: 216,000 inputs); a debug build runs
//! a sixtieth of that, and `WGFLOW_FUZZ_CASES` scales either.
//!
//! Every input that ever failed is kept: proptest records failing seeds under
//! `tests/proptest-regressions/fuzz.txt`, and `tests/data/fuzz-corpus/` holds hostile files
//! that are replayed first by [`the_corpus_replays_cleanly`].

#[path = "onnx/protos.rs"]
mod protos;

use proptest::prelude::*;
use protos::{attr_float, attr_int, attr_ints, attr_str, typed_value};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use wgflow::onnx::proto::{
    tensor_proto::DataType, AttributeProto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto,
    TensorProto,
};
use wgflow::onnx::{import_bytes, ImportOptions, Message};

/// The largest single allocation any input may cause: the import runs with 2^22 elements
/// and 16 MiB files allowed, so anything near this is a size read without a check.
const MAX_ALLOC: usize = 1 << 30;
/// The longest any one input may take.
const MAX_TIME: Duration = Duration::from_secs(20);

struct Peak;
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to the system allocator unchanged; only records the largest size asked.
unsafe impl GlobalAlloc for Peak {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        PEAK.fetch_max(l.size(), Ordering::Relaxed);
        System.alloc(l)
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        System.dealloc(p, l)
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, size: usize) -> *mut u8 {
        PEAK.fetch_max(size, Ordering::Relaxed);
        System.realloc(p, l, size)
    }
}

#[global_allocator]
static ALLOC: Peak = Peak;

fn opts() -> ImportOptions {
    ImportOptions {
        max_elements: 1 << 22,
        max_file_bytes: 1 << 24,
        ..Default::default()
    }
}

/// Run `f` on one input: it must return (no panic) within [`MAX_TIME`], allocating no block
/// over [`MAX_ALLOC`].
fn check<T>(what: &str, f: impl FnOnce() -> T) -> Result<(), TestCaseError> {
    // One input at a time across the test threads, so that the peak is this input's.
    static ONE: Mutex<()> = Mutex::new(());
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    PEAK.store(0, Ordering::Relaxed);
    let start = Instant::now();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    let (took, peak) = (start.elapsed(), PEAK.load(Ordering::Relaxed));
    prop_assert!(r.is_ok(), "{what}: panicked");
    prop_assert!(took < MAX_TIME, "{what}: took {took:?}");
    prop_assert!(peak <= MAX_ALLOC, "{what}: allocated {peak} bytes at once");
    Ok(())
}

/// Failing seeds go to `tests/proptest-regressions/fuzz.txt` and are replayed first.
fn persist() -> Option<Box<dyn proptest::test_runner::FailurePersistence>> {
    Some(Box::new(
        proptest::test_runner::FileFailurePersistence::Direct(
            "tests/proptest-regressions/fuzz.txt",
        ),
    ))
}

/// `default` cases in a debug build (the whole suite's quick pass), sixty times as many in
/// a release build (about 60 s on two cores), times `WGFLOW_FUZZ_CASES` if set.
fn cases(default: u32) -> u32 {
    let default = if cfg!(debug_assertions) {
        default
    } else {
        default * 60
    };
    std::env::var("WGFLOW_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse::<f64>().ok())
        .map_or(default, |k| (default as f64 * k).max(1.0) as u32)
}

/// ONNX ops the importer translates (and a few it does not), each fuzzed alone.
const OPS: &[&str] = &[
    "Add",
    "Sub",
    "Mul",
    "Div",
    "Less",
    "Equal",
    "And",
    "Where",
    "Relu",
    "Neg",
    "Cast",
    "Reshape",
    "Transpose",
    "Squeeze",
    "Unsqueeze",
    "Flatten",
    "Expand",
    "Concat",
    "Split",
    "Slice",
    "Pad",
    "Gather",
    "GatherElements",
    "ScatterElements",
    "Tile",
    "Shape",
    "Size",
    "ConstantOfShape",
    "Range",
    "OneHot",
    "Resize",
    "Upsample",
    "ReduceSum",
    "ReduceMax",
    "ReduceMean",
    "ArgMax",
    "CumSum",
    "Softmax",
    "LogSoftmax",
    "MatMul",
    "Gemm",
    "Conv",
    "ConvTranspose",
    "MaxPool",
    "AveragePool",
    "GlobalAveragePool",
    "BatchNormalization",
    "LayerNormalization",
    "InstanceNormalization",
    "TopK",
    "Unique",
    "NonZero",
    "Einsum",
    "DepthToSpace",
    "SpaceToDepth",
    "Trilu",
    "Clip",
    "Mod",
    "Pow",
    "BitShift",
    "Dropout",
    "QuantizeLinear",
    "DequantizeLinear",
    "Identity",
    "Constant",
    "Compress",
    "Hardmax",
    "LRN",
    "GridSample",
    "RoiAlign",
    "DFT",
    "STFT",
    "LSTM",
    "GRU",
    "RNN",
    "Attention",
];

const ATTRS: &[&str] = &[
    "axis",
    "axes",
    "keepdims",
    "num_outputs",
    "group",
    "kernel_shape",
    "strides",
    "pads",
    "dilations",
    "perm",
    "to",
    "mode",
    "split",
    "starts",
    "ends",
    "value",
    "alpha",
    "beta",
    "epsilon",
    "direction",
    "blocksize",
    "upper",
    "k",
    "largest",
    "sorted",
    "allowzero",
    "hidden_size",
    "exclusive",
    "reverse",
    "output_padding",
    "auto_pad",
    "ceil_mode",
    "coordinate_transformation_mode",
    "noop_with_empty_axes",
    "select_last_index",
    "fmod",
];

fn hostile_int() -> impl Strategy<Value = i64> {
    prop_oneof![
        4 => -3i64..8,
        1 => Just(i64::MAX),
        1 => Just(i64::MIN),
        1 => Just(1 << 31),
        1 => Just((1 << 31) - 1),
        1 => Just(1 << 40),
        1 => Just(1 << 62),
        1 => Just(-(1 << 31)),
    ]
}

fn hostile_float() -> impl Strategy<Value = f32> {
    prop_oneof![
        4 => -4.0f32..4.0,
        1 => Just(f32::NAN),
        1 => Just(f32::INFINITY),
        1 => Just(f32::NEG_INFINITY),
        1 => Just(1e9f32),
        1 => Just(0.0f32),
        1 => Just(-1e-30f32),
    ]
}

fn attribute() -> impl Strategy<Value = AttributeProto> {
    let name = prop::sample::select(ATTRS);
    (
        name,
        0..5u8,
        hostile_int(),
        prop::collection::vec(hostile_int(), 0..6),
        hostile_float(),
    )
        .prop_map(|(name, kind, i, v, f)| match kind {
            0 => attr_int(name, i),
            1 => attr_ints(name, &v),
            2 => attr_float(name, f),
            3 => attr_str(
                name,
                ["constant", "linear", "nearest", "SAME_UPPER", "LEFT", ""]
                    [(i.unsigned_abs() % 6) as usize],
            ),
            // A declared type that does not match the field set.
            _ => AttributeProto {
                i: Some(i),
                f: Some(f),
                ..attr_float(name, f)
            },
        })
}

const ELEMS: &[DataType] = &[
    DataType::Float,
    DataType::Int64,
    DataType::Int32,
    DataType::Bool,
    DataType::Float16,
    DataType::Double,
    DataType::Uint8,
    DataType::String,
];

fn dims() -> impl Strategy<Value = Vec<i64>> {
    let d = prop_oneof![8 => 0i64..5, 1 => Just(1 << 31), 1 => Just(1 << 40), 1 => Just(-1), 1 => Just(7)];
    prop::collection::vec(d, 0..5)
}

/// One input: a graph input of random type and dims, or an initializer of hostile values.
#[derive(Debug, Clone)]
enum In {
    Fed(DataType, Vec<i64>),
    Ints(Vec<i64>, Vec<i64>),
    Floats(Vec<i64>, Vec<f32>),
}

fn input() -> impl Strategy<Value = In> {
    prop_oneof![
        (prop::sample::select(ELEMS), dims()).prop_map(|(e, d)| In::Fed(e, d)),
        prop::collection::vec(hostile_int(), 0..6).prop_flat_map(|v| {
            let n = v.len() as i64;
            prop_oneof![Just(vec![n]), Just(vec![]), Just(vec![n, 1])]
                .prop_map(move |d| In::Ints(d, v.clone()))
        }),
        prop::collection::vec(hostile_float(), 0..6)
            .prop_map(|v| In::Floats(vec![v.len() as i64], v)),
    ]
}

/// A model of one op over `ins`, with `attrs`, `outs` outputs, at `opset`.
fn single_op(
    op: &str,
    ins: &[In],
    attrs: Vec<AttributeProto>,
    outs: usize,
    opset: i64,
) -> ModelProto {
    let mut graph = GraphProto::default();
    let mut names = Vec::new();
    for (k, i) in ins.iter().enumerate() {
        let name = format!("in{k}");
        match i {
            In::Fed(e, d) => graph.input.push(typed_value(&name, d, *e)),
            In::Ints(d, v) => graph.initializer.push(TensorProto {
                name: Some(name.clone()),
                dims: d.clone(),
                data_type: Some(DataType::Int64 as i32),
                int64_data: v.clone(),
                ..Default::default()
            }),
            In::Floats(d, v) => graph.initializer.push(TensorProto {
                name: Some(name.clone()),
                dims: d.clone(),
                data_type: Some(DataType::Float as i32),
                float_data: v.clone(),
                ..Default::default()
            }),
        }
        names.push(name);
    }
    let outputs: Vec<String> = (0..outs).map(|k| format!("out{k}")).collect();
    graph.output = outputs
        .iter()
        .map(|o| typed_value(o, &[], DataType::Float))
        .collect();
    graph.node.push(NodeProto {
        op_type: Some(op.into()),
        name: Some("n".into()),
        input: names,
        output: outputs,
        attribute: attrs,
        ..Default::default()
    });
    ModelProto {
        ir_version: Some(8),
        opset_import: vec![OperatorSetIdProto {
            domain: Some(String::new()),
            version: Some(opset),
        }],
        graph: Some(graph),
        ..Default::default()
    }
}

fn models() -> Vec<Vec<u8>> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/onnx-light");
    ["bvlc_alexnet", "squeezenet", "inception_v1"]
        .iter()
        .map(|n| std::fs::read(dir.join(format!("light_{n}.onnx"))).expect("light model"))
        .collect()
}

fn graph_files() -> Vec<String> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("graph-examples");
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .expect("graph-examples")
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
        .map(|e| std::fs::read_to_string(e.path()).expect("graph file"))
        .collect();
    v.sort();
    v
}

/// Damage `src` at up to three places: truncate, flip a bit, splice in a hostile varint or
/// number, drop or duplicate a span.
fn mutate(src: &[u8], edits: &[(u8, usize, usize)], numeric: bool) -> Vec<u8> {
    const VARINTS: [&[u8]; 4] = [
        &[0xff, 0xff, 0xff, 0xff, 0x0f],
        &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01],
        &[0x80, 0x80, 0x80, 0x80, 0x08],
        &[0x00],
    ];
    const NUMBERS: [&[u8]; 5] = [
        b"4294967296",
        b"-1",
        b"1e300",
        b"2147483648",
        b"99999999999999999999",
    ];
    let mut b = src.to_vec();
    for &(kind, x, y) in edits {
        let len = b.len().max(1);
        let (i, j) = (x % len, y % len);
        match kind % 5 {
            0 => b.truncate(i),
            1 => {
                if let Some(v) = b.get_mut(i) {
                    *v ^= 1 << (j % 8);
                }
            }
            2 => {
                let v = if numeric {
                    NUMBERS[j % NUMBERS.len()]
                } else {
                    VARINTS[j % VARINTS.len()]
                };
                let i = i.min(b.len());
                let end = if numeric {
                    // Over the number that starts here, if any.
                    let n = b[i..].iter().take_while(|c| c.is_ascii_digit()).count();
                    i + n.max(1)
                } else {
                    i + 1
                };
                let end = end.min(b.len());
                b.splice(i..end, v.iter().copied());
            }
            3 => {
                let (lo, hi) = (i.min(j).min(b.len()), i.max(j).min(b.len()));
                b.drain(lo..hi.min(lo + 64));
            }
            _ => {
                let i = i.min(b.len());
                let span: Vec<u8> = b[i..(i + 1 + j % 80).min(b.len())].to_vec();
                let at = j % (b.len() + 1);
                b.splice(at..at, span);
            }
        }
    }
    b
}

fn edits() -> impl Strategy<Value = Vec<(u8, usize, usize)>> {
    prop::collection::vec((any::<u8>(), any::<usize>(), any::<usize>()), 1..4)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: cases(3000),
        max_shrink_iters: 200,
        failure_persistence: persist(),
        ..ProptestConfig::default()
    })]

    #[test]
    fn single_ops_with_hostile_attributes(
        op in prop::sample::select(OPS),
        ins in prop::collection::vec(input(), 0..4),
        attrs in prop::collection::vec(attribute(), 0..4),
        outs in 1usize..4,
        opset in prop::sample::select(&[7i64, 11, 13, 17, 18, 21, 99][..]),
    ) {
        let bytes = single_op(op, &ins, attrs, outs, opset).encode_to_vec();
        check(op, || import_bytes(&bytes, None, &opts()).map(|m| m.graph.len()))?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: cases(600),
        max_shrink_iters: 100,
        failure_persistence: persist(),
        ..ProptestConfig::default()
    })]

    #[test]
    fn mutated_models(which in 0usize..3, edits in edits()) {
        let seeds = models();
        let bytes = mutate(&seeds[which], &edits, false);
        check("mutated model", || import_bytes(&bytes, None, &opts()).map(|m| m.graph.len()))?;
    }

    #[test]
    fn mutated_graph_files(which in 0usize..3, edits in edits()) {
        let files = graph_files();
        let text = &files[which % files.len()];
        let bytes = mutate(text.as_bytes(), &edits, true);
        let text = String::from_utf8_lossy(&bytes).into_owned();
        check("graph file", || wgflow::Graph::from_json(&text).map(|g| g.len()))?;
    }

    #[test]
    fn npy_headers_and_data(
        descr in prop::sample::select(&["<f4", "<f2", "<i4", "<i8", "<u4", "|b1", "|u1", "<i2", ">f8", "<c8", "O"][..]),
        shape in prop::collection::vec(prop_oneof![0u64..5, Just(2_000_000_000u64), Just(1 << 40), Just(u64::MAX)], 0..4),
        fortran in any::<bool>(),
        data in 0usize..64,
        version in prop::sample::select(&[1u8, 2, 3, 9][..]),
    ) {
        let dims: Vec<String> = shape.iter().map(u64::to_string).collect();
        let tuple = if dims.len() == 1 { format!("({},)", dims[0]) } else { format!("({})", dims.join(", ")) };
        let header = format!(
            "{{'descr': '{descr}', 'fortran_order': {}, 'shape': {tuple}, }}\n",
            if fortran { "True" } else { "False" }
        );
        let mut b = b"\x93NUMPY".to_vec();
        b.push(version);
        b.push(0);
        if version == 1 {
            b.extend_from_slice(&(header.len() as u16).to_le_bytes());
        } else {
            b.extend_from_slice(&(header.len() as u32).to_le_bytes());
        }
        b.extend_from_slice(header.as_bytes());
        b.extend(std::iter::repeat_n(0x3fu8, data));
        check("npy", || wgflow::npy::from_bytes(&b).map(|t| t.len()))?;
    }
}

/// The hostile files that once failed (issue 44's reproductions): each imports or is refused.
#[test]
fn the_corpus_replays_cleanly() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/fuzz-corpus");
    let mut n = 0;
    for e in std::fs::read_dir(&dir)
        .expect("tests/data/fuzz-corpus")
        .flatten()
    {
        let path = e.path();
        let bytes = std::fs::read(&path).expect("read");
        let name = path.display().to_string();
        let r = match path.extension().and_then(|x| x.to_str()) {
            Some("onnx") => check(&name, || {
                import_bytes(&bytes, None, &ImportOptions::default()).map(|m| m.graph.len())
            }),
            Some("json") => check(&name, || {
                wgflow::Graph::from_json(&String::from_utf8_lossy(&bytes)).map(|g| g.len())
            }),
            Some("npy") => check(&name, || wgflow::npy::from_bytes(&bytes).map(|t| t.len())),
            _ => continue,
        };
        if let Err(e) = r {
            panic!("{e}");
        }
        n += 1;
    }
    assert!(n >= 10, "the corpus has {n} files");
}

/// The single-op models are not all refused at the door: a good share import, so the
/// translators themselves are exercised.
#[test]
fn single_ops_reach_the_translators() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let strategy = (
        prop::sample::select(OPS),
        prop::collection::vec(input(), 1..4),
        prop::collection::vec(attribute(), 0..2),
    );
    let mut runner = TestRunner::deterministic();
    let (mut ok, mut total) = (0, 0);
    for _ in 0..400 {
        let (op, ins, attrs) = strategy.new_tree(&mut runner).expect("tree").current();
        let bytes = single_op(op, &ins, attrs, 1, 17).encode_to_vec();
        total += 1;
        if import_bytes(&bytes, None, &opts()).is_ok() {
            ok += 1;
        }
    }
    eprintln!("{ok} of {total} single-op models imported");
    assert!(ok * 20 >= total, "only {ok} of {total} imported");
}
