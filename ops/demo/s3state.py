#!/usr/bin/env python3
"""What the quickstart buckets hold, read over plain (unsigned) S3 HTTP, and what a pass changed.

    s3state.py snapshot <s3 endpoint> <out.json> <bucket>...   print and save objects, versions, uploads
    s3state.py diff <before.json> <after.json> <expect.json>    print expired / kept; exit 1 if not as expected

Standard library only; S3 auth must be off (the quickstart cluster's default).
"""
import json
import sys
import urllib.request
import xml.etree.ElementTree as ET


def local(tag):
    return tag.rsplit("}", 1)[-1]


def get_xml(url):
    with urllib.request.urlopen(url, timeout=30) as r:
        return ET.fromstring(r.read())


def children(node, name):
    return [c for c in node if local(c.tag) == name]


def text(node, name):
    for c in node:
        if local(c.tag) == name:
            return c.text or ""
    return ""


def bucket_state(endpoint, bucket):
    """One line per thing a lifecycle rule can remove: a version (or marker) and an upload."""
    items = []
    root = get_xml(f"{endpoint}/{bucket}?versions&max-keys=1000")
    for v in children(root, "Version"):
        latest = text(v, "IsLatest") == "true"
        vid = text(v, "VersionId")
        suffix = "" if vid in ("", "null") else f" version=…{vid[-8:]}" + ("" if latest else " (noncurrent)")
        items.append(f"object {text(v, 'Key')}{suffix}")
    for m in children(root, "DeleteMarker"):
        items.append(f"delete-marker {text(m, 'Key')} version=…{text(m, 'VersionId')[-8:]}")
    root = get_xml(f"{endpoint}/{bucket}?uploads")
    for u in children(root, "Upload"):
        items.append(f"upload {text(u, 'Key')} id={text(u, 'UploadId')[:8]}…")
    return sorted(items)


def snapshot(endpoint, out, buckets):
    state = {b: bucket_state(endpoint, b) for b in buckets}
    for b, items in state.items():
        print(f"  {b}:")
        for i in items:
            print(f"    {i}")
    with open(out, "w") as f:
        json.dump(state, f, indent=1)


def diff(before_path, after_path, expect_path):
    before, after, expect = (json.load(open(p)) for p in (before_path, after_path, expect_path))
    ok = True
    for b in before:
        gone = [i for i in before[b] if i not in after.get(b, [])]
        kept = [i for i in before[b] if i in after.get(b, [])]
        new = [i for i in after.get(b, []) if i not in before[b]]
        print(f"  {b}:")
        for i in gone:
            print(f"    EXPIRED  {i}")
        for i in kept:
            print(f"    kept     {i}")
        for i in new:
            print(f"    added    {i}")
        want = sorted(expect.get(b, {}).get("expired", []))
        got = sorted(strip_ids(i) for i in gone)
        if got != want:
            ok = False
            print(f"    !! expected expired: {want}\n    !! actually expired: {got}")
        want_new = sorted(expect.get(b, {}).get("added", []))
        got_new = sorted(strip_ids(i) for i in new)
        if got_new != want_new:
            ok = False
            print(f"    !! expected added: {want_new}\n    !! actually added: {got_new}")
    return 0 if ok else 1


def strip_ids(item):
    """`object k version=1234…` → `object k`, so expectations need no generated ids."""
    return " ".join(w for w in item.split() if not w.startswith(("version=", "id=")))


def main(argv):
    if len(argv) >= 4 and argv[1] == "snapshot":
        snapshot(argv[2].rstrip("/"), argv[3], argv[4:])
        return 0
    if len(argv) == 5 and argv[1] == "diff":
        return diff(argv[2], argv[3], argv[4])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
