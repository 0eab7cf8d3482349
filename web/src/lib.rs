//! wgflow in a web page: JavaScript bindings over the Rust library, compiled for
//! `wasm32-unknown-unknown` (`wasm-bindgen`). The browser counterpart of the CLI's `run`:
//! load a saved graph (its JSON text) or an ONNX model (its bytes), feed `Float32Array`s by
//! name, read the fetches back.
//!
//! Sessions here run on `cpu:0`, single-threaded (a page's wasm has no threads unless it is
//! cross-origin isolated). WebGPU needs the asynchronous API (adapter, device and `mapAsync`
//! are promises a page must not block on), which is not built yet. Errors reach JavaScript
//! as `Error`s whose message is the native library's; bad input never panics, so the module
//! stays usable after one.

use js_sys::Float32Array;
use wasm_bindgen::prelude::*;
use wgflow::onnx::{ImportOptions, InferenceSession};
use wgflow::{Device, Graph, HostTensor, Session, SessionOptions};

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

/// A tensor crossing into or out of JavaScript: float32 values and dims.
#[wasm_bindgen]
#[derive(Clone)]
pub struct WgTensor {
    data: Vec<f32>,
    dims: Vec<usize>,
}

#[wasm_bindgen]
impl WgTensor {
    /// `data` in row-major order; its length must be the product of `dims`.
    #[wasm_bindgen(constructor)]
    pub fn new(data: Float32Array, dims: Vec<u32>) -> WgTensor {
        WgTensor {
            data: data.to_vec(),
            dims: dims.into_iter().map(|d| d as usize).collect(),
        }
    }

    /// The values, as a new `Float32Array`.
    #[wasm_bindgen(getter)]
    pub fn data(&self) -> Float32Array {
        Float32Array::from(&self.data[..])
    }

    /// The dims.
    #[wasm_bindgen(getter)]
    pub fn dims(&self) -> Vec<u32> {
        self.dims.iter().map(|&d| d as u32).collect()
    }
}

impl WgTensor {
    fn host(&self) -> Result<HostTensor, JsError> {
        HostTensor::new(self.dims.clone(), self.data.clone()).map_err(js)
    }

    fn from_host(t: &HostTensor) -> Result<WgTensor, JsError> {
        Ok(WgTensor {
            data: t.to_f32().map_err(js)?,
            dims: t.dims().to_vec(),
        })
    }

    /// A tensor from Rust values (what the tests build).
    pub fn from_vec(data: Vec<f32>, dims: Vec<usize>) -> WgTensor {
        WgTensor { data, dims }
    }

    /// The values.
    pub fn values(&self) -> &[f32] {
        &self.data
    }
}

/// A saved graph and its session on cpu:0.
#[wasm_bindgen]
pub struct GraphSession {
    graph: Graph,
    session: Session,
}

#[wasm_bindgen]
impl GraphSession {
    /// The JSON text `Graph::save` writes (what `wgflow run` reads).
    #[wasm_bindgen(constructor)]
    pub fn new(json: &str) -> Result<GraphSession, JsError> {
        let graph = Graph::from_json(json).map_err(js)?;
        let session = Session::new(&graph, cpu_options()).map_err(js)?;
        Ok(GraphSession { graph, session })
    }

    /// Feed `values[i]` to the node named `names[i]` and return the nodes named in
    /// `fetches`, in order.
    pub fn run(
        &mut self,
        names: Vec<String>,
        values: Vec<WgTensor>,
        fetches: Vec<String>,
    ) -> Result<Vec<WgTensor>, JsError> {
        if names.len() != values.len() {
            return Err(JsError::new(&format!(
                "{} feed names for {} values",
                names.len(),
                values.len()
            )));
        }
        let node = |name: &str| {
            self.graph
                .tensor(name)
                .ok_or_else(|| JsError::new(&format!("no node is named '{name}'")))
        };
        let feeds = names
            .iter()
            .zip(&values)
            .map(|(n, v)| Ok((node(n)?, v.host()?)))
            .collect::<Result<Vec<_>, JsError>>()?;
        let fetch = fetches
            .iter()
            .map(|n| node(n))
            .collect::<Result<Vec<_>, JsError>>()?;
        let out = self.session.run(&feeds, &fetch).map_err(js)?;
        out.iter().map(WgTensor::from_host).collect()
    }
}

/// An ONNX model (its bytes; external data is refused) on cpu:0, onnxruntime's way: inputs
/// and outputs by their ONNX names, symbolic dims bound from the feeds.
#[wasm_bindgen]
pub struct OnnxSession {
    inner: InferenceSession,
}

#[wasm_bindgen]
impl OnnxSession {
    /// The model's bytes (a `Uint8Array`).
    #[wasm_bindgen(constructor)]
    pub fn new(bytes: Vec<u8>) -> Result<OnnxSession, JsError> {
        let inner =
            InferenceSession::from_bytes(bytes, None, ImportOptions::default(), cpu_options())
                .map_err(js)?;
        Ok(OnnxSession { inner })
    }

    /// The inputs' names, as the model declares them.
    #[wasm_bindgen(js_name = inputNames)]
    pub fn input_names(&self) -> Vec<String> {
        self.inner.inputs().iter().map(|d| d.name.clone()).collect()
    }

    /// The outputs' names.
    #[wasm_bindgen(js_name = outputNames)]
    pub fn output_names(&self) -> Vec<String> {
        self.inner
            .outputs()
            .iter()
            .map(|d| d.name.clone())
            .collect()
    }

    /// Feed `values[i]` to input `names[i]`; returns the model's outputs in order.
    pub fn run(
        &mut self,
        names: Vec<String>,
        values: Vec<WgTensor>,
    ) -> Result<Vec<WgTensor>, JsError> {
        if names.len() != values.len() {
            return Err(JsError::new(&format!(
                "{} feed names for {} values",
                names.len(),
                values.len()
            )));
        }
        let feeds = names
            .iter()
            .zip(&values)
            .map(|(n, v)| Ok((n.as_str(), v.host()?)))
            .collect::<Result<Vec<_>, JsError>>()?;
        let out = self.inner.run(None, &feeds).map_err(js)?;
        out.iter().map(WgTensor::from_host).collect()
    }
}
