// Drive the side-by-side page (index.html, bench.js) in headless Chromium through chromedriver
// and print one table: wgflow, TensorFlow.js and onnxruntime-web on WebGPU and on wasm.
//
//     node benches/web/run.mjs --pkg web/dist/pkg --models DIR [--reps 3]
//         [--workloads w1,w3,w4,w4train,squeezenet,resnet50] [--skip "SYSTEM@WORKLOAD,..."] [--json OUT]
//
// See benches/web/README.md for the setup (npm ci, the wasm build, models.py).
import { writeFile } from "node:fs/promises";
import { join, resolve, dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { browser, serve, sleep } from "../../web/demo/browser.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, "../..");
const args = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : dflt;
};
const pkg = resolve(opt("--pkg", join(root, "web/dist/pkg")));
const models = resolve(opt("--models", "/tmp/wgflow-web-bench-models"));
const query = new URLSearchParams({
  reps: opt("--reps", "3"),
  workloads: opt("--workloads", "w1,w3,w4,w4train,squeezenet,resnet50"),
  skip: opt("--skip", ""),
});
const jsonOut = opt("--json", null);

const mounts = [
  ["/nm/", join(here, "node_modules") + "/"],
  ["/pkg/", pkg + "/"],
  ["/models/light_", join(root, "tests/data/onnx-light/light_")],
  ["/models/", models + "/"],
  ["/", here + "/"],
];
const { url, close: closeServer } = await serve((path) => {
  if (path === "/") path = "/index.html";
  const [prefix, dir] = mounts.find(([p]) => path.startsWith(p));
  const file = resolve(dir + path.slice(prefix.length));
  return file.startsWith(dirname(dir + "x")) ? file : null;
});
const site = `${url}?${query}`;

let chrome = null;
try {
  chrome = await browser([], { timeouts: { script: 3600000 } });
  const { call, S } = chrome;
  await call("POST", `${S}/url`, { url: site });
  let state;
  let lastLog = "";
  const started = Date.now();
  for (;;) {
    state = await call("POST", `${S}/execute/sync`, {
      script: "return window.bench ? Object.assign({ log: document.getElementById('log').textContent }, window.bench) : null",
      args: [],
    });
    if (state && state.log !== lastLog) {
      console.error(state.log.slice(lastLog.length).trim());
      lastLog = state.log;
    }
    if (state) {
      if (state.error) throw new Error(`the page failed: ${state.error}`);
      if (state.done) break;
    }
    if (!state && Date.now() - started > 60000) {
      const logs = await call("POST", `${S}/se/log`, { type: "browser" }).catch(() => []);
      throw new Error(`the page did not start:\n${logs.map((l) => l.message).join("\n")}`);
    }
    await sleep(500);
  }
  const systems = [...new Set(state.rows.map((r) => r.system))];
  const loads = [...new Set(state.rows.map((r) => r.workload))];
  console.log(`Chromium: ${state.agent}\nadapter: ${JSON.stringify(state.adapter)}\n`);
  console.log(`| workload | ${systems.join(" | ")} |\n|---|${systems.map(() => "---").join("|")}|`);
  for (const w of loads) {
    const cells = systems.map((s) => {
      const r = state.rows.find((r) => r.workload === w && r.system === s);
      if (!r) return "—";
      const bad = r.rel_diff !== null && !(r.rel_diff <= 1e-3) ? " **wrong**" : "";
      return `${r.median_ms.toFixed(1)} (first ${r.first_ms.toFixed(0)})${bad}`;
    });
    console.log(`| ${w} | ${cells.join(" | ")} |`);
  }
  if (jsonOut) await writeFile(jsonOut, JSON.stringify(state, null, 1));
} catch (e) {
  console.error(String(e && e.stack ? e.stack : e));
  process.exitCode = 1;
} finally {
  if (chrome) await chrome.close();
  closeServer();
}
