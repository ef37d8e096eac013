//! Per-vector expectations the vector files cannot state themselves (the files are copied
//! unchanged): ids a pack composes, ids taken from the signature, provider-required answers,
//! and refusals that come earlier than the reason code says. Pack authors append rows here.

use hookgate_providers::{BadRequestReason, Rejection};

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
    (
        "docusign/generated/valid_envelope_completed",
        "envelope-completed:2025-12-31T23:59:50.5070000Z:e5f6a7b8-0000-4000-8000-000000000003",
    ),
    (
        "docusign/generated/valid_previous_secret_configured",
        "recipient-completed:2025-12-31T23:59:51.1230000Z:e5f6a7b8-0000-4000-8000-000000000003:1",
    ),
    (
        "messagebird/shared/valid_basic",
        "message.created:0fd0a57721037d606aa8f446a39744d4:2025-12-31T23:59:56Z",
    ),
    (
        "messagebird/shared/valid_utf8_body",
        "message.created:ca8bafd3a8b8903ded7ef9a8e60ec831:2025-12-31T23:59:56Z",
    ),
    (
        "messagebird/shared/valid_previous_key_configured",
        "message.created:0fd0a57721037d606aa8f446a39744d4:2025-12-31T23:59:56Z",
    ),
    (
        "messagebird/shared/valid_hs512_token",
        "message.created:0fd0a57721037d606aa8f446a39744d4:2025-12-31T23:59:56Z",
    ),
    (
        "modern_treasury/shared/valid_basic",
        "completed:payment_order:87d5a104-c67d-4ec1-a42c-8620cfdce64c:2025-12-31T23:59:55Z",
    ),
    (
        "modern_treasury/shared/valid_utf8_body",
        "completed:payment_order:8539cbf7-6c87-47ee-abea-fa38f94f69ec:2025-12-31T23:59:55Z",
    ),
    (
        "modern_treasury/shared/valid_previous_secret_configured",
        "completed:payment_order:87d5a104-c67d-4ec1-a42c-8620cfdce64c:2025-12-31T23:59:55Z",
    ),
    (
        "onfido/shared/valid_basic",
        "check.completed:e79260d1-82ad-455a-aecc-27549a8e4962:2025-12-31T23:59:40Z",
    ),
    (
        "onfido/shared/valid_utf8_body",
        "check.completed:9d42456d-0a6c-4a30-a390-30445fa89163:2025-12-31T23:59:40Z",
    ),
    (
        "onfido/shared/valid_previous_secret_configured",
        "check.completed:e79260d1-82ad-455a-aecc-27549a8e4962:2025-12-31T23:59:40Z",
    ),
    (
        "plivo/shared/valid_basic",
        "81410962-9b0b-4dfb-acbc-cc91685c2fe0:delivered:2025-12-31 23:59:51+00:00",
    ),
    (
        "plivo/shared/valid_utf8_body",
        "12ac7c10-33a5-4017-aed8-bbc39a61f551:delivered:2025-12-31 23:59:51+00:00",
    ),
    (
        "plivo/shared/valid_previous_secret_configured",
        "81410962-9b0b-4dfb-acbc-cc91685c2fe0:delivered:2025-12-31 23:59:51+00:00",
    ),
    (
        "plivo/shared/valid_multiple_signatures_one_matches",
        "81410962-9b0b-4dfb-acbc-cc91685c2fe0:delivered:2025-12-31 23:59:51+00:00",
    ),
    (
        "plivo/shared/valid_params_reordered",
        "81410962-9b0b-4dfb-acbc-cc91685c2fe0:delivered:2025-12-31 23:59:51+00:00",
    ),
    (
        "plivo/shared/valid_url_with_query",
        "81410962-9b0b-4dfb-acbc-cc91685c2fe0:delivered:2025-12-31 23:59:51+00:00",
    ),
    (
        "pusher/shared/valid_basic",
        "1767225595321:channel_occupied:presence-room-z7mk5d",
    ),
    (
        "pusher/shared/valid_utf8_body",
        "1767225595321:channel_occupied:presence-room-8mjzm5",
    ),
    (
        "pusher/shared/valid_previous_secret_configured",
        "1767225595321:channel_occupied:presence-room-z7mk5d",
    ),
    (
        "pusher/shared/valid_time_ms_at_tolerance_boundary",
        "1767225300000:channel_occupied:presence-room-z7mk5d",
    ),
    (
        "retell/shared/valid_basic",
        "call_ended:d7c62247dfd21b7911f737c7eca6081a",
    ),
    (
        "retell/shared/valid_utf8_body",
        "call_ended:6ea4e1ae84ea02b55b48638c5957c71d",
    ),
    (
        "retell/shared/valid_previous_secret_configured",
        "call_ended:d7c62247dfd21b7911f737c7eca6081a",
    ),
    (
        "retell/shared/valid_at_tolerance_boundary",
        "call_ended:d7c62247dfd21b7911f737c7eca6081a",
    ),
    (
        "sanity/shared/valid_basic",
        "post-dhauzrfe:QmIsDe1yYnNGO0Lqa9FH9v",
    ),
    (
        "sanity/shared/valid_utf8_body",
        "post-dhauzrfe:nIbdrX9wWtaMge2tbovhSP",
    ),
    (
        "sanity/shared/valid_previous_secret_configured",
        "post-dhauzrfe:QmIsDe1yYnNGO0Lqa9FH9v",
    ),
    (
        "webflow/shared/valid_basic",
        "form_submission:375086db9f7b5f9c244e6ac4",
    ),
    (
        "webflow/shared/valid_utf8_body",
        "form_submission:6a820c4df7896238d0b48a68",
    ),
    (
        "webflow/shared/valid_previous_secret_configured",
        "form_submission:375086db9f7b5f9c244e6ac4",
    ),
    // Cashfree: type:cf_payment_id:event_time (no id is sent)
    (
        "cashfree/shared/valid_basic",
        "PAYMENT_SUCCESS_WEBHOOK:5000007638:2025-12-31T23:59:35+05:30",
    ),
    (
        "cashfree/shared/valid_utf8_body",
        "PAYMENT_SUCCESS_WEBHOOK:5000050565:2025-12-31T23:59:35+05:30",
    ),
    (
        "cashfree/shared/valid_previous_secret_configured",
        "PAYMENT_SUCCESS_WEBHOOK:5000007638:2025-12-31T23:59:35+05:30",
    ),
];

/// Shared valid vectors without an id whose pack identifies them by the SHA-256 of the body
/// (`sha256:` + its hex; the generated files carry that id themselves).
pub(crate) const BODY_DIGEST_IDS: &[&str] = &[
    "cronofy/shared/",
    "hygraph/shared/",
    "cloudinary/shared/",
    "braintree/shared/",
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
    "facebook/generated/valid_notification",
    "facebook/generated/valid_previous_secret_configured",
    "meta/generated/valid_notification",
    "meta/generated/valid_previous_secret_configured",
    "whatsapp/generated/valid_notification",
    "whatsapp/generated/valid_previous_secret_configured",
    "clickup/generated/valid_without_history_items",
    "dropbox/generated/valid_list_folder",
    "dropbox/generated/valid_previous_secret_configured",
    "twitter/generated/valid_tweet_create",
    "twitter/generated/valid_previous_secret_configured",
    "frontapp/generated/valid_sync",
    "frontapp/generated/valid_previous_secret_configured",
    "linkedin/generated/valid_notification",
    "linkedin/generated/valid_previous_secret_configured",
    "vercel_log_drains/generated/valid_json_batch",
    "vercel_log_drains/generated/valid_previous_secret_configured",
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
    // the nonce is part of what is signed: without it there is no signature to check
    (
        "plivo/shared/invalid_missing_nonce_header",
        Rejection::BadRequest(BadRequestReason::MissingSignature),
    ),
    // `t=…,v1=…` without the space WorkOS writes reads as one item whose timestamp is malformed
    (
        "workos/shared/invalid_malformed_signature",
        Rejection::BadRequest(BadRequestReason::MalformedTimestamp),
    ),
    // a repeated signature header is refused as such
    (
        "worldline/shared/invalid_duplicate_signature_header",
        Rejection::BadRequest(BadRequestReason::DuplicatedSignature),
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
