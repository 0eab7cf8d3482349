// Drive the built demo page (web/build-demo.sh) in headless Chromium, as a user would: train
// the digits CNN on the page's WebGPU adapter (one epoch) and on wasm cpu:0, classify test
// images and a digit drawn with the pointer, run an ONNX model picked through the file input,
// and optionally save a screenshot. Plain Node.js (18+) speaking WebDriver to chromedriver: no
// npm packages.
//
//     node web/demo/check.mjs DIST [--screenshot docs/web-demo.png] [--epochs 5]
//
// Environment: as browser.mjs says; WGFLOW_REQUIRE_BROWSER=1 makes a missing WebGPU adapter a
// failure.
import { writeFile, rename } from "node:fs/promises";
import { join, resolve, dirname, basename } from "node:path";
import { fileURLToPath } from "node:url";
import { browser, serve, sleep } from "./browser.mjs";

const args = process.argv.slice(2);
const dist = resolve(args[0] ?? "web/dist");
const opt = (name, dflt) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : dflt;
};
const shot = opt("--screenshot", null);
const epochs = Number(opt("--epochs", "5"));
const root = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const model = join(root, "tests/data/onnx-light/light_squeezenet.onnx");

function check(ok, what) {
  if (!ok) throw new Error(`check failed: ${what}`);
}

const { url: site, close: closeServer } = await serve((p) => {
  const file = resolve(dist, "." + (p.endsWith("/") ? p + "index.html" : p));
  return file.startsWith(dist) ? file : null;
});
let chrome = null;

try {
  chrome = await browser(["--window-size=1150,1250"]);
  const { call, S } = chrome;
  const js = (script, a = []) => call("POST", `${S}/execute/sync`, { script, args: a });
  const state = () => js("return window.demo || null");
  async function until(what, pred, seconds) {
    const end = Date.now() + seconds * 1000;
    for (;;) {
      const s = await state();
      if (s && s.error) throw new Error(`the page failed while waiting for ${what}: ${s.error}`);
      if (s && pred(s)) return s;
      if (Date.now() >= end) {
        const text = await js("return location.href + '\\n' + document.documentElement.outerHTML.slice(0, 300)").catch((e) => String(e));
        const log = await call("POST", `${S}/se/log`, { type: "browser" }).catch(() => []);
        console.error(`page state: ${JSON.stringify(s)}\npage text:\n${text}\nconsole:\n${log.map((l) => l.message).join("\n")}`);
        check(false, `${what} within ${seconds} s`);
      }
      await sleep(200);
    }
  }
  const click = (id) => js(`document.getElementById(arguments[0]).click()`, [id]);
  const setValue = (id, v) => js(`document.getElementById(arguments[0]).value = arguments[1]`, [id, v]);

  await call("POST", `${S}/url`, { url: site });
  let s = await until("the page to load", (s) => s.ready, 60);
  console.log(`devices: ${JSON.stringify(s.devices)}; best: ${s.best}`);
  check(s.devices.some((d) => d.startsWith("cpu:0")), "cpu:0 is listed");
  const gpu = s.devices.find((d) => d.startsWith("gpu:0"));
  if (!gpu) {
    check(process.env.WGFLOW_REQUIRE_BROWSER !== "1", "a WebGPU adapter in the page");
    console.log("no WebGPU adapter: the gpu:0 part is skipped");
  }
  // Device::best(): a fallback (software) adapter ranks below wasm cpu:0.
  check(s.best === (gpu && !gpu.includes("(software,") ? "gpu:0" : "cpu:0"), `best device ${s.best} for ${gpu}`);
  const report = { devices: s.devices, best: s.best };

  const trainOn = async (device, n, seconds) => {
    await setValue("device", device);
    await setValue("epochs", String(n));
    await click("train");
    const r = await until(`${n} epochs on ${device}`, (s) => s.epochs.length === n && s.accuracy !== null, seconds);
    await js("window.demo.accuracy = null");
    return r;
  };
  if (gpu) {
    // One epoch on WebGPU: the loss must fall from about ln 10 = 2.30 at the start.
    const r = await trainOn("gpu:0", 1, 600);
    console.log(`gpu:0: epoch 1 loss ${r.epochs[0].loss.toFixed(4)} in ${r.epochs[0].ms.toFixed(0)} ms, test accuracy ${(100 * r.accuracy).toFixed(1)}%`);
    check(Number.isFinite(r.epochs[0].loss) && r.epochs[0].loss < 2.2, "one epoch on gpu:0 lowers the mean loss below ln 10");
    check(r.accuracy > 0.6, "gpu:0's test accuracy after one epoch > 60%");
    report.gpu = { epoch_ms: r.epochs[0].ms, loss: r.epochs[0].loss, accuracy: r.accuracy };
  }
  const r = await trainOn("cpu:0", epochs, 600);
  const losses = r.epochs.map((e) => e.loss);
  console.log(`cpu:0: losses ${losses.map((l) => l.toFixed(4)).join(" ")}; epoch ms ${r.epochs.map((e) => e.ms.toFixed(0)).join(" ")}; test accuracy ${(100 * r.accuracy).toFixed(1)}%`);
  check(losses.every(Number.isFinite) && losses[losses.length - 1] < losses[0], "the loss falls on cpu:0");
  check(r.accuracy > 0.9, `cpu:0's test accuracy after ${epochs} epochs > 90%`);
  if (report.gpu) {
    // The same seed and batches: gpu:0's first epoch is cpu:0's, up to rounding.
    const [a, b] = [report.gpu.loss, losses[0]];
    console.log(`epoch 1 mean loss: gpu:0 ${a.toFixed(6)}, cpu:0 ${b.toFixed(6)}`);
    check(Math.abs(a - b) <= 1e-3 * Math.abs(b), "gpu:0's first epoch matches cpu:0's within 1e-3");
  }
  report.cpu = { epoch_ms: r.epochs.map((e) => e.ms), losses, accuracy: r.accuracy };

  // Test images drawn on the pad and classified.
  let right = 0;
  for (let k = 0; k < 10; k++) {
    await js("window.demo.classified = null");
    await click("sample");
    const c = (await until(`test image ${k}`, (s) => s.classified, 60)).classified;
    const sum = c.probs.reduce((a, b) => a + b, 0);
    check(Math.abs(sum - 1) < 1e-4 && c.probs.every((p) => p >= 0), `probabilities of test image ${k} sum to 1 (${sum})`);
    right += c.digit === c.label;
  }
  console.log(`${right} of 10 test images classified right`);
  check(right >= 8, "at least 8 of 10 test images classified right");

  // A digit drawn with the pointer: a vertical stroke, a "1".
  await click("clear");
  await js("window.demo.classified = null");
  const pad = (await call("POST", `${S}/element`, { using: "css selector", value: "#pad" }));
  const el = Object.values(pad)[0];
  const move = (x, y, duration = 20) => ({ type: "pointerMove", duration, origin: { "element-6066-11e4-a52e-4f735466cecf": el }, x, y });
  await call("POST", `${S}/actions`, {
    actions: [{
      type: "pointer", id: "pen", parameters: { pointerType: "mouse" },
      actions: [move(4, -90), { type: "pointerDown", button: 0 }, move(0, -30), move(0, 0), move(-2, 40), move(-4, 90), { type: "pointerUp", button: 0 }],
    }],
  });
  const drawn = (await until("the drawn digit", (s) => s.classified && s.classified.label == null, 60)).classified;
  console.log(`the drawn stroke is classified as ${drawn.digit} (${(100 * drawn.probs[drawn.digit]).toFixed(1)}%)`);
  check(drawn.digit === 1, "a vertical stroke is a 1");
  report.drawn = drawn.digit;

  // A trace of one classification on cpu:0 (the download link's JSON).
  await click("trace");
  s = await until("the trace", (s) => s.trace > 0, 30);
  report.trace_bytes = s.trace;

  // The ONNX model through the file input: the light SqueezeNet, whose stored output is a
  // uniform softmax over 1,000 classes (its weights are ConstantOfShape).
  const input = Object.values(await call("POST", `${S}/element`, { using: "css selector", value: "#model" }))[0];
  await call("POST", `${S}/element/${input}/value`, { text: model });
  s = await until("the ONNX model's top-5", (s) => s.top5, 120);
  console.log(`${basename(model)}: output ${JSON.stringify(s.onnx.output)}, runs ${s.onnx.times.map((t) => t.toFixed(0)).join(", ")} ms, top-5 ${JSON.stringify(s.top5)}`);
  check(JSON.stringify(s.onnx.output) === "[1,1000]" || JSON.stringify(s.onnx.output) === "[1,1000,1,1]", "SqueezeNet's output is 1,000 classes");
  check(Math.abs(s.onnx.sum - 1) < 1e-3, "SqueezeNet's softmax sums to 1");
  check(s.top5.every(([, v]) => Math.abs(v - 1e-3) < 1e-6), "the stored output: 1/1000 for every class");
  report.onnx = s.onnx;

  if (shot) {
    await js("window.scrollTo(0, 0)");
    const png = Buffer.from(await call("GET", `${S}/screenshot`), "base64");
    const tmp = `${shot}.tmp-${process.pid}`;
    await writeFile(tmp, png);
    await rename(tmp, shot);
    console.log(`screenshot: ${shot} (${png.length} bytes)`);
  }
  console.log(JSON.stringify(report));
  console.log("demo page: ok");
} catch (e) {
  console.error(String(e && e.stack ? e.stack : e));
  if (chrome) {
    const log = await chrome.call("POST", `${chrome.S}/se/log`, { type: "browser" }).catch(() => []);
    console.error(`the page's console:\n${log.map((l) => l.message).join("\n").slice(0, 20000)}`);
  }
  process.exitCode = 1;
} finally {
  if (chrome) await chrome.close();
  closeServer();
}
