//! wgflow in a web page: JavaScript bindings over the Rust library, compiled for
//! `wasm32-unknown-unknown` (`wasm-bindgen`). The browser counterpart of the CLI's `run`:
//! load a saved graph (its JSON text) or an ONNX model (its bytes), feed `Float32Array`s by
//! name, read the fetches back.
//!
//! Sessions run on `cpu:0` (single-threaded: a page's wasm has no threads unless it is
//! cross-origin isolated) or, after `await initWebGpu()`, on the page's WebGPU adapter as
//! `gpu:0` through `runAsync` (a page must not block on the GPU). Errors reach JavaScript as
//! `Error`s whose message is the native library's; bad input never panics, so the module
//! stays usable after one.

// Library code returns errors: a panic on input a user controls would abort their program
// (or poison a page's module). Tests may unwrap.
#![cfg_attr(
    not(test),
    deny(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic,
        clippy::todo,
        clippy::unimplemented
    )
)]

use js_sys::{BigInt64Array, Float32Array, Int32Array};
use std::cell::RefCell;
use std::rc::Rc;
use wasm_bindgen::prelude::*;
use wgflow::onnx::{ImportOptions, InferenceSession};
use wgflow::{DType, Device, Graph, HostTensor, Session, SessionOptions, Tensor};

mod digits;
pub use digits::DigitsDemo;

fn js(e: wgflow::Error) -> JsError {
    JsError::new(&e.to_string())
}

/// cpu:0 alone: no adapter is asked for (which would need a promise in a page).
fn cpu_options() -> SessionOptions {
    SessionOptions {
        visible_devices: Some(Vec::new()),
        default_device: Some(Device::Cpu),
        ..SessionOptions::default()
    }
}

/// A session's options on `device`: [`cpu_options`] for cpu:0, else that device by default.
fn options_for(device: Device) -> SessionOptions {
    match device {
        Device::Cpu => cpu_options(),
        _ => SessionOptions {
            default_device: Some(device),
            ..SessionOptions::default()
        },
    }
}

/// Ask the browser for its WebGPU adapter and a device on it, and make them `gpu:0`.
/// Await it once, before the first session; resolves to the number of adapters (0 or 1).
#[wasm_bindgen(js_name = initWebGpu)]
pub async fn init_webgpu() -> Result<u32, JsError> {
    wgflow::backend::init_web()
        .await
        .map(|n| n as u32)
        .map_err(js)
}

/// Every device, best first: `gpu:0` (after `initWebGpu`) and `cpu:0`, each as
/// `"spec: name (type, backend)"`.
#[wasm_bindgen(js_name = listDevices)]
pub fn list_devices() -> Vec<String> {
    wgflow::devices()
        .iter()
        .map(|d| {
            format!(
                "{}: {} ({}, {})",
                d.device, d.name, d.device_type, d.backend
            )
        })
        .collect()
}

/// The device a session should use by default, as `Device::best()` ranks them: a hardware
/// adapter if the page has one, else `cpu:0` (a fallback adapter such as SwiftShader is a
/// CPU pretending to be a GPU, slower than wasm on the same cores).
#[wasm_bindgen(js_name = bestDevice)]
pub fn best_device() -> String {
    Device::best().to_string()
}

/// A tensor crossing into or out of JavaScript: float32 values and dims.
/// A tensor crossing into or out of wgflow: float32 (`Float32Array`), int32 (`Int32Array`)
/// or int64 (`BigInt64Array`: an ONNX model's `input_ids`, an ArgMax), with its dims.
#[wasm_bindgen]
#[derive(Clone)]
pub struct WgTensor {
    values: Values,
    dims: Vec<usize>,
}

#[derive(Clone)]
enum Values {
    F32(Vec<f32>),
    I32(Vec<i32>),
    /// int64 as JavaScript holds it; wgflow holds int64 as i32, so a feed's values are range
    /// checked on the way in ([`HostTensor::from_i64`]).
    I64(Vec<i64>),
}

#[wasm_bindgen]
impl WgTensor {
    /// `data` in row-major order; its length must be the product of `dims`.
    #[wasm_bindgen(constructor)]
    pub fn new(data: Float32Array, dims: Vec<u32>) -> WgTensor {
        WgTensor::with(Values::F32(data.to_vec()), dims)
    }

    /// An int32 tensor.
    #[wasm_bindgen(js_name = fromInt32)]
    pub fn from_int32(data: Int32Array, dims: Vec<u32>) -> WgTensor {
        WgTensor::with(Values::I32(data.to_vec()), dims)
    }

    /// An int64 tensor (what exported NLP models take as `input_ids` and
    /// `attention_mask`): a value outside int32's range is an error naming its index when
    /// it is fed.
    #[wasm_bindgen(js_name = fromBigInt64)]
    pub fn from_big_int64(data: BigInt64Array, dims: Vec<u32>) -> WgTensor {
        WgTensor::with(Values::I64(data.to_vec()), dims)
    }

    /// `"float32"`, `"int32"` or `"int64"` (an ONNX output the model declares int64).
    #[wasm_bindgen(getter)]
    pub fn dtype(&self) -> String {
        match self.values {
            Values::F32(_) => "float32",
            Values::I32(_) => "int32",
            Values::I64(_) => "int64",
        }
        .into()
    }

    /// The values as a new `Float32Array` (integers converted: exact below 2^24).
    #[wasm_bindgen(getter)]
    pub fn data(&self) -> Float32Array {
        match &self.values {
            Values::F32(v) => Float32Array::from(&v[..]),
            Values::I32(v) => {
                Float32Array::from(&v.iter().map(|&x| x as f32).collect::<Vec<_>>()[..])
            }
            Values::I64(v) => {
                Float32Array::from(&v.iter().map(|&x| x as f32).collect::<Vec<_>>()[..])
            }
        }
    }

    /// An integer tensor's values as a new `BigInt64Array`; an error for float32.
    #[wasm_bindgen(js_name = int64Data)]
    pub fn int64_data(&self) -> Result<BigInt64Array, JsError> {
        let v = self
            .i64_values()
            .ok_or_else(|| JsError::new("a float32 tensor has no int64 data: read .data"))?;
        Ok(BigInt64Array::from(&v[..]))
    }

    /// The dims.
    #[wasm_bindgen(getter)]
    pub fn dims(&self) -> Vec<u32> {
        self.dims.iter().map(|&d| d as u32).collect()
    }
}

impl WgTensor {
    fn with(values: Values, dims: Vec<u32>) -> WgTensor {
        WgTensor {
            values,
            dims: dims.into_iter().map(|d| d as usize).collect(),
        }
    }

    /// The values as a feed, moved (a 16M-element feed is not copied once more here).
    fn into_host(self) -> Result<HostTensor, JsError> {
        match self.values {
            Values::F32(v) => HostTensor::new(self.dims, v),
            Values::I32(v) => HostTensor::new(self.dims, v),
            Values::I64(v) => HostTensor::from_i64(self.dims, &v),
        }
        .map_err(js)
    }

    /// A result for JavaScript: float32 for floating-point results, int64 where the model
    /// declares it (`int64`), int32 for other integers and booleans (0 or 1). A float32
    /// result's buffer is moved, not copied (a 16M-element result is 64 MB).
    fn from_host(t: HostTensor, int64: bool) -> Result<WgTensor, JsError> {
        let dims = t.dims().to_vec();
        let values = match t.dtype() {
            DType::F32 => Values::F32(t.into_vec::<f32>().map_err(js)?),
            DType::F16 => Values::F32(t.to_f32().map_err(js)?),
            DType::I32 if int64 => Values::I64(t.to_i64_vec().map_err(js)?),
            DType::U32 => Values::I64(
                t.to_vec::<u32>()
                    .map_err(js)?
                    .into_iter()
                    .map(i64::from)
                    .collect(),
            ),
            DType::I32 | DType::Bool => Values::I32(t.words().iter().map(|&w| w as i32).collect()),
        };
        Ok(WgTensor { values, dims })
    }

    /// A tensor from Rust values (what the tests build).
    pub fn from_vec(data: Vec<f32>, dims: Vec<usize>) -> WgTensor {
        WgTensor {
            values: Values::F32(data),
            dims,
        }
    }

    /// A float32 tensor's values; `None` for an integer one.
    pub fn values(&self) -> Option<&[f32]> {
        match &self.values {
            Values::F32(v) => Some(v),
            _ => None,
        }
    }

    /// An integer tensor's values, widened to i64; `None` for a float32 one.
    pub fn i64_values(&self) -> Option<Vec<i64>> {
        match &self.values {
            Values::F32(_) => None,
            Values::I32(v) => Some(v.iter().map(|&x| i64::from(x)).collect()),
            Values::I64(v) => Some(v.clone()),
        }
    }
}

/// A saved graph and its session, on cpu:0 or the page's WebGPU adapter.
#[wasm_bindgen]
pub struct GraphSession {
    graph: Graph,
    session: Rc<RefCell<Session>>,
    device: Device,
}

#[wasm_bindgen]
impl GraphSession {
    /// The JSON text `Graph::save` writes (what `wgflow run` reads), on cpu:0.
    #[wasm_bindgen(constructor)]
    pub fn new(json: &str) -> Result<GraphSession, JsError> {
        GraphSession::on_device(json, "cpu:0")
    }

    /// The same on `device` (`"cpu:0"`, or `"gpu:0"` after `initWebGpu`).
    #[wasm_bindgen(js_name = onDevice)]
    pub fn on_device(json: &str, device: &str) -> Result<GraphSession, JsError> {
        let device = Device::parse(device).map_err(js)?;
        let graph = Graph::from_json(json).map_err(js)?;
        let session = Session::new(&graph, options_for(device)).map_err(js)?;
        Ok(GraphSession {
            graph,
            session: Rc::new(RefCell::new(session)),
            device,
        })
    }

    /// Feed `values[i]` to the node named `names[i]` and return the nodes named in
    /// `fetches`, in order. cpu:0 only: a GPU in a page needs `runAsync`.
    pub fn run(
        &mut self,
        names: Vec<String>,
        values: Vec<WgTensor>,
        fetches: Vec<String>,
    ) -> Result<Vec<WgTensor>, JsError> {
        if self.device != Device::Cpu {
            return Err(JsError::new(&format!(
                "{} in a page runs through runAsync (run would block the page)",
                self.device
            )));
        }
        let (feeds, fetch) = self.resolve(&names, values, &fetches)?;
        let mut session = self.session.try_borrow_mut().map_err(|_| busy())?;
        let out = session.run(&feeds, &fetch).map_err(js)?;
        out.into_iter()
            .map(|t| WgTensor::from_host(t, false))
            .collect()
    }

    /// [`GraphSession::run`] on any device, as a `Promise` of the fetched tensors.
    // The borrow is held across the GPU's await on purpose: it marks the session busy, so a
    // second `runAsync` before this one settles is refused by `try_borrow_mut`, not run.
    #[allow(clippy::await_holding_refcell_ref)]
    #[wasm_bindgen(js_name = runAsync)]
    pub fn run_async(
        &self,
        names: Vec<String>,
        values: Vec<WgTensor>,
        fetches: Vec<String>,
    ) -> js_sys::Promise {
        let prepared = self.resolve(&names, values, &fetches);
        let session = self.session.clone();
        wasm_bindgen_futures::future_to_promise(async move {
            let (feeds, fetch) = prepared?;
            let out = {
                let mut session = session.try_borrow_mut().map_err(|_| busy())?;
                session.run_async(&feeds, &fetch).await.map_err(js)?
            };
            let array = js_sys::Array::new();
            for t in out {
                array.push(&JsValue::from(WgTensor::from_host(t, false)?));
            }
            Ok(array.into())
        })
    }
}

fn same_length(names: &[String], values: &[WgTensor]) -> Result<(), JsError> {
    if names.len() != values.len() {
        return Err(JsError::new(&format!(
            "{} feed names for {} values",
            names.len(),
            values.len()
        )));
    }
    Ok(())
}

fn busy() -> JsError {
    JsError::new("this session is already running (await the last runAsync first)")
}

impl GraphSession {
    #[allow(clippy::type_complexity)]
    fn resolve(
        &self,
        names: &[String],
        values: Vec<WgTensor>,
        fetches: &[String],
    ) -> Result<(Vec<(Tensor, HostTensor)>, Vec<Tensor>), JsError> {
        same_length(names, &values)?;
        let node = |name: &str| {
            self.graph
                .tensor(name)
                .ok_or_else(|| JsError::new(&format!("no node is named '{name}'")))
        };
        let feeds = names
            .iter()
            .zip(values)
            .map(|(n, v)| Ok((node(n)?, v.into_host()?)))
            .collect::<Result<Vec<_>, JsError>>()?;
        let fetch = fetches
            .iter()
            .map(|n| node(n))
            .collect::<Result<Vec<_>, JsError>>()?;
        Ok((feeds, fetch))
    }
}

/// An ONNX model (its bytes; external data is refused) on cpu:0 or the page's WebGPU
/// adapter, onnxruntime's way: inputs and outputs by their ONNX names, symbolic dims bound
/// from the feeds.
#[wasm_bindgen]
pub struct OnnxSession {
    inner: Rc<RefCell<InferenceSession>>,
    device: Device,
}

#[wasm_bindgen]
impl OnnxSession {
    /// The model's bytes (a `Uint8Array`), on cpu:0.
    #[wasm_bindgen(constructor)]
    pub fn new(bytes: Vec<u8>) -> Result<OnnxSession, JsError> {
        OnnxSession::on_device(bytes, "cpu:0")
    }

    /// The same on `device` (`"cpu:0"`, or `"gpu:0"` after `initWebGpu`, run through
    /// `runAsync`).
    #[wasm_bindgen(js_name = onDevice)]
    pub fn on_device(bytes: Vec<u8>, device: &str) -> Result<OnnxSession, JsError> {
        let device = Device::parse(device).map_err(js)?;
        let inner = InferenceSession::from_bytes(
            bytes,
            None,
            ImportOptions::default(),
            options_for(device),
        )
        .map_err(js)?;
        Ok(OnnxSession {
            inner: Rc::new(RefCell::new(inner)),
            device,
        })
    }

    /// The inputs' names, as the model declares them.
    #[wasm_bindgen(js_name = inputNames)]
    pub fn input_names(&self) -> Vec<String> {
        self.inner
            .borrow()
            .inputs()
            .iter()
            .map(|d| d.name.clone())
            .collect()
    }

    /// Input `i`'s declared dims, -1 where the size is symbolic (bound from the feed).
    #[wasm_bindgen(js_name = inputDims)]
    pub fn input_dims(&self, i: u32) -> Result<Vec<i32>, JsError> {
        let inner = self.inner.borrow();
        let d = inner.inputs().get(i as usize).ok_or_else(|| {
            JsError::new(&format!(
                "input {i} does not exist (the model has {})",
                inner.inputs().len()
            ))
        })?;
        Ok(d.dims
            .iter()
            .map(|d| d.known().map_or(-1, |n| i32::try_from(n).unwrap_or(-1)))
            .collect())
    }

    /// The outputs' names.
    #[wasm_bindgen(js_name = outputNames)]
    pub fn output_names(&self) -> Vec<String> {
        self.inner
            .borrow()
            .outputs()
            .iter()
            .map(|d| d.name.clone())
            .collect()
    }

    /// Feed `values[i]` to input `names[i]`; returns the model's outputs in order. cpu:0
    /// only: a GPU in a page needs `runAsync`.
    pub fn run(
        &mut self,
        names: Vec<String>,
        values: Vec<WgTensor>,
    ) -> Result<Vec<WgTensor>, JsError> {
        if self.device != Device::Cpu {
            return Err(JsError::new(&format!(
                "{} in a page runs through runAsync (run would block the page)",
                self.device
            )));
        }
        let owned = onnx_feeds(&names, values)?;
        let feeds: Vec<(&str, HostTensor)> = owned
            .into_iter()
            .zip(&names)
            .map(|((_, h), n)| (n.as_str(), h))
            .collect();
        let mut inner = self.inner.try_borrow_mut().map_err(|_| busy())?;
        let out = inner.run_owned(None, feeds).map_err(js)?;
        onnx_results(&inner, out)
    }

    /// [`OnnxSession::run`] on any device, as a `Promise` of the outputs.
    #[allow(clippy::await_holding_refcell_ref)]
    #[wasm_bindgen(js_name = runAsync)]
    pub fn run_async(&self, names: Vec<String>, values: Vec<WgTensor>) -> js_sys::Promise {
        let prepared = onnx_feeds(&names, values);
        let inner = self.inner.clone();
        wasm_bindgen_futures::future_to_promise(async move {
            let (names, tensors): (Vec<String>, Vec<HostTensor>) = prepared?.into_iter().unzip();
            let feeds: Vec<(&str, HostTensor)> =
                names.iter().map(String::as_str).zip(tensors).collect();
            let results = {
                let mut inner = inner.try_borrow_mut().map_err(|_| busy())?;
                let out = inner.run_async(None, feeds).await.map_err(js)?;
                onnx_results(&inner, out)?
            };
            let array = js_sys::Array::new();
            for t in results {
                array.push(&JsValue::from(t));
            }
            Ok(array.into())
        })
    }
}

/// A model's outputs for JavaScript, int64 where the model declares it.
fn onnx_results(inner: &InferenceSession, out: Vec<HostTensor>) -> Result<Vec<WgTensor>, JsError> {
    out.into_iter()
        .zip(inner.outputs())
        .map(|(t, d)| WgTensor::from_host(t, d.is_int64()))
        .collect()
}

fn onnx_feeds(
    names: &[String],
    values: Vec<WgTensor>,
) -> Result<Vec<(String, HostTensor)>, JsError> {
    same_length(names, &values)?;
    names
        .iter()
        .zip(values)
        .map(|(n, v)| Ok((n.clone(), v.into_host()?)))
        .collect()
}
