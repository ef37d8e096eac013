//! What packs say about themselves (`providers list/show`, docs/providers.md) matches what
//! their signatures cover.

use hookgate_providers::pack::{builtin, builtin_packs};

#[test]
fn body_fields_outside_the_signed_bytes_are_reported_unsigned() {
    let mailgun = builtin("mailgun").unwrap().info();
    assert_eq!(mailgun.type_signed, Some(false));
    assert!(
        mailgun
            .unauthenticated_fields
            .contains(&"/event-data/event")
    );
    assert!(
        !mailgun.unauthenticated_fields.contains(&"/token"),
        "signed field"
    );
    // PayPal binds the body only by its CRC-32.
    let paypal = builtin("paypal").unwrap().info();
    assert_eq!(paypal.type_signed, Some(false));
    assert!(paypal.unauthenticated_fields.contains(&"/id"));
    // Adyen signs the event code of each item.
    let adyen = builtin("adyen").unwrap().info();
    assert_eq!(adyen.type_signed, Some(true));
    assert!(!adyen.unauthenticated_fields.contains(&"/eventCode"));
    let stripe = builtin("stripe").unwrap().info();
    assert!(stripe.unauthenticated_headers.is_empty() && stripe.unauthenticated_fields.is_empty());
}

#[test]
fn every_pack_describes_its_configuration_and_facts() {
    for pack in builtin_packs() {
        let info = pack.info();
        assert!(
            info.configuration
                .contains(&format!("provider = \"{}\"", info.id)),
            "{}",
            info.id
        );
        assert_eq!(
            info.configuration.contains("public_url = "),
            info.needs_public_url,
            "{}",
            info.id
        );
        for option in info.options.iter().filter(|o| o.required) {
            assert!(info.configuration.contains(option.name), "{}", info.id);
        }
        let facts = pack.describe();
        for label in [
            "Secret",
            "Signature",
            "Signed bytes",
            "Algorithm",
            "Freshness",
            "Event id",
        ] {
            let (_, text) = facts
                .iter()
                .find(|(l, _)| *l == label)
                .unwrap_or_else(|| panic!("{}: {label}", info.id));
            assert!(!text.is_empty(), "{}: {label}", info.id);
        }
        assert_eq!(
            facts.iter().filter(|(l, _)| *l == "Handshake").count(),
            info.handshakes.len(),
            "{}",
            info.id
        );
    }
}
