"""More cases: per-version filters, restored versions, pagination, tag values with odd
characters, reserved-looking names. Same pass schedule as cases.py."""

from concurrent.futures import ThreadPoolExecutor

from cases import PASSES, Case, Simple, VCase, days, objs, rule, staged, tag


def extra_cases(h):
    cases = []

    # Tag values with spaces, '+', '=', unicode, and an empty value.
    o = {
        "sp": (b"d", {"k": "a b"}),
        "plus": (b"d", {"k": "a+b"}),
        "uni": (b"d", {"k": "ü"}),
        "empty": (b"d", {"e": ""}),
        "other": (b"d", {"k": "ab"}),
    }
    cases.append(Simple(
        h, "tagvals",
        rule("sp", tag("k", "a b"), days(1)) + rule("plus", tag("k", "a+b"), days(1))
        + rule("uni", tag("k", "ü"), days(1)) + rule("empty", tag("e", ""), days(1)),
        o, staged(o, {"P2": ["sp", "plus", "uni", "empty"]})))

    # Nested prefix without a trailing slash.
    o = objs("a/b/cd", "a/b/c/e", "a/bc", "a/b/x")
    cases.append(Simple(h, "nested-prefix", rule("n", "<Prefix>a/b/c</Prefix>", days(1)), o,
                        staged(o, {"P2": ["a/b/cd", "a/b/c/e"]})))

    # Keys that look like SeaweedFS's reserved names.
    cases.append(Reserved(h, "reserved"))

    # More than one listing page (the filer lists 1024 entries at a time).
    cases.append(Many(h, "many", 2100))

    cases.append(VersionFilters(h, "v-filters"))
    cases.append(Restored(h, "v-restored"))
    cases.append(VersionedDate(h, "v-date"))
    cases.append(SuspendedMarker(h, "v-susp-marker"))
    cases.extend(edit_cases(h))
    cases.extend(more_cases(h))
    cases.extend(more2_cases(h))
    return cases


class Reserved(Case):
    def setup(self):
        self.b = self.h.bucket(self.name)
        self.accepted = set()
        for k in ["x.versions", "x.versions/y", "d.uploads/z", "sys/.system/q", "plain"]:
            try:
                self.h.put(self.b, k)
                self.accepted.add(k)
            except Exception as e:  # noqa: BLE001
                print(f"  note: gateway refused key {k!r}: {e}")
        self.h.lifecycle(self.b, rule("all", "", days(1)))
        self.expect = staged(self.accepted, {"P2": self.accepted})


class Many(Case):
    def __init__(self, h, name, n):
        super().__init__(h, name)
        self.n = n

    def setup(self):
        self.b = self.h.bucket(self.name)
        keys = [f"m/{i:05d}" for i in range(self.n)] + [f"keep/{i}" for i in range(3)]
        with ThreadPoolExecutor(16) as ex:
            list(ex.map(lambda k: self.h.put(self.b, k, b"z"), keys))
        self.h.lifecycle(self.b, rule("m", "<Prefix>m/</Prefix>", days(1)))
        self.expect = staged(keys, {"P2": [k for k in keys if k.startswith("m/")]})


class VersionFilters(VCase):
    """Size and tag filters apply to each noncurrent version's own size and tags."""

    def setup(self):
        self.mk()
        s3 = self.h.s3
        # key s: 50-byte v1, 500-byte v2, current v3. Rule: noncurrent > 100 bytes.
        for lab, n in (("s1", 50), ("s2", 500), ("s3", 10)):
            self.names[s3.put_object(Bucket=self.b, Key="s", Body=b"x" * n)["VersionId"]] = lab
        # key t: v1 tagged gone=yes, v2 untagged, current v3 tagged gone=yes.
        for lab, tg in (("t1", "gone=yes"), ("t2", None), ("t3", "gone=yes")):
            kw = {"Tagging": tg} if tg else {}
            self.names[s3.put_object(Bucket=self.b, Key="t", Body=b"d", **kw)["VersionId"]] = lab
        nc = "<NoncurrentVersionExpiration><NoncurrentDays>1</NoncurrentDays></NoncurrentVersionExpiration>"
        self.h.lifecycle(self.b, rule("big", "<And><Prefix>s</Prefix><ObjectSizeGreaterThan>100"
                                             "</ObjectSizeGreaterThan></And>", nc)
                         + rule("tagged", tag("gone", "yes"), nc))
        full = {("s", "s1", False), ("s", "s2", False), ("s", "s3", True),
                ("t", "t1", False), ("t", "t2", False), ("t", "t3", True)}
        self.until("P1", full, full - {("s", "s2", False), ("t", "t1", False)})


class Restored(VCase):
    """v1, v2; v2 deleted by id makes v1 current again: NoncurrentDays must not delete it."""

    def setup(self):
        self.mk()
        self.putv("k", "v1")
        v2 = self.putv("k", "v2")
        self.h.s3.delete_object(Bucket=self.b, Key="k", VersionId=v2)
        self.h.lifecycle(self.b, rule("nc", "", "<NoncurrentVersionExpiration><NoncurrentDays>1"
                                      "</NoncurrentDays></NoncurrentVersionExpiration>"))
        self.until("P5", {("k", "v1", True)})


class VersionedDate(VCase):
    """Expiration Date in the past on a versioned bucket: one marker on top of each key at
    the first pass; nothing more later."""

    def setup(self):
        self.mk()
        self.putv("a", "a1")
        self.putv("b", "b1")
        self.h.s3.delete_object(Bucket=self.b, Key="b")  # already a marker on top
        self.h.lifecycle(self.b, rule("d", "", "<Expiration><Date>2026-01-01T00:00:00Z</Date></Expiration>"))
        st = {("a", "a1", False), ("a", "DM", True), ("b", "b1", False), ("b", "DM", True)}
        self.until("P5", st)

    def verify(self, label):
        super().verify(label)
        r = self.h.s3.list_object_versions(Bucket=self.b)
        self.h.check(self.name + "-marker-count", label, {2}, {len(r.get("DeleteMarkers", []))})


class SuspendedMarker(VCase):
    """Suspended bucket: a DELETE of a missing key leaves a lone null delete marker, which
    ExpiredObjectDeleteMarker removes; a null marker over an older version stays."""

    def setup(self):
        self.mk()
        self.putv("old", "o1")
        self.h.versioning(self.b, "Suspended")
        self.h.s3.delete_object(Bucket=self.b, Key="old")
        self.h.s3.delete_object(Bucket=self.b, Key="lone")
        self.h.lifecycle(self.b, rule(
            "m", "", "<Expiration><ExpiredObjectDeleteMarker>true</ExpiredObjectDeleteMarker></Expiration>"))
        self.until("P5", {("old", "o1", False), ("old", "DM", True)})
        self.expect["P1"] = {("old", "o1", False), ("old", "DM", True)}


_ = (PASSES,)


class RuleEdit(Case):
    """The rule is edited after P1: objects already written must follow the new rule."""

    def __init__(self, h, name, first, second, expect):
        super().__init__(h, name)
        self.first, self.second = first, second
        self.expect = {p: set(v) for p, v in expect.items()}

    def setup(self):
        self.b = self.h.bucket(self.name)
        for k in ["a/1", "b/1"]:
            self.h.put(self.b, k)
        self.h.lifecycle(self.b, self.first)

    def before(self, label):
        if label == "P2":
            self.h.lifecycle(self.b, self.second)


def edit_cases(h):
    both = {"a/1", "b/1"}
    return [
        # Days 10 -> Days 1 after P1: due at P2 under the new rule.
        RuleEdit(h, "edit-shorter", rule("r", "", days(10)), rule("r", "", days(1)),
                 staged(both, {"P2": both})),
        # Days 1 -> Days 10 after P1 (before the first due pass): kept until P5.
        RuleEdit(h, "edit-longer", rule("r", "", days(1)), rule("r", "", days(10)),
                 staged(both, {"P5": both})),
        # prefix a/ -> b/ (same id and TTL) after P1.
        RuleEdit(h, "edit-prefix", rule("r", "<Prefix>a/</Prefix>", days(1)),
                 rule("r", "<Prefix>b/</Prefix>", days(1)), staged(both, {"P2": ["b/1"]})),
        # Disabled -> Enabled after P1: objects already old are caught.
        RuleEdit(h, "edit-enable", rule("r", "", days(1), status="Disabled"), rule("r", "", days(1)),
                 staged(both, {"P2": both})),
    ]


class ManyVersions(VCase):
    """One key with more versions than a listing page: NewerNoncurrentVersions 1 keeps the
    newest noncurrent one; everything older goes."""

    def __init__(self, h, name, n):
        super().__init__(h, name)
        self.n = n

    def setup(self):
        self.mk()
        for i in range(self.n):
            self.putv("k", f"v{i:05d}", body=b"v")
        self.h.lifecycle(self.b, rule(
            "nn", "", "<NoncurrentVersionExpiration><NoncurrentDays>1</NoncurrentDays>"
            "<NewerNoncurrentVersions>1</NewerNoncurrentVersions></NoncurrentVersionExpiration>"))
        last, prev = f"v{self.n - 1:05d}", f"v{self.n - 2:05d}"
        full = {("k", f"v{i:05d}", i == self.n - 1) for i in range(self.n)}
        self.until("P1", full, {("k", last, True), ("k", prev, False)})


class Locked(VCase):
    """Object-lock bucket. k1 under GOVERNANCE retention (until +60 real days) then
    overwritten: Expiration puts a marker on k (allowed under lock), NoncurrentDays 1
    deletes the unlocked noncurrent k2 version but never the locked k1."""

    versioned = True

    def setup(self):
        import datetime as dt
        self.b = f"acc-{self.h.run}-{self.name}"
        self.h.s3.create_bucket(Bucket=self.b, ObjectLockEnabledForBucket=True)
        self.h.created.append(self.b)
        until = dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=60)
        r = self.h.s3.put_object(Bucket=self.b, Key="k", Body=b"locked", ObjectLockMode="GOVERNANCE",
                                 ObjectLockRetainUntilDate=until, ChecksumAlgorithm="CRC32")
        self.names[r["VersionId"]] = "k1"
        r = self.h.s3.put_object(Bucket=self.b, Key="k", Body=b"free", ChecksumAlgorithm="CRC32")
        self.names[r["VersionId"]] = "k2"
        self.h.lifecycle(self.b, rule("exp", "", days(1) + "<NoncurrentVersionExpiration><NoncurrentDays>1"
                                      "</NoncurrentDays></NoncurrentVersionExpiration>"))
        self.expect = {"P1": {("k", "k1", False), ("k", "k2", True)},
                       "P2": {("k", "k1", False), ("k", "k2", False), ("k", "DM", True)},
                       # k2 noncurrent since P2's marker (written at real time today): due +2d.
                       "P4": {("k", "k1", False), ("k", "DM", True)},
                       "P5": {("k", "k1", False), ("k", "DM", True)}}


def more_cases(h):
    # (A backslash in a key is turned into '/' by the 4.48 gateway, so none here.)
    o = objs("tab\tkey", "nl\nkey", "q?x=1&y=2", "hash#frag", "star*", "~tilde")
    return [
        Simple(h, "ctrl-keys", rule("all", "", days(1)), o, staged(o, {"P2": o})),
        ManyVersions(h, "v-many", 1030),
        Locked(h, "v-lock"),
    ]


class NoncurrentMarker(VCase):
    """v1, then a delete marker, then v2: the marker is noncurrent now. NoncurrentDays 1
    removes v1 and the noncurrent marker; v2 stays."""

    def setup(self):
        self.mk()
        self.putv("k", "v1")
        self.h.s3.delete_object(Bucket=self.b, Key="k")
        self.putv("k", "v2")
        self.h.lifecycle(self.b, rule("nc", "", "<NoncurrentVersionExpiration><NoncurrentDays>1"
                                      "</NoncurrentDays></NoncurrentVersionExpiration>"))
        self.until("P1", {("k", "v1", False), ("k", "DM", False), ("k", "v2", True)},
                   {("k", "v2", True)})


class MarkerPrefix(VCase):
    """ExpiredObjectDeleteMarker under prefix a/: the lone marker b/x stays, a/x goes. A key
    whose current version is a marker over a version gets no second marker from a Days rule."""

    def setup(self):
        self.mk()
        self.h.s3.delete_object(Bucket=self.b, Key="a/x")
        self.h.s3.delete_object(Bucket=self.b, Key="b/x")
        self.putv("c/y", "y1")
        self.h.s3.delete_object(Bucket=self.b, Key="c/y")
        self.h.lifecycle(self.b, rule(
            "m", "<Prefix>a/</Prefix>",
            "<Expiration><ExpiredObjectDeleteMarker>true</ExpiredObjectDeleteMarker></Expiration>")
            + rule("d", "<Prefix>c/</Prefix>", days(1)))
        self.until("P5", {("b/x", "DM", True), ("c/y", "y1", False), ("c/y", "DM", True)})
        self.expect["P1"] = {("b/x", "DM", True), ("c/y", "y1", False), ("c/y", "DM", True)}


class VersionedTags(VCase):
    """Expiration by tag in a versioned bucket looks at the current version's tags only."""

    def setup(self):
        self.mk()
        s3 = self.h.s3
        self.names[s3.put_object(Bucket=self.b, Key="k", Body=b"1", Tagging="t=1")["VersionId"]] = "k1"
        self.names[s3.put_object(Bucket=self.b, Key="k", Body=b"2")["VersionId"]] = "k2"
        self.names[s3.put_object(Bucket=self.b, Key="j", Body=b"1")["VersionId"]] = "j1"
        self.names[s3.put_object(Bucket=self.b, Key="j", Body=b"2", Tagging="t=1")["VersionId"]] = "j2"
        self.h.lifecycle(self.b, rule("t", tag("t", "1"), days(1)))
        base = {("k", "k1", False), ("k", "k2", True), ("j", "j1", False)}
        self.until("P1", base | {("j", "j2", True)},
                   base | {("j", "j2", False), ("j", "DM", True)})


def more2_cases(h):
    return [NoncurrentMarker(h, "v-nc-marker"), MarkerPrefix(h, "v-marker-prefix"),
            VersionedTags(h, "v-tags")]
