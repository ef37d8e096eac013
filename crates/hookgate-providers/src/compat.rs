//! The transitional [`Adapter`] implementation of [`Pack`]: a POST without query string,
//! `public_url` or options, one event per request. Kept until the binary calls the pack API.

use http::{HeaderMap, HeaderName, HeaderValue};

use crate::pack::{Delivery, Pack, RequestContext, SignTarget};
use crate::{
    Adapter, BadRequestReason, Extracted, IdLocation, Metadata, Rejection, SecretFormatError,
    SecretMaterial, SignRequest, TrustedSecret, Verified,
};

fn extracted(delivery: Delivery) -> Result<Extracted, Rejection> {
    match delivery {
        Delivery::Handshake(answer) => Ok(Extracted::Handshake {
            content_type: answer.content_type.unwrap_or("text/plain"),
            body: answer.body,
        }),
        Delivery::Events { mut events, .. } if events.len() == 1 => {
            Ok(Extracted::Event(events.remove(0)))
        }
        // A batch does not fit one envelope; such packs need the pack API.
        Delivery::Events { .. } => {
            Err(Rejection::BadRequest(BadRequestReason::UnparseableEnvelope))
        }
    }
}

impl Adapter for Pack {
    fn id(&self) -> &'static str {
        Pack::id(self)
    }

    fn default_tolerance_seconds(&self) -> Option<u64> {
        Pack::default_tolerance_seconds(self)
    }

    fn default_content_type(&self) -> &'static str {
        self.send_content_type()
    }

    fn accepts_content_type(&self, content_type: Option<&HeaderValue>) -> bool {
        Pack::accepts_content_type(self, content_type)
    }

    fn decode_secret(&self, secret: &str) -> Result<SecretMaterial, SecretFormatError> {
        Pack::decode_secret(self, secret)
    }

    fn signature_headers(&self) -> &'static [&'static str] {
        Pack::signature_headers(self)
    }

    fn parse_metadata(&self, headers: &HeaderMap) -> Result<Metadata, Rejection> {
        Pack::parse_metadata(self, &RequestContext::post(headers))
    }

    fn verify(
        &self,
        metadata: &Metadata,
        body: &[u8],
        secrets: &[TrustedSecret<'_>],
        now: i64,
        tolerance_seconds: Option<u64>,
    ) -> Result<Verified, Rejection> {
        // Metadata parsed from headers alone; the verification needs no other request part.
        let headers = HeaderMap::new();
        Pack::verify(
            self,
            &RequestContext::post(&headers),
            metadata,
            body,
            secrets,
            now,
            tolerance_seconds,
        )
    }

    fn extract(
        &self,
        metadata: &Metadata,
        headers: &HeaderMap,
        body: &[u8],
    ) -> Result<Extracted, Rejection> {
        extracted(Pack::extract(
            self,
            &RequestContext::post(headers),
            metadata,
            body,
            None,
        )?)
    }

    fn extract_with_key(
        &self,
        metadata: &Metadata,
        headers: &HeaderMap,
        body: &[u8],
        key: &SecretMaterial,
    ) -> Result<Extracted, Rejection> {
        extracted(Pack::extract(
            self,
            &RequestContext::post(headers),
            metadata,
            body,
            Some(key),
        )?)
    }

    fn id_location(&self) -> IdLocation {
        Pack::id_location(self)
    }

    fn sign(
        &self,
        key: &SecretMaterial,
        request: &SignRequest<'_>,
    ) -> Vec<(HeaderName, HeaderValue)> {
        self.sign_delivery(key, request, &SignTarget::default())
            .headers
    }
}
