#!/usr/bin/env bash
# Quickstart: on a fresh machine, installs SeaweedFS 4.48 into .tools/, builds
# s3-lifecycled, starts a private loopback `weed server` (free ports, its own data
# dir under .tools/quickstart/), seeds two demo buckets through the S3 API, starts
# `s3-lifecycled serve` (admin API, /metrics and the status page on free loopback
# ports), triggers one pass 40 days in the future (`trigger --now`), and shows what
# was expired and what was kept. Stops serve and the cluster it started (by their
# recorded pids), even on error or Ctrl-C. Exits 0 when the pass did exactly what
# the demo rules say. QUICKSTART_HOLD=60 keeps serve up 60 s after the pass so
# the status page can be opened in a browser.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

say() { printf '\n== %s\n' "$*"; }
die() { printf 'quickstart: %s\n' "$*" >&2; exit 1; }

say "installing SeaweedFS 4.48 into .tools/ (skipped when present)"
weed="$(ops/install-seaweedfs.sh)"

# A debug build: the release profile takes roughly twice as long to compile from
# scratch, the demo pass is tiny either way, and `ops/test.sh` reuses these
# artifacts afterwards.
say "building s3-lifecycled (debug)"
cargo build --locked --bin s3-lifecycled
bin="$root/target/debug/s3-lifecycled"

mkdir -p "$root/.tools/quickstart"
data="$(mktemp -d "$root/.tools/quickstart/run-XXXXXX")"
pid=""
serve_pid=""

# 10 consecutive free loopback ports (8 for weed, 2 for serve) below the kernel's ephemeral range, so
# outgoing connections never take them (docs/test-cluster.md#ports).
base="$(python3 - <<'EOF'
import random, socket
def free(p):
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", p))
    except OSError:
        return False
    finally:
        s.close()
    c = socket.socket(); c.settimeout(0.1)
    try:
        return c.connect_ex(("127.0.0.1", p)) != 0
    finally:
        c.close()
for _ in range(200):
    b = random.randint(10000, 32700 - 10)
    if all(free(p) for p in range(b, b + 10)):
        print(b); break
else:
    raise SystemExit("no 10 consecutive free ports in 10000-32700")
EOF
)"
M=$base; MG=$((base + 1)); V=$((base + 2)); VG=$((base + 3))
F=$((base + 4)); FG=$((base + 5)); S=$((base + 6)); SG=$((base + 7))
ADMIN="127.0.0.1:$((base + 8))"; HTTP="127.0.0.1:$((base + 9))"
s3="http://127.0.0.1:$S"

is_ours() {
  [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] && tr '\0' '\n' <"/proc/$pid/cmdline" | grep -qF -- "$data"
}

serve_running() {
  [ -n "$serve_pid" ] && kill -0 "$serve_pid" 2>/dev/null
}

cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if serve_running; then
    kill -TERM "$serve_pid" 2>/dev/null || true
    wait "$serve_pid" 2>/dev/null || true
  fi
  if is_ours; then
    printf '\n== stopping weed (pid %s; takes ~15 s)\n' "$pid"
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 80); do is_ours || break; sleep 0.5; done
    if is_ours; then kill -KILL "$pid" 2>/dev/null || true; fi
    wait "$pid" 2>/dev/null || true
    # A killed weed leaves its per-port sockets behind; remove only ours.
    for s in "master-grpc-$MG" "volume-grpc-$VG" "filer-grpc-$FG" "s3-grpc-$SG" "s3-$S"; do
      rm -f -- "${TMPDIR:-/tmp}/seaweedfs-$s.sock"
    done
  fi
  if [ "$rc" -eq 0 ]; then
    rm -rf -- "$data"
  else
    printf 'quickstart failed (exit %s); cluster data and weed.log kept in %s\n' "$rc" "$data" >&2
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

say "starting weed server on 127.0.0.1 ports $base-$((base + 7)) (data: ${data#"$root"/})"
printf '[master.volume_growth]\ncopy_1 = 2\n' >"$data/master.toml"
# The subshell execs weed, so $! is weed's own pid. AWS credentials in the
# environment would switch S3 auth on (docs/test-cluster.md#s3-auth).
(
  cd "$data"
  unset AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY
  exec "$weed" -v=0 server -dir="$data" -ip=127.0.0.1 -ip.bind=127.0.0.1 \
    -master.port=$M -master.port.grpc=$MG -master.telemetry=false -master.volumeSizeLimitMB=64 \
    -volume.port=$V -volume.port.grpc=$VG -volume.max=50 -volume.preStopSeconds=0 \
    -filer -filer.port=$F -filer.port.grpc=$FG \
    -s3 -s3.port=$S -s3.port.grpc=$SG -s3.port.iceberg=0 -s3.port.lance=0
) </dev/null >"$data/weed.log" 2>&1 &
pid=$!
echo "$pid" >"$data/weed.pid"

tcp_ok() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
ready() {
  tcp_ok "$MG" && tcp_ok "$FG" && tcp_ok "$SG" || return 1
  curl -s "http://127.0.0.1:$M/dir/status" | grep -q '"Max":[1-9]' || return 1
  case "$(curl -s -o /dev/null -w '%{http_code}' "$s3/")" in 2??|3??|403) ;; *) return 1 ;; esac
  curl -sf -o /dev/null -H 'Accept: application/json' "http://127.0.0.1:$F/" || return 1
}
for i in $(seq 180); do
  kill -0 "$pid" 2>/dev/null || { tail -n 30 "$data/weed.log" >&2; die "weed exited during startup"; }
  ready && break
  [ "$i" -eq 180 ] && { tail -n 30 "$data/weed.log" >&2; die "weed not ready after 90 s"; }
  sleep 0.5
done
echo "ready: S3 $s3, filer gRPC 127.0.0.1:$FG, S3 gRPC 127.0.0.1:$SG"

s3put() { # s3put PATH [curl args...]  (auth is off: plain unsigned requests)
  local path="$1"; shift
  curl -sS --fail-with-body -o /dev/null -X PUT "$@" "$s3/$path" || die "PUT /$path failed"
}

say "seeding demo buckets through the S3 API"
s3put demo-logs
for k in logs/app-2024-01.log logs/app-2024-02.log keep/config.json scratch/notes.csv; do
  s3put "demo-logs/$k" --data-binary "content of $k"
done
s3put demo-logs/scratch/tmp-report.csv --data-binary "tagged scratch" -H 'x-amz-tagging: class=tmp'
upload_id="$(curl -sS --fail-with-body -X POST "$s3/demo-logs/uploads/big.bin?uploads" |
  python3 -c 'import sys,re; print(re.search(r"<UploadId>([^<]+)</UploadId>", sys.stdin.read()).group(1))')"
s3put "demo-logs/uploads/big.bin?partNumber=1&uploadId=$upload_id" --data-binary "first part, never completed"

s3put demo-versions
s3put "demo-versions?versioning=" --data-binary \
  '<VersioningConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Status>Enabled</Status></VersioningConfiguration>'
s3put demo-versions/docs/report.txt --data-binary "report, first draft"
s3put demo-versions/docs/report.txt --data-binary "report, final"
s3put demo-versions/keep/readme.txt --data-binary "only one version"

for doc in ops/demo/*.xml; do
  bucket="$(basename "$doc" .xml)"
  md5="$(python3 -c 'import base64,hashlib,sys; print(base64.b64encode(hashlib.md5(open(sys.argv[1],"rb").read()).digest()).decode())' "$doc")"
  s3put "$bucket?lifecycle=" --data-binary "@$doc" -H "Content-MD5: $md5" -H 'Content-Type: application/xml'
  echo "lifecycle of $bucket: $doc"
done

say "before the pass"
python3 ops/demo/s3state.py snapshot "$s3" "$data/before.json" demo-logs demo-versions

now="$(python3 -c 'import datetime as d; print((d.datetime.now(d.timezone.utc) + d.timedelta(days=40)).strftime("%Y-%m-%dT%H:%M:%SZ"))')"
say "starting s3-lifecycled serve (admin API $ADMIN, HTTP $HTTP)"
# schedule = off: this demo starts its pass with `trigger`; a real service
# starts one every day at service.schedule by itself. allow_future_now = true: the
# demo triggers a pass 40 days ahead, which serve refuses otherwise (never set it
# in production).
S3_LIFECYCLED__TELEMETRY__LOG_FILTER=warn \
S3_LIFECYCLED__CURSOR__DIR=/etc/s3/lifecycle/quickstart \
S3_LIFECYCLED__SERVICE__SCHEDULE=off \
S3_LIFECYCLED__SERVICE__ALLOW_FUTURE_NOW=true \
S3_LIFECYCLED__SERVICE__ADMIN_LISTEN="$ADMIN" \
S3_LIFECYCLED__SERVICE__HTTP_LISTEN="$HTTP" \
  "$bin" serve --filer "127.0.0.1:$FG" --s3-grpc "127.0.0.1:$SG" \
  </dev/null >"$data/serve.log" 2>&1 &
serve_pid=$!
for i in $(seq 120); do
  serve_running || { cat "$data/serve.log" >&2; die "serve exited during startup"; }
  [ "$(curl -s -o /dev/null -w '%{http_code}' "http://$HTTP/ready")" = 200 ] && break
  [ "$i" -eq 120 ] && { cat "$data/serve.log" >&2; die "serve not ready after 60 s"; }
  sleep 0.5
done
echo "ready: status page http://$HTTP/   metrics http://$HTTP/metrics"

say "s3-lifecycled trigger --now $now   (40 days from now)"
run_id="$("$bin" trigger --admin "$ADMIN" --now "$now" | sed -n 's/^run_id=\([0-9a-f]*\).*/\1/p')"
[ -n "$run_id" ] || die "trigger printed no run id"
echo "pass $run_id started"
for i in $(seq 240); do
  last="$("$bin" status --admin "$ADMIN" --last --json)"
  [ "$(printf '%s' "$last" | python3 -c 'import json,sys; print((json.load(sys.stdin) or {}).get("run_id",""))')" = "$run_id" ] && break
  [ "$i" -eq 240 ] && { cat "$data/serve.log" >&2; die "pass $run_id did not finish within 120 s"; }
  sleep 0.5
done
"$bin" status --admin "$ADMIN" --last
outcome="$(printf '%s' "$last" | python3 -c 'import json,sys; print(json.load(sys.stdin)["outcome"])')"
[ "$outcome" = completed ] || die "pass outcome $outcome (expected completed)"

say "metrics (curl http://$HTTP/metrics | grep dispatch_total)"
curl -s "http://$HTTP/metrics" | grep '^SeaweedFS_s3_lifecycle_dispatch_total' || true

if [ "${QUICKSTART_HOLD:-0}" -gt 0 ]; then
  say "status page: http://$HTTP/ (serve stays up ${QUICKSTART_HOLD} s)"
  sleep "$QUICKSTART_HOLD"
fi
say "stopping serve (SIGTERM: drain, save cursors, exit 0)"
kill -TERM "$serve_pid"
set +e
wait "$serve_pid"
serve_rc=$?
set -e
serve_pid=""
[ "$serve_rc" -eq 0 ] || { cat "$data/serve.log" >&2; die "serve exited $serve_rc on SIGTERM"; }
echo "serve stopped cleanly"

say "after the pass"
python3 ops/demo/s3state.py snapshot "$s3" "$data/after.json" demo-logs demo-versions

say "what the pass changed"
cat >"$data/expect.json" <<'EOF'
{"demo-logs": {"expired": ["object logs/app-2024-01.log", "object logs/app-2024-02.log",
                           "object scratch/tmp-report.csv", "upload uploads/big.bin"]},
 "demo-versions": {"expired": ["object docs/report.txt (noncurrent)"]}}
EOF
python3 ops/demo/s3state.py diff "$data/before.json" "$data/after.json" "$data/expect.json" ||
  die "the pass did not expire exactly what the demo rules say (see !! above)"
say "done: the demo rules were enforced as expected"
