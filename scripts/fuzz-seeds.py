#!/usr/bin/env python3
"""Writes seed corpora for the fuzz targets of hookgate-providers from testdata/vectors.

    scripts/fuzz-seeds.py [OUT]    (default: crates/hookgate-providers/fuzz/corpus)

One folder per target, in the input encodings the targets document (fuzz/src/lib.rs and
fuzz_targets/*.rs); packs are grouped as fuzz/src/lib.rs groups them (by signature-header
syntax, in id order), so every pack in packs/ and every vector file gets seeds. Seeds are
derived on each run and never committed.
"""
import base64
import hashlib
import json
import os
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
VECTORS = ROOT / "testdata" / "vectors"
PACKS = ROOT / "crates" / "hookgate-providers" / "packs"

def packs_with_format(*fmts):
    """Pack ids (sorted) whose signature header has one of these syntaxes, as fuzz/src/lib.rs
    groups them."""
    out = []
    for path in sorted(PACKS.glob("*.json"), key=lambda p: p.stem):
        signature = json.loads(path.read_text()).get("signature", {})
        if signature.get("headers") and any(f in signature.get("format", {}) for f in fmts):
            out.append(path.stem)
    return out


# A timestamp_then_signatures header (one comma list) is fuzzed with the plain ones.
PLAIN = packs_with_format("plain", "timestamp_then_signatures")
KEY_VALUE = packs_with_format("key_value")
VERSIONED_LIST = packs_with_format("versioned_list")
BATCHED = [p.stem for p in sorted(PACKS.glob("*.json"), key=lambda p: p.stem)
           if "batch" in json.loads(p.read_text())]
POINTERS = ["/id", "/type", "/data/object/id", "/created", "/event_id", "/0/sg_event_id",
            "/notificationItems/0/NotificationRequestItem/pspReference", "/webhookTimestamp"]


def vectors(pack_id):
    """Every vector of the pack: its own file and the generated supplement, if any."""
    out = []
    for path in (VECTORS / f"{pack_id}.json", VECTORS / f"{pack_id}.generated.json"):
        if path.exists():
            out += json.loads(path.read_text())["vectors"]
    return out


def body_of(vector):
    if "body_b64" in vector:
        return base64.b64decode(vector["body_b64"])
    return vector["body"].encode()


def header_lines(vector):
    for name, value in vector["headers"].items():
        for one in value if isinstance(value, list) else [value]:
            yield name, one


def signature_values(pack_id, vector):
    names = [n.lower() for n in json.loads((PACKS / f"{pack_id}.json").read_text())
             .get("signature", {}).get("headers", [])]
    return [v for n, v in header_lines(vector) if n.lower() in names]


def write(out, target, data):
    folder = out / target
    folder.mkdir(parents=True, exist_ok=True)
    (folder / hashlib.sha1(data).hexdigest()).write_bytes(data)


def main():
    out = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else \
        ROOT / "crates" / "hookgate-providers" / "fuzz" / "corpus"
    count = 0
    for target, ids in (("sig_plain", PLAIN), ("sig_key_value", KEY_VALUE),
                        ("sig_versioned_list", VERSIONED_LIST)):
        for index, pack_id in enumerate(ids):
            for vector in vectors(pack_id):
                values = signature_values(pack_id, vector)
                if values:
                    write(out, target, bytes([index]) + "\n".join(values).encode())
                    count += 1
    for pack_id in sorted(p.stem for p in PACKS.glob("*.json")):
        for vector in vectors(pack_id):
            body = body_of(vector)
            headers = "".join(f"{n}: {v}\n" for n, v in header_lines(vector)).encode()
            if pack_id in BATCHED:
                write(out, "batch", bytes([BATCHED.index(pack_id)]) + headers + b"\n" + body)
            content_type = str(vector["headers"].get("Content-Type", vector["headers"].get(
                "content-type", "")))
            if "form" in content_type:
                write(out, "form", body)
            elif body[:1] in (b"{", b"["):
                for pointer in POINTERS:
                    write(out, "json_pointer", pointer.encode() + b"\n" + body)
            lines = [pack_id, f"@now {vector['now']}"]
            lines += [f"@secret {s}" for s in vector["secrets"]]
            if vector.get("url"):
                lines.append(f"@url {vector['url']}")
            for key, value in (vector.get("config") or {}).items():
                if key != "expected_response":
                    lines.append(f"@option {key}={value}")
            lines.append(f"@method {vector.get('method', 'POST')}")
            request = ("\n".join(lines) + "\n").encode() + headers + b"\n" + body
            write(out, "request", request)
            if vector["expect"] == "valid":
                # the same delivery re-signed by the harness: body mutations reach extraction
                signed = ("\n".join(lines + ["@sign"]) + "\n").encode() + headers + b"\n" + body
                write(out, "request", signed)
            count += 1
    print(f"seeds for {count} vectors written under {os.path.relpath(out, ROOT)}")


if __name__ == "__main__":
    main()
