//! Per-vector expectations the vector files cannot state themselves (the files are copied
//! unchanged): ids a pack composes, ids taken from the signature, provider-required answers,
//! and refusals that come earlier than the reason code says. Pack authors append rows here.

use hookgate_providers::Rejection;

/// Valid vectors whose provider has no event id: the id the pack composes from signed fields
/// (or, for Mailgun's legacy form webhooks, the signed one-time token).
pub(crate) const COMPOSED_IDS: &[(&str, &str)] = &[
    (
        "lemonsqueezy/shared/valid_basic",
        "order_created:orders:53535",
    ),
    (
        "lemonsqueezy/shared/valid_previous_secret_configured",
        "order_created:orders:53535",
    ),
    (
        "zoom/shared/valid_event",
        "meeting.started:1767225598088:80000010213",
    ),
    (
        "zoom/shared/valid_previous_secret_configured",
        "meeting.started:1767225598088:80000010213",
    ),
    (
        "discord/shared/valid_webhook_event",
        "APPLICATION_AUTHORIZED:2025-12-31T23:59:58.064834:80351110224678912",
    ),
    // ElevenLabs: type:event_timestamp:conversation_id
    (
        "elevenlabs/shared/valid_basic",
        "post_call_transcription:1767225590:SFg31BaeKNbAh9gsWeyW",
    ),
    (
        "elevenlabs/shared/valid_utf8_body",
        "post_call_transcription:1767225590:w7Gu4Bg59uHQrhpt4fKf",
    ),
    (
        "elevenlabs/shared/valid_previous_secret_configured",
        "post_call_transcription:1767225590:SFg31BaeKNbAh9gsWeyW",
    ),
    (
        "elevenlabs/shared/valid_at_tolerance_boundary",
        "post_call_transcription:1767225590:SFg31BaeKNbAh9gsWeyW",
    ),
    (
        "mailgun/shared/valid_legacy_form_webhook",
        "762702ea8e8218545e8e1d812678a4327c25d7a7367eedbe5e",
    ),
];

/// Valid vectors without an id whose pack identifies them by the verified signature
/// (`sig:` + the signature header's bytes in hex).
pub(crate) const SIGNATURE_IDS: &[&str] = &[
    "adyen/shared/sdk_test_management_payload_hmac",
    "adyen/shared/valid_banking_header_hmac",
    "square/shared/sdk_test_escaped_body",
    "twilio/shared/sdk_test_form_params",
    "twilio/shared/sdk_test_https_port_removed",
    "twilio/shared/sdk_test_https_port_443_added",
    "twilio/shared/sdk_test_http_port_80_added",
    "twilio/shared/sdk_test_duplicate_params",
    "twilio/shared/sdk_test_json_body_hash",
    "clickup/generated/valid_without_history_items",
];

/// The provider-required answers to accepted (non-handshake) vectors.
pub(crate) const ANSWERS: &[(&str, u16, Option<&str>, &str)] = &[
    ("adyen", 200, Some("text/plain"), "[accepted]"),
    (
        "discord/shared/valid_application_command",
        200,
        Some("application/json"),
        r#"{"type":5}"#,
    ),
    ("discord/shared/valid_webhook_event", 204, None, ""),
    // Xero expects an empty 200 (its Intent to Receive check counts the body)
    ("xero", 200, None, ""),
];

/// Invalid vectors refused otherwise than their reason code says (earlier, or as another
/// failure), and why.
pub(crate) const EARLIER_REJECTIONS: &[(&str, Rejection)] = &[
    // a classic Mollie webhook is a form post: not a content type next-gen webhooks use
    (
        "mollie/shared/invalid_classic_unsigned_webhook",
        Rejection::UnsupportedMediaType,
    ),
    // Anthropic's id is the body's; webhook-id is only a signed header of the template, so its
    // absence is a missing part of the signature
    (
        "anthropic/shared/invalid_missing_id_header",
        Rejection::BadRequest(hookgate_providers::BadRequestReason::MissingSignature),
    ),
    // a well-formed header whose only signature is under an unknown key (v1, not v0): no
    // candidate, so nothing matches
    (
        "elevenlabs/shared/invalid_malformed_signature",
        Rejection::InvalidSignature,
    ),
];
