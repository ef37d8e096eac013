//! The whole request path of one pack, raw bytes to a verdict. The input is text lines: the
//! pack id; directives `@now <unix>`, `@secret <text>` (trusted, in order), `@url <public_url>`,
//! `@query <raw>`, `@option <name>=<value>`, `@method <M>`, `@sign` (re-sign the body with the
//! first secret at `now` first, so mutations of the body reach extraction); then
//! `Name: value` headers, an empty line, and the body.
#![no_main]

use std::collections::BTreeMap;

use hookgate_providers::pack::{self, EndpointOptions, SignTarget, fuzzing};
use hookgate_providers::{SecretMaterial, SignRequest, TrustedSecret};
use hookgate_providers_fuzz::{headers_and_body, line};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (id, mut rest) = line(data);
    let Some(pack) = std::str::from_utf8(id).ok().and_then(pack::builtin) else {
        return;
    };
    let (mut now, mut method) = (1_767_225_600_i64, "POST".to_owned());
    let (mut secrets, mut options) = (Vec::<SecretMaterial>::new(), BTreeMap::new());
    let (mut url, mut query, mut sign) = (None::<String>, None::<String>, false);
    while rest.first() == Some(&b'@') {
        let (directive, after) = line(&rest[1..]);
        rest = after;
        let directive = String::from_utf8_lossy(directive);
        let (name, value) = directive.split_once(' ').unwrap_or((&directive, ""));
        match name {
            "now" => now = value.parse().unwrap_or(now),
            "secret" => secrets.extend(pack.decode_secret(value).ok()),
            "url" => url = Some(value.to_owned()),
            "query" => query = Some(value.to_owned()),
            "option" => {
                let (k, v) = value.split_once('=').unwrap_or((value, ""));
                options.insert(k.to_owned(), v.to_owned());
            }
            "method" => method = value.to_owned(),
            "sign" => sign = true,
            _ => {}
        }
    }
    let options = pack
        .check_options(&options)
        .unwrap_or_else(|_| EndpointOptions::none().clone());
    let (given_headers, given_body) = headers_and_body(rest);
    let mut headers: Vec<(Vec<u8>, Vec<u8>)> = given_headers
        .iter()
        .map(|(n, v)| (n.to_vec(), v.to_vec()))
        .collect();
    let mut body = given_body.to_vec();
    if let (true, Some(key), true) = (sign, secrets.first(), pack.has_shared_secret()) {
        let request = SignRequest {
            event_id: "evt_fuzz",
            event_type: Some("fuzz"),
            timestamp: now,
            body: given_body,
        };
        let target = SignTarget {
            public_url: url.as_deref(),
            options: Some(&options),
        };
        let signed = pack.sign_delivery(key, &request, &target);
        for (name, value) in signed.headers {
            headers.retain(|(n, _)| !n.eq_ignore_ascii_case(name.as_str().as_bytes()));
            headers.push((name.as_str().as_bytes().to_vec(), value.as_bytes().to_vec()));
        }
        body = signed.body;
        url = signed.url.or(url);
    }
    let header_refs: Vec<(&[u8], &[u8])> = headers
        .iter()
        .map(|(n, v)| (n.as_slice(), v.as_slice()))
        .collect();
    let trusted: Vec<TrustedSecret<'_>> = secrets
        .iter()
        .map(|key| TrustedSecret { version: "v", key })
        .collect();
    let request = fuzzing::RawRequest {
        method: method.as_bytes(),
        headers: &header_refs,
        raw_query: query.as_deref(),
        public_url: url.as_deref(),
        options: &options,
        body: &body,
    };
    let _ = fuzzing::request_verdict(pack, &request, &trusted, now);
});
