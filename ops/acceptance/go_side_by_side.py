#!/usr/bin/env python3
"""Side by side: the Go lifecycle worker of SeaweedFS 4.48 (`weed shell` ->
`s3.lifecycle.run-shard`) and s3-lifecycled (`run-once`), both at the wall clock, on twin
buckets with identical contents and lifecycle documents. See GO_SIDE_BY_SIDE.md.

Every case gets two buckets, `gs-<run>-<case>-go` and `gs-<run>-<case>-rs`, built by the same
code through the S3 API (boto3; lifecycle XML sent raw, S3 auth off) and then made old by
shifting the times of their filer entries back (docs/test-cluster.md#backdating). The Go pass
acts on every bucket of the cluster that has a lifecycle document, so the run has two phases:

  phase go: build every -go twin, run the Go pass, (between-pass steps), Go pass again
  phase rs: build every -rs twin, run-once --buckets <-rs twins>, (between-pass steps), again

The -rs twins do not exist while the Go passes run. After each pass both twins are listed through
S3 (ListObjectVersions, ListMultipartUploads, ListParts) and normalised (version ids replaced by
the labels the harness gave them), and compared.

    ops/acceptance/go_side_by_side.py --workdir /work/scratch/gs            # starts a cluster
    ops/acceptance/go_side_by_side.py --attach --s3 http://127.0.0.1:24006 \\
        --filer 127.0.0.1:24005 --s3-grpc 127.0.0.1:24007 --master 127.0.0.1:24000.24001

Exit 0 when every case's final state is the same or differs for a cause listed in
EXPECTED_DIFF; 1 otherwise.
"""

import argparse
import base64
import datetime as dt
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid

import boto3
import requests
from botocore.config import Config

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
NS = 'xmlns="http://s3.amazonaws.com/doc/2006-03-01/"'
DAY = 86400
BUCKETS_ROOT = "/buckets"
NONCURRENT_SINCE = "Seaweed-X-Amz-Noncurrent-Since-Ns"
LATEST_MTIME = "Seaweed-X-Amz-Latest-Version-Mtime"

# Final-state differences with a known, documented cause (GO_SIDE_BY_SIDE.md has the details).
# case -> (class, one-line cause)
EXPECTED_DIFF = {
    "rounding": ("design: due rounding",
                 "Go deletes at mtime + N days exactly; we round up to the next midnight UTC as AWS does "
                 "(docs/design-deviations.md#due-rounding). Differs whenever now is past 01:00 UTC."),
    "mpu-with-exp": ("Go bug (documented)",
                     "Go expires the parts of an upload in progress as ordinary objects (facts §13.21, "
                     "docs/design-deviations.md#parts-are-not-objects); we and AWS leave them."),
    "st-mpu-parts": ("Go bug (documented)",
                     "as mpu-with-exp, reached through replay of the part files' events (facts §13.21)."),
    "st-v-exp": ("Go bug (documented)",
                 "Go's replay never expires the current version of a versioning-enabled bucket; only a "
                 "recovery/cold-start walk does (facts §13.5, docs/design-deviations.md#versioned-current-versions)."),
    "enable-later": ("Go bug (documented)",
                     "enabling a Disabled rule does not change Go's rule-set hash, so no recovery walk; "
                     "objects written before the cursor are never examined (facts §13.3, "
                     "docs/design-deviations.md#disabled-rules)."),
    "v-newer-1": ("Go bug (new, racy)",
                  "same Go bug as st-v-newer, reached in the cold-start pass when the drain of the shard owning "
                  "`k.versions` runs before the walk of the shard owning `k`; otherwise the walk deletes first "
                  "and the twins agree. GO_SIDE_BY_SIDE.md#st-v-newer."),
    "v-newer-2": ("Go bug (new, racy)", "as v-newer-1."),
    "st-v-newer": ("Go bug (new)",
                   "Go's replay ranks a key's CURRENT versions against the latest id of an OLD pointer event "
                   "(facts §4.4 expansion), so it deletes the newest noncurrent version (that "
                   "NewerNoncurrentVersions keeps) and keeps an older one. GO_SIDE_BY_SIDE.md#st-v-newer."),
}


# --------------------------------------------------------------------------------------------
# filer gRPC (stubs generated from the repo's proto/filer.proto into the workdir)
# --------------------------------------------------------------------------------------------
def load_filer_pb(workdir):
    out = os.path.join(workdir, "pb")
    os.makedirs(out, exist_ok=True)
    if not os.path.exists(os.path.join(out, "filer_pb2_grpc.py")):
        from grpc_tools import protoc
        rc = protoc.main(["protoc", f"-I{os.path.join(REPO, 'proto')}", f"--python_out={out}",
                          f"--grpc_python_out={out}", os.path.join(REPO, "proto", "filer.proto")])
        if rc != 0:
            sys.exit("protoc failed on proto/filer.proto")
    sys.path.insert(0, out)
    import filer_pb2  # noqa: E402
    import filer_pb2_grpc  # noqa: E402
    return filer_pb2, filer_pb2_grpc


class Filer:
    def __init__(self, addr, workdir):
        import grpc
        self.pb, pbg = load_filer_pb(workdir)
        opts = [("grpc.max_receive_message_length", 1 << 30), ("grpc.max_send_message_length", 1 << 30)]
        self.ch = grpc.insecure_channel(addr, options=opts)
        self.stub = pbg.SeaweedFilerStub(self.ch)

    def list(self, directory):
        start = ""
        while True:
            n = 0
            req = self.pb.ListEntriesRequest(directory=directory, startFromFileName=start, limit=1024)
            for r in self.stub.ListEntries(req, timeout=60):
                n += 1
                start = r.entry.name
                yield r.entry
            if n < 1024:
                return

    def update(self, directory, entry):
        self.stub.UpdateEntry(self.pb.UpdateEntryRequest(directory=directory, entry=entry), timeout=60)

    def shift_entry(self, directory, e, secs):
        """Moves every time of the entry `secs` seconds into the past: mtime, crtime, a
        demotion stamp (ns) and a .versions folder's cached latest mtime (s)."""
        a = e.attributes
        a.mtime -= secs
        if a.crtime:
            a.crtime -= secs
        if NONCURRENT_SINCE in e.extended:
            v = int(e.extended[NONCURRENT_SINCE].decode() or 0)
            if v > 0:
                e.extended[NONCURRENT_SINCE] = str(v - secs * 10**9).encode()
        if LATEST_MTIME in e.extended:
            v = int(e.extended[LATEST_MTIME].decode() or 0)
            if v > 0:
                e.extended[LATEST_MTIME] = str(v - secs).encode()
        self.update(directory, e)

    def shift_bucket(self, bucket, secs, keys=None):
        """Backdates a bucket's objects, versions (with their stamps and the folder's cached
        latest mtime) and uploads (the `.uploads/<id>` dir and its parts) by `secs`. `keys`:
        only these logical keys (destination keys for uploads). Returns entries touched."""
        root = f"{BUCKETS_ROOT}/{bucket}"
        want = (lambda k: True) if keys is None else (lambda k: k in keys)
        n = 0

        def walk(d, rel):
            nonlocal n
            for e in list(self.list(d)):
                path = rel + e.name
                full = f"{d}/{e.name}"
                if e.is_directory and path == ".uploads":
                    for up in list(self.list(full)):
                        dest = up.extended.get("key", b"").decode()
                        if up.is_directory and want(dest):
                            for part in list(self.list(f"{full}/{up.name}")):
                                self.shift_entry(f"{full}/{up.name}", part, secs)
                                n += 1
                            self.shift_entry(full, up, secs)
                            n += 1
                elif e.is_directory and e.name.endswith(".versions"):
                    logical = path[: -len(".versions")]
                    if want(logical):
                        for v in list(self.list(full)):
                            self.shift_entry(full, v, secs)
                            n += 1
                        self.shift_entry(d, e, secs)
                        n += 1
                elif e.is_directory:
                    walk(full, path + "/")
                elif want(path):
                    self.shift_entry(d, e, secs)
                    n += 1

        walk(root, "")
        return n


# --------------------------------------------------------------------------------------------
# cluster
# --------------------------------------------------------------------------------------------
class Cluster:
    ROLES = ["master", "master_grpc", "volume", "volume_grpc", "filer", "filer_grpc", "s3", "s3_grpc"]

    def __init__(self, weed, data, base):
        self.weed, self.data = weed, data
        self.p = {r: base + i for i, r in enumerate(self.ROLES)}
        self.proc = None

    @property
    def s3(self):
        return f"http://127.0.0.1:{self.p['s3']}"

    @property
    def filer(self):
        return f"127.0.0.1:{self.p['filer_grpc']}"

    @property
    def s3_grpc(self):
        return f"127.0.0.1:{self.p['s3_grpc']}"

    @property
    def master(self):
        return f"127.0.0.1:{self.p['master']}.{self.p['master_grpc']}"

    def start(self):
        for r, port in self.p.items():
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    sys.exit(f"port {port} ({r}) is in use: pick another --port-base")
        os.makedirs(self.data, exist_ok=True)
        with open(os.path.join(self.data, "master.toml"), "w") as f:
            f.write("[master.volume_growth]\ncopy_1 = 2\n")
        p = self.p
        args = [self.weed, "-v=0", "server", f"-dir={self.data}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
                f"-master.port={p['master']}", f"-master.port.grpc={p['master_grpc']}",
                "-master.telemetry=false", "-master.volumeSizeLimitMB=64",
                f"-volume.port={p['volume']}", f"-volume.port.grpc={p['volume_grpc']}",
                "-volume.max=1000", "-volume.preStopSeconds=0",
                "-filer", f"-filer.port={p['filer']}", f"-filer.port.grpc={p['filer_grpc']}",
                "-s3", f"-s3.port={p['s3']}", f"-s3.port.grpc={p['s3_grpc']}",
                "-s3.port.iceberg=0", "-s3.port.lance=0"]
        env = {k: v for k, v in os.environ.items() if k not in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")}
        self.log = open(os.path.join(self.data, "weed.log"), "w")
        self.proc = subprocess.Popen(["nice", "-n", "19", *args], cwd=self.data, env=env,
                                     stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        with open(os.path.join(self.data, "weed.pid"), "w") as f:
            f.write(str(self.proc.pid))
        self.wait_ready()

    def wait_ready(self):
        deadline = time.time() + 90
        while time.time() < deadline:
            if self.proc and self.proc.poll() is not None:
                tail = open(os.path.join(self.data, "weed.log")).read()[-3000:]
                sys.exit(f"weed server exited ({self.proc.returncode}):\n{tail}")
            if self.ready():
                return
            time.sleep(0.5)
        sys.exit("weed server not ready after 90 s")

    def ready(self):
        try:
            for r in ("master_grpc", "filer_grpc", "s3_grpc"):
                with socket.create_connection(("127.0.0.1", self.p[r]), timeout=1):
                    pass
            st = requests.get(f"http://127.0.0.1:{self.p['master']}/dir/status", timeout=2).text
            if not re.search(r'"Max":[1-9]', st):
                return False
            if requests.get(self.s3 + "/", timeout=2).status_code >= 400 and \
                    requests.get(self.s3 + "/", timeout=2).status_code != 403:
                return False
            r = requests.get(f"http://127.0.0.1:{self.p['filer']}/", headers={"Accept": "application/json"},
                             timeout=2)
            return 200 <= r.status_code < 300
        except Exception:  # noqa: BLE001
            return False

    def stop(self):
        if not self.proc or self.proc.poll() is not None:
            return
        # our own child, by its recorded pid (the `nice` wrapper execs weed, same pid)
        os.kill(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(40)
        except subprocess.TimeoutExpired:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        for r in ("master", "volume", "filer", "s3"):
            sock = f"/tmp/seaweedfs-{r}-grpc-{self.p[r + '_grpc']}.sock"
            if os.path.exists(sock):
                os.remove(sock)


# --------------------------------------------------------------------------------------------
# one twin of a case
# --------------------------------------------------------------------------------------------
class Twin:
    def __init__(self, h, case, side):
        self.h, self.side = h, side
        self.b = f"gs-{h.run}-{case}-{side}"
        self.names = {"null": "null"}  # version id -> label
        self.uploads = {}  # upload id -> label
        self.s3 = h.s3

    # S3 ------------------------------------------------------------------------------------
    def create(self, versioning=None):
        self.s3.create_bucket(Bucket=self.b)
        if versioning:
            self.versioning(versioning)

    def versioning(self, status):
        self.s3.put_bucket_versioning(Bucket=self.b, VersioningConfiguration={"Status": status})

    def lifecycle(self, rules):
        body = f"<LifecycleConfiguration {NS}>{rules}</LifecycleConfiguration>".encode()
        md5 = base64.b64encode(hashlib.md5(body).digest()).decode()
        r = requests.put(f"{self.h.s3url}/{self.b}?lifecycle=", data=body,
                         headers={"Content-MD5": md5, "Content-Type": "application/xml"})
        if r.status_code != 200:
            raise RuntimeError(f"put lifecycle {self.b}: {r.status_code} {r.text}")

    def put(self, key, body=b"data", tags=None, label=None):
        kw = {}
        if tags:
            kw["Tagging"] = "&".join(f"{k}={v}" for k, v in tags.items())
        vid = self.s3.put_object(Bucket=self.b, Key=key, Body=body, **kw).get("VersionId")
        if label and vid:
            self.names[vid] = label
        return vid

    def delete(self, key, label=None, version=None):
        kw = {"VersionId": version} if version else {}
        r = self.s3.delete_object(Bucket=self.b, Key=key, **kw)
        if label and r.get("VersionId"):
            self.names[r["VersionId"]] = label
        return r

    def upload(self, key, label, parts=1):
        u = self.s3.create_multipart_upload(Bucket=self.b, Key=key)["UploadId"]
        self.uploads[u] = label
        etags = []
        for i in range(1, parts + 1):
            etags.append(self.s3.upload_part(Bucket=self.b, Key=key, UploadId=u, PartNumber=i,
                                             Body=b"p" * 10)["ETag"])
        return u, etags

    def shift(self, days, keys=None):
        return self.h.filer.shift_bucket(self.b, int(days * DAY), keys)

    # state ---------------------------------------------------------------------------------
    def state(self):
        """Normalised: one line per version/marker (newest first per key) and per upload."""
        items = []
        for page in self.s3.get_paginator("list_object_versions").paginate(Bucket=self.b):
            for v in page.get("Versions", []):
                items.append((v["Key"], v["LastModified"], "V", v["VersionId"], v["IsLatest"], v["Size"]))
            for m in page.get("DeleteMarkers", []):
                items.append((m["Key"], m["LastModified"], "DM", m["VersionId"], m["IsLatest"], 0))
        items.sort(key=lambda t: (t[0], not t[4], -t[1].timestamp()))
        out = []
        for key, _lm, kind, vid, latest, size in items:
            label = self.names.get(vid)
            if label is None:
                label = "lifecycle-DM" if kind == "DM" else "unknown-version"
            out.append(f"{kind} {key!r} {label}{' LATEST' if latest else ''} size={size}")
        ups = self.s3.list_multipart_uploads(Bucket=self.b).get("Uploads", [])
        for u in sorted(ups, key=lambda u: u["Key"]):
            try:
                parts = len(self.s3.list_parts(Bucket=self.b, Key=u["Key"], UploadId=u["UploadId"])
                            .get("Parts", []))
            except Exception as e:  # noqa: BLE001
                parts = f"list_parts error {type(e).__name__}"
            out.append(f"UPLOAD {u['Key']!r} {self.uploads.get(u['UploadId'], 'unknown-upload')} parts={parts}")
        return out


# --------------------------------------------------------------------------------------------
# cases
# --------------------------------------------------------------------------------------------
def rule(rid, filt, action, status="Enabled"):
    f = "" if filt is None else f"<Filter>{filt}</Filter>"
    return f"<Rule><ID>{rid}</ID>{f}<Status>{status}</Status>{action}</Rule>"


def days(n):
    return f"<Expiration><Days>{n}</Days></Expiration>"


def tag(k, v):
    return f"<Tag><Key>{k}</Key><Value>{v}</Value></Tag>"


def nc(days_=None, keep=None):
    d = f"<NoncurrentDays>{days_}</NoncurrentDays>" if days_ is not None else ""
    k = f"<NewerNoncurrentVersions>{keep}</NewerNoncurrentVersions>" if keep is not None else ""
    return f"<NoncurrentVersionExpiration>{d}{k}</NoncurrentVersionExpiration>"


EODM = "<Expiration><ExpiredObjectDeleteMarker>true</ExpiredObjectDeleteMarker></Expiration>"


def abort(n):
    return (f"<AbortIncompleteMultipartUpload><DaysAfterInitiation>{n}</DaysAfterInitiation>"
            "</AbortIncompleteMultipartUpload>")


CASES = {}
PASSES = ("P1", "P2", "P3")
# Cases that run on a cluster of their own (a fresh `weed server` each, when the harness starts
# the clusters): the Go worker keeps one cursor per shard for all buckets, and a not-yet-due
# match in any other case's bucket holds that cursor back, so the next Go pass re-reads the whole
# log from there and sees objects a settled cursor would have passed long ago.
ISOLATED = set()


def case(name, what, isolated=False):
    def deco(fn):
        CASES[name] = (fn, what)
        if isolated:
            ISOLATED.add(name)
        return fn
    return deco


# Each case function gets a Twin, builds the bucket and returns an optional callable run
# between pass 1 and pass 2. Ages: "due" objects are 3 days old for Days=1 rules (clear of both
# Go's exact due time and our next-midnight rounding), "not due" ones are fresh.

@case("exp-prefix", "Expiration Days=1, Filter Prefix logs/ (nested keys, a look-alike prefix)")
def c_exp_prefix(t):
    t.create()
    for k in ["logs/a", "logs/2024/01/b", "logsx/c", "other/logs/d", "e"]:
        t.put(k)
    t.lifecycle(rule("r", "<Prefix>logs/</Prefix>", days(1)))
    t.shift(3)


@case("exp-tag", "Expiration Days=1, Filter Tag env=tmp")
def c_exp_tag(t):
    t.create()
    t.put("t-tmp", tags={"env": "tmp"})
    t.put("t-tmp-extra", tags={"env": "tmp", "x": "y"})
    t.put("t-prod", tags={"env": "prod"})
    t.put("t-TMP", tags={"env": "TMP"})
    t.put("t-none")
    t.lifecycle(rule("r", tag("env", "tmp"), days(1)))
    t.shift(3)


@case("and-prefix-tags", "Expiration Days=1, And(Prefix p/, Tag a=1, Tag b=2)")
def c_and(t):
    t.create()
    t.put("p/both", tags={"a": "1", "b": "2"})
    t.put("p/both-extra", tags={"a": "1", "b": "2", "c": "3"})
    t.put("p/only-a", tags={"a": "1"})
    t.put("p/wrong", tags={"a": "1", "b": "3"})
    t.put("q/both", tags={"a": "1", "b": "2"})
    t.put("p/none")
    t.lifecycle(rule("r", "<And><Prefix>p/</Prefix>" + tag("a", "1") + tag("b", "2") + "</And>", days(1)))
    t.shift(3)


SIZES = [0, 1, 99, 100, 101, 199, 200, 201]


def sized(t):
    for n in SIZES:
        t.put(f"s{n:03d}", body=b"x" * n)


@case("size-gt", "Expiration Days=1, ObjectSizeGreaterThan=100 (sizes 0,1,99,100,101,199,200,201)")
def c_size_gt(t):
    t.create()
    sized(t)
    t.lifecycle(rule("r", "<ObjectSizeGreaterThan>100</ObjectSizeGreaterThan>", days(1)))
    t.shift(3)


@case("size-lt", "Expiration Days=1, ObjectSizeLessThan=100")
def c_size_lt(t):
    t.create()
    sized(t)
    t.lifecycle(rule("r", "<ObjectSizeLessThan>100</ObjectSizeLessThan>", days(1)))
    t.shift(3)


@case("size-and", "Expiration Days=1, And(ObjectSizeGreaterThan=100, ObjectSizeLessThan=200)")
def c_size_and(t):
    t.create()
    sized(t)
    t.lifecycle(rule("r", "<And><Prefix></Prefix><ObjectSizeGreaterThan>100</ObjectSizeGreaterThan>"
                          "<ObjectSizeLessThan>200</ObjectSizeLessThan></And>", days(1)))
    t.shift(3)


@case("date-past", "Expiration Date 2020-01-01 on old/, fresh objects (no backdating needed)")
def c_date_past(t):
    t.create()
    for k in ["old/a", "old/b/c", "new/a"]:
        t.put(k)
    t.lifecycle(rule("r", "<Prefix>old/</Prefix>",
                     "<Expiration><Date>2020-01-01T00:00:00Z</Date></Expiration>"))


@case("date-future", "Expiration Date in 30 days (nothing due) next to Days=1 on d/")
def c_date_future(t):
    t.create()
    for k in ["fut/a", "d/a", "x"]:
        t.put(k)
    fut = (dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=30)).strftime("%Y-%m-%dT00:00:00Z")
    t.lifecycle(rule("fut", "<Prefix>fut/</Prefix>", f"<Expiration><Date>{fut}</Date></Expiration>")
                + rule("d", "<Prefix>d/</Prefix>", days(1)))
    t.shift(3)


@case("disabled", "Status Disabled, Expiration Days=1, 3-day-old objects")
def c_disabled(t):
    t.create()
    t.put("a")
    t.put("b/c")
    t.lifecycle(rule("off", "<Prefix></Prefix>", days(1), status="Disabled"))
    t.shift(3)


@case("overlap", "Days=10 on all + Days=1 on a/ + Days=2 on Tag t=1; objects 3 days old")
def c_overlap(t):
    t.create()
    t.put("a/x")
    t.put("b/tagged", tags={"t": "1"})
    t.put("b/plain")
    t.lifecycle(rule("long", "<Prefix></Prefix>", days(10)) + rule("short", "<Prefix>a/</Prefix>", days(1))
                + rule("tagged", tag("t", "1"), days(2)))
    t.shift(3)


@case("keys", "Expiration Days=1 on all: spaces, unicode, %, +, deep nesting, a folder marker")
def c_keys(t):
    t.create()
    for k in ["with space.txt", "ünïcödé/文件.txt", "a+b.txt", "100%.txt", "emoji-😀.txt",
              "deep/a/b/c/d/e/f.txt", " leading-space", "trailing-dot.", "dir with space/x y"]:
        t.put(k)
    t.put("folder/", body=b"")
    t.lifecycle(rule("all", "<Prefix></Prefix>", days(1)))
    t.shift(3)


@case("overwritten", "Expiration Days=1: k written, made 3 days old, written again now; j only old")
def c_overwritten(t):
    t.create()
    t.put("k", b"old")
    t.put("j", b"old")
    t.lifecycle(rule("r", "<Prefix></Prefix>", days(1)))
    t.shift(3)
    time.sleep(1)
    t.put("k", b"new")


@case("not-due", "Days=5 on a/ with 3-day-old objects; Days=1 on b/ with fresh objects")
def c_not_due(t):
    t.create()
    t.put("a/old3")
    t.put("b/fresh")
    t.lifecycle(rule("five", "<Prefix>a/</Prefix>", days(5)) + rule("one", "<Prefix>b/</Prefix>", days(1)))
    t.shift(3, keys={"a/old3"})


@case("rounding", "Expiration Days=1, objects 1 day + 1 hour old (Go due, ours at next midnight)")
def c_rounding(t):
    t.create()
    t.put("r")
    t.lifecycle(rule("r", "<Prefix></Prefix>", days(1)))
    t.shift(1 + 1 / 24)


@case("v-exp", "versioned, Expiration Days=1: k (1 version), j (2 versions), fresh f")
def c_v_exp(t):
    t.create("Enabled")
    t.put("k", label="k1")
    t.put("j", label="j1")
    t.put("j", label="j2")
    t.lifecycle(rule("r", "<Prefix></Prefix>", days(1)))
    t.shift(3)
    t.put("f", label="f1")


@case("v-exp-then-nc", "versioned, Expiration Days=1 + NoncurrentDays=1; pass 1, then 3 more days, pass 2")
def c_v_exp_nc(t):
    t.create("Enabled")
    t.put("k", label="k1")
    t.lifecycle(rule("r", "<Prefix></Prefix>", days(1) + nc(1)))
    t.shift(3)
    return {"after1": lambda: t.shift(3)}


@case("v-ncdays", "versioned, NoncurrentDays=1: k v1,v2,v3 (all 3 days old); m v1 old, m v2 fresh")
def c_v_ncdays(t):
    t.create("Enabled")
    for i in (1, 2, 3):
        t.put("k", label=f"k{i}")
    t.put("m", label="m1")
    t.lifecycle(rule("r", "<Prefix></Prefix>", nc(1)))
    t.shift(3)
    t.put("m", label="m2")  # m1 demoted now: noncurrent for 0 days


@case("v-newer-1", "versioned, NoncurrentDays=1 + NewerNoncurrentVersions=1: k v1..v4, 3 days old")
def c_v_newer1(t):
    t.create("Enabled")
    for i in range(1, 5):
        t.put("k", label=f"k{i}")
    t.lifecycle(rule("r", "<Prefix></Prefix>", nc(1, 1)))
    t.shift(3)


@case("v-newer-2", "versioned, NoncurrentDays=1 + NewerNoncurrentVersions=2: k v1..v5, two t1,t2")
def c_v_newer2(t):
    t.create("Enabled")
    for i in range(1, 6):
        t.put("k", label=f"k{i}")
    t.put("two", label="t1")
    t.put("two", label="t2")
    t.lifecycle(rule("r", "<Prefix></Prefix>", nc(1, 2)))
    t.shift(3)


@case("v-newer-fresh", "versioned, NoncurrentDays=5 + NewerNoncurrentVersions=1: k v1..v4 only 3 days old")
def c_v_newer_fresh(t):
    t.create("Enabled")
    for i in range(1, 5):
        t.put("k", label=f"k{i}")
    t.lifecycle(rule("r", "<Prefix></Prefix>", nc(5, 1)))
    t.shift(3)


@case("v-eodm-lone", "versioned, ExpiredObjectDeleteMarker: lone marker d; marker over version c; e plain")
def c_v_eodm_lone(t):
    t.create("Enabled")
    t.put("c", label="c1")
    t.delete("c", label="c-dm")
    t.delete("d", label="d-dm")
    t.put("e", label="e1")
    t.lifecycle(rule("m", "<Prefix></Prefix>", EODM))
    t.shift(3)


@case("v-eodm-behind", "versioned, ExpiredObjectDeleteMarker + NoncurrentDays=1: a (a1 + marker), 3 days old")
def c_v_eodm_behind(t):
    t.create("Enabled")
    t.put("a", label="a1")
    t.delete("a", label="a-dm")
    t.lifecycle(rule("m", "<Prefix></Prefix>", EODM + nc(1)))
    t.shift(3)


@case("v-nc-marker", "versioned, NoncurrentDays=1: k v1, marker, v2 (noncurrent marker), 3 days old")
def c_v_nc_marker(t):
    t.create("Enabled")
    t.put("k", label="k1")
    t.delete("k", label="k-dm")
    t.put("k", label="k2")
    t.lifecycle(rule("r", "<Prefix></Prefix>", nc(1)))
    t.shift(3)


@case("v-susp-nc", "Enabled k1, then Suspended and k written (null, latest); NoncurrentDays=1; 3 days old")
def c_v_susp_nc(t):
    t.create("Enabled")
    t.put("k", label="k1")
    t.versioning("Suspended")
    t.put("k", b"null-data")
    t.lifecycle(rule("r", "<Prefix></Prefix>", nc(1)))
    t.shift(3)


@case("v-susp-exp", "Suspended, Expiration Days=1: n (n1 + null), m (null only); 3 days old")
def c_v_susp_exp(t):
    t.create("Enabled")
    t.put("n", label="n1")
    t.versioning("Suspended")
    t.put("n", b"null-n")
    t.put("m", b"null-m")
    t.lifecycle(rule("r", "<Prefix></Prefix>", days(1)))
    t.shift(3)


@case("mpu-abort", "AbortIncompleteMultipartUpload DaysAfterInitiation=1 on tmp/: tmp/old (3d), "
      "keep/old (3d), tmp/new (fresh)")
def c_mpu_abort(t):
    t.create()
    t.upload("tmp/old", "tmp-old")
    t.upload("keep/old", "keep-old")
    t.lifecycle(rule("a", "<Prefix>tmp/</Prefix>", abort(1)))
    t.shift(3)
    t.upload("tmp/new", "tmp-new")


@case("mpu-with-exp", "Expiration Days=1 + Abort DaysAfterInitiation=5 on all: upload big (3d, 2 parts), obj (3d)")
def c_mpu_exp(t):
    t.create()
    t.upload("big", "big", parts=2)
    t.put("obj")
    t.lifecycle(rule("exp", "<Prefix></Prefix>", days(1)) + rule("ab", "<Prefix></Prefix>", abort(5)))
    t.shift(3)


@case("v-exp-on-marker", "versioned, Expiration Days=1: k1 + marker on top (latest is a marker), 3 days old")
def c_v_exp_marker(t):
    t.create("Enabled")
    t.put("k", label="k1")
    t.delete("k", label="k-dm")
    t.put("j", label="j1")
    t.lifecycle(rule("r", "<Prefix></Prefix>", days(1)))
    t.shift(3)


@case("many", "Expiration Days=1 on p/: 1,100 objects (more than one 1,024-entry listing page), 5 under q/")
def c_many(t):
    from concurrent.futures import ThreadPoolExecutor
    t.create()
    keys = [f"p/{i:05d}" for i in range(1100)] + [f"q/{i}" for i in range(5)]
    with ThreadPoolExecutor(8) as ex:
        list(ex.map(lambda k: t.put(k, b"m"), keys))
    t.lifecycle(rule("r", "<Prefix>p/</Prefix>", days(1)))
    t.shift(3)


@case("v-nc-filters", "versioned, NoncurrentDays=1 on And(Tag env=tmp, ObjectSizeGreaterThan=3): "
      "noncurrent versions with/without the tag, small/large")
def c_v_nc_filters(t):
    t.create("Enabled")
    t.put("k", b"large-tagged", tags={"env": "tmp"}, label="k-big-tmp")
    t.put("k", b"sm", tags={"env": "tmp"}, label="k-small-tmp")
    t.put("k", b"large-untagged", label="k-big-none")
    t.put("k", b"latest", tags={"env": "tmp"}, label="k-latest")
    t.lifecycle(rule("r", "<And><Prefix></Prefix>" + tag("env", "tmp")
                     + "<ObjectSizeGreaterThan>3</ObjectSizeGreaterThan></And>", nc(1)))
    t.shift(3)


@case("v-date", "versioned, Expiration Date 2020-01-01: k (2 versions), fresh")
def c_v_date(t):
    t.create("Enabled")
    t.put("k", label="k1")
    t.put("k", label="k2")
    t.lifecycle(rule("r", "<Prefix></Prefix>", "<Expiration><Date>2020-01-01T00:00:00Z</Date></Expiration>"))


@case("v-newer-only", "versioned, NewerNoncurrentVersions=1 without NoncurrentDays: k v1..v3, 3 days old")
def c_v_newer_only(t):
    t.create("Enabled")
    for i in range(1, 4):
        t.put("k", label=f"k{i}")
    t.lifecycle(rule("r", "<Prefix></Prefix>", nc(None, 1)))
    t.shift(3)


@case("v-susp-marker", "Suspended, ExpiredObjectDeleteMarker: lone null marker z; n1 + null marker over it")
def c_v_susp_marker(t):
    t.create("Enabled")
    t.put("n", label="n1")
    t.versioning("Suspended")
    t.delete("n")
    t.delete("z")
    t.lifecycle(rule("m", "<Prefix></Prefix>", EODM))
    t.shift(3)


# ---- steady state: the rules are in place at pass 1 (so both products have cursors and the
# Go worker's rule-set hash is settled); the objects are written after pass 1 and made old, so
# pass 2 reaches them through meta-log replay (and whatever walk each product still does).

@case("st-exp", "steady: Expiration Days=1; objects written after pass 1, made 3 days old")
def c_st_exp(t):
    t.create()
    t.put("seed")
    t.lifecycle(rule("r", "<Prefix>x/</Prefix>", days(1)))

    def after1():
        t.put("x/a")
        t.put("x/b/c")
        t.put("y")
        t.shift(3, keys={"x/a", "x/b/c", "y"})
    return {"after1": after1}


@case("st-overwritten", "steady: Days=1; k written before pass 1; after it k made 3 days old and written again")
def c_st_overwritten(t):
    t.create()
    t.put("k", b"old")
    t.lifecycle(rule("r", "<Prefix></Prefix>", days(1)))

    def after1():
        t.shift(3)
        time.sleep(1)
        t.put("k", b"new")
    return {"after1": after1}


@case("st-tag-added", "steady: Days=1 on Tag env=tmp; old untagged object gets the tag after pass 1")
def c_st_tag(t):
    t.create()
    t.put("a")
    t.put("b")
    t.lifecycle(rule("r", tag("env", "tmp"), days(1)))
    t.shift(3)

    def after1():
        t.s3.put_object_tagging(Bucket=t.b, Key="a", Tagging={"TagSet": [{"Key": "env", "Value": "tmp"}]})
    return {"after1": after1}


@case("st-v-exp", "steady: versioned, Expiration Days=1; k written after pass 1, made 3 days old", isolated=True)
def c_st_v_exp(t):
    t.create("Enabled")
    t.put("seed", label="s1")
    t.lifecycle(rule("r", "<Prefix>k</Prefix>", days(1)))

    def after1():
        t.put("k", label="k1")
        t.put("k2", label="k2a")
        t.put("k2", label="k2b")
        t.shift(3, keys={"k", "k2"})
    return {"after1": after1}


@case("st-v-nc", "steady: versioned, NoncurrentDays=1; k v1,v2 written after pass 1, made 3 days old")
def c_st_v_nc(t):
    t.create("Enabled")
    t.put("seed", label="s1")
    t.lifecycle(rule("r", "<Prefix></Prefix>", nc(1)))

    def after1():
        t.put("k", label="k1")
        t.put("k", label="k2")
        t.put("k", label="k3")
        t.shift(3, keys={"k"})
    return {"after1": after1}


@case("st-v-newer", "steady: versioned, NoncurrentDays=1 + NewerNoncurrentVersions=1; k v1..v4 after pass 1",
      isolated=True)
def c_st_v_newer(t):
    t.create("Enabled")
    t.put("seed", label="s1")
    t.lifecycle(rule("r", "<Prefix></Prefix>", nc(1, 1)))

    def after1():
        for i in range(1, 5):
            t.put("k", label=f"k{i}")
        t.shift(3, keys={"k"})
    return {"after1": after1}


@case("st-v-newer-only", "steady: versioned, NewerNoncurrentVersions=1 (no NoncurrentDays); k v1..v4 written "
      "after pass 1, nothing backdated (control for st-v-newer: a walker kind for Go)")
def c_st_v_newer_only(t):
    t.create("Enabled")
    t.put("seed", label="s1")
    t.lifecycle(rule("r", "<Prefix></Prefix>", nc(None, 1)))

    def after1():
        for i in range(1, 5):
            t.put("k", label=f"k{i}")
    return {"after1": after1}


@case("st-v-eodm", "steady: versioned, ExpiredObjectDeleteMarker; after pass 1: lone marker d, c1 + marker c")
def c_st_v_eodm(t):
    t.create("Enabled")
    t.put("seed", label="s1")
    t.lifecycle(rule("m", "<Prefix></Prefix>", EODM))

    def after1():
        t.delete("d", label="d-dm")
        t.put("c", label="c1")
        t.delete("c", label="c-dm")
        t.shift(3, keys={"c", "d"})
    return {"after1": after1}


@case("st-v-dm-orphaned", "steady: versioned, EODM; a1 + marker; after pass 1 a1 is deleted by id (marker left alone)")
def c_st_v_orphan(t):
    t.create("Enabled")
    v = t.put("a", label="a1")
    t.delete("a", label="a-dm")
    t.lifecycle(rule("m", "<Prefix></Prefix>", EODM))
    t.shift(3)
    return {"after1": lambda: t.delete("a", version=v)}


@case("st-v-susp", "steady: Enabled k1 written, Suspended; after pass 1 a null PUT of k; NoncurrentDays=1, 3 days")
def c_st_v_susp(t):
    t.create("Enabled")
    t.put("k", label="k1")
    t.lifecycle(rule("r", "<Prefix></Prefix>", nc(1)))

    def after1():
        t.versioning("Suspended")
        t.put("k", b"null-data")
        t.shift(3, keys={"k"})
    return {"after1": after1}


@case("st-date", "steady: Expiration Date 2020-01-01 on old/; objects written after pass 1 (fresh)")
def c_st_date(t):
    t.create()
    t.put("seed")
    t.lifecycle(rule("r", "<Prefix>old/</Prefix>",
                     "<Expiration><Date>2020-01-01T00:00:00Z</Date></Expiration>"))

    def after1():
        t.put("old/a")
        t.put("keep")
    return {"after1": after1}


@case("st-mpu", "steady: Abort DaysAfterInitiation=1 + Expiration Days=1; upload (2 parts) after pass 1, 3 days old")
def c_st_mpu(t):
    t.create()
    t.put("seed")
    t.lifecycle(rule("ab", "<Prefix>up/</Prefix>", abort(1)) + rule("exp", "<Prefix>up/</Prefix>", days(1)))

    def after1():
        t.upload("up/big", "big", parts=2)
        t.shift(3, keys={"up/big"})
    return {"after1": after1}


@case("st-mpu-parts", "steady: Expiration Days=1 + Abort 5 days; upload (2 parts) after pass 1, 3 days old")
def c_st_mpu_parts(t):
    t.create()
    t.put("seed")
    t.lifecycle(rule("exp", "<Prefix></Prefix>", days(1)) + rule("ab", "<Prefix></Prefix>", abort(5)))

    def after1():
        t.upload("big", "big", parts=2)
        t.shift(3, keys={"big"})
    return {"after1": after1}


# ---- pass 3: the only lifecycle edit of the run (any edit would make the Go worker recover
# every bucket, so nothing else changes a document between passes).

@case("enable-later", "Disabled Days=1 rule, objects 3 days old; enabled between pass 2 and pass 3",
      isolated=True)
def c_enable_later(t):
    t.create()
    t.put("a")
    t.put("b/c")
    t.lifecycle(rule("r", "<Prefix></Prefix>", days(1), status="Disabled"))
    t.shift(3)
    return {"after2": lambda: t.lifecycle(rule("r", "<Prefix></Prefix>", days(1)))}


# --------------------------------------------------------------------------------------------
# harness
# --------------------------------------------------------------------------------------------
class Harness:
    def __init__(self, args, run):
        self.args = args
        self.run = run
        self.s3url = args.s3
        self.s3 = boto3.client("s3", endpoint_url=args.s3, aws_access_key_id="any",
                               aws_secret_access_key="any", region_name="us-east-1",
                               config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 2}))
        self.filer = Filer(args.filer, args.workdir)
        self.log = []

    def say(self, *a):
        line = " ".join(str(x) for x in a)
        print(line, flush=True)
        self.log.append(line)

    def go_pass(self, label):
        script = (f"s3.lifecycle.run-shard -shards 0-15 -s3 {self.args.s3_grpc} -events 0 -runtime 600s\n"
                  "exit\n")
        cmd = ["nice", "-n", "19", self.args.weed, "shell", f"-master={self.args.master}"]
        t0 = time.time()
        p = subprocess.run(cmd, input=script, capture_output=True, text=True, timeout=900)
        out = (p.stdout + p.stderr).strip()
        path = os.path.join(self.args.workdir, f"go-{self.run}-{label}.txt")
        with open(path, "w") as f:
            f.write(f"$ {' '.join(cmd)} <<< {script!r}\nexit {p.returncode}\n{out}\n")
        self.say(f"go pass {label}: exit {p.returncode} in {time.time() - t0:.1f}s -> {path}")
        last = [ln for ln in out.splitlines() if "shards" in ln or "error" in ln.lower()]
        for ln in last[-4:]:
            self.say("   ", ln[:300])
        if "complete; cursors checkpointed" not in out:
            self.say("   WARNING: the Go pass did not report completion; see", path)

    def rs_pass(self, label, buckets):
        cfg = os.path.join(self.args.workdir, f"rs-{self.run}.toml")
        with open(cfg, "w") as f:
            f.write(f'[cluster]\nfiler = "{self.args.filer}"\ns3_grpc = "{self.args.s3_grpc}"\n'
                    f'[cursor]\ndir = "/etc/s3/lifecycle/gs-{self.run}"\n'
                    '[telemetry]\nlog_filter = "warn"\n')
        cmd = ["nice", "-n", "19", self.args.bin, "run-once", "--config", cfg, "--json",
               "--buckets", ",".join(buckets)]
        t0 = time.time()
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
        path = os.path.join(self.args.workdir, f"rs-{self.run}-{label}.json")
        with open(path, "w") as f:
            f.write(p.stdout)
        with open(path + ".stderr", "w") as f:
            f.write(p.stderr)
        self.say(f"rs pass {label}: exit {p.returncode} in {time.time() - t0:.1f}s -> {path}")
        if p.returncode != 0:
            self.say("   ", p.stderr[-1500:])

    def phase(self, side, names):
        twins, between = {}, {}
        for n in names:
            t = Twin(self, n, side)
            twins[n] = t
            fn = CASES[n][0]
            try:
                b = fn(t)
            except Exception as e:  # noqa: BLE001
                self.say(f"  setup {t.b} FAILED: {type(e).__name__}: {e}")
                b = None
            if b:
                between[n] = b
        states = {"P0": {n: t.state() for n, t in twins.items()}}
        time.sleep(2)
        for i, label in enumerate(PASSES, 1):
            if side == "go":
                self.go_pass(label)
            else:
                self.rs_pass(label, [t.b for t in twins.values()])
            time.sleep(1)
            states[label] = {n: twins[n].state() for n in names}
            hooks = [(n, hk[f"after{i}"]) for n, hk in between.items() if f"after{i}" in hk]
            for n, fn in hooks:
                try:
                    fn()
                except Exception as e:  # noqa: BLE001
                    self.say(f"  after{i} {twins[n].b} FAILED: {type(e).__name__}: {e}")
            if hooks:
                time.sleep(2)
        return twins, states

    def compare(self, names):
        self.say(f"run {self.run}: {', '.join(names)}")
        # (S3 ListBuckets shows only the caller's own buckets; the filer shows all of them)
        others = [e.name for e in self.filer.list(BUCKETS_ROOT)
                  if e.is_directory and "s3-bucket-lifecycle-configuration-xml" in e.extended]
        if others:
            self.say(f"note: {len(others)} bucket(s) of the cluster already have a lifecycle document; the Go "
                     f"pass acts on them too (first: {others[:3]})")
        self.say("== phase go ==")
        _, go_states = self.phase("go", names)
        self.say("== phase rs ==")
        _, rs_states = self.phase("rs", names)
        rows = []
        for n in names:
            row = {"case": n, "what": CASES[n][1], "run": self.run}
            for label in ("P0",) + PASSES:
                row[label] = {"go": go_states[label][n], "rs": rs_states[label][n],
                              "same": go_states[label][n] == rs_states[label][n]}
            verdict = "same" if row[PASSES[-1]]["same"] else "DIFFERENT"
            if not row["P0"]["same"]:
                verdict = "SETUP-DIFFERENT"
            row["verdict"] = verdict
            row["expected"] = EXPECTED_DIFF.get(n)
            rows.append(row)
        return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--attach", action="store_true",
                    help="use a running cluster (the four addresses); isolated cases then share it")
    ap.add_argument("--port-base", type=int, default=25000, help="eight ports from here when starting")
    ap.add_argument("--s3", help="S3 endpoint URL (attach)")
    ap.add_argument("--filer", help="filer gRPC host:port (attach)")
    ap.add_argument("--s3-grpc", help="S3 gateway gRPC host:port (attach)")
    ap.add_argument("--master", help="master host:httpPort.grpcPort for weed shell (attach)")
    ap.add_argument("--weed", default=os.path.join(REPO, ".tools/seaweedfs/bin/weed"))
    ap.add_argument("--bin", default=os.path.join(REPO, "bin-s3-lifecycled"))
    ap.add_argument("--workdir", default="/work/scratch/go-side-by-side")
    ap.add_argument("--run", default=os.environ.get("GS_RUN"))
    ap.add_argument("--only", default="", help="comma-separated case names")
    ap.add_argument("--keep", action="store_true", help="leave the started cluster(s) running")
    ap.add_argument("--list", action="store_true", help="list the cases and exit")
    args = ap.parse_args()
    if args.list:
        for n, (_, what) in CASES.items():
            print(f"{n:16} {what}{'  [own cluster]' if n in ISOLATED else ''}")
        return
    if not os.path.exists(args.weed):
        args.weed = "/work/main/.tools/seaweedfs/bin/weed"
    os.makedirs(args.workdir, exist_ok=True)
    run_id = args.run or uuid.uuid4().hex[:6]
    names = [n for n in CASES if not args.only or n in args.only.split(",")]
    unknown = set(args.only.split(",")) - set(CASES) if args.only else set()
    if unknown:
        sys.exit(f"unknown case(s): {sorted(unknown)}")
    if args.attach:
        if not all([args.s3, args.filer, args.s3_grpc, args.master]):
            sys.exit("--attach needs --s3, --filer, --s3-grpc and --master")
        groups = [names]
    else:
        shared = [n for n in names if n not in ISOLATED]
        groups = ([shared] if shared else []) + [[n] for n in names if n in ISOLATED]
    t_start = dt.datetime.now(dt.timezone.utc)
    print(f"run {run_id}: {len(names)} cases in {len(groups)} cluster group(s); wall clock {t_start.isoformat()}",
          flush=True)
    if t_start.hour >= 23:
        print("warning: a run that crosses midnight UTC may move the `rounding` case", flush=True)
    results, log = [], []
    for gi, group in enumerate(groups):
        cluster = None
        if not args.attach:
            data = os.path.join(args.workdir, f"weed-{run_id}-{gi}")
            if os.path.exists(data):
                shutil.rmtree(data)
            cluster = Cluster(args.weed, data, args.port_base)
            print(f"\n### group {gi}: {', '.join(group) if len(group) < 4 else f'{len(group)} cases'}; "
                  f"weed server in {data}, ports {args.port_base}-{args.port_base + 7}", flush=True)
            cluster.start()
            args.s3, args.filer, args.s3_grpc, args.master = (cluster.s3, cluster.filer, cluster.s3_grpc,
                                                              cluster.master)
        try:
            h = Harness(args, f"{run_id}{'' if len(groups) == 1 else chr(ord('a') + gi)}")
            results.extend(h.compare(group))
            log.extend(h.log)
        finally:
            if cluster and not args.keep:
                print("stopping weed server (about 15 s)", flush=True)
                cluster.stop()
                shutil.rmtree(data, ignore_errors=True)
            elif cluster:
                print(f"cluster left running: pid {cluster.proc.pid}: --attach --s3 {args.s3} --filer {args.filer} "
                      f"--s3-grpc {args.s3_grpc} --master {args.master}", flush=True)
                args.port_base += 10
    bad = report(results, log)
    path = os.path.join(args.workdir, f"results-{run_id}.json")
    with open(path, "w") as f:
        json.dump({"run": run_id, "started": t_start.isoformat(), "results": results, "log": log},
                  f, indent=1, ensure_ascii=False)
    print(f"details in {path}")
    sys.exit(1 if bad else 0)


def report(results, log):
    print("\n== results ==")
    bad = 0
    for row in results:
        n, verdict, exp = row["case"], row["verdict"], row["expected"]
        early = [p for p in PASSES[:-1] if not row[p]["same"]]
        extra = f" (also different after {', '.join(early)})" if early else ""
        if verdict == "same" and early:
            extra = f" (different after {', '.join(early)})"
        print(f"{n:16} {verdict}{extra}{'  [expected: ' + exp[0] + ']' if exp and verdict != 'same' else ''}")
        if verdict != "same" or early:
            for label in ("P0",) + PASSES:
                if label == "P0" and row["P0"]["same"]:
                    continue
                print(f"  {label} go: {row[label]['go']}")
                print(f"  {label} rs: {row[label]['rs']}")
        if verdict != "same" and not exp:
            bad += 1
    print(f"\n{sum(r['verdict'] == 'same' for r in results)}/{len(results)} same; "
          f"{sum(r['verdict'] != 'same' and bool(r['expected']) for r in results)} expected difference(s); "
          f"{bad} unexplained difference(s)")
    return bad


if __name__ == "__main__":
    main()
