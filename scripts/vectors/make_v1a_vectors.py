#!/usr/bin/env python3
"""Standard Webhooks `v1a` (Ed25519) vectors, independent of the hookgate engine.

Writes testdata/vectors/standard_webhooks.generated.json: requests signed with Ed25519 over
`{id}.{timestamp}.{body}` (the Standard Webhooks specification, "Signature scheme"), alone and
mixed with `v1` HMAC-SHA256 entries in one `webhook-signature` header, plus tamper cases. The
signing uses the `cryptography` package (pip install cryptography), HMAC the standard library;
nothing here calls hookgate. Keys are derived from fixed labels, and Ed25519 signatures are
deterministic, so the output is stable: `--check` exits 1 when the file differs.

Key formats written: `whpk_` + base64 of the 32-byte public key (endpoint secrets), and in each
file header the matching `whsk_` + base64 of the 32-byte seed (what `hookgate send
--private-key` reads).

    python3 scripts/vectors/make_v1a_vectors.py [--check]
"""

import argparse
import base64
import hashlib
import hmac
import json
import pathlib
import sys

try:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
except ImportError:  # pragma: no cover
    sys.exit("make_v1a_vectors.py needs the `cryptography` package: pip install cryptography")

ROOT = pathlib.Path(__file__).resolve().parents[2]
OUT = ROOT / "testdata" / "vectors" / "standard_webhooks.generated.json"
PACK = ROOT / "crates" / "hookgate-providers" / "packs" / "standard_webhooks.json"
SPEC = "https://github.com/standard-webhooks/standard-webhooks/blob/main/spec/standard-webhooks.md"
NOW = 1767225600
TOLERANCE = 300


def seed(label):
    return hashlib.sha256(b"hookgate v1a vector key " + label.encode()).digest()


def keypair(label):
    private = Ed25519PrivateKey.from_private_bytes(seed(label))
    public = private.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    return private, "whpk_" + base64.b64encode(public).decode(), "whsk_" + base64.b64encode(seed(label)).decode()


def b64(data):
    return base64.b64encode(data).decode()


def signed(msg_id, ts, body):
    return f"{msg_id}.{ts}.".encode() + body.encode()


def v1a(private, msg_id, ts, body):
    return "v1a," + b64(private.sign(signed(msg_id, ts, body)))


def v1(key, msg_id, ts, body):
    return "v1," + b64(hmac.digest(key, signed(msg_id, ts, body), "sha256"))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only compare with the file")
    args = parser.parse_args()

    a, pk_a, sk_a = keypair("a")
    b, pk_b, _ = keypair("b")
    hmac_key = hashlib.sha256(b"hookgate v1a vector hmac secret").digest()
    whsec = "whsec_" + b64(hmac_key)
    other_hmac = hashlib.sha256(b"hookgate v1a vector unrelated hmac secret").digest()
    body = json.dumps(
        {"type": "invoice.paid", "timestamp": "2025-12-31T23:58:20Z", "data": {"id": "inv_v1a_0001", "amount": 4200}},
        separators=(",", ":"),
    )
    ts = str(NOW - 100)

    vectors = []

    def add(name, msg_id, secrets, signature, expect, reason, *, now=NOW, body_sent=None, matched=None, note):
        headers = {
            "Content-Type": "application/json",
            "webhook-id": msg_id,
            "webhook-timestamp": ts,
        }
        if signature is not None:
            headers["webhook-signature"] = signature
        v = {
            "name": f"standard_webhooks/generated/{name}",
            "provider": "standard_webhooks",
            "scheme": "standard-webhooks-v1a",
            "secret_format": "whpk_base64" if all(s.startswith("whpk_") for s in secrets) else "whsec_base64",
            "secrets": secrets,
            "now": now,
            "tolerance_seconds": TOLERANCE,
            "method": "POST",
            "headers": headers,
            "body": body if body_sent is None else body_sent,
            "expect": expect,
            "reason": reason,
        }
        if expect == "valid":
            v["matched_secret_index"] = matched
            v["event_id"] = msg_id
            v["event_id_source"] = "header:webhook-id"
        v["source"] = {
            "kind": "generated",
            "generator": "scripts/vectors/make_v1a_vectors.py (Python cryptography Ed25519, hmac)",
            "note": note + "; signed with the Standard Webhooks recipe, not by an official SDK",
        }
        vectors.append(v)

    m = "msg_v1a_only_0001"
    add("v1a_only", m, [pk_a], v1a(a, m, ts, body), "valid", "ok", matched=0,
        note="one v1a entry, the whpk_ key configured")
    m = "msg_v1a_mixed_0002"
    add("mixed_header_v1a_matches", m, [pk_a],
        v1(other_hmac, m, ts, body) + " " + v1a(a, m, ts, body), "valid", "multiple_signatures_one_matches",
        matched=0, note="v1 (another secret) and v1a in one header; only the public key is configured")
    m = "msg_v1a_mixed_0003"
    add("mixed_header_v1_matches", m, [pk_b, whsec],
        v1a(a, m, ts, body) + " " + v1(hmac_key, m, ts, body), "valid", "multiple_signatures_one_matches",
        matched=1, note="v1a by key a (not configured) and v1 by the configured whsec_; a whpk_ key b first")
    m = "msg_v1a_rotation_0004"
    add("public_key_rotation", m, [pk_b, pk_a], v1a(a, m, ts, body), "valid", "previous_secret_match",
        matched=1, note="two public keys configured (new first); the older one signed")
    m = "msg_v1a_tamper_0005"
    sig = v1a(a, m, ts, body)
    add("v1a_body_tampered", m, [pk_a], sig, "invalid", "body_tampered",
        body_sent=body.replace("4200", "4201"), note="one byte of the body changed after signing")
    add("v1a_whitespace_changed", m, [pk_a], sig, "invalid", "whitespace_changed",
        body_sent=body + " ", note="a space appended after signing")
    add("v1a_wrong_secret", m, [pk_b], sig, "invalid", "wrong_secret",
        note="signed with key a, key b configured")
    add("v1a_stale_timestamp", m, [pk_a], sig, "invalid", "stale_timestamp",
        now=int(ts) + TOLERANCE + 1, note="the verifier's clock one second past the tolerance")
    add("v1a_future_timestamp", m, [pk_a], sig, "invalid", "future_timestamp",
        now=int(ts) - TOLERANCE - 1, note="the verifier's clock one second before the future bound")
    add("v1a_missing_signature_header", m, [pk_a], None, "invalid", "missing_signature_header",
        note="no webhook-signature header")
    add("v1a_malformed_signature_header", m, [pk_a], "v1a," + b64(b"\x01" * 63), "invalid",
        "malformed_signature_header", note="a v1a entry of 63 bytes (an Ed25519 signature has 64)")
    m = "msg_v1a_forgery_0006"
    public_a = base64.b64decode(pk_a[len("whpk_"):])
    add("public_key_used_as_hmac_key", m, [pk_a], v1(public_a, m, ts, body), "invalid", "signature_mismatch",
        note="a v1 HMAC keyed with the public key's bytes (anyone can compute it): never accepted")
    add("v1a_signature_under_v1_label", m, [pk_a], "v1," + v1a(a, m, ts, body)[4:], "invalid",
        "malformed_signature_header", note="a valid Ed25519 signature labelled v1 (64 bytes, not an HMAC-SHA256 tag)")

    doc = {
        "schema": "webhook-vectors/v1",
        "provider": "standard_webhooks",
        "scheme": "standard-webhooks-v1a",
        "set": "generated",
        "docs": SPEC,
        "secret_format": "whpk_base64",
        "tolerance_seconds": TOLERANCE,
        "generator": "scripts/vectors/make_v1a_vectors.py",
        "signing_keys": {"a": sk_a},
        "notes": "Ed25519 (v1a) vectors signed by the Python cryptography package over {id}.{timestamp}.{body}; "
        "independent of the hookgate engine. Not published by the Standard Webhooks project.",
        "vectors": vectors,
    }
    text = json.dumps(doc, indent=1, ensure_ascii=False) + "\n"
    if args.check:
        current = OUT.read_text() if OUT.exists() else ""
        if current != text:
            print(f"{OUT} differs from what this script writes")
            return 1
        print(f"{OUT} is up to date ({len(vectors)} vectors)")
        return 0
    OUT.write_text(text)
    pack = json.loads(PACK.read_text())
    shared = json.loads((ROOT / "testdata" / "vectors" / "standard_webhooks.json").read_text())
    total = len(shared["vectors"]) + len(vectors)
    if pack["vectors"] != total:
        raw = PACK.read_text().replace(f'"vectors": {pack["vectors"]},', f'"vectors": {total},', 1)
        PACK.write_text(raw)
    print(f"wrote {OUT} ({len(vectors)} vectors; pack total {total})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
