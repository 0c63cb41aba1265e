#!/usr/bin/env bash
# The npm packages of the tests in tests/node (a consumer of the bus written in Node.js, and the
# AsyncAPI specification's JSON schemas docs/asyncapi.yaml is validated against), installed from
# tests/node/package-lock.json. Where node or npm is missing it says so and goes on: those tests
# skip with the same sentence.
set -euo pipefail
cd "$(dirname "$0")/../tests/node"

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  echo "gridbus: node or npm is missing: the Node.js consumer and AsyncAPI validation tests will skip" \
       "(Debian: apt-get install nodejs npm)" >&2
  exit 0
fi
# Installed already from this lock file: nothing to do.
if [ node_modules/.installed -nt package-lock.json ]; then
  exit 0
fi
npm ci --no-audit --no-fund --loglevel=error
touch node_modules/.installed
