//! [`InferenceSession`]: run a model by its ONNX names, as onnxruntime's
//! `InferenceSession(path).run(None, {"input_ids": ids})` does.
//!
//! One import serves every size. The model is imported once with its symbolic dimensions
//! (`batch`, `sequence`) as run-time dimensions, and each set of sizes the feeds bring gets a
//! plan of its own in one [`Session`]. Some models cannot be one graph for all sizes: a size
//! becomes data (`Range(0, seq)` as position ids), a recurrence is unrolled over the sequence,
//! or an input's *value* is a shape (a fed `Resize` scale, a fed `Reshape` shape). Those are
//! imported again for each set of sizes and values the feeds bring, the sizes and values then
//! constants, and the imports are cached (at most [`InferenceSession::MAX_IMPORTS`], least
//! recently run dropped); [`InferenceSession::per_binding`] says which way a model runs.

use super::proto::{tensor_shape_proto::dimension::Value as D, type_proto::Value as T};
use super::{decode_model, fail, import_model, proto, ImportOptions, Model};
use crate::compile::Plan;
use crate::graph::Dim;
use crate::{Error, HostTensor, Result, Session, SessionOptions, Tensor};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A model input or output as the file declares it.
#[derive(Debug, Clone, PartialEq)]
pub struct Declared {
    /// Its ONNX name.
    pub name: String,
    /// Its dimensions: sizes, and symbolic ones by name (an unnamed one is
    /// `"<input>:<axis>"`).
    pub dims: Vec<Dim>,
    /// The ONNX element type's name (`FLOAT`, `INT64`, …).
    pub onnx_type: String,
}

impl Declared {
    /// Whether it is int64 in the model (wgflow holds it as i32: feed
    /// [`HostTensor::from_i64`], read back with [`HostTensor::to_i64_vec`]).
    pub fn is_int64(&self) -> bool {
        self.onnx_type == "INT64"
    }
}

/// One import and its session: the symbolic one, or one for a binding.
struct Imported {
    model: Model,
    session: Session,
}

/// An ONNX model ready to run by names; see the [module](self) docs.
pub struct InferenceSession {
    /// The decoded model, kept only where it is imported again per binding: a model that
    /// one import serves holds its weights once, in that import's graph.
    model: Option<Arc<proto::ModelProto>>,
    dir: Option<PathBuf>,
    import: ImportOptions,
    options: SessionOptions,
    inputs: Vec<Declared>,
    outputs: Vec<Declared>,
    /// The import with run-time dimensions, unless the model cannot be one.
    symbolic: Option<Imported>,
    /// Why the model is imported per binding (the symbolic import's error).
    per_binding: Option<String>,
    /// Inputs whose values the import needs (they become constants of each import).
    value_inputs: Vec<String>,
    /// Imports per binding, most recently run last.
    pinned: Vec<(String, Imported)>,
}

impl std::fmt::Debug for InferenceSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InferenceSession")
            .field("inputs", &self.inputs)
            .field("outputs", &self.outputs)
            .field("per_binding", &self.per_binding)
            .finish_non_exhaustive()
    }
}

impl InferenceSession {
    /// The most per-binding imports kept (each holds its own copy of the weights).
    pub const MAX_IMPORTS: usize = 4;

    /// Open the `.onnx` file at `path` (external data is read from its directory).
    pub fn new(path: &Path, import: ImportOptions, options: SessionOptions) -> Result<Self> {
        let bytes = crate::files::read_regular(path, import.max_file_bytes, "ONNX model")
            .map_err(|e| fail(format!("file {}", path.display()), e.to_string()))?;
        Self::from_bytes(bytes, path.parent(), import, options)
    }

    /// A model from its bytes; `dir` is where its external data lives (`None`: refuse it).
    pub fn from_bytes(
        bytes: Vec<u8>,
        dir: Option<&Path>,
        import: ImportOptions,
        options: SessionOptions,
    ) -> Result<Self> {
        let model = decode_model(&bytes, &import)?;
        // The file's bytes go before the weights are built from the decoded model: the import
        // then peaks at two copies of the weights, not three.
        drop(bytes);
        let (inputs, outputs) = declared(&model, &import)?;
        let mut s = InferenceSession {
            model: Some(Arc::new(model)),
            dir: dir.map(Path::to_path_buf),
            import,
            options,
            inputs,
            outputs,
            symbolic: None,
            per_binding: None,
            value_inputs: Vec::new(),
            pinned: Vec::new(),
        };
        // On a 32-bit target (wasm32) the probe sizes that stand in for run-time dimensions
        // (about 2^17 each) overflow a usize element count once two meet in one tensor
        // (`[batch, seq, hidden]`): such a model is imported per binding there.
        if cfg!(target_pointer_width = "32") && has_symbols(&s.inputs, &s.import) {
            s.per_binding = Some(
                "symbolic dimensions are bound before import on a 32-bit target (wasm32)".into(),
            );
            return Ok(s);
        }
        let decoded = s
            .model
            .clone()
            .ok_or_else(|| Error::Internal("no decoded model".into()))?;
        match import_model(&decoded, s.dir.as_deref(), &s.import) {
            Ok(model) => {
                let session = Session::new(&model.graph, s.options.clone())?;
                s.symbolic = Some(Imported { model, session });
                // One import serves every size and no input's value is needed: the decoded
                // model is not read again.
                s.model = None;
            }
            Err(e) => {
                let text = e.to_string();
                // An input's value is needed: with it, the rest may still fail, so import
                // once per binding from the first run on.
                if let Some(name) = is_value_needed(&text, &s.inputs) {
                    s.value_inputs.push(name);
                } else if !has_symbols(&s.inputs, &s.import) {
                    // All sizes are known: the error is the model's, not the sizes'.
                    return Err(e);
                }
                s.per_binding = Some(without_pin_advice(&text));
            }
        }
        Ok(s)
    }

    /// The inputs to feed, as the model declares them (initializers are not listed).
    pub fn inputs(&self) -> &[Declared] {
        &self.inputs
    }

    /// The model's outputs, in order.
    pub fn outputs(&self) -> &[Declared] {
        &self.outputs
    }

    /// `None` when one import serves every size; else why the model is imported once per
    /// set of sizes (and fed shape values) instead.
    pub fn per_binding(&self) -> Option<&str> {
        self.per_binding.as_deref()
    }

    /// The sizes `feeds` give the model's symbolic input dimensions (those not pinned at
    /// import), as `(name, size)`: what to pin for a static import of one binding. Errors as
    /// a run would: a feed of the wrong rank, two feeds that disagree on a size, or a
    /// dimension no feed gives.
    pub fn sizes_from_feeds(&self, feeds: &[(&str, HostTensor)]) -> Result<Vec<(String, usize)>> {
        let (sizes, _) = self.binding(feeds)?;
        let mut sizes: Vec<(String, usize)> = sizes.into_iter().collect();
        sizes.sort();
        Ok(sizes)
    }

    /// Run the model: `feeds` by input name, `fetches` by ONNX value name (`None`: the
    /// model's outputs in order). Returns the values in the order asked for.
    pub fn run(
        &mut self,
        fetches: Option<&[&str]>,
        feeds: &[(&str, HostTensor)],
    ) -> Result<Vec<HostTensor>> {
        let (imp, fed, fetch) = self.prepare(fetches, feeds)?;
        let fed: Vec<(Tensor, HostTensor)> = fed
            .into_iter()
            .map(|(t, k)| (t, feeds[k].1.clone()))
            .collect();
        imp.session.run(&fed, &fetch)
    }

    /// The asynchronous form of [`InferenceSession::run_owned`] (what a web page awaits: a
    /// GPU there must not be blocked on). The feeds are taken by value, not copied.
    pub async fn run_async(
        &mut self,
        fetches: Option<&[&str]>,
        feeds: Vec<(&str, HostTensor)>,
    ) -> Result<Vec<HostTensor>> {
        let (imp, fed, fetch) = self.prepare_owned(fetches, feeds)?;
        imp.session.run_async(&fed, &fetch).await
    }

    /// [`InferenceSession::run`] taking the feeds by value, so that none is copied on the
    /// way (what the Python binding calls).
    pub fn run_owned(
        &mut self,
        fetches: Option<&[&str]>,
        feeds: Vec<(&str, HostTensor)>,
    ) -> Result<Vec<HostTensor>> {
        let (imp, fed, fetch) = self.prepare_owned(fetches, feeds)?;
        imp.session.run(&fed, &fetch)
    }

    /// [`InferenceSession::prepare`] with the fed values moved into their placeholders.
    #[allow(clippy::type_complexity)]
    fn prepare_owned(
        &mut self,
        fetches: Option<&[&str]>,
        feeds: Vec<(&str, HostTensor)>,
    ) -> Result<(&mut Imported, Vec<(Tensor, HostTensor)>, Vec<Tensor>)> {
        let (imp, fed, fetch) = self.prepare(fetches, &feeds)?;
        let mut values: Vec<Option<HostTensor>> = feeds.into_iter().map(|(_, h)| Some(h)).collect();
        let fed: Vec<(Tensor, HostTensor)> = fed
            .into_iter()
            .filter_map(|(t, k)| Some((t, values.get_mut(k)?.take()?)))
            .collect();
        Ok((imp, fed, fetch))
    }

    /// The plan that [`InferenceSession::run`] runs for these feeds (compiled and cached).
    pub fn plan_for(
        &mut self,
        fetches: Option<&[&str]>,
        feeds: &[(&str, HostTensor)],
    ) -> Result<Arc<Plan>> {
        let (imp, fed, fetch) = self.prepare(fetches, feeds)?;
        let fed: Vec<(Tensor, HostTensor)> = fed
            .into_iter()
            .map(|(t, k)| (t, feeds[k].1.clone()))
            .collect();
        imp.session.plan_for(&fed, &fetch)
    }

    /// The session and imported model that run these feeds (the symbolic one, or the
    /// binding's), e.g. for its counters or graph.
    pub fn session_for(&mut self, feeds: &[(&str, HostTensor)]) -> Result<(&mut Session, &Model)> {
        let (imp, _, _) = self.prepare(None, feeds)?;
        Ok((&mut imp.session, &imp.model))
    }

    /// The import for `feeds`, its placeholder for each fed value (with the value's position
    /// in `feeds`), and the fetches resolved in it.
    #[allow(clippy::type_complexity)]
    fn prepare(
        &mut self,
        fetches: Option<&[&str]>,
        feeds: &[(&str, HostTensor)],
    ) -> Result<(&mut Imported, Vec<(Tensor, usize)>, Vec<Tensor>)> {
        for (name, _) in feeds {
            if !self.inputs.iter().any(|i| i.name == *name) {
                let names: Vec<&str> = self.inputs.iter().map(|i| i.name.as_str()).collect();
                return Err(Error::Feed {
                    kind: crate::FeedKind::Name,
                    name: (*name).to_string(),
                    message: format!(
                        "the model has no such input (its inputs: {})",
                        names.join(", ")
                    ),
                });
            }
        }
        let missing: Vec<String> = self
            .inputs
            .iter()
            .filter(|i| !feeds.iter().any(|(n, _)| *n == i.name))
            .map(|i| {
                let dims = crate::graph::dims_text(&i.dims);
                format!("{} ({} {dims})", i.name, i.onnx_type)
            })
            .collect();
        if !missing.is_empty() {
            return Err(Error::Feed {
                kind: crate::FeedKind::Missing,
                name: missing.join(", "),
                message: "is an input of the model but not fed; pass --feed NAME=FILE.npy for each"
                    .into(),
            });
        }
        let imp = if self.symbolic.is_some() && self.value_inputs.is_empty() {
            self.symbolic
                .as_mut()
                .ok_or_else(|| Error::Internal("no import".into()))?
        } else {
            self.pinned_for(feeds)?
        };
        let mut fed = Vec::with_capacity(feeds.len());
        for (k, (name, _)) in feeds.iter().enumerate() {
            // An input made a constant of this import is not fed.
            if let Some(t) = imp.model.inputs.iter().find(|i| i.name == *name) {
                fed.push((t.tensor, k));
            }
        }
        let fetch = match fetches {
            None => imp.model.output_tensors(),
            Some(names) => names
                .iter()
                .map(|n| {
                    imp.model.value(n).ok_or_else(|| Error::Fetch {
                        name: (*n).to_string(),
                        message: "no output or value of the model has this name (values folded at import have none)".into(),
                    })
                })
                .collect::<Result<_>>()?,
        };
        Ok((imp, fed, fetch))
    }

    /// The import whose sizes (and needed input values) are those of `feeds`, made if new.
    fn pinned_for(&mut self, feeds: &[(&str, HostTensor)]) -> Result<&mut Imported> {
        loop {
            let (dims, key) = self.binding(feeds)?;
            if let Some(k) = self.pinned.iter().position(|(have, _)| *have == key) {
                let entry = self.pinned.remove(k);
                self.pinned.push(entry);
                break;
            }
            let mut opts = self.import.clone();
            opts.dims.extend(dims);
            for name in &self.value_inputs {
                if let Some((_, v)) = feeds.iter().find(|(n, _)| n == name) {
                    opts.constant_inputs.insert(name.clone(), v.clone());
                }
            }
            let decoded = self
                .model
                .as_ref()
                .ok_or_else(|| Error::Internal("the decoded model was dropped".into()))?;
            match import_model(decoded, self.dir.as_deref(), &opts) {
                Ok(model) => {
                    let session = Session::new(&model.graph, self.options.clone())?;
                    if self.pinned.len() >= Self::MAX_IMPORTS {
                        self.pinned.remove(0);
                    }
                    self.pinned.push((key, Imported { model, session }));
                    break;
                }
                Err(e) => match is_value_needed(&e.to_string(), &self.inputs) {
                    Some(name)
                        if !self.value_inputs.contains(&name)
                            && feeds.iter().any(|(n, _)| *n == name) =>
                    {
                        self.value_inputs.push(name);
                    }
                    _ => return Err(e),
                },
            }
        }
        let last = self.pinned.len() - 1;
        Ok(&mut self.pinned[last].1)
    }

    /// The sizes of the model's symbolic dimensions that `feeds` bring, and a key naming
    /// them and the values of the inputs the import needs.
    fn binding(&self, feeds: &[(&str, HostTensor)]) -> Result<(HashMap<String, usize>, String)> {
        let mut sizes: HashMap<String, (usize, &str)> = HashMap::new();
        for input in &self.inputs {
            let Some((_, v)) = feeds.iter().find(|(n, _)| *n == input.name) else {
                continue;
            };
            if v.dims().len() != input.dims.len() {
                return Err(Error::Feed {
                    kind: crate::FeedKind::Shape,
                    name: input.name.clone(),
                    message: format!(
                        "has rank {}, the model declares {} ({})",
                        v.dims().len(),
                        input.dims.len(),
                        crate::graph::dims_text(&input.dims)
                    ),
                });
            }
            for (d, &n) in input.dims.iter().zip(v.dims()) {
                let Dim::Named(sym) = d else { continue };
                if self.import.dims.contains_key(sym) {
                    continue;
                }
                match sizes.get(sym) {
                    Some(&(m, other)) if m != n => {
                        return Err(Error::Feed {
                            kind: crate::FeedKind::Shape,
                            name: input.name.clone(),
                            message: format!(
                                "gives dimension '{sym}' size {n}, but '{other}' gives it {m}"
                            ),
                        })
                    }
                    _ => {
                        sizes.insert(sym.clone(), (n, &input.name));
                    }
                }
            }
        }
        // A size no feed brings must be pinned.
        for input in &self.inputs {
            for d in &input.dims {
                if let Dim::Named(sym) = d {
                    if !sizes.contains_key(sym) && !self.import.dims.contains_key(sym) {
                        return Err(Error::Feed {
                            kind: crate::FeedKind::Missing,
                            name: input.name.clone(),
                            message: format!(
                                "is not fed, so its dimension '{sym}' has no size: feed it, or pin the size (ImportOptions::dims, --dim {sym}=SIZE)"
                            ),
                        });
                    }
                }
            }
        }
        let mut names: Vec<(&String, &(usize, &str))> = sizes.iter().collect();
        names.sort();
        let mut key: String = names
            .iter()
            .map(|(k, (n, _))| format!("{k}={n};"))
            .collect();
        for name in &self.value_inputs {
            if let Some((_, v)) = feeds.iter().find(|(n, _)| n == name) {
                key += &format!("{name}:{:?}:{:?}:{:?};", v.dtype(), v.dims(), v.words());
            }
        }
        let dims = sizes.into_iter().map(|(k, (n, _))| (k, n)).collect();
        Ok((dims, key))
    }
}

/// The model input named in an import error that needs an input's value at import (a fed
/// shape, scale or count), if it is one of `inputs`.
fn is_value_needed(text: &str, inputs: &[Declared]) -> Option<String> {
    if !text.contains("must be known at import") {
        return None;
    }
    text.split("('")
        .skip(1)
        .filter_map(|rest| rest.split_once("')").map(|(n, _)| n))
        .find(|n| inputs.iter().any(|i| i.name == *n))
        .map(str::to_string)
}

/// An import error's message without the importer's advice to pin dimensions, for a caller
/// that binds them from the feeds itself (a per-binding [`InferenceSession`], the CLI), to
/// whose users the advice does not apply.
pub fn without_pin_advice(text: &str) -> String {
    const ADVICE: [&str; 2] = ["; import with those dimensions pinned (", "; pin it ("];
    let mut out = text.to_string();
    for a in ADVICE {
        if let Some(at) = out.find(a) {
            let end = out[at + a.len()..]
                .find(')')
                .map_or(out.len(), |e| at + a.len() + e + 1);
            out.replace_range(at..end, "");
        }
    }
    out
}

fn has_symbols(inputs: &[Declared], opts: &ImportOptions) -> bool {
    inputs.iter().flat_map(|i| &i.dims).any(|d| match d {
        Dim::Named(s) => !opts.dims.contains_key(s),
        _ => false,
    })
}

/// The declared inputs (without initializers) and outputs of `model`.
fn declared(
    model: &proto::ModelProto,
    opts: &ImportOptions,
) -> Result<(Vec<Declared>, Vec<Declared>)> {
    let graph = model
        .graph
        .as_ref()
        .ok_or_else(|| fail("model", "has no graph"))?;
    let inits: std::collections::HashSet<&str> = graph
        .initializer
        .iter()
        .filter_map(|t| t.name.as_deref())
        .collect();
    let one = |vi: &proto::ValueInfoProto| {
        let name = vi.name.clone().unwrap_or_default();
        let (dims, elem) = match vi.r#type.as_ref().and_then(|t| t.value.as_ref()) {
            Some(T::TensorType(tt)) => {
                let dims = tt.shape.as_ref().map_or(Vec::new(), |s| {
                    s.dim
                        .iter()
                        .enumerate()
                        .map(|(axis, d)| match &d.value {
                            Some(D::DimValue(v)) if *v >= 0 => Dim::Known(*v as usize),
                            Some(D::DimParam(p)) if !p.is_empty() => Dim::Named(p.clone()),
                            _ => Dim::Named(format!("{name}:{axis}")),
                        })
                        .collect()
                });
                (dims, tt.elem_type.unwrap_or(0))
            }
            _ => (Vec::new(), 0),
        };
        Declared {
            name,
            dims,
            onnx_type: proto::tensor_proto::DataType::try_from(elem)
                .map_or_else(|_| elem.to_string(), |d| d.as_str_name().to_string()),
        }
    };
    let inputs = graph
        .input
        .iter()
        .filter(|vi| !inits.contains(vi.name.as_deref().unwrap_or("")))
        .filter(|vi| {
            !opts
                .constant_inputs
                .contains_key(vi.name.as_deref().unwrap_or(""))
        })
        .map(one)
        .collect();
    let outputs = graph.output.iter().map(one).collect();
    Ok((inputs, outputs))
}

#[cfg(test)]
mod tests {
    use super::without_pin_advice as without_advice;

    #[test]
    fn a_per_binding_reason_drops_the_advice_to_pin() {
        let text = "node 'e' (Einsum): Einsum merges the run-time dimension batch with others; pin it (--dim batch=SIZE)";
        assert_eq!(
            without_advice(text),
            "node 'e' (Einsum): Einsum merges the run-time dimension batch with others"
        );
        let text = "node 'r' (Reshape): a value computed from the run-time dimensions would become a fixed size; import with those dimensions pinned (ImportOptions::dims, --dim batch=SIZE --dim seq=SIZE) at model.onnx";
        assert_eq!(
            without_advice(text),
            "node 'r' (Reshape): a value computed from the run-time dimensions would become a fixed size at model.onnx"
        );
        assert_eq!(without_advice("no advice here"), "no advice here");
    }
}
