//! The demo page's digit classifier: the `train_digits` example's CNN, trained in the page
//! on cpu:0 or the page's WebGPU adapter, then asked about a digit drawn on a canvas.
//!
//! One graph holds both paths: training (fed a batch of image indices; the dataset is a
//! device-resident constant) and classification (fed drawn images of any count), sharing
//! the variables, so a trained session classifies without copying weights anywhere.

use crate::{busy, js};
use js_sys::{Float32Array, Promise};
use std::cell::RefCell;
use std::rc::Rc;
use wasm_bindgen::prelude::*;
use wgflow::trace::RunOptions;
use wgflow::train::{Adam, Optimizer};
use wgflow::{DType, Device, Dim, HostTensor, Session, Tensor};

// The example's `expect`s build tensors whose lengths match by construction.
#[allow(dead_code, clippy::expect_used)]
mod model {
    include!("../../graph-examples/digits_model.rs");
}
use model::{Digits, Model, TRAIN};

/// Images per training step.
const BATCH: usize = 64;

struct Nodes {
    batch: Tensor,
    loss: Tensor,
    accuracy: Tensor,
    train: Tensor,
    drawn: Tensor,
    probs: Tensor,
}

/// The `train_digits` CNN on one device, trained an epoch at a time.
#[wasm_bindgen]
pub struct DigitsDemo {
    nodes: Rc<Nodes>,
    session: Rc<RefCell<Session>>,
    device: Device,
    images: Vec<f32>,
    labels: Vec<i32>,
    epochs: Rc<RefCell<u32>>,
}

#[wasm_bindgen]
impl DigitsDemo {
    /// The dataset as the two committed `.npy` files' bytes (`digits_images.npy`,
    /// `digits_labels.npy`), the device (`"cpu:0"` or `"gpu:0"` after `initWebGpu`) and the
    /// seed of the initial weights.
    #[wasm_bindgen(constructor)]
    pub fn new(
        images_npy: &[u8],
        labels_npy: &[u8],
        device: &str,
        seed: u32,
    ) -> Result<DigitsDemo, JsError> {
        let device = Device::parse(device).map_err(js)?;
        let data = Digits {
            images: wgflow::npy::from_bytes(images_npy).map_err(js)?,
            labels: wgflow::npy::from_bytes(labels_npy).map_err(js)?,
        };
        let images = data.images.to_f32().map_err(js)?;
        let labels = data.labels.to_vec::<i32>().map_err(js)?;
        if images.len() != labels.len() * 64 || labels.len() <= TRAIN {
            return Err(JsError::new(&format!(
                "expected [n, 64] images and [n] labels with n > {TRAIN}, got {} values and {} labels",
                images.len(),
                labels.len()
            )));
        }
        let mut d = model::build_digits(&data, Model::Cnn, u64::from(seed)).map_err(js)?;
        let g = &mut d.graph;
        let drawn = g
            .placeholder_dyn("drawn", [Dim::named("n"), Dim::from(64)], DType::F32)
            .map_err(js)?;
        let scale = g.constant(1.0f32 / 16.0).map_err(js)?;
        let x = g.mul(drawn, scale).map_err(js)?;
        let logits = model::logits(g, Model::Cnn, x, &d.params).map_err(js)?;
        let probs = g.softmax(logits, -1).map_err(js)?;
        let train = Adam::new(0.003)
            .minimize(g, d.loss, &d.params)
            .map_err(js)?;
        let session = Session::new(&d.graph, crate::options_for(device)).map_err(js)?;
        Ok(DigitsDemo {
            nodes: Rc::new(Nodes {
                batch: d.batch,
                loss: d.loss,
                accuracy: d.accuracy,
                train,
                drawn,
                probs,
            }),
            session: Rc::new(RefCell::new(session)),
            device,
            images,
            labels,
            epochs: Rc::new(RefCell::new(0)),
        })
    }

    /// The device the model lives on.
    #[wasm_bindgen(getter)]
    pub fn device(&self) -> String {
        self.device.to_string()
    }

    /// Epochs trained so far.
    #[wasm_bindgen(getter)]
    pub fn epochs(&self) -> u32 {
        *self.epochs.borrow()
    }

    /// One epoch of Adam steps (learning rate 0.003, batches of 64 in a fresh order per
    /// epoch): a `Promise` of the epoch's mean training loss.
    // The borrow marks the session busy across the GPU's awaits (see `GraphSession`).
    #[allow(clippy::await_holding_refcell_ref)]
    #[wasm_bindgen(js_name = trainEpoch)]
    pub fn train_epoch(&self) -> Promise {
        let (nodes, session, epochs) = (
            self.nodes.clone(),
            self.session.clone(),
            self.epochs.clone(),
        );
        wasm_bindgen_futures::future_to_promise(async move {
            let mut s = session.try_borrow_mut().map_err(|_| busy())?;
            let epoch = *epochs.borrow();
            let steps = model::batches(1, BATCH, 42 + u64::from(epoch));
            let mut total = 0.0f64;
            for idx in &steps {
                let out = s
                    .run_async(&[(nodes.batch, idx.clone())], &[nodes.loss, nodes.train])
                    .await
                    .map_err(js)?;
                total += f64::from(out[0].item::<f32>().map_err(js)?);
            }
            *epochs.borrow_mut() += 1;
            Ok(JsValue::from_f64(total / steps.len() as f64))
        })
    }

    /// A `Promise` of the accuracy on the 360 test images (a fraction).
    #[allow(clippy::await_holding_refcell_ref)]
    #[wasm_bindgen(js_name = testAccuracy)]
    pub fn test_accuracy(&self) -> Promise {
        let (nodes, session) = (self.nodes.clone(), self.session.clone());
        let n = self.labels.len();
        wasm_bindgen_futures::future_to_promise(async move {
            let mut s = session.try_borrow_mut().map_err(|_| busy())?;
            let idx: Vec<i32> = (TRAIN as i32..n as i32).collect();
            let idx = HostTensor::new(vec![idx.len()], idx).map_err(js)?;
            let out = s
                .run_async(&[(nodes.batch, idx)], &[nodes.accuracy])
                .await
                .map_err(js)?;
            Ok(JsValue::from_f64(f64::from(
                out[0].item::<f32>().map_err(js)?,
            )))
        })
    }

    /// A `Promise` of the ten class probabilities of one drawn image: 64 pixels, row-major
    /// 8×8, each 0 (background) to 16 (ink), as the dataset's.
    #[allow(clippy::await_holding_refcell_ref)]
    pub fn classify(&self, pixels: Float32Array) -> Promise {
        let (nodes, session) = (self.nodes.clone(), self.session.clone());
        let feed = image(pixels);
        wasm_bindgen_futures::future_to_promise(async move {
            let feed = feed?;
            let mut s = session.try_borrow_mut().map_err(|_| busy())?;
            let out = s
                .run_async(&[(nodes.drawn, feed)], &[nodes.probs])
                .await
                .map_err(js)?;
            Ok(Float32Array::from(&out[0].to_f32().map_err(js)?[..]).into())
        })
    }

    /// Test image `k`'s 64 pixels (0..16), for the page to draw.
    #[wasm_bindgen(js_name = testImage)]
    pub fn test_image(&self, k: u32) -> Result<Float32Array, JsError> {
        let i = self.test_index(k)?;
        Ok(Float32Array::from(&self.images[i * 64..(i + 1) * 64]))
    }

    /// Test image `k`'s label.
    #[wasm_bindgen(js_name = testLabel)]
    pub fn test_label(&self, k: u32) -> Result<i32, JsError> {
        Ok(self.labels[self.test_index(k)?])
    }

    /// The number of test images.
    #[wasm_bindgen(js_name = testCount)]
    pub fn test_count(&self) -> u32 {
        (self.labels.len() - TRAIN) as u32
    }

    /// One traced classification of `pixels` as Chrome trace-event JSON (open it in
    /// ui.perfetto.dev): every kernel with its duration. cpu:0 only: a page's WebGPU has no
    /// timestamp queries and cannot wait for one step at a time.
    #[wasm_bindgen(js_name = traceClassify)]
    pub fn trace_classify(&self, pixels: Float32Array) -> Result<String, JsError> {
        if self.device != Device::Cpu {
            return Err(JsError::new(&format!(
                "traces in a page come from cpu:0 (the model is on {}: WebGPU there has no timestamp queries)",
                self.device
            )));
        }
        let feed = image(pixels)?;
        let mut s = self.session.try_borrow_mut().map_err(|_| busy())?;
        let (_, meta) = s
            .run_with(
                &[(self.nodes.drawn, feed)],
                &[self.nodes.probs],
                &RunOptions { trace: true },
            )
            .map_err(js)?;
        Ok(meta.chrome_trace_json())
    }
}

impl DigitsDemo {
    fn test_index(&self, k: u32) -> Result<usize, JsError> {
        let i = TRAIN + k as usize;
        if i >= self.labels.len() {
            return Err(JsError::new(&format!(
                "test image {k} does not exist (there are {})",
                self.labels.len() - TRAIN
            )));
        }
        Ok(i)
    }
}

fn image(pixels: Float32Array) -> Result<HostTensor, JsError> {
    let v = pixels.to_vec();
    if v.len() != 64 {
        return Err(JsError::new(&format!(
            "an image is 64 pixels (8x8), got {}",
            v.len()
        )));
    }
    HostTensor::new(vec![1, 64], v).map_err(js)
}
