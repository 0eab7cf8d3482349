// The demo page: wgflow's JavaScript bindings (pkg/, built by web/build-demo.sh).
import init, { initWebGpu, listDevices, bestDevice, DigitsDemo, OnnxSession, WgTensor } from "./pkg/wgflow_web.js";

const $ = (id) => document.getElementById(id);
const ms = (t) => `${t.toFixed(1)} ms`;
// What the page did, for a driver (web/demo/check.mjs) to read.
const state = (window.demo = { ready: false, epochs: [], accuracy: null, classified: null, top5: null, error: null });

function fail(e) {
  state.error = String(e && e.message ? e.message : e);
  $("error").textContent = state.error;
  console.error(e);
}
window.addEventListener("unhandledrejection", (e) => fail(e.reason));

let digits = null;
let images = null;
let labels = null;

// --- drawing pad: strokes on a 240x240 canvas, read back as the dataset's 8x8 0..16 pixels ---
const pad = $("pad");
const ctx = pad.getContext("2d");
function clearPad() {
  ctx.fillStyle = "#fff";
  ctx.fillRect(0, 0, pad.width, pad.height);
}
clearPad();
let drawing = false;
function at(e) {
  const r = pad.getBoundingClientRect();
  return [e.clientX - r.left, e.clientY - r.top];
}
pad.addEventListener("pointerdown", (e) => {
  drawing = true;
  const [x, y] = at(e);
  ctx.beginPath();
  ctx.moveTo(x, y);
});
pad.addEventListener("pointermove", (e) => {
  if (!drawing) return;
  const [x, y] = at(e);
  ctx.lineWidth = 18;
  ctx.lineCap = "round";
  ctx.strokeStyle = "#000";
  ctx.lineTo(x, y);
  ctx.stroke();
});
pad.addEventListener("pointerup", () => {
  drawing = false;
  classify(padPixels()).catch(fail);
});

// Like the dataset (UCI optdigits): the ink's bounding box scaled into a 32x32 box, centred,
// then counted in 4x4 blocks (0..16 per block).
function padPixels() {
  const { data } = ctx.getImageData(0, 0, pad.width, pad.height);
  const ink = (x, y) => 1 - data[4 * (y * pad.width + x)] / 255;
  let [x0, y0, x1, y1] = [pad.width, pad.height, -1, -1];
  for (let y = 0; y < pad.height; y++)
    for (let x = 0; x < pad.width; x++)
      if (ink(x, y) > 0.1) {
        x0 = Math.min(x0, x); y0 = Math.min(y0, y);
        x1 = Math.max(x1, x); y1 = Math.max(y1, y);
      }
  const out = new Float32Array(64);
  if (x1 < 0) return out;
  const side = Math.max(x1 - x0, y1 - y0) + 1;
  const cx = (x0 + x1) / 2, cy = (y0 + y1) / 2;
  for (let by = 0; by < 32; by++)
    for (let bx = 0; bx < 32; bx++) {
      const sx = Math.round(cx + ((bx + 0.5) / 32 - 0.5) * side);
      const sy = Math.round(cy + ((by + 0.5) / 32 - 0.5) * side);
      if (sx >= 0 && sy >= 0 && sx < pad.width && sy < pad.height && ink(sx, sy) > 0.5)
        out[(by >> 2) * 8 + (bx >> 2)] += 1;
    }
  return out;
}

function drawPixels(px) {
  clearPad();
  const cell = pad.width / 8;
  for (let i = 0; i < 64; i++) {
    const v = 255 - Math.round((px[i] / 16) * 255);
    ctx.fillStyle = `rgb(${v},${v},${v})`;
    ctx.fillRect((i % 8) * cell, Math.floor(i / 8) * cell, cell, cell);
  }
}

function showSmall(px) {
  const s = $("small").getContext("2d");
  const img = s.createImageData(8, 8);
  for (let i = 0; i < 64; i++) {
    const v = 255 - Math.round((px[i] / 16) * 255);
    img.data.set([v, v, v, 255], 4 * i);
  }
  s.putImageData(img, 0, 0);
}

async function classify(px, label) {
  if (!digits || digits.epochs === 0) {
    $("classified").textContent = "train the model first";
    return;
  }
  showSmall(px);
  const t0 = performance.now();
  const probs = await digits.classify(px);
  const t = performance.now() - t0;
  let best = 0;
  for (let i = 1; i < 10; i++) if (probs[i] > probs[best]) best = i;
  $("guess").textContent = String(best);
  $("classified").textContent =
    `${(100 * probs[best]).toFixed(1)}% sure, ${ms(t)} on ${digits.device}` +
    (label === undefined ? "" : ` (label ${label})`);
  $("bars").innerHTML = Array.from(probs, (p, i) =>
    `<div class="bar"><span>${i}</span><div style="width:${Math.max(1, 160 * p)}px"></div>${(100 * p).toFixed(1)}%</div>`).join("");
  state.classified = { digit: best, probs: Array.from(probs), label, ms: t };
}

async function train() {
  $("train").disabled = true;
  try {
    const device = $("device").value;
    const epochs = Math.max(1, Number($("epochs").value) | 0);
    let t0 = performance.now();
    digits = new DigitsDemo(images, labels, device, 1);
    const log = [`built the graph and a session on ${device} in ${ms(performance.now() - t0)}`];
    $("log").textContent = log.join("\n");
    state.epochs = [];
    for (let e = 1; e <= epochs; e++) {
      t0 = performance.now();
      const loss = await digits.trainEpoch();
      const t = performance.now() - t0;
      state.epochs.push({ loss, ms: t });
      log.push(`epoch ${e}: mean loss ${loss.toFixed(4)}, ${ms(t)} (23 steps of 64 images${e === 1 ? ", first run compiles" : ""})`);
      $("log").textContent = log.join("\n");
      $("log").scrollTop = $("log").scrollHeight;
      await new Promise((r) => setTimeout(r, 0)); // let the page paint
    }
    t0 = performance.now();
    state.accuracy = await digits.testAccuracy();
    log.push(`test accuracy ${(100 * state.accuracy).toFixed(1)}% on ${digits.testCount()} images (${ms(performance.now() - t0)})`);
    $("log").textContent = log.join("\n");
    $("log").scrollTop = $("log").scrollHeight;
    $("sample").disabled = false;
    $("trace").disabled = device !== "cpu:0";
    $("trace").title = device === "cpu:0" ? "" : "traces come from cpu:0 (WebGPU in a page has no timestamp queries)";
  } finally {
    $("train").disabled = false;
  }
}

let sampleIndex = 0;
async function sample() {
  const k = sampleIndex++ % digits.testCount();
  const px = digits.testImage(k);
  drawPixels(px);
  await classify(px, digits.testLabel(k));
}

function downloadTrace() {
  const json = digits.traceClassify(padPixels());
  const a = document.createElement("a");
  a.href = URL.createObjectURL(new Blob([json], { type: "application/json" }));
  a.download = "wgflow-trace.json";
  a.click();
  state.trace = json.length;
}

// --- ONNX: the model's first input fed the ONNX test runner's dummy data, arange(n) / n ---
async function runOnnx(file) {
  const out = $("onnx");
  out.textContent = `loading ${file.name}…`;
  const bytes = new Uint8Array(await file.arrayBuffer());
  let t0 = performance.now();
  const session = new OnnxSession(bytes);
  const tImport = performance.now() - t0;
  const dims = Array.from(session.inputDims(0), (d) => (d < 0 ? 1 : d));
  const n = dims.reduce((a, b) => a * b, 1);
  const x = new Float32Array(n);
  for (let i = 0; i < n; i++) x[i] = i / n;
  const name = session.inputNames()[0];
  const times = [];
  let y = null;
  for (let r = 0; r < 3; r++) {
    t0 = performance.now();
    [y] = session.run([name], [new WgTensor(x, dims)]);
    times.push(performance.now() - t0);
  }
  const v = y.data;
  const order = Array.from(v.keys()).sort((a, b) => v[b] - v[a]).slice(0, 5);
  state.top5 = order.map((i) => [i, v[i]]);
  state.onnx = { output: Array.from(y.dims), sum: v.reduce((a, b) => a + b, 0), times, import: tImport };
  out.innerHTML =
    `<div>${file.name}: input <code>${name}</code> [${dims}] (arange(n)/n), output <code>${session.outputNames()[0]}</code> [${Array.from(y.dims)}]</div>` +
    `<div>import ${ms(tImport)}; runs ${times.map(ms).join(", ")} (the first plans and compiles)</div>` +
    `<table><tr><th>top-5 class</th><th>value</th></tr>` +
    order.map((i) => `<tr><td>${i}</td><td>${v[i].toPrecision(4)}</td></tr>`).join("") + `</table>`;
}

async function main() {
  await init();
  let gpus = 0;
  try {
    gpus = await initWebGpu();
  } catch (e) {
    console.warn("no WebGPU:", e);
  }
  const list = listDevices();
  const best = bestDevice();
  state.devices = list;
  state.best = best;
  $("devices").textContent = list.join("\n") + `\nbest device: ${best}` +
    (gpus > 0 && best === "cpu:0" ? " (gpu:0 is a fallback adapter: wasm cpu:0 is faster on the same cores)" : "");
  for (const d of list) {
    const spec = d.split(":").slice(0, 2).join(":");
    const o = new Option(spec, spec, false, spec === best);
    $("device").add(o);
  }
  $("device").value = best;
  const fetchBytes = async (p) => new Uint8Array(await (await fetch(p)).arrayBuffer());
  images = await fetchBytes("digits_images.npy");
  labels = await fetchBytes("digits_labels.npy");
  $("train").onclick = () => train().catch(fail);
  $("clear").onclick = () => clearPad();
  $("sample").onclick = () => sample().catch(fail);
  $("trace").onclick = () => { try { downloadTrace(); } catch (e) { fail(e); } };
  $("model").onchange = (e) => e.target.files[0] && runOnnx(e.target.files[0]).catch(fail);
  state.ready = true;
}

main().catch(fail);
