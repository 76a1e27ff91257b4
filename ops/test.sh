#!/usr/bin/env bash
# The test command: installs SeaweedFS 4.48 into .tools/ if needed, then runs
# every test (unit, property and end-to-end against a real loopback cluster).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
WEED_BIN="$(ops/install-seaweedfs.sh)"
export WEED_BIN
cargo test --locked "$@"
