// wgflow, TensorFlow.js and onnxruntime-web on the same workloads in one page, each on its
// WebGPU and its wasm backend, taking turns (driven by run.mjs; results in window.bench).
import init, { initWebGpu, GraphSession, OnnxSession, WgTensor } from "/pkg/wgflow_web.js";
import * as ort from "/nm/onnxruntime-web/dist/ort.webgpu.bundle.min.mjs";

const q = new URLSearchParams(location.search);
const reps = Number(q.get("reps") ?? 3);
const workloads = (q.get("workloads") ?? "w1,w3,w4,w4train,squeezenet,resnet50").split(",");
const skip = new Set((q.get("skip") ?? "").split(",").filter(Boolean)); // "system@workload"
const out = (window.bench = { done: false, rows: [], error: null });
const log = (s) => {
  document.getElementById("log").textContent += "\n" + s;
  console.log(s);
};

const fetchBytes = async (url) => new Uint8Array(await (await fetch(url)).arrayBuffer());
function filled(n, seed) {
  const a = new Float32Array(n);
  let s = seed >>> 0;
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    a[i] = (s >>> 8) / (1 << 24) - 0.5;
  }
  return a;
}

// Every workload is an ONNX model (the same file for wgflow and onnxruntime-web) and, for
// W1/W3/W4, the same computation in TensorFlow.js. Inputs are uploaded on every run and the
// output read back on every run, by every system.
const W = {
  w1: { model: "/models/add.onnx", inputs: [["a", [1 << 24]], ["b", [1 << 24]]],
        tf: (x) => tf.add(x[0], x[1]) },
  w3: { model: "/models/matmul.onnx", inputs: [["a", [1024, 1024]], ["b", [1024, 1024]]],
        tf: (x) => tf.matMul(x[0], x[1]) },
  w4: { model: "/models/mlp.onnx", inputs: [["x", [256, 784]]],
        tfWeights: () => [[784, 512], [512], [512, 512], [512], [512, 10], [10]].map((d, i) => tf.tensor(filled(d.reduce((a, b) => a * b, 1), 99 + i).map((v) => v * 0.1), d)),
        tf: (x, w) => tf.add(tf.matMul(tf.relu(tf.add(tf.matMul(tf.relu(tf.add(tf.matMul(x[0], w[0]), w[1])), w[2]), w[3])), w[4]), w[5]) },
  // One Adam step of W4 (softmax cross-entropy against fed soft labels), reading the loss
  // back: wgflow runs the graph file w4_train_graph.py writes (its first loss is checked
  // against that script's float64 value), TF.js the same model with its own Glorot weights.
  // onnxruntime-web's standard bundle has no training.
  w4train: { graph: "/w4_train.json", expected: "/w4_train.expected.json",
        inputs: [["x", [256, 784]], ["y", [256, 10]]],
        tfTrain: () => {
          const dims = [[784, 512], [512], [512, 512], [512], [512, 10], [10]];
          const vars = dims.map((d, i) => tf.variable(d.length === 2 ? tf.initializers.glorotUniform({ seed: i }).apply(d) : tf.zeros(d)));
          return { vars, opt: tf.train.adam(1e-3) };
        },
        tfLoss: (x, v) => {
          const h1 = tf.relu(tf.add(tf.matMul(x[0], v[0]), v[1]));
          const h2 = tf.relu(tf.add(tf.matMul(h1, v[2]), v[3]));
          const logits = tf.add(tf.matMul(h2, v[4]), v[5]);
          return tf.mul(tf.sum(tf.mul(tf.logSoftmax(logits), x[1])), -1 / 256);
        } },
  squeezenet: { model: "/models/light_squeezenet.onnx", inputs: [["data_0", [1, 3, 224, 224]]] },
  resnet50: { model: "/models/light_resnet50.onnx", inputs: [["gpu_0/data_0", [1, 3, 224, 224]]] },
};

const systems = [];
function system(name, prepare) {
  systems.push({ name, prepare });
}
for (const dev of ["gpu:0", "cpu:0"]) {
  system(`wgflow ${dev === "gpu:0" ? "webgpu" : "wasm cpu:0"}`, async (w, bytes, x) => {
    if (dev === "gpu:0" && !out.gpu) return null;
    const names = w.inputs.map(([n]) => n);
    if (w.graph) {
      const g = GraphSession.onDevice(bytes, dev);
      const fetches = [w.ref.train, w.ref.loss];
      return {
        run: async () => (await g.runAsync(names, x.map((a, i) => new WgTensor(a, w.inputs[i][1])), fetches))[1].data,
        free: () => g.free(),
      };
    }
    const s = OnnxSession.onDevice(bytes, dev);
    return {
      run: async () => (await s.runAsync(names, x.map((a, i) => new WgTensor(a, w.inputs[i][1]))))[0].data,
      free: () => s.free(),
    };
  });
}
for (const ep of ["webgpu", "wasm"]) {
  system(`onnxruntime-web ${ep}`, async (w, bytes, x) => {
    if (w.graph || (ep === "webgpu" && !out.gpu)) return null;
    const s = await ort.InferenceSession.create(bytes, { executionProviders: [ep] });
    return {
      run: async () => {
        const feeds = {};
        w.inputs.forEach(([n, d], i) => (feeds[n] = new ort.Tensor("float32", x[i], d)));
        const r = await s.run(feeds);
        const y = r[s.outputNames[0]];
        const data = y.location === "cpu" ? y.data : await y.getData();
        return data;
      },
      free: () => s.release(),
    };
  });
}
for (const backend of ["webgpu", "wasm"]) {
  system(`TensorFlow.js ${backend}`, async (w, _bytes, x) => {
    if (!(w.tf || w.tfTrain) || (backend === "webgpu" && !out.gpu)) return null;
    await tf.setBackend(backend);
    if (w.tfTrain) {
      const { vars, opt } = w.tfTrain();
      return {
        run: async () => {
          if (tf.getBackend() !== backend) await tf.setBackend(backend);
          const inputs = x.map((a, i) => tf.tensor(a, w.inputs[i][1]));
          const loss = opt.minimize(() => w.tfLoss(inputs, vars), true, vars);
          const data = await loss.data();
          tf.dispose([loss, ...inputs]);
          return data;
        },
        free: () => { tf.dispose(vars); opt.dispose(); },
      };
    }
    const weights = w.tfWeights ? w.tfWeights() : [];
    return {
      run: async () => {
        if (tf.getBackend() !== backend) await tf.setBackend(backend);
        const inputs = x.map((a, i) => tf.tensor(a, w.inputs[i][1]));
        const y = w.tf(inputs, weights);
        const data = await y.data();
        tf.dispose([y, ...inputs]);
        return data;
      },
      free: () => tf.dispose(weights),
    };
  });
}

const median = (v) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)];

async function main() {
  await init();
  out.gpu = (await initWebGpu()) > 0;
  ort.env.wasm.numThreads = 1; // a page that is not cross-origin isolated has no threads
  ort.env.wasm.wasmPaths = "/nm/onnxruntime-web/dist/";
  tf.wasm.setWasmPaths("/nm/@tensorflow/tfjs-backend-wasm/dist/");
  await tf.setBackend("wasm");
  if (out.gpu) await tf.setBackend("webgpu");
  out.agent = navigator.userAgent;
  out.adapter = out.gpu ? (await (await navigator.gpu.requestAdapter()).info) : null;
  if (out.adapter) out.adapter = { vendor: out.adapter.vendor, architecture: out.adapter.architecture, isFallbackAdapter: out.adapter.isFallbackAdapter };
  for (const key of workloads) {
    const w = W[key];
    const bytes = w.graph ? await (await fetch(w.graph)).text() : await fetchBytes(w.model);
    if (w.expected) w.ref = await (await fetch(w.expected)).json();
    const x = w.inputs.map(([, d], i) => filled(d.reduce((a, b) => a * b, 1), 7 + i));
    const live = [];
    for (const sys of systems) {
      if (skip.has(`${sys.name}@${key}`)) continue;
      const t0 = performance.now();
      const ran = await sys.prepare(w, bytes, x);
      if (!ran) continue;
      const y = await ran.run();
      const first = performance.now() - t0;
      live.push({ sys, ran, first, times: [], y });
      log(`${key} ${sys.name}: first run ${first.toFixed(0)} ms`);
    }
    for (let r = 0; r < reps; r++) {
      for (const l of live) {
        const t0 = performance.now();
        await l.ran.run();
        l.times.push(performance.now() - t0);
      }
    }
    const ref = w.ref ? [w.ref.first_loss] : live.find((l) => l.sys.name === "onnxruntime-web wasm")?.y;
    for (const l of live) {
      let diff = null;
      if (ref && !((key === "w4" || key === "w4train") && l.sys.name.startsWith("TensorFlow.js"))) {
        let m = 0, s = 0;
        for (let i = 0; i < ref.length; i++) {
          m = Math.max(m, Math.abs(l.y[i] - ref[i]));
          s = Math.max(s, Math.abs(ref[i]));
        }
        diff = l.y.length === ref.length ? m / Math.max(s, 1e-30) : Infinity;
      }
      const row = { workload: key, system: l.sys.name, first_ms: l.first, median_ms: median(l.times), times_ms: l.times, rel_diff: diff };
      out.rows.push(row);
      log(`${key} ${l.sys.name}: median ${row.median_ms.toFixed(1)} ms (first ${l.first.toFixed(0)} ms)${diff === null ? "" : `, max diff / max |ref| ${diff.toExponential(1)}`}`);
      l.ran.free();
    }
  }
  out.done = true;
}

main().catch((e) => {
  out.error = String(e && e.stack ? e.stack : e);
  log(out.error);
});
