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
    /// The verification scheme in code that executes this pack: `hmac`.
    pub scheme: String,
    /// `docs`, `sdk` or `experimental`.
    pub evidence: String,
    pub sources: Vec<String>,
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
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SignatureSpec {
    /// Header names carrying the signature, in lookup order (the first present is used).
    pub headers: Vec<String>,
    pub format: SignatureFormatSpec,
    /// `hmac-sha1`, `hmac-sha256` or `hmac-sha512`.
    pub algorithm: String,
    /// `hex` (lower case), `base64` or `base64url`.
    pub encoding: String,
    /// The signed-bytes template: literal text and `{body}`, `{ts}`, `{id}`, `{header:Name}`.
    pub signed: String,
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
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VersionedListFormatSpec {
    pub separator: String,
    pub version_separator: String,
    pub versions: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TimestampSpec {
    /// Locations in lookup order: `header:Name`…, or one `signature:<key>`, or one
    /// `json:/pointer` (read from the verified body).
    pub from: Vec<String>,
    /// `unix_seconds`, `unix_millis` or `rfc3339`.
    pub format: String,
    pub tolerance_seconds: u64,
    /// `past_only` or `both`.
    pub window: String,
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
    /// Where the discriminator lives (`json:/type`, `header:Name`).
    pub when: String,
    pub equals: String,
    /// Where the challenge text lives (`json:/challenge`).
    pub challenge: String,
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
