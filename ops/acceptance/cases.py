"""The acceptance cases: what each bucket holds, its lifecycle document, and what AWS would
leave after each pass (P1 = today+1d 12:00, P2 = +2d 00:30, P3 = +3d 00:30, P4 = +6d 00:30,
P5 = +13d 00:30; objects written today; due = next midnight after mtime + Days)."""

import datetime as dt

NS = 'xmlns="http://s3.amazonaws.com/doc/2006-03-01/"'
PASSES = ["P1", "P2", "P3", "P4", "P5"]


def rule(rid, filt, action, status="Enabled", legacy_prefix=None):
    f = "" if filt is None else f"<Filter>{filt}</Filter>"
    lp = "" if legacy_prefix is None else f"<Prefix>{legacy_prefix}</Prefix>"
    return f"<Rule><ID>{rid}</ID>{lp}{f}<Status>{status}</Status>{action}</Rule>"


def days(n):
    return f"<Expiration><Days>{n}</Days></Expiration>"


def tag(k, v):
    return f"<Tag><Key>{k}</Key><Value>{v}</Value></Tag>"


class Case:
    versioned = False

    def __init__(self, h, name):
        self.h = h
        self.name = name
        self.names = {}  # version id -> label
        self.expect = {}  # pass label -> set

    def setup(self):
        raise NotImplementedError

    def before(self, label):
        pass

    def state(self):
        if self.versioned:
            return self.h.versions(self.b, self.names)
        return self.h.keys(self.b)

    def verify(self, label):
        if label in self.expect:
            self.h.check(self.name, label, set(self.expect[label]), self.state())

    def until(self, upto, val, after=None):
        """val for passes up to and including `upto`, `after` (default empty) later."""
        hit = False
        for p in PASSES:
            self.expect[p] = set(after or ()) if hit else set(val)
            if p == upto:
                hit = True


class Simple(Case):
    """Unversioned bucket: objects {key: (body, tags)}, a rule set, and expected key sets."""

    def __init__(self, h, name, rules, objects, expect):
        super().__init__(h, name)
        self.rules = rules
        self.objects = objects
        self.expect = {p: set(v) for p, v in expect.items()}

    def setup(self):
        self.b = self.h.bucket(self.name)
        for k, (body, tags) in self.objects.items():
            self.h.put(self.b, k, body, tags)
        self.h.lifecycle(self.b, self.rules)


def objs(*keys, body=b"data", tags=None):
    return {k: (body, tags) for k in keys}


def staged(all_keys, gone):
    """expected per pass: gone = {pass: keys deleted by then (cumulative)}"""
    out = {}
    removed = set()
    for p in PASSES:
        removed |= set(gone.get(p, ()))
        out[p] = set(all_keys) - removed
    return out


def build_cases(h):
    cases = []

    # --- unusual keys, whole-bucket Days=1 ------------------------------------------
    # One 890-byte name is refused by the 4.48 gateway (KeyTooLongError: a filer name is
    # limited per path component); ~900 bytes spread over components is accepted.
    long_key = "long/" + "/".join(["k" * 220] * 4)
    keys = [
        "with space.txt", "ünïcödé/文件.txt", "a+b.txt", "100%.txt", "pct%20enc.txt",
        "emoji-😀.txt", long_key, "trailing-dot.", " leading-space",
    ]
    o = objs(*keys)
    o["folder/"] = (b"", None)
    allk = set(keys) | {"folder/"}
    cases.append(Simple(h, "keys", rule("all", "<Prefix></Prefix>", days(1)), o,
                        staged(allk, {"P2": allk})))

    # --- prefixes with special characters ------------------------------------------
    o = objs("sp ace/1", "sp%20ace/1", "spxace/1", "a+b/1", "a b/1", "ü/1", "u/1")
    cases.append(Simple(
        h, "prefix-special",
        rule("sp", "<Prefix>sp ace/</Prefix>", days(1))
        + rule("plus", "<Prefix>a+b/</Prefix>", days(1))
        + rule("uml", "<Prefix>ü/</Prefix>", days(1)),
        o, staged(o, {"P2": ["sp ace/1", "a+b/1", "ü/1"]})))

    # --- prefix without slash is a plain starts-with ------------------------------------
    o = objs("logs/a", "logs-old", "logsx/y", "alogs/z", "Logs/a")
    cases.append(Simple(h, "prefix-noslash", rule("l", "<Prefix>logs</Prefix>", days(1)), o,
                        staged(o, {"P2": ["logs/a", "logs-old", "logsx/y"]})))

    # --- size filters at the boundaries (strict) ----------------------------------------
    sizes = [0, 99, 100, 101, 199, 200, 201]
    o = {f"s{n:03d}": (b"x" * n, None) for n in sizes}
    cases.append(Simple(
        h, "size-and",
        rule("sz", "<And><Prefix></Prefix><ObjectSizeGreaterThan>100</ObjectSizeGreaterThan>"
             "<ObjectSizeLessThan>200</ObjectSizeLessThan></And>", days(1)),
        o, staged(o, {"P2": ["s101", "s199"]})))
    cases.append(Simple(
        h, "size-gt", rule("gt", "<ObjectSizeGreaterThan>100</ObjectSizeGreaterThan>", days(1)),
        o, staged(o, {"P2": ["s101", "s199", "s200", "s201"]})))
    cases.append(Simple(
        h, "size-lt", rule("lt", "<ObjectSizeLessThan>100</ObjectSizeLessThan>", days(1)),
        o, staged(o, {"P2": ["s000", "s099"]})))

    # --- tag filter ---------------------------------------------------------------
    o = {"t-tmp": (b"d", {"env": "tmp"}), "t-prod": (b"d", {"env": "prod"}), "t-none": (b"d", None),
         "t-tmp-extra": (b"d", {"env": "tmp", "other": "x"}), "t-TMP": (b"d", {"env": "TMP"})}
    cases.append(Simple(h, "tag", rule("t", tag("env", "tmp"), days(1)), o,
                        staged(o, {"P2": ["t-tmp", "t-tmp-extra"]})))

    # --- And: prefix + two tags -------------------------------------------------------
    o = {"p/both": (b"d", {"a": "1", "b": "2"}), "p/both-extra": (b"d", {"a": "1", "b": "2", "c": "3"}),
         "p/only-a": (b"d", {"a": "1"}), "q/both": (b"d", {"a": "1", "b": "2"}),
         "p/wrong": (b"d", {"a": "1", "b": "3"}), "p/none": (b"d", None)}
    cases.append(Simple(
        h, "and-tags",
        rule("and", "<And><Prefix>p/</Prefix>" + tag("a", "1") + tag("b", "2") + "</And>", days(1)),
        o, staged(o, {"P2": ["p/both", "p/both-extra"]})))

    # --- empty filter, empty prefix, no filter with legacy prefix -----------------------
    o = objs("x/1", "y/2", "z")
    cases.append(Simple(h, "empty-filter", rule("e", "", days(1)), o, staged(o, {"P2": o})))
    o = objs("old/1", "old/2", "new/1", "oldish")
    cases.append(Simple(h, "legacy-prefix", rule("lp", None, days(1), legacy_prefix="old/"), o,
                        staged(o, {"P2": ["old/1", "old/2"]})))

    # --- Expiration Date in the past and the future; Days 3 --------------------------
    fut = h.today + dt.timedelta(days=5)
    o = objs("past/1", "fut/1", "d3/1", "other")
    cases.append(Simple(
        h, "dates",
        rule("past", "<Prefix>past/</Prefix>", "<Expiration><Date>2026-01-01T00:00:00Z</Date></Expiration>")
        + rule("fut", "<Prefix>fut/</Prefix>",
               f"<Expiration><Date>{fut.strftime('%Y-%m-%dT%H:%M:%SZ')}</Date></Expiration>")
        + rule("d3", "<Prefix>d3/</Prefix>", days(3)),
        o, staged(o, {"P1": ["past/1"], "P4": ["fut/1", "d3/1"]})))

    # --- Disabled rule ----------------------------------------------------------------
    o = objs("a", "b")
    cases.append(Simple(h, "disabled", rule("off", "", days(1), status="Disabled"), o, staged(o, {})))

    # --- overlapping rules: the shortest applies ----------------------------------------
    o = {"a/x": (b"d", None), "b/tagged": (b"d", {"t": "1"}), "b/plain": (b"d", None)}
    cases.append(Simple(
        h, "overlap",
        rule("long", "", days(10)) + rule("short", "<Prefix>a/</Prefix>", days(1))
        + rule("tagged", tag("t", "1"), days(3)),
        o, staged(o, {"P2": ["a/x"], "P4": ["b/tagged"], "P5": ["b/plain"]})))

    cases.append(RuleRemoved(h, "rule-removed"))
    cases.append(ConfigDeleted(h, "config-deleted"))
    cases.append(Recreated(h, "recreate-same", new_rules=rule("all", "", days(3)),
                           gone_at="P4"))
    cases.append(Recreated(h, "recreate-longer", new_rules=rule("all", "", days(10)),
                           gone_at="P5"))
    cases.append(Recreated(h, "recreate-norules", new_rules=None, gone_at=None))
    cases.append(Multipart(h, "mpu"))
    cases.append(MultipartWithExpiration(h, "mpu-exp"))

    cases.append(NoncurrentDays(h, "v-ncdays"))
    cases.append(NewerNoncurrent(h, "v-newer"))
    cases.append(MarkersWithNoncurrent(h, "v-markers-nc"))
    cases.append(MarkersOnly(h, "v-markers-only"))
    cases.append(VersionedExpiration(h, "v-exp"))
    cases.append(SuspendedNoncurrent(h, "v-susp-nc"))
    cases.append(SuspendedExpiration(h, "v-susp-exp"))

    cases.append(BadDocs(h, "bad"))
    return cases


class RuleRemoved(Case):
    def setup(self):
        self.b = self.h.bucket(self.name)
        for k in ["a/1", "b/1"]:
            self.h.put(self.b, k)
        self.h.lifecycle(self.b, rule("r1", "<Prefix>a/</Prefix>", days(1))
                         + rule("r2", "<Prefix>b/</Prefix>", days(3)))
        # a/new is written right after P2 (today): due today+2d, so P3 deletes it.
        self.until("P1", {"a/1", "b/1"}, {"b/1"})

    def before(self, label):
        if label == "P3":  # after P2: drop r2, add an object under a/
            self.h.lifecycle(self.b, rule("r1", "<Prefix>a/</Prefix>", days(1)))
            self.h.put(self.b, "a/new")


class ConfigDeleted(Case):
    def setup(self):
        self.b = self.h.bucket(self.name)
        for k in ["x", "y"]:
            self.h.put(self.b, k)
        self.h.lifecycle(self.b, rule("all", "", days(3)))
        self.until("P5", {"x", "y"})

    def before(self, label):
        if label == "P3":
            self.h.s3.delete_bucket_lifecycle(Bucket=self.b)


class Recreated(Case):
    def __init__(self, h, name, new_rules, gone_at):
        super().__init__(h, name)
        self.new_rules = new_rules
        self.gone_at = gone_at

    def setup(self):
        self.b = self.h.bucket(self.name)
        self.h.put(self.b, "old/1")
        self.h.lifecycle(self.b, rule("all", "", days(3)))
        self.expect["P1"] = {"old/1"}
        gone = False
        for p in PASSES[1:]:
            if p == self.gone_at:
                gone = True
            self.expect[p] = set() if gone else {"new/1", "new/2"}

    def before(self, label):
        if label == "P2":  # after P1: delete the bucket, create it again
            self.h.s3.delete_object(Bucket=self.b, Key="old/1")
            self.h.s3.delete_bucket(Bucket=self.b)
            for _ in range(20):
                try:
                    self.h.s3.create_bucket(Bucket=self.b)
                    break
                except Exception as e:  # noqa: BLE001
                    last = e
                    import time
                    time.sleep(0.5)
            else:
                raise last
            self.h.put(self.b, "new/1")
            self.h.put(self.b, "new/2")
            if self.new_rules:
                self.h.lifecycle(self.b, self.new_rules)


class Multipart(Case):
    """Abort after 1 day under tmp/; keep/ not covered; one tmp/ upload completed just
    before the due pass (an object then, never aborted or deleted)."""

    def setup(self):
        s3 = self.h.s3
        self.b = self.h.bucket(self.name)
        self.ups = {}
        for k in ["tmp/u1", "keep/u2", "tmp/u3"]:
            u = s3.create_multipart_upload(Bucket=self.b, Key=k)["UploadId"]
            p = s3.upload_part(Bucket=self.b, Key=k, UploadId=u, PartNumber=1, Body=b"p" * 10)
            self.ups[k] = (u, p["ETag"])
        self.h.lifecycle(self.b, rule("abort", "<Prefix>tmp/</Prefix>",
                                      "<AbortIncompleteMultipartUpload><DaysAfterInitiation>1"
                                      "</DaysAfterInitiation></AbortIncompleteMultipartUpload>"))
        full = {"upload:tmp/u1", "upload:keep/u2", "upload:tmp/u3"}
        after = {"upload:keep/u2", "tmp/u3"}
        self.expect = {"P1": full, "P2": after, "P3": after, "P4": after, "P5": after}

    def before(self, label):
        if label == "P2":
            u, etag = self.ups["tmp/u3"]
            self.h.s3.complete_multipart_upload(
                Bucket=self.b, Key="tmp/u3", UploadId=u,
                MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": etag}]})


class MultipartWithExpiration(Case):
    """An Expiration rule over the whole bucket must not touch an upload in progress;
    the abort rule (3 days) does."""

    def setup(self):
        s3 = self.h.s3
        self.b = self.h.bucket(self.name)
        u = s3.create_multipart_upload(Bucket=self.b, Key="big")["UploadId"]
        s3.upload_part(Bucket=self.b, Key="big", UploadId=u, PartNumber=1, Body=b"p" * 10)
        self.h.put(self.b, "obj")
        self.h.lifecycle(self.b, rule("exp", "", days(1)) + rule(
            "abort", "", "<AbortIncompleteMultipartUpload><DaysAfterInitiation>3"
            "</DaysAfterInitiation></AbortIncompleteMultipartUpload>"))
        self.expect = {"P1": {"upload:big", "obj"}, "P2": {"upload:big"}, "P3": {"upload:big"},
                       "P4": set(), "P5": set()}


class VCase(Case):
    versioned = True

    def mk(self, status="Enabled"):
        self.b = self.h.bucket(self.name)
        self.h.versioning(self.b, status)

    def putv(self, key, label, body=b"data"):
        vid = self.h.put(self.b, key, body)
        self.names[vid] = label
        return vid


class NoncurrentDays(VCase):
    def setup(self):
        self.mk()
        for i in (1, 2, 3):
            self.putv("k", f"v{i}")
        self.h.lifecycle(self.b, rule("nc", "", "<NoncurrentVersionExpiration><NoncurrentDays>1"
                                      "</NoncurrentDays></NoncurrentVersionExpiration>"))
        full = {("k", "v1", False), ("k", "v2", False), ("k", "v3", True)}
        self.expect = {"P1": full}
        for p in PASSES[1:]:
            self.expect[p] = {("k", "v3", True)}


class NewerNoncurrent(VCase):
    def setup(self):
        self.mk()
        for i in range(1, 6):
            self.putv("k", f"v{i}")
        self.putv("two", "t1")
        self.putv("two", "t2")
        self.h.lifecycle(self.b, rule(
            "nn", "", "<NoncurrentVersionExpiration><NoncurrentDays>1</NoncurrentDays>"
            "<NewerNoncurrentVersions>2</NewerNoncurrentVersions></NoncurrentVersionExpiration>"))
        full = {("k", f"v{i}", i == 5) for i in range(1, 6)} | {("two", "t1", False), ("two", "t2", True)}
        kept = {("k", "v5", True), ("k", "v4", False), ("k", "v3", False),
                ("two", "t1", False), ("two", "t2", True)}
        self.expect = {"P1": full}
        for p in PASSES[1:]:
            self.expect[p] = kept


class MarkersWithNoncurrent(VCase):
    """ExpiredObjectDeleteMarker + NoncurrentDays 1: key a (version + marker) loses its
    version at P2, then its marker is an expired object delete marker; key b is a lone
    marker from the start and goes at the first pass."""

    def setup(self):
        self.mk()
        self.putv("a", "a1")
        self.h.s3.delete_object(Bucket=self.b, Key="a")
        self.h.s3.delete_object(Bucket=self.b, Key="b")
        self.h.lifecycle(self.b, rule(
            "m", "", "<Expiration><ExpiredObjectDeleteMarker>true</ExpiredObjectDeleteMarker></Expiration>"
            "<NoncurrentVersionExpiration><NoncurrentDays>1</NoncurrentDays></NoncurrentVersionExpiration>"))
        self.expect = {"P1": {("a", "a1", False), ("a", "DM", True)},
                       # AWS may need one more run to see the marker orphaned: check P3 on.
                       "P3": set(), "P4": set(), "P5": set()}


class MarkersOnly(VCase):
    """ExpiredObjectDeleteMarker alone: a marker over a noncurrent version stays; a lone
    marker goes."""

    def setup(self):
        self.mk()
        self.putv("c", "c1")
        self.h.s3.delete_object(Bucket=self.b, Key="c")
        self.h.s3.delete_object(Bucket=self.b, Key="d")
        self.putv("e", "e1")
        self.h.lifecycle(self.b, rule(
            "m", "", "<Expiration><ExpiredObjectDeleteMarker>true</ExpiredObjectDeleteMarker></Expiration>"))
        self.until("P5", {("c", "c1", False), ("c", "DM", True), ("e", "e1", True)})


class VersionedExpiration(VCase):
    """Expiration Days 1 in a versioned bucket: one delete marker on top, the version kept
    (noncurrent); no second marker later."""

    def setup(self):
        self.mk()
        self.putv("k", "k1")
        self.h.lifecycle(self.b, rule("exp", "", days(1)))
        self.expect = {"P1": {("k", "k1", True)}}
        for p in PASSES[1:]:
            self.expect[p] = {("k", "k1", False), ("k", "DM", True)}

    def verify(self, label):
        super().verify(label)
        if label in ("P2", "P5"):
            r = self.h.s3.list_object_versions(Bucket=self.b)
            n = len(r.get("DeleteMarkers", []))
            self.h.check(self.name + "-marker-count", label, {1}, {n})


class SuspendedNoncurrent(VCase):
    """Versioning enabled, k v1; suspended, k written again (null, latest). NoncurrentDays 1
    removes v1; the null version stays."""

    def setup(self):
        self.mk()
        self.putv("k", "v1")
        self.h.versioning(self.b, "Suspended")
        self.h.put(self.b, "k", b"null-data")
        self.names["null"] = "null"
        self.h.lifecycle(self.b, rule("nc", "", "<NoncurrentVersionExpiration><NoncurrentDays>1"
                                      "</NoncurrentDays></NoncurrentVersionExpiration>"))
        self.expect = {"P1": {("k", "v1", False), ("k", "null", True)}}
        for p in PASSES[1:]:
            self.expect[p] = {("k", "null", True)}


class SuspendedExpiration(VCase):
    """Suspended bucket, Expiration Days 1: AWS puts a null delete marker in place of the
    null version (the null version is gone), and keeps earlier versions as noncurrent."""

    def setup(self):
        self.mk()
        self.putv("n", "n1")
        self.h.versioning(self.b, "Suspended")
        self.h.put(self.b, "n", b"null-n")
        self.h.put(self.b, "m", b"null-m")
        self.names["null"] = "null"
        self.h.lifecycle(self.b, rule("exp", "", days(1)))
        self.expect = {"P1": {("n", "n1", False), ("n", "null", True), ("m", "null", True)}}
        for p in PASSES[1:]:
            self.expect[p] = {("n", "n1", False), ("n", "DM", True), ("m", "DM", True)}


class BadDocs(Case):
    """Documents the gateway stores though AWS would refuse them. The other buckets must
    carry on (checked by every other case). Recorded, judged by hand."""

    def setup(self):
        self.b = self.h.bucket(self.name + "-garbage")
        self.h.put(self.b, "x")
        doc = (f"<LifecycleConfiguration {NS}>" + rule("g", "", days(1))
               + "</LifecycleConfiguration><trailing>")
        self.garbage = self.h.put_lifecycle_raw(self.b, doc)
        self.b2 = self.h.bucket(self.name + "-zero")
        self.h.put(self.b2, "x")
        self.zero = self.h.put_lifecycle_raw(
            self.b2, f"<LifecycleConfiguration {NS}>" + rule("z", "", days(0))
            + rule("one", "<Prefix>x</Prefix>", days(1)) + "</LifecycleConfiguration>")
        self.b3 = self.h.bucket(self.name + "-notxml")
        self.h.put(self.b3, "x")
        self.notxml = self.h.put_lifecycle_raw(self.b3, "this is not xml")
        print(f"bad docs: garbage PUT {self.garbage[0]}, days0 PUT {self.zero[0]}, notxml PUT {self.notxml[0]}")

    def verify(self, label):
        for b in (self.b, self.b2, self.b3):
            print(f"  info {b} @{label}: {sorted(self.h.keys(b))}")
