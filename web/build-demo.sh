#!/usr/bin/env bash
# Build the demo page (web/demo) into a static folder, web/dist by default:
#
#     bash web/build-demo.sh && python3 -m http.server -d web/dist 8000
#
# then open http://localhost:8000 in a browser with WebGPU (or without: cpu:0 still runs).
# Needs the wasm32-unknown-unknown target and wasm-bindgen-cli at the version web/Cargo.toml
# pins (see web/README.md). WGFLOW_WEB_PROFILE=dev builds faster and runs slower (CI's check).
set -euo pipefail
web="$(cd "$(dirname "$0")" && pwd)"
out="${1:-$web/dist}"
profile="${WGFLOW_WEB_PROFILE:-release}"
case "$profile" in dev) dir=debug ;; *) dir="$profile" ;; esac
(cd "$web" && cargo build --target wasm32-unknown-unknown --profile "$profile")
target="$(cd "$web" && cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')"
rm -rf "$out"
mkdir -p "$out"
wasm-bindgen --target web --out-dir "$out/pkg" "$target/wasm32-unknown-unknown/$dir/wgflow_web.wasm"
cp "$web/demo/index.html" "$web/demo/demo.js" "$out/"
cp "$web/../graph-examples/data/digits_images.npy" "$web/../graph-examples/data/digits_labels.npy" "$out/"
echo "built $out: serve it with python3 -m http.server -d $out 8000"
