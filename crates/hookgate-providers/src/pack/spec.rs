//! The declarative form of a provider pack, as written in `packs/<id>.json` (or, later, in the
//! user's configuration). Every struct refuses unknown fields; enumerated values are plain
//! strings here and are checked by [`PackSpec::compile`], so an error names the field path and
//! lists what is allowed.

use serde::Deserialize;

use super::PackError;

/// One provider pack. See the module documentation of [`crate::pack`] for each field.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PackSpec {
    pub id: String,
    pub display_name: String,
    /// The verification scheme in code that executes this pack (see [`crate::pack::Scheme`]).
    pub scheme: String,
    /// How many known-answer vectors the pack ships (a test checks it against testdata).
    pub vectors: u32,
    /// `docs`, `sdk` or `experimental`.
    pub evidence: String,
    pub sources: Vec<String>,
    /// Where each fact the pack declares is confirmed: an https URL of the provider's docs or
    /// `sdk:<registry>/<package>@<version>:<path>` (a file of an official SDK).
    #[serde(default)]
    pub citations: Option<CitationsSpec>,
    #[serde(default)]
    pub notes: Option<String>,
    /// Accepted media types, lower case, without parameters.
    pub content_types: Vec<String>,
    /// The `Content-Type` that `sign` sends; defaults to the first accepted one.
    #[serde(default)]
    pub send_content_type: Option<String>,
    /// `utf8`, `whsec_base64`, `hex` or `base64`.
    pub secret_format: String,
    pub signature: SignatureSpec,
    /// Older signature generations chosen by a version header (`signature_versions`).
    #[serde(default)]
    pub signature_versions: Option<super::signature_versions::SignatureVersionsSpec>,
    #[serde(default)]
    pub timestamp: Option<TimestampSpec>,
    pub event_id: EventIdSpec,
    #[serde(default)]
    pub event_type: Option<EventTypeSpec>,
    #[serde(default)]
    pub object_id: Vec<String>,
    #[serde(default)]
    pub object_version: Vec<String>,
    #[serde(default)]
    pub created_at: Vec<String>,
    /// Where the provider stamps the API version the payload was written in.
    #[serde(default)]
    pub api_version: Vec<String>,
    #[serde(default)]
    pub handshakes: Vec<HandshakeSpec>,
    /// Refuse an empty body (400 `missing_body`) before any HMAC.
    #[serde(default)]
    pub require_body: bool,
    /// For `application/x-www-form-urlencoded` deliveries: the form field holding the JSON.
    #[serde(default)]
    pub form_payload_field: Option<String>,
    /// `body_digest` when neither the id nor a timestamp is signed (required then, refused
    /// otherwise).
    #[serde(default)]
    pub replay_defence: Option<String>,
    /// How far back the provider may redeliver an event (automatic retries or manual resends).
    #[serde(default)]
    pub redelivery_horizon_seconds: Option<u64>,
    /// Whether and how the provider's API lists what it sent (provider reconciliation).
    #[serde(default)]
    pub reconcile: Option<super::reconcile::ReconcileSpec>,
    /// Per-endpoint settings the pack reads (`options = { … }` in the endpoint configuration).
    #[serde(default)]
    pub options: Vec<OptionSpec>,
    /// One request carrying several events: where the items live.
    #[serde(default)]
    pub batch: Option<BatchSpec>,
    /// The provider-required answer to accepted events; the first matching rule wins, no
    /// rule (or none matching) = hookgate's own 200 answer.
    #[serde(default)]
    pub answers: Vec<AnswerSpec>,
    /// Where a signed one-time value lives that must never be accepted twice (Mailgun's
    /// token): the ingress answers a reuse as a duplicate. Locations, first present wins.
    #[serde(default)]
    pub replay_key: Vec<String>,
    /// `Content-Encoding`s the provider sends (`gzip`); the body is decoded before
    /// verification. Empty = only unencoded bodies.
    #[serde(default)]
    pub content_encoding: Vec<String>,
}

/// One citation per fact; a fact the pack does not have (no timestamp, no handshake) needs none.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CitationsSpec {
    /// Algorithm, encoding, signed bytes and the header.
    #[serde(default)]
    pub signature: Option<String>,
    #[serde(default)]
    pub secret_format: Option<String>,
    /// Location, unit and tolerance of the signed timestamp.
    #[serde(default)]
    pub timestamp: Option<String>,
    /// The id's source and whether retries keep it.
    #[serde(default)]
    pub event_id: Option<String>,
    #[serde(default)]
    pub handshake: Option<String>,
    #[serde(default)]
    pub redelivery_horizon: Option<String>,
    #[serde(default)]
    pub content_types: Option<String>,
    #[serde(default)]
    pub api_version: Option<String>,
}

impl CitationsSpec {
    /// The keys of the schema, in the order the docs list them.
    pub const KEYS: &'static [&'static str] = &[
        "signature",
        "secret_format",
        "timestamp",
        "event_id",
        "handshake",
        "redelivery_horizon",
        "content_types",
        "api_version",
    ];

    /// `(key, value)` of every citation given, in [`Self::KEYS`] order.
    pub fn entries(&self) -> Vec<(&'static str, &str)> {
        [
            &self.signature,
            &self.secret_format,
            &self.timestamp,
            &self.event_id,
            &self.handshake,
            &self.redelivery_horizon,
            &self.content_types,
            &self.api_version,
        ]
        .into_iter()
        .zip(Self::KEYS)
        .filter_map(|(value, key)| value.as_deref().map(|v| (*key, v)))
        .collect()
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OptionSpec {
    pub name: String,
    #[serde(default)]
    pub required: bool,
    /// `text` (any non-empty string) or `json` (a JSON document).
    pub format: String,
    pub description: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BatchSpec {
    /// JSON pointer of the array of items (`""` = the body is the array).
    pub items: String,
    /// JSON pointer inside each element to the item itself (Adyen's `/NotificationRequestItem`).
    #[serde(default)]
    pub item: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AnswerSpec {
    /// A location that must be present for the rule to apply (absent = always).
    #[serde(default)]
    pub when_present: Option<String>,
    pub status: u16,
    #[serde(default)]
    pub content_type: Option<String>,
    #[serde(default)]
    pub body: String,
    /// An option whose value, when the endpoint sets it, replaces `body`.
    #[serde(default)]
    pub body_option: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SignatureSpec {
    /// Header names carrying the signature, in lookup order (the first present is used).
    #[serde(default)]
    pub headers: Vec<String>,
    #[serde(default)]
    pub format: Option<SignatureFormatSpec>,
    /// A header naming the key that signed (`key_id_and_secret` secrets: only the configured
    /// secrets with that key id are tried; absent header = 400 `missing_signature`).
    #[serde(default)]
    pub key_id_header: Option<String>,
    /// `hmac-sha1`, `hmac-sha256` or `hmac-sha512` (HMAC schemes only), or a keyed plain
    /// hash: `sha256-concat`, `sha1-concat-key-last`, `sha256-concat-key-last`.
    #[serde(default)]
    pub algorithm: Option<String>,
    /// An endpoint option choosing the algorithm (`option`, `values`: value → algorithm).
    #[serde(default)]
    pub algorithm_option: Option<super::keyed_hash::AlgorithmOptionSpec>,
    /// `hex` (lower case), `base64`, `base64url`, `base64_hex` (base64 of the lower-case hex
    /// text: Solidgate) or `text` (shared tokens).
    pub encoding: String,
    /// The signed-bytes template: literal text and `{body}` (or `{body_crc32}`), `{ts}`,
    /// `{id}`, `{header:Name}`, `{url}`, `{option:name}`, `{signature:key}` (a `key_value` item).
    #[serde(default)]
    pub signed: Option<String>,
    /// `url_params_hmac`: a header whose `algorithm=` item selects the HMAC (Twilio's
    /// SharedKey settings).
    #[serde(default)]
    pub algorithm_header: Option<String>,
    /// `url_nonce_hmac`: the header carrying the signed nonce.
    #[serde(default)]
    pub nonce_header: Option<String>,
    /// `canonical_request_hmac`: the header listing the signed headers (names joined by `,`).
    #[serde(default)]
    pub signed_headers_header: Option<String>,
    /// `form_payload_hmac`: the form field carrying the `key_id|hex` signature pairs.
    #[serde(default)]
    pub signature_field: Option<String>,
    /// `form_payload_hmac`: the form field whose (decoded) text is signed.
    #[serde(default)]
    pub payload_field: Option<String>,
    /// `url_params_hmac`: the query parameter carrying the hex SHA-256 of a non-form body.
    #[serde(default)]
    pub body_hash_param: Option<String>,
    /// `fields_hmac`: JSON pointers (inside the signed object) of the signed fields.
    #[serde(default)]
    pub fields: Vec<String>,
    /// `fields_hmac`: what joins the fields (`:` for Adyen, nothing for Mailgun).
    #[serde(default)]
    pub field_separator: String,
    /// `jwt_hmac`: what the token must carry.
    #[serde(default)]
    pub jwt: Option<JwtSpec>,
    /// `fields_hmac`: pointer (inside the signed object) of the signature.
    #[serde(default)]
    pub field_signature: Option<String>,
    /// `fields_hmac` without a batch: candidate pointers of the signed object, first present
    /// wins (`""` = the whole document).
    #[serde(default)]
    pub object: Vec<String>,
    /// `shared_token`: the query parameter carrying the token (instead of a header).
    #[serde(default)]
    pub query_param: Option<String>,
    /// `shared_token`: the body field carrying the token, `json:/pointer` or `form:name`
    /// (instead of a header).
    #[serde(default)]
    pub body_field: Option<String>,
    /// `shared_token`: the endpoint option (required, text) naming the header that carries
    /// the token, for senders that let the team choose it (instead of `headers`).
    #[serde(default)]
    pub header_option: Option<String>,
    /// `shared_token`: how the token is written — `plain` (default), `bearer`
    /// (`Authorization: Bearer <token>`) or `basic` (`Authorization: Basic
    /// base64(user:password)`, compared with the secret `user:password`).
    #[serde(default)]
    pub token_form: Option<String>,
    /// Headers that must carry exactly this value (Box: `BOX-SIGNATURE-VERSION: 1`): any other
    /// value, or none, answers `invalid_signature`, as the provider's verifier does.
    #[serde(default)]
    pub required_headers: std::collections::BTreeMap<String, String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JwtSpec {
    /// Allowed `alg` values: `HS256`, `HS384`, `HS512` (anything else is malformed).
    pub algorithms: Vec<String>,
    /// The `iss` the token must carry.
    #[serde(default)]
    pub issuer: Option<String>,
    /// `iss` names the API key that signed the token (LiveKit): with secret format
    /// `key_id_and_secret`, only the configured `<key id>:<secret>` whose key id equals `iss`
    /// is tried, keyed by its secret.
    #[serde(default)]
    pub issuer_is_key_id: bool,
    /// `sub` must be the signed URL (`public_url` with the request's query).
    #[serde(default)]
    pub subject_is_url: bool,
    /// A claim holding the SHA-256 of the signed URL.
    #[serde(default)]
    pub url_hash: Option<HashClaimSpec>,
    /// A claim holding the SHA-256 of the body (required when the body is not empty).
    #[serde(default)]
    pub body_hash: Option<HashClaimSpec>,
    /// Claims that must be present (`exp`, `nbf`, …); `exp` and `nbf` bound the lifetime.
    #[serde(default)]
    pub required_claims: Vec<String>,
    /// Clock leeway on `exp` and `nbf`, as the provider's SDK applies it.
    #[serde(default)]
    pub leeway_seconds: u64,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HashClaimSpec {
    pub claim: String,
    /// `hex`, `base64` or `base64url` (unpadded; padding ignored when verifying).
    pub encoding: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SignatureFormatSpec {
    /// The whole header value is one signature, optionally behind a prefix (`sha256=`).
    Plain(PlainFormatSpec),
    /// `key=value` items (`t=…,v1=…,v1=…`, `ts=…;h1=…`).
    KeyValue(KeyValueFormatSpec),
    /// Separated `<version><sep><signature>` entries (`v1,<b64> v1,<b64>`).
    VersionedList(VersionedListFormatSpec),
    /// The signed timestamp, then one or more signatures, all separated (`<ts>,<sig>,<sig>`:
    /// Recurly); the timestamp is read as `signature:timestamp`.
    TimestampThenSignatures(TimestampThenSignaturesFormatSpec),
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TimestampThenSignaturesFormatSpec {
    pub separator: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlainFormatSpec {
    #[serde(default)]
    pub prefix: Option<String>,
    /// Accept the value without the prefix too.
    #[serde(default)]
    pub prefix_optional: bool,
    /// The header may occur several times, each occurrence one candidate signature.
    #[serde(default)]
    pub repeated_header: bool,
    /// Every listed signature header that is present carries one candidate (one header per
    /// active key: DocuSign's numbered headers), not just the first present.
    #[serde(default)]
    pub each_header: bool,
    /// The value holds several signatures separated by this (Plivo's `,`).
    #[serde(default)]
    pub separator: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeyValueFormatSpec {
    pub pair_separator: String,
    pub kv_separator: String,
    pub signature_keys: Vec<String>,
    #[serde(default)]
    pub timestamp_key: Option<String>,
    /// A signature item that does not decode is skipped instead of refusing the request.
    #[serde(default)]
    pub skip_undecodable: bool,
    /// The header holds whole sets of items separated by this (one set per active secret,
    /// each with its own timestamp item); every set's signatures are candidates at the first
    /// set's time.
    #[serde(default)]
    pub group_separator: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VersionedListFormatSpec {
    pub separator: String,
    pub version_separator: String,
    pub versions: Vec<String>,
    /// Versions whose entries are Ed25519 signatures over the same signed bytes, verified
    /// with `whpk_` public keys configured beside the shared secrets (Standard Webhooks
    /// `v1a`); `hmac` packs with `whsec_base64` secrets only.
    #[serde(default)]
    pub ed25519_versions: Vec<String>,
    /// Each entry starts with the id of the key that signed it, then `version_separator`
    /// (`<key id>/<version>/<signature>`: Worldpay's `1/SHA256/…`); every listed version's
    /// entry is a candidate whatever its key id.
    #[serde(default)]
    pub key_id_first: bool,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TimestampSpec {
    /// Locations in lookup order: `header:Name`…, or one `signature:<key>`, or one
    /// `json:/pointer` (read from the verified body).
    pub from: Vec<String>,
    /// `unix_seconds`, `unix_millis` or `rfc3339`.
    pub format: String,
    /// The past bound, and the future bound unless `max_future_seconds` is smaller.
    pub tolerance_seconds: u64,
    /// A smaller future bound the provider documents (at most `tolerance_seconds`).
    #[serde(default)]
    pub max_future_seconds: Option<u64>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventIdSpec {
    /// Alternatives in lookup order (`header:Name`, `json:/pointer`), or with `compose` the
    /// JSON fields whose values, joined by `:`, identify the event (`json:/p?` = optional).
    pub from: Vec<String>,
    #[serde(default)]
    pub compose: bool,
    /// Whether the signature covers the id; checked against the template.
    pub signed: bool,
    /// `yes`, `no` or `unknown`: whether retries and manual redeliveries keep the id.
    pub retries_keep_id: String,
    /// When no location yields an id: `signature` = `sig:` + the verified signature in hex
    /// (the provider's own keyed MAC of what it signed; stable across identical redeliveries);
    /// `body_digest` = `sha256:` + the hex SHA-256 of the verified body (with it, `from` may
    /// be empty). User packs default to `body_digest`.
    #[serde(default)]
    pub fallback: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventTypeSpec {
    pub from: Vec<String>,
    /// Whether the signature covers the type; checked against the template.
    pub signed: bool,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HandshakeSpec {
    /// The method the handshake arrives with: `POST` (default), `GET`, `HEAD` or `OPTIONS`.
    #[serde(default)]
    pub method: Option<String>,
    /// Where the discriminator lives (`json:/type`, `header:Name`, `query:name`); only an
    /// unsigned constant answer to a method other than POST may omit it.
    #[serde(default)]
    pub when: Option<String>,
    /// The discriminator's value (a JSON number is compared by its decimal text); absent:
    /// the discriminator only has to be present and not empty.
    #[serde(default)]
    pub equals: Option<String>,
    /// Answered without verification: the answer is the proof the provider checks, or says
    /// nothing (`handshake.rs`).
    #[serde(default)]
    pub unsigned: bool,
    /// What an echoed or digested challenge may be (required when unverified).
    #[serde(default)]
    pub challenge_format: Option<ChallengeFormatSpec>,
    /// Locations that must also be present (Discord: an interaction PING has a `token`).
    #[serde(default)]
    pub also_present: Vec<String>,
    /// Where the challenge text lives (`json:/challenge`, or `query:name` for a GET); not
    /// for constant answers.
    #[serde(default)]
    pub challenge: Option<String>,
    /// A GET handshake that carries no signature but a token the endpoint owner chose
    /// (Meta's `hub.verify_token`): compared in constant time with an endpoint option.
    #[serde(default)]
    pub token: Option<HandshakeTokenSpec>,
    pub answer: HandshakeAnswerSpec,
}

// The names are the schema's `answer` values.
#[allow(clippy::enum_variant_names)]
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HandshakeAnswerSpec {
    /// The challenge as `text/plain`.
    EchoText,
    /// `{"<field>": challenge}` as `application/json`.
    EchoJson(EchoJsonSpec),
    /// `{"<echo_field>": challenge, "<digest_field>": hex HMAC(secret, challenge)}`.
    EchoWithDigest(EchoWithDigestSpec),
    /// `{"<field>": prefix + HMAC(secret, challenge)}`, `hex` or `base64`.
    Digest(DigestAnswerSpec),
    /// 200 with the challenge in a response header, no body.
    EchoHeader(EchoHeaderSpec),
    /// A fixed answer (Discord PING: `{"type":1}`; webhook PING: 204).
    Constant(ConstantAnswerSpec),
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChallengeFormatSpec {
    pub max_length: usize,
    /// `alphanumeric`, `token` (and `-._~`), `base64` (and `+/=-_`) or `text` (printable
    /// ASCII without `<>&"'\` and backquote).
    pub chars: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DigestAnswerSpec {
    pub field: String,
    #[serde(default)]
    pub prefix: String,
    pub encoding: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EchoHeaderSpec {
    pub header: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HandshakeTokenSpec {
    /// The query parameter carrying the token.
    pub query: String,
    /// The endpoint option holding the expected token (unset = the handshake is refused).
    pub option: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConstantAnswerSpec {
    pub status: u16,
    #[serde(default)]
    pub content_type: Option<String>,
    #[serde(default)]
    pub body: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EchoJsonSpec {
    pub field: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EchoWithDigestSpec {
    pub echo_field: String,
    pub digest_field: String,
}

impl PackSpec {
    /// Parses a JSON pack; `label` (e.g. `packs.linear`) prefixes the path of any error.
    pub fn from_json(label: &str, text: &str) -> Result<Self, PackError> {
        let mut de = serde_json::Deserializer::from_str(text);
        serde_path_to_error::deserialize(&mut de).map_err(|e| {
            let path = e.path().to_string();
            let path = if path == "." {
                label.to_owned()
            } else {
                format!("{label}.{path}")
            };
            PackError::new(path, e.into_inner().to_string())
        })
    }
}
