// The models of the `train_digits` example, shared with tests/grad/train_digits.rs through
// `include!` (so this file has no inner doc comments and no `main`).
//
// Data: scikit-learn's 8x8 handwritten digits (1,797 images, pixel values 0..16), exported
// once by graph-examples/data/export_digits.py in a fixed shuffled order; the first
// `TRAIN` images are the training set, the rest the test set.

use wgflow::{Axes, Conv2dOptions, DType, Dim, Graph, HostTensor, Initializer, Tensor};

/// Images in the training set (the rest, 360, are the test set).
pub const TRAIN: usize = 1437;
/// Classes.
pub const CLASSES: usize = 10;

/// The dataset: `images` f32 `[1797, 64]` (0..16), `labels` i32 `[1797]`.
pub struct Digits {
    pub images: HostTensor,
    pub labels: HostTensor,
}

/// Read the committed dataset from `dir` (`digits_images.npy`, `digits_labels.npy`).
pub fn load_digits(dir: &std::path::Path) -> wgflow::Result<Digits> {
    Ok(Digits {
        images: wgflow::npy::read(dir.join("digits_images.npy"))?,
        labels: wgflow::npy::read(dir.join("digits_labels.npy"))?,
    })
}

/// The directory of the committed dataset.
pub fn data_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("graph-examples/data")
}

/// Which network.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Model {
    /// 64 → 128 (ReLU) → 10.
    Mlp,
    /// conv 3×3 (1→16, pad 1) → ReLU → max-pool 2 → conv 3×3 (16→32, pad 1) → ReLU →
    /// max-pool 2 → 128 → 10.
    Cnn,
}

impl Model {
    pub fn name(self) -> &'static str {
        match self {
            Model::Mlp => "mlp",
            Model::Cnn => "cnn",
        }
    }

    /// The trainable parameters' names and shapes, in order.
    pub fn params(self) -> Vec<(&'static str, Vec<usize>)> {
        match self {
            Model::Mlp => vec![
                ("w1", vec![64, 128]),
                ("b1", vec![128]),
                ("w2", vec![128, CLASSES]),
                ("b2", vec![CLASSES]),
            ],
            Model::Cnn => vec![
                ("c1", vec![16, 1, 3, 3]),
                ("cb1", vec![16]),
                ("c2", vec![32, 16, 3, 3]),
                ("cb2", vec![32]),
                ("w", vec![128, CLASSES]),
                ("b", vec![CLASSES]),
            ],
        }
    }
}

/// A model's graph: the dataset as device-resident constants, a fed batch of image indices
/// of any size (a run-time dimension: training batches, the last partial batch and the
/// whole test set all run this one graph), the batch's mean cross-entropy and accuracy.
pub struct DigitsGraph {
    pub graph: Graph,
    /// i32 `[batch]` (`batch` known at run time): indices of the images of one run.
    pub batch: Tensor,
    /// Mean softmax cross-entropy of the batch.
    pub loss: Tensor,
    /// Fraction of the batch's images classified correctly (f32 scalar); fed
    /// [`test_indices`], the test accuracy.
    pub accuracy: Tensor,
    /// The variables, in [`Model::params`] order.
    pub params: Vec<Tensor>,
}

/// The network's logits for `x` (f32 `[n, 64]`, pixels already scaled to 0..1).
pub fn logits(g: &mut Graph, model: Model, x: Tensor, p: &[Tensor]) -> wgflow::Result<Tensor> {
    match model {
        Model::Mlp => {
            let h = g.linear(x, p[0], Some(p[1]))?;
            let h = g.relu(h)?;
            g.linear(h, p[2], Some(p[3]))
        }
        Model::Cnn => {
            let img = g.reshape(x, &[-1, 1, 8, 8])?;
            let pad = Conv2dOptions {
                padding: [1, 1],
                ..Default::default()
            };
            let c = g.conv2d(img, p[0], Some(p[1]), pad)?;
            let c = g.relu(c)?;
            let c = g.max_pool2d(c, [2, 2], [2, 2], [0, 0])?;
            let c = g.conv2d(c, p[2], Some(p[3]), pad)?;
            let c = g.relu(c)?;
            let c = g.max_pool2d(c, [2, 2], [2, 2], [0, 0])?;
            let flat = g.reshape(c, &[-1, 128])?;
            g.linear(flat, p[4], Some(p[5]))
        }
    }
}

/// Build `model` for batches of any size, its weights drawn with `seed` (He normal for
/// weights, zeros for biases).
pub fn build_digits(data: &Digits, model: Model, seed: u64) -> wgflow::Result<DigitsGraph> {
    let mut g = Graph::new();
    let images = g.constant(data.images.clone())?;
    let labels = g.constant(data.labels.clone())?;
    let scale = g.constant(1.0f32 / 16.0)?;
    let pixels = g.mul(images, scale)?;
    let params = model
        .params()
        .into_iter()
        .enumerate()
        .map(|(k, (name, shape))| {
            let init = if shape.len() == 1 {
                Initializer::Zeros
            } else {
                Initializer::HeNormal { seed: seed + k as u64 }
            };
            g.variable_with(&format!("{}/{name}", model.name()), shape, DType::F32, init)
        })
        .collect::<wgflow::Result<Vec<_>>>()?;
    // Only the batch's indices are fed; the images never leave the device.
    let idx = g.placeholder_dyn("batch", [Dim::named("batch")], DType::I32)?;
    let x = g.take(pixels, idx, 0)?;
    let y = g.take(labels, idx, 0)?;
    let out = logits(&mut g, model, x, &params)?;
    let loss = cross_entropy(&mut g, out, y)?;
    let predicted = g.argmax(out, Some(1), false)?;
    let right = g.equal(predicted, y)?;
    let right = g.cast(right, DType::F32)?;
    let accuracy = g.mean(right, Axes::All, false)?;
    Ok(DigitsGraph {
        graph: g,
        batch: idx,
        loss,
        accuracy,
        params,
    })
}

/// Mean over the batch of `-log softmax(logits)[label]`.
pub fn cross_entropy(g: &mut Graph, logits: Tensor, labels: Tensor) -> wgflow::Result<Tensor> {
    let logp = g.log_softmax(logits, -1)?;
    let onehot = g.one_hot(labels, CLASSES)?;
    let picked = g.mul(logp, onehot)?;
    let per_image = g.sum(picked, Axes::List(vec![1]), false)?;
    let mean = g.mean(per_image, Axes::All, false)?;
    g.neg(mean)
}

/// The indices of the test images (the images after the first [`TRAIN`]).
pub fn test_indices(data: &Digits) -> HostTensor {
    let n = data.images.shape().0[0] as i32;
    let idx: Vec<i32> = (TRAIN as i32..n).collect();
    HostTensor::new(vec![idx.len()], idx).expect("test indices")
}

/// The order of training images for `epochs` epochs: a fresh permutation per epoch from a
/// fixed seed (xorshift + Fisher–Yates), cut into batches of `batch` (the last batch of
/// each epoch holds the remainder: 29 images for batches of 64).
pub fn batches(epochs: usize, batch: usize, seed: u64) -> Vec<HostTensor> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    let mut out = Vec::new();
    for _ in 0..epochs {
        let mut order: Vec<i32> = (0..TRAIN as i32).collect();
        for i in (1..order.len()).rev() {
            let j = (next() % (i as u64 + 1)) as usize;
            order.swap(i, j);
        }
        for chunk in order.chunks(batch) {
            out.push(HostTensor::new(vec![chunk.len()], chunk.to_vec()).expect("batch"));
        }
    }
    out
}
