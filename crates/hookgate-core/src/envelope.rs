//! What an adapter learns from a *verified* body.

/// The logical event, extracted only after the signature verified.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Envelope {
    /// The provider's logical event id: the deduplication key. Stable across the provider's
    /// retries for every provider we accept.
    pub event_id: String,
    /// Provider event type (`payment_intent.succeeded`, GitHub's `X-GitHub-Event`, …).
    pub event_type: Option<String>,
    /// Id of the object the event is about, where the provider says so.
    pub object_id: Option<String>,
    /// Authoritative, monotonically increasing object version, where the provider has one.
    pub object_version: Option<i64>,
    /// Provider's created-at (unix seconds): evidence, never order.
    pub created_at: Option<i64>,
    /// The provider's API version stamp (Stripe's `api_version`, Shopify's
    /// `X-Shopify-API-Version`): the shape the payload was written in.
    pub api_version: Option<String>,
}

/// The unique key of an inbox row. Also the associated data of its sealed payload, so a
/// ciphertext cannot be moved to another row and still open.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RowIdentity<'a> {
    pub provider: &'a str,
    pub endpoint_id: &'a str,
    pub provider_event_id: &'a str,
}

impl RowIdentity<'_> {
    /// Unambiguous encoding: each part length-prefixed (u32 big-endian).
    pub fn associated_data(&self) -> Vec<u8> {
        let parts = [self.provider, self.endpoint_id, self.provider_event_id];
        let mut out = Vec::with_capacity(parts.iter().map(|p| p.len() + 4).sum::<usize>() + 8);
        out.extend_from_slice(b"hookgate");
        for part in parts {
            out.extend_from_slice(&(part.len() as u32).to_be_bytes());
            out.extend_from_slice(part.as_bytes());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn associated_data_is_unambiguous() {
        let a = RowIdentity {
            provider: "ab",
            endpoint_id: "c",
            provider_event_id: "d",
        };
        let b = RowIdentity {
            provider: "a",
            endpoint_id: "bc",
            provider_event_id: "d",
        };
        assert_ne!(a.associated_data(), b.associated_data());
    }
}
