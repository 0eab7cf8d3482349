// Headless Chromium through chromedriver (plain WebDriver over fetch: no npm packages) and a
// static file server: what web/demo/check.mjs and benches/web/run.mjs share.
// Environment: CHROMEDRIVER (default `chromedriver`), CHROMIUM (default /usr/bin/chromium
// where it exists).
import { spawn } from "node:child_process";
import { createServer } from "node:http";
import { readFile } from "node:fs/promises";
import { existsSync } from "node:fs";
import { extname } from "node:path";

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const types = { ".html": "text/html", ".js": "text/javascript", ".mjs": "text/javascript", ".wasm": "application/wasm" };

/// Serve files on a free local port: `locate(urlPath)` is the file for a path, or null (403).
/// Resolves to `{ url, close }`.
export async function serve(locate) {
  const server = createServer(async (req, res) => {
    const file = locate(decodeURIComponent(new URL(req.url, "http://x").pathname));
    if (!file) return res.writeHead(403).end();
    try {
      const body = await readFile(file);
      res.writeHead(200, { "content-type": types[extname(file)] ?? "application/octet-stream" }).end(body);
    } catch {
      res.writeHead(404).end();
    }
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  return { url: `http://127.0.0.1:${server.address().port}/`, close: () => server.close() };
}

/// A headless Chromium session with WebGPU enabled: `{ call(method, path, body), S, close }`,
/// where `S` is the session's path (`/session/ID`) and `extra` adds capabilities.
export async function browser(args = [], extra = {}) {
  const port = 9300 + Math.floor(Math.random() * 600);
  const driver = spawn(process.env.CHROMEDRIVER || "chromedriver", [`--port=${port}`], { stdio: "ignore" });
  const wd = `http://127.0.0.1:${port}`;
  async function call(method, path, body) {
    const r = await fetch(wd + path, {
      method,
      headers: { "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const j = await r.json();
    if (!r.ok) throw new Error(`${method} ${path}: ${JSON.stringify(j.value).slice(0, 500)}`);
    return j.value;
  }
  try {
    for (let i = 0; !(await call("GET", "/status").catch(() => ({}))).ready; i++) {
      if (i > 100) throw new Error("chromedriver did not start");
      await sleep(100);
    }
    const chrome = { args: ["--headless=new", "--no-sandbox", "--enable-unsafe-webgpu", ...args] };
    const binary = process.env.CHROMIUM || (existsSync("/usr/bin/chromium") ? "/usr/bin/chromium" : null);
    if (binary) chrome.binary = binary;
    const { sessionId } = await call("POST", "/session", {
      capabilities: {
        alwaysMatch: { browserName: "chrome", "goog:chromeOptions": chrome, "goog:loggingPrefs": { browser: "ALL" }, ...extra },
      },
    });
    const S = `/session/${sessionId}`;
    return {
      call,
      S,
      close: async () => {
        await call("DELETE", S).catch(() => {});
        driver.kill();
      },
    };
  } catch (e) {
    driver.kill();
    throw e;
  }
}
