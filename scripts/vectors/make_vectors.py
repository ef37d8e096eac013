#!/usr/bin/env python3
"""Writes known-answer vectors for a provider pack, independently of the Rust engine.

Python 3 standard library only (hmac, hashlib, base64, json). Two jobs:

* sign: valid requests signed with the provider's documented recipe — HMAC over the pack's
  `signature.signed` template, or a recipe file's own template — with the current secret
  and with a previous secret configured during rotation;
* derive: the tamper cases from a valid request (one byte and whitespace changed in what is
  signed, a wrong secret, the clock moved past the tolerance both ways, the signature
  missing and malformed). Deriving needs no key, so it works for every scheme, public-key
  ones included.

Output is `testdata/vectors/<id>.generated.json` when the provider has its own vector file
(`<id>.json`, which is never modified), else `testdata/vectors/<id>.json`; every vector has
`set` = `generated` and a `source` saying how it was made. The pack's `vectors` count is
updated to the total of its files. See README.md next to this script.
"""

import argparse
import base64
import copy
import datetime
import hashlib
import hmac
import json
import re
import sys
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKS = ROOT / "crates/hookgate-providers/packs"
VECTORS = ROOT / "testdata/vectors"
RECIPES = Path(__file__).resolve().parent / "recipes"
SCRIPT = "scripts/vectors/make_vectors.py"

ALGORITHMS = {"hmac-sha1": hashlib.sha1, "hmac-sha256": hashlib.sha256, "hmac-sha512": hashlib.sha512}
B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


def fail(message):
    sys.exit(f"make_vectors: {message}")


# ---------------------------------------------------------------------------------------------
# Secrets and signing (the documented recipe)


def secret_key(fmt, text):
    """Key bytes of a configured secret, per the vector format's `secret_format`."""
    if fmt == "utf8":
        return text.encode()
    if fmt == "utf8_nfkd":
        import unicodedata
        return unicodedata.normalize("NFKD", text).encode()
    if fmt == "hex":
        return bytes.fromhex(text)
    if fmt == "base64":
        return base64.b64decode(text, validate=True)
    if fmt == "whsec_base64":
        return base64.b64decode(text[6:] if text.startswith("whsec_") else text, validate=True)
    fail(f"cannot sign with secret format {fmt!r} (shared secrets only)")


def other_secret(fmt, text):
    """A secret of the same shape that differs in one character (never the one configured)."""
    if fmt.startswith("ed25519") or fmt.startswith("p256") or fmt == "x509_pem":
        return None  # a public key needs a real other key: recipes give `wrong_secret`
    prefix = "whsec_" if text.startswith("whsec_") else ""
    body = text[len(prefix):]
    i = len(body) // 2
    while i < len(body) and body[i] == "=":
        i -= 1
    alphabet = "0123456789abcdef" if fmt == "hex" else B64 if "base64" in fmt else None
    if alphabet is None:
        ch = "x" if body[i] != "x" else "y"
    else:
        lower = body[i].lower() if fmt == "hex" else body[i]
        ch = alphabet[(alphabet.index(lower) + 1) % len(alphabet)]
    return prefix + body[:i] + ch + body[i + 1:]


def encode(encoding, tag):
    if encoding in ("hex", "hex_any_case"):
        return tag.hex()
    if encoding == "hex_upper":
        return tag.hex().upper()
    if encoding == "base64":
        return base64.b64encode(tag).decode()
    if encoding == "base64url":
        return base64.urlsafe_b64encode(tag).decode().rstrip("=")
    if encoding == "base64_hex":
        return base64.b64encode(tag.hex().encode()).decode()
    fail(f"unknown encoding {encoding!r}")


def time_text(fmt, unix):
    if fmt == "unix_seconds":
        return str(unix)
    if fmt == "unix_millis":
        return str(unix * 1000)
    if fmt == "rfc3339":
        return datetime.datetime.fromtimestamp(unix, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    fail(f"unknown timestamp format {fmt!r}")


def parse_time(fmt, text):
    if fmt == "unix_seconds":
        return int(text)
    if fmt == "unix_millis":
        return int(text) // 1000
    if fmt == "rfc3339":
        return int(datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp())
    fail(f"unknown timestamp format {fmt!r}")


def header_of(headers, name):
    for k, v in headers.items():
        if k.lower() == name.lower():
            return v
    return None


def signed_bytes(template, body, headers, ts_text, event_id, url, options, items=None):
    """The signed bytes: the template's literal text with its placeholders filled in."""
    out = b""
    for literal, placeholder in re.findall(r"([^{]*)(?:\{([^}]*)\})?", template):
        out += literal.encode()
        if not placeholder:
            continue
        if placeholder == "body":
            out += body
        elif placeholder == "body_crc32":
            out += str(zlib.crc32(body) & 0xFFFFFFFF).encode()
        elif placeholder == "body_sha256":
            out += hashlib.sha256(body).hexdigest().encode()
        elif placeholder == "ts":
            out += ts_text.encode()
        elif placeholder == "id":
            out += event_id.encode()
        elif placeholder == "url":
            out += url.encode()
        elif placeholder.startswith("header:"):
            out += header_of(headers, placeholder[7:]).encode()
        elif placeholder.startswith("option:"):
            out += options[placeholder[7:]].encode()
        elif placeholder.startswith("signature:"):
            out += (items or {})[placeholder[10:]].encode()
        else:
            fail(f"cannot sign the placeholder {{{placeholder}}}")
    return out


def der_items(data):
    """The (tag, content) items of a DER sequence's content."""
    out, i = [], 0
    while i < len(data):
        tag, length = data[i], data[i + 1]
        i += 2
        if length & 0x80:
            n = length & 0x7F
            length = int.from_bytes(data[i:i + n], "big")
            i += n
        out.append((tag, data[i:i + length]))
        i += length
    return out


def rsa_private_key(pem_text):
    """(n, d) of a PKCS#8 RSA private key in PEM."""
    der = base64.b64decode("".join(l for l in pem_text.splitlines() if not l.startswith("-----")))
    (_, outer), = der_items(der)
    octets = [c for t, c in der_items(outer) if t == 0x04][0]
    (_, rsa), = der_items(octets)
    ints = [int.from_bytes(c, "big") for t, c in der_items(rsa) if t == 0x02]
    return ints[1], ints[3]


def rsa_pkcs1_sha256(pem_text, message):
    """RSASSA-PKCS1-v1_5 with SHA-256 (RFC 8017 §8.2), the textbook way."""
    n, d = rsa_private_key(pem_text)
    k = (n.bit_length() + 7) // 8
    digest_info = bytes.fromhex("3031300d060960864801650304020105000420") + hashlib.sha256(message).digest()
    em = b"\x00\x01" + b"\xff" * (k - len(digest_info) - 3) + b"\x00" + digest_info
    return pow(int.from_bytes(em, "big"), d, n).to_bytes(k, "big")


def token_request(pack, recipe, secret, event_id):
    """Headers of a shared-token request: the token in the provider's header as it writes it
    (a token in a body field is already in the recipe's body)."""
    sig = pack["signature"]
    headers = {}
    if pack.get("send_content_type") or pack["content_types"]:
        headers["Content-Type"] = pack.get("send_content_type") or pack["content_types"][0]
    for location in pack["event_id"]["from"]:
        if location.startswith("header:"):
            headers[location[7:]] = event_id
            break
    headers.update(recipe.get("headers", {}))
    # a token in the header the endpoint names (`header_option`): the recipe's config names it
    name = recipe.get("config", {})[sig["header_option"]] if sig.get("header_option") else (sig.get("headers") or [None])[0]
    if name:
        form = sig.get("token_form", "plain")
        if form == "bearer":
            secret = "Bearer " + secret
        elif form == "basic":
            secret = "Basic " + base64.b64encode(secret.encode()).decode()
        headers[name] = secret
    return headers


def sign_request(pack, recipe, secret, body, event_id, ts, url, options, items=None):
    """Headers of a request signed with `secret` at `ts`: HMAC over the template, or for
    `rsa_sha256_certificate` packs RSA with the private key the recipe pairs with `secret`."""
    sig = pack["signature"]
    if pack["scheme"] == "shared_token":
        return token_request(pack, recipe, secret, event_id)
    template = recipe.get("signed", sig.get("signed"))
    if pack["scheme"] not in ("hmac", "rsa_sha256_certificate") or template is None:
        fail(f"{pack['id']}: only HMAC and RSA template recipes are signed here (scheme {pack['scheme']})")
    headers = {}
    if pack.get("send_content_type") or pack["content_types"]:
        headers["Content-Type"] = pack.get("send_content_type") or pack["content_types"][0]
    timestamp = pack.get("timestamp")
    ts_text = time_text(timestamp["format"], ts) if timestamp else ""
    if timestamp:
        for location in timestamp["from"]:
            if location.startswith("header:"):
                headers[location[7:]] = ts_text
                break
    for location in pack["event_id"]["from"]:
        if location.startswith("header:"):
            headers[location[7:]] = event_id
            break
    headers.update(recipe.get("headers", {}))
    message = signed_bytes(template, body, headers, ts_text, event_id, url or "", options, items)
    if pack["scheme"] == "rsa_sha256_certificate":
        key_file = recipe["signing_key_files"][recipe["secrets"].index(secret)]
        digest = rsa_pkcs1_sha256((ROOT / key_file).read_text(), message)
    else:
        key = secret_key(pack["secret_format"], secret)
        digest = hmac.new(key, message, ALGORITHMS[sig["algorithm"]]).digest()
    value = encode(sig["encoding"], digest)
    fmt = sig["format"]
    if "plain" in fmt:
        value = (fmt["plain"].get("prefix") or "") + value
    elif "key_value" in fmt:
        kv = fmt["key_value"]
        items_out = [k + kv["kv_separator"] + v for k, v in (items or {}).items()]
        if kv.get("timestamp_key"):
            items_out.append(kv["timestamp_key"] + kv["kv_separator"] + ts_text)
        items_out.append(kv["signature_keys"][0] + kv["kv_separator"] + value)
        value = kv["pair_separator"].join(items_out)
    elif "versioned_list" in fmt:
        vl = fmt["versioned_list"]
        value = vl["versions"][0] + vl["version_separator"] + value
        if vl.get("key_id_first"):
            value = recipe.get("key_id", "1") + vl["version_separator"] + value
    elif "timestamp_then_signatures" in fmt:
        value = ts_text + fmt["timestamp_then_signatures"]["separator"] + value
    if sig.get("query_param"):
        # the signature travels in a query parameter of the URL the provider calls
        headers[QUERY_URL] = with_query_param(url or DEFAULT_URL, sig["query_param"], value)
        return headers
    headers[sig["headers"][0]] = value
    return headers


QUERY_URL = "\0url"  # where sign_request hands a query-signed URL back (never a header)
DEFAULT_URL = "https://hooks.example.com/in"


def with_query_param(url, name, value):
    from urllib.parse import quote
    joiner = "&" if "?" in url else "?"
    return f"{url}{joiner}{quote(name, safe='')}={quote(value, safe='')}"


def without_query_param(url, name):
    base, _, query = url.partition("?")
    kept = [p for p in query.split("&") if p and p.split("=")[0] != name]
    return base + ("?" + "&".join(kept) if kept else "")


# ---------------------------------------------------------------------------------------------
# Reading a vector the way the pack does


def body_of(v):
    if "body_b64" in v:
        return base64.b64decode(v["body_b64"])
    return v["body"].encode()


def set_body(v, body):
    v.pop("body", None)
    v.pop("body_b64", None)
    try:
        v["body"] = body.decode()
    except UnicodeDecodeError:
        v["body_b64"] = base64.b64encode(body).decode()


def json_pointer(doc, pointer):
    if pointer == "":
        return doc
    for part in pointer[1:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(doc, list):
            if not part.isdigit() or int(part) >= len(doc):
                return None
            doc = doc[int(part)]
        elif isinstance(doc, dict) and part in doc:
            doc = doc[part]
        else:
            return None
    return doc


def document(body):
    try:
        return json.loads(body)
    except ValueError:
        from urllib.parse import parse_qsl
        return dict(parse_qsl(body.decode(errors="replace"), keep_blank_values=True))


def signed_object_pointers(pack, doc):
    """JSON pointers of the objects a fields_hmac pack verifies, first item first."""
    batch = pack.get("batch")
    if batch:
        items = json_pointer(doc, batch["items"]) or []
        return [f"{batch['items']}/{i}{batch.get('item') or ''}" for i in range(len(items))]
    return [o for o in pack["signature"].get("object", []) if isinstance(json_pointer(doc, o), dict)][:1]


def signature_headers_present(pack, v):
    names = list(pack["signature"].get("headers", []))
    if pack["signature"].get("header_option"):
        names.append(v.get("config", {})[pack["signature"]["header_option"]])
    return [h for h in v["headers"] if h.lower() in [n.lower() for n in names]]


def timestamp_of(pack, v):
    """The signed timestamp of a request (unix seconds), as the pack reads it, or None."""
    rule = pack.get("timestamp")
    if not rule:
        return None
    for location in rule["from"]:
        text = None
        if location.startswith("header:"):
            text = header_of(v["headers"], location[7:])
        elif location.startswith("signature:") and "timestamp_then_signatures" in pack["signature"]["format"]:
            sep = pack["signature"]["format"]["timestamp_then_signatures"]["separator"]
            for name in signature_headers_present(pack, v):
                text = v["headers"][name].split(sep)[0]
        elif location.startswith("signature:"):
            kv = pack["signature"]["format"]["key_value"]
            for name in signature_headers_present(pack, v):
                for item in v["headers"][name].split(kv["pair_separator"]):
                    k, _, value = item.partition(kv["kv_separator"])
                    if k == location[10:]:
                        text = value
        elif location.startswith("json:"):
            doc = document(body_of(v))
            objects = signed_object_pointers(pack, doc) if pack["scheme"] == "fields_hmac" else [""]
            for o in objects or [""]:
                found = json_pointer(doc, o + location[5:])
                if found is not None:
                    text = str(found)
                    break
        if text is not None:
            return parse_time(rule["format"], text)
    return None


# ---------------------------------------------------------------------------------------------
# Tamper cases


def change_one_char(text):
    """`text` with one character near its middle replaced by another of the same kind."""
    for i in list(range(len(text) // 2, len(text))) + list(range(len(text) // 2)):
        c = text[i]
        if c.isdigit():
            return text[:i] + str((int(c) + 1) % 10) + text[i + 1:]
        if c.isalpha():
            repl = "b" if c.lower() == "a" else "a"
            return text[:i] + (repl.upper() if c.isupper() else repl) + text[i + 1:]
    fail(f"no letter or digit to change in {text!r}")


def signed_field_text(pack, v, recipe):
    """A string value inside what a fields_hmac pack signs, as it appears in the body."""
    if recipe.get("tamper_field"):
        return recipe["tamper_field"]
    doc = document(body_of(v))
    for o in signed_object_pointers(pack, doc):
        for field in pack["signature"]["fields"]:
            value = json_pointer(doc, o + field)
            if isinstance(value, str) and len(value) >= 4 and body_of(v).count(value.encode()) == 1:
                return value
    fail(f"{v['name']}: no signed string field to tamper with (give tamper_field in the recipe)")


def tamper_signed(pack, v, recipe, kind):
    """(headers, body) of `v` with one byte of what is signed changed, or whitespace added."""
    headers, body = dict(v["headers"]), body_of(v)
    if pack["scheme"] == "shared_token" and pack["signature"].get("body_field", "").startswith("json:"):
        # the token is a string field of the JSON body: change the field's value
        token = json_pointer(document(body), pack["signature"]["body_field"][5:])
        mid = len(token) // 2
        changed = change_one_char(token) if kind == "byte" else token[:mid] + " " + token[mid:]
        needle = json.dumps(token).encode()
        if body.count(needle) != 1:
            fail(f"{v['name']}: the body token must occur once, JSON-quoted, to be changed")
        return headers, body.replace(needle, json.dumps(changed).encode(), 1)
    if pack["scheme"] == "shared_token":
        name = signature_headers_present(pack, v)[0]
        token = headers[name]
        mid = len(token) // 2
        headers[name] = change_one_char(token) if kind == "byte" else token[:mid] + " " + token[mid:]
        return headers, body
    signature_in_body = pack["scheme"] == "fields_hmac" and not signature_headers_present(pack, v)
    if signature_in_body:
        field = signed_field_text(pack, v, recipe)
        mid = len(field) // 2
        changed = change_one_char(field) if kind == "byte" else field[:mid] + " " + field[mid:]
        return headers, body.replace(field.encode(), changed.encode(), 1)
    if kind == "byte":
        text = body.decode(errors="replace")
        if text.encode() == body:
            return headers, change_one_char(text).encode()
        flipped = bytearray(body)
        flipped[len(flipped) // 2] ^= 0x01
        return headers, bytes(flipped)
    if body[:1] in (b"{", b"["):
        return headers, body[:1] + b" " + body[1:]
    return headers, body + b" " if not body.endswith(b"=") else b" " + body


def derived(pack, recipe, base, case, reason, label):
    v = copy.deepcopy(base)
    v["name"] = f"{pack['id']}/generated/{label}"
    v["expect"] = "invalid"
    v["reason"] = reason
    v["matched_secret_index"] = None
    v["event_id"] = None
    v.pop("event_id_source", None)
    v["source"] = {
        "kind": "generated",
        "generator": f"{SCRIPT}: derived from {base['name']} ({case})",
        "verified_with": "the verdict follows from the change; the provider's SDK did not re-check it",
    }
    v["notes"] = f"{case}; otherwise the request {base['name']}"
    return v


def tamper_cases(pack, recipe, valid, wanted):
    """The derived invalid vectors for the cases in `wanted`."""
    out = []
    base = valid[0]
    rule = pack.get("timestamp")
    for reason in wanted:
        if reason in ("body_tampered", "whitespace_changed"):
            kind = "byte" if reason == "body_tampered" else "space"
            v = derived(pack, recipe, base, f"one {'byte' if kind == 'byte' else 'space'} changed in what is signed", reason, reason)
            headers, body = tamper_signed(pack, base, recipe, kind)
            v["headers"] = headers
            set_body(v, body)
            out.append(v)
        elif reason == "wrong_secret":
            v = derived(pack, recipe, base, "only another secret is configured", reason, reason)
            wrong = recipe.get("wrong_secret") or other_secret(base.get("secret_format", pack["secret_format"]), base["secrets"][base["matched_secret_index"]])
            if wrong is None:
                fail(f"{pack['id']}: a public-key pack needs `wrong_secret` in its recipe")
            v["secrets"] = [wrong]
            out.append(v)
        elif reason in ("stale_timestamp", "future_timestamp"):
            ts = timestamp_of(pack, base)
            if ts is None:
                fail(f"{base['name']}: no signed timestamp to move the clock against")
            tolerance = rule["tolerance_seconds"]
            future = rule.get("max_future_seconds", tolerance)
            now = ts + tolerance + 1 if reason == "stale_timestamp" else ts - future - 1
            what = f"the verifier's clock at {now}, {'one second past the tolerance' if reason == 'stale_timestamp' else 'one second before the future bound'}"
            v = derived(pack, recipe, base, what, reason, reason)
            v["now"] = now
            out.append(v)
        elif reason in ("missing_signature_header", "malformed_signature_header") and pack["signature"].get("query_param"):
            param = pack["signature"]["query_param"]
            missing = reason.startswith("missing")
            v = derived(pack, recipe, base, "signature query parameter removed" if missing else "signature query parameter malformed", reason, reason)
            url = without_query_param(base["url"], param)
            v["url"] = url if missing else with_query_param(url, param, recipe.get("malformed_signature", "!!"))
            out.append(v)
        elif reason == "missing_signature_header" and pack["signature"].get("body_field", "").startswith("json:"):
            # a token in the body: the request without the field
            doc = document(body_of(base))
            parent, _, key = pack["signature"]["body_field"][5:].rpartition("/")
            holder = json_pointer(doc, parent)
            if not isinstance(holder, dict) or key not in holder:
                fail(f"{base['name']}: no body token to remove")
            del holder[key]
            v = derived(pack, recipe, base, "token field removed from the body", reason, reason)
            set_body(v, json.dumps(doc, ensure_ascii=False, separators=(",", ":")).encode())
            out.append(v)
        elif reason in ("missing_signature_header", "malformed_signature_header"):
            header_base = next((x for x in valid if signature_headers_present(pack, x)), None)
            if header_base is not None:
                v = derived(pack, recipe, header_base, "signature header removed" if reason.startswith("missing") else "signature header malformed", reason, reason)
                for name in signature_headers_present(pack, header_base):
                    if reason.startswith("missing"):
                        del v["headers"][name]
                    else:
                        v["headers"][name] = recipe.get("malformed_signature", "!!")
                        break
            else:
                # fields_hmac with the signature in the body
                doc = document(body_of(base))
                objects = signed_object_pointers(pack, doc)
                sig_value = json_pointer(doc, objects[0] + pack["signature"]["field_signature"]) if objects else None
                if not isinstance(sig_value, str):
                    fail(f"{base['name']}: no signature to remove or break")
                v = derived(pack, recipe, base, "signature in the body malformed", reason, reason)
                if reason.startswith("missing"):
                    fail(f"{pack['id']}: removing a body signature is not derived; write that vector by hand")
                set_body(v, body_of(base).replace(sig_value.encode(), recipe.get("malformed_signature", "!!").encode(), 1))
            out.append(v)
        else:
            fail(f"unknown case {reason}")
    return out


def required_reasons(pack):
    reasons = ["body_tampered", "whitespace_changed", "wrong_secret"]
    if pack.get("timestamp"):
        reasons += ["stale_timestamp", "future_timestamp"]
    reasons.append("missing_signature_header")
    if pack["scheme"] != "shared_token":
        reasons.append("malformed_signature_header")
    return reasons


# ---------------------------------------------------------------------------------------------
# Valid requests from a recipe


def signed_vectors(pack, recipe):
    """The valid vectors a recipe describes, each signed here."""
    out = []
    secrets = recipe["secrets"]
    # a pack without an id location identifies events by their body digest
    event_source = (pack["event_id"]["from"] or [None])[0]
    for i, sample in enumerate(recipe["requests"]):
        body = sample["body"].encode()
        ts = sample.get("timestamp", recipe["now"] - 5)
        rotation = sample.get("rotation", False)
        # during rotation the newer secret is configured first and the request is still
        # signed with the previous one
        configured = [secrets[1], secrets[0]] if rotation else [secrets[0]]
        signer = secrets[0]
        event_id = sample.get("event_id")
        if event_id is None and pack["event_id"].get("fallback") == "body_digest":
            # the engine's fallback id: sha256: + the hex SHA-256 of the verified body
            event_id = "sha256:" + hashlib.sha256(body).hexdigest()
        # `{signature:<key>}` items (a nonce in the signature header): per request or recipe
        items = sample.get("signature_items", recipe.get("signature_items"))
        headers = sign_request(pack, recipe, signer, body, event_id or "", ts, sample.get("url", recipe.get("url")), recipe.get("config", {}), items)
        signed_url = headers.pop(QUERY_URL, None)
        v = {
            "name": f"{pack['id']}/generated/{sample['name']}",
            "provider": pack["id"],
            "scheme": recipe.get("scheme", pack["scheme"]),
            "secret_format": pack["secret_format"],
            "secrets": configured,
            "now": recipe["now"],
            "tolerance_seconds": pack["timestamp"]["tolerance_seconds"] if pack.get("timestamp") else None,
            "method": "POST",
        }
        if signed_url or sample.get("url", recipe.get("url")):
            v["url"] = signed_url or sample.get("url", recipe.get("url"))
        if recipe.get("config"):
            v["config"] = recipe["config"]
        v["headers"] = headers
        set_body(v, body)
        v.update({
            "expect": "valid",
            "reason": "previous_secret_match" if rotation else "ok",
            "matched_secret_index": 1 if rotation else 0,
            "event_id": event_id,
            "event_id_source": event_source.replace("json:", "body:") if event_id and event_source else None,
            "source": {
                "kind": "generated",
                "generator": (f"{SCRIPT}: the configured token sent where the provider documents it; not provider-published" if pack["scheme"] == "shared_token" else f"{SCRIPT}: signed with the documented recipe ({pack['signature'].get('algorithm', pack['scheme'])} over {recipe.get('signed', pack['signature'].get('signed'))!r}); not provider-published"),
                "verified_with": "not re-verified by a provider SDK; the hookgate test suite checks it against the pack",
            },
        })
        out.append(v)
    return out


# ---------------------------------------------------------------------------------------------


def write_pack_count(pack_path, total):
    text = pack_path.read_text()
    text, n = re.subn(r'("vectors":\s*)\d+', lambda m: f"{m.group(1)}{total}", text, count=1)
    if n != 1:
        fail(f"{pack_path}: no \"vectors\" field to update")
    pack_path.write_text(text)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("provider", nargs="+", help="pack id(s), e.g. stripe")
    parser.add_argument("--check", action="store_true", help="only report what is missing; write nothing")
    args = parser.parse_args()
    for pid in args.provider:
        pack_path = PACKS / f"{pid}.json"
        pack = json.loads(pack_path.read_text())
        recipe_path = RECIPES / f"{pid}.json"
        recipe = json.loads(recipe_path.read_text()) if recipe_path.exists() else {}
        if "secret_files" in recipe:
            recipe["secrets"] = [(ROOT / f).read_text() for f in recipe["secret_files"]]
        own = VECTORS / f"{pid}.json"
        own_doc = json.loads(own.read_text()) if own.exists() else None
        if own_doc is not None and own_doc.get("set") == "generated":
            own_doc = None  # regenerate a file this script wrote
        existing = own_doc["vectors"] if own_doc else []
        generated = signed_vectors(pack, recipe) if recipe.get("requests") else []
        valid = [v for v in existing + generated if v["expect"] == "valid"]
        present = {v["reason"] for v in existing + generated if v["expect"] == "invalid"}
        skip = set(recipe.get("skip", []))
        wanted = [r for r in required_reasons(pack) if r not in present and r not in skip]
        if len(valid) < 2:
            print(f"{pid}: only {len(valid)} valid vector(s); add requests to {recipe_path}", file=sys.stderr)
        if not valid:
            fail(f"{pid}: nothing to derive tamper cases from")
        generated += tamper_cases(pack, recipe, [v for v in existing if v["expect"] == "valid"] or valid, wanted)
        if args.check:
            print(f"{pid}: would write {len(generated)} vector(s): {', '.join(v['name'] for v in generated)}")
            continue
        target = VECTORS / (f"{pid}.generated.json" if own_doc else f"{pid}.json")
        if not generated:
            write_pack_count(pack_path, len(existing))
            print(f"{pid}: nothing to add; pack counts {len(existing)}")
            continue
        header = {
            "schema": "webhook-vectors/v1",
            "provider": pid,
            "scheme": own_doc["scheme"] if own_doc else pack["scheme"],
            "set": "generated",
            "docs": pack["sources"][0],
            "secret_format": pack["secret_format"],
            "tolerance_seconds": pack["timestamp"]["tolerance_seconds"] if pack.get("timestamp") else None,
            "sdk_packages": {},
            "verified_with": f"generated by {SCRIPT} (Python standard library, not the hookgate engine): "
            "valid requests signed with the documented recipe, tamper cases derived from a valid request; "
            "not provider-published and not re-checked by a provider SDK",
            "node_crosscheck": None,
            "vectors": generated,
        }
        target.write_text(json.dumps(header, indent=1, ensure_ascii=False) + "\n")
        write_pack_count(pack_path, len(existing) + len(generated))
        print(f"{pid}: wrote {len(generated)} vector(s) to {target.relative_to(ROOT)}; pack counts {len(existing) + len(generated)}")


if __name__ == "__main__":
    main()
