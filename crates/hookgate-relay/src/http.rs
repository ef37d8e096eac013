//! HTTP destinations: POST the provider's original bytes to an internal service, re-signed
//! with Standard Webhooks so the service can verify that the gateway sent it.
//!
//! Headers of every request:
//!
//! | header | value |
//! | --- | --- |
//! | `Content-Type` | [`Message::content_type`]: the transform's, else sniffed from the body |
//! | `Idempotency-Key`, `webhook-id` | the inbox id (stable across retries and re-deliveries), or the fresh key an operator's re-delivery with `fresh_key` recorded |
//! | `webhook-timestamp` | unix seconds of this attempt |
//! | `webhook-signature` | `v1,<base64 HMAC-SHA256>` per signing secret, space-separated |
//! | `X-Hookgate-Provider`, `X-Hookgate-Endpoint`, `X-Hookgate-Event-Id`, `X-Hookgate-Event-Type` | the event's metadata (sanitised) |
//! | `traceparent` | the W3C trace context of the delivery's `relay.delivery` span, only when traces are exported (`[tracing]`) |
//!
//! Signing reuses `hookgate_providers`' built-in Standard Webhooks pack (`<id>.<timestamp>.<body>`).
//! Results: 2xx delivered; 408, 429 (with `Retry-After`), 5xx, timeouts and connection errors
//! transient; any other status permanent. Redirects are not followed (permanent).
//!
//! A URL whose host is, or resolves to, a private, loopback, link-local or otherwise
//! non-public address is refused unless `allow_private_network` is set: IP literals at
//! construction, names at every connection (a resolver that filters what DNS returns, so a
//! name re-pointed at an internal address later is refused too).
//!
//! Proxies: the environment's (`HTTP_PROXY`, `HTTPS_PROXY`, `ALL_PROXY`) are never used, since
//! through one the proxy resolves the destination and the resolver above never sees it. A
//! destination may name its own `proxy`; the proxy's address is then trusted (it is the
//! operator's) and the destination's host is resolved and checked here before every request.

use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use hookgate_providers::pack::{self, SignTarget};
use hookgate_providers::{SecretMaterial, SignRequest};
use http::{HeaderMap, HeaderName, HeaderValue};

use crate::{Delivered, DeliveryError, Destination, Message, header_safe};

/// Longest `Retry-After` honoured.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(3600);

/// A resolved HTTP destination (`kind = "http"`).
#[derive(Clone)]
pub struct HttpSettings {
    pub id: String,
    pub url: url::Url,
    pub timeout: Duration,
    /// Extra headers sent with every request (after the defaults, so they can override
    /// `Content-Type`; never the signature, id or `X-Hookgate-*` headers).
    pub headers: Vec<(HeaderName, HeaderValue)>,
    /// `whsec_` secrets, decoded; every one signs (rotation: add the new, then drop the old).
    pub signing_secrets: Vec<Arc<SecretMaterial>>,
    pub allow_private_network: bool,
    /// An explicit forward proxy (`http://` or `https://`, userinfo for basic auth). `None`:
    /// direct connections only (environment proxies are ignored).
    pub proxy: Option<url::Url>,
}

impl fmt::Debug for HttpSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpSettings")
            .field("id", &self.id)
            .field("url", &redacted_url(&self.url))
            .field("timeout", &self.timeout)
            .field("headers", &self.headers.len())
            .field("signing_secrets", &self.signing_secrets.len())
            .field("allow_private_network", &self.allow_private_network)
            .field("proxy", &self.proxy.as_ref().map(redacted_url))
            .finish()
    }
}

/// The URL without userinfo or query (for logs and `config check`).
pub fn redacted_url(url: &url::Url) -> String {
    let mut u = url.clone();
    let _ = u.set_username("");
    let _ = u.set_password(None);
    if u.query().is_some() {
        u.set_query(Some("<redacted>"));
    }
    u.to_string()
}

/// Whether `ip` is outside the public internet. IPv4: `0.0.0.0/8`, `10/8`, `100.64/10`
/// (CGNAT), `127/8`, `169.254/16`, `172.16/12`, `192.0.0.0/24` (IETF protocol assignments),
/// the documentation ranges, `192.168/16`, `198.18/15` (benchmarking), multicast, `240/4` and
/// broadcast. IPv6: `::/96` (unspecified, loopback and the deprecated IPv4-compatible form),
/// IPv4-mapped `::ffff:0:0/96` (judged by the IPv4 address it maps), `64:ff9b::/32` (NAT64),
/// `2001:db8::/32`, `fc00::/7`, `fe80::/10`, `fec0::/10` (deprecated site-local) and multicast.
pub fn is_private(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let o = v4.octets();
            v4.is_private()
                || v4.is_loopback()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4.is_multicast()
                || v4.is_documentation()
                || o[0] == 0
                || (o[0] == 100 && (o[1] & 0xC0) == 64)
                || (o[0] == 192 && o[1] == 0 && o[2] == 0)
                || (o[0] == 198 && (o[1] & 0xFE) == 18)
                || o[0] >= 240
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_private(IpAddr::V4(v4));
            }
            let s = v6.segments();
            s[..6] == [0; 6]
                || v6.is_multicast()
                || (s[0] & 0xFE00) == 0xFC00
                || (s[0] & 0xFFC0) == 0xFE80
                || (s[0] & 0xFFC0) == 0xFEC0
                || (s[0] == 0x2001 && s[1] == 0x0DB8)
                || (s[0] == 0x0064 && s[1] == 0xFF9B)
        }
    }
}

/// The resolver error that marks a refused private address (found again in the error chain).
#[derive(Debug)]
struct PrivateAddress;

impl fmt::Display for PrivateAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the destination resolves to a private or loopback address")
    }
}

impl std::error::Error for PrivateAddress {}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// `host`'s addresses from the system resolver; [`PrivateAddress`] when any is not public.
async fn public_addrs(host: &str) -> Result<Vec<SocketAddr>, BoxError> {
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host, 0)).await?.collect();
    if addrs.iter().any(|a| is_private(a.ip())) {
        return Err(Box::new(PrivateAddress));
    }
    Ok(addrs)
}

/// DNS through the system resolver, refusing any answer that contains a non-public address.
struct PublicOnly;

impl reqwest::dns::Resolve for PublicOnly {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let addrs = public_addrs(&host).await?;
            Ok(Box::new(addrs.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

/// Resolves `url`'s host name and refuses it when any address is not public (IP literals were
/// checked at construction). The proxy resolves the name again: one that enforces its own
/// egress policy also closes the window between the two lookups.
async fn check_public_name(url: &url::Url, timeout: Duration) -> Result<(), DeliveryError> {
    let Some(url::Host::Domain(name)) = url.host() else {
        return Ok(());
    };
    match tokio::time::timeout(timeout, public_addrs(name)).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) if e.downcast_ref::<PrivateAddress>().is_some() => {
            Err(DeliveryError::Permanent(PrivateAddress.to_string()))
        }
        Ok(Err(e)) => Err(DeliveryError::transient(format!(
            "cannot resolve the destination: {e}"
        ))),
        Err(_) => Err(DeliveryError::transient(format!(
            "resolving the destination timed out after {} ms",
            timeout.as_millis()
        ))),
    }
}

/// An HTTP destination.
pub struct HttpDestination {
    settings: HttpSettings,
    client: reqwest::Client,
}

impl HttpDestination {
    /// Builds the client. Fails for a URL (or proxy URL) that is not http(s) or has no host,
    /// or a URL that is a private IP literal without `allow_private_network`.
    pub fn new(settings: HttpSettings) -> Result<HttpDestination, String> {
        if !matches!(settings.url.scheme(), "http" | "https") {
            return Err("url must be http:// or https://".into());
        }
        let Some(host) = settings.url.host() else {
            return Err("url has no host".into());
        };
        if !settings.allow_private_network {
            let literal = match host {
                url::Host::Ipv4(ip) => Some(IpAddr::V4(ip)),
                url::Host::Ipv6(ip) => Some(IpAddr::V6(ip)),
                url::Host::Domain(d) if d.eq_ignore_ascii_case("localhost") => {
                    Some(IpAddr::from([127, 0, 0, 1]))
                }
                url::Host::Domain(_) => None,
            };
            if literal.is_some_and(is_private) {
                return Err(
                    "url is a private or loopback address; set allow_private_network = true to allow it"
                        .into(),
                );
            }
        }
        let mut builder = reqwest::Client::builder()
            .user_agent(concat!("hookgate/", env!("CARGO_PKG_VERSION")))
            .timeout(settings.timeout)
            .connect_timeout(settings.timeout)
            .redirect(reqwest::redirect::Policy::none())
            .pool_idle_timeout(Duration::from_secs(60))
            // Environment proxies would resolve the destination out of the resolver's sight.
            .no_proxy();
        match &settings.proxy {
            Some(proxy) => {
                if !matches!(proxy.scheme(), "http" | "https") || proxy.host().is_none() {
                    return Err("proxy must be an http:// or https:// URL with a host".into());
                }
                // The resolver would judge the proxy's address, not the destination's: the
                // destination is checked before each request instead (`check_target`).
                let proxy = reqwest::Proxy::all(proxy.as_str())
                    .map_err(|_| "proxy is not a usable proxy URL".to_owned())?;
                builder = builder.proxy(proxy);
            }
            None if !settings.allow_private_network => {
                builder = builder.dns_resolver(Arc::new(PublicOnly));
            }
            None => {}
        }
        let client = builder
            .build()
            .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
        Ok(HttpDestination { settings, client })
    }

    /// Through an explicit proxy the proxy resolves the destination, so without
    /// `allow_private_network` its name is checked here first.
    async fn check_target(&self) -> Result<(), DeliveryError> {
        if self.settings.proxy.is_none() || self.settings.allow_private_network {
            return Ok(());
        }
        check_public_name(&self.settings.url, self.settings.timeout).await
    }

    /// The headers of one request (see the module docs).
    pub fn headers(&self, m: &Message<'_>) -> HeaderMap {
        let mut h = HeaderMap::new();
        if let Ok(content_type) = HeaderValue::from_str(m.content_type()) {
            h.insert(http::header::CONTENT_TYPE, content_type);
        }
        for (name, value) in &self.settings.headers {
            h.insert(name.clone(), value.clone());
        }
        let put = |h: &mut HeaderMap, name: &'static str, value: &str| {
            if let Ok(v) = HeaderValue::from_str(&header_safe(value)) {
                h.insert(HeaderName::from_static(name), v);
            }
        };
        put(&mut h, "idempotency-key", m.idempotency_key);
        put(&mut h, "x-hookgate-provider", m.provider);
        put(&mut h, "x-hookgate-endpoint", m.endpoint_id);
        put(&mut h, "x-hookgate-event-id", m.provider_event_id);
        put(&mut h, "x-hookgate-event-type", m.event_type.unwrap_or(""));
        for (name, value) in sign(&self.settings.signing_secrets, m) {
            h.insert(name, value);
        }
        // Ours, not a configured header's: it names the span that made this request.
        if let Some(traceparent) = m.traceparent
            && let Ok(v) = HeaderValue::from_str(traceparent)
        {
            h.insert(HeaderName::from_static("traceparent"), v);
        }
        h
    }
}

/// Standard Webhooks headers (`webhook-id`, `webhook-timestamp`, `webhook-signature` with one
/// `v1,` entry per secret), computed by the built-in `standard_webhooks` pack. No secrets: only the id
/// and timestamp headers.
pub fn sign(secrets: &[Arc<SecretMaterial>], m: &Message<'_>) -> Vec<(HeaderName, HeaderValue)> {
    let pack = pack::builtin("standard_webhooks").expect("a built-in pack");
    let request = SignRequest {
        event_id: m.idempotency_key,
        event_type: m.event_type,
        timestamp: m.timestamp,
        body: m.body,
    };
    let mut out: Vec<(HeaderName, HeaderValue)> = Vec::new();
    let mut signatures = Vec::new();
    for secret in secrets {
        for (name, value) in pack
            .sign_delivery(secret, &request, &SignTarget::default())
            .headers
        {
            match name.as_str() {
                "webhook-signature" => {
                    if let Ok(v) = value.to_str() {
                        signatures.push(v.to_owned());
                    }
                }
                "webhook-id" | "webhook-timestamp" if !out.iter().any(|(n, _)| *n == name) => {
                    out.push((name, value));
                }
                _ => {}
            }
        }
    }
    if secrets.is_empty() {
        // Unsigned, but the id and timestamp still travel (the id is the idempotency key).
        if let Ok(v) = HeaderValue::from_str(&header_safe(m.idempotency_key)) {
            out.push((HeaderName::from_static("webhook-id"), v));
        }
        out.push((
            HeaderName::from_static("webhook-timestamp"),
            HeaderValue::from(m.timestamp),
        ));
    }
    if !signatures.is_empty()
        && let Ok(v) = HeaderValue::from_str(&signatures.join(" "))
    {
        out.push((HeaderName::from_static("webhook-signature"), v));
    }
    out
}

/// `Retry-After` in seconds (HTTP dates are not honoured; the backoff applies instead).
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let secs: u64 = headers
        .get(http::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()?;
    Some(Duration::from_secs(secs).min(MAX_RETRY_AFTER))
}

/// Classifies a response status (see the module docs).
pub fn classify(status: u16, headers: &HeaderMap) -> Result<(), DeliveryError> {
    match status {
        200..=299 => Ok(()),
        408 | 429 | 500..=599 => Err(DeliveryError::Transient {
            reason: format!("http status {status}"),
            retry_after: if status == 429 || status == 503 {
                retry_after(headers)
            } else {
                None
            },
        }),
        _ => Err(DeliveryError::Permanent(format!("http status {status}"))),
    }
}

/// A redacted description of a client error: its kind and the causes, never the URL.
fn describe(e: &reqwest::Error, timeout: Duration) -> DeliveryError {
    let mut source: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(e);
    let mut causes = Vec::new();
    while let Some(s) = source {
        if s.downcast_ref::<PrivateAddress>().is_some() {
            return DeliveryError::Permanent(PrivateAddress.to_string());
        }
        causes.push(s.to_string());
        source = s.source();
    }
    if e.is_timeout() {
        return DeliveryError::transient(format!("timed out after {} ms", timeout.as_millis()));
    }
    let kind = if e.is_connect() {
        "connection failed"
    } else if e.is_body() || e.is_request() {
        "request failed"
    } else {
        "http error"
    };
    causes.dedup();
    let detail = causes.last().map(|c| format!(": {c}")).unwrap_or_default();
    DeliveryError::transient(format!("{kind}{detail}"))
}

#[async_trait::async_trait]
impl Destination for HttpDestination {
    fn id(&self) -> &str {
        &self.settings.id
    }

    async fn deliver(&self, m: &Message<'_>) -> Result<Delivered, DeliveryError> {
        self.check_target().await?;
        let response = self
            .client
            .post(self.settings.url.clone())
            .headers(self.headers(m))
            .body(m.body.to_vec())
            .send()
            .await
            .map_err(|e| describe(&e, self.settings.timeout))?;
        let status = response.status().as_u16();
        let result = classify(status, response.headers());
        // The body is not read: nothing of it is needed, and an unbounded read is banned.
        drop(response);
        result.map(|()| Delivered {
            duplicate: false,
            http_status: Some(status),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_addresses() {
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "::1",
            "fd00::1",
            "fe80::1",
            "::ffff:127.0.0.1",
        ] {
            assert!(is_private(ip.parse().unwrap()), "{ip}");
        }
        for ip in ["93.184.216.34", "8.8.8.8", "2606:4700:4700::1111"] {
            assert!(!is_private(ip.parse().unwrap()), "{ip}");
        }
    }

    /// Each range at its edges, and the public addresses just outside it.
    #[test]
    fn private_ranges_table() {
        let private = [
            // 192.0.0.0/24: IETF protocol assignments (192.0.0.8, 192.0.0.170 NAT64 discovery).
            "192.0.0.0",
            "192.0.0.8",
            "192.0.0.170",
            "192.0.0.255",
            // ::/96: the unspecified and loopback addresses and the IPv4-compatible form.
            "::",
            "::2",
            "::a00:1",
            "::8.8.8.8",
            "::ffff",
            "::ffff:ffff",
            // fec0::/10: deprecated site-local.
            "fec0::",
            "fec0::1",
            "feff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
            // fe80::/10 ends just below it.
            "febf:ffff::1",
            // ::ffff:0:0/96 judged by the IPv4 address it maps.
            "::ffff:10.0.0.1",
            "::ffff:169.254.169.254",
            "::ffff:192.0.0.1",
            "::ffff:0.0.0.0",
            // Already there: NAT64, documentation, CGNAT, benchmarking, reserved.
            "64:ff9b::a00:1",
            "2001:db8::1",
            "100.127.255.255",
            "198.19.0.1",
            "240.0.0.1",
            "255.255.255.255",
        ];
        for ip in private {
            assert!(is_private(ip.parse().unwrap()), "{ip} is private");
        }
        let public = [
            "191.255.255.255",
            "192.0.1.0",
            "192.0.3.1",
            "::1:0:0:1",
            "1::",
            "::ffff:8.8.8.8",
            "::ffff:192.0.1.1",
            "2001:4860:4860::8888",
            "100.128.0.1",
        ];
        for ip in public {
            assert!(!is_private(ip.parse().unwrap()), "{ip} is public");
        }
    }

    #[test]
    fn statuses() {
        let none = HeaderMap::new();
        assert!(classify(200, &none).is_ok());
        assert!(classify(204, &none).is_ok());
        for s in [408, 429, 500, 502, 503, 504] {
            assert!(
                matches!(classify(s, &none), Err(DeliveryError::Transient { .. })),
                "{s}"
            );
        }
        for s in [301, 400, 401, 403, 404, 410, 422] {
            assert!(
                matches!(classify(s, &none), Err(DeliveryError::Permanent(_))),
                "{s}"
            );
        }
        let mut h = HeaderMap::new();
        h.insert(http::header::RETRY_AFTER, HeaderValue::from_static("7"));
        assert_eq!(
            classify(429, &h),
            Err(DeliveryError::Transient {
                reason: "http status 429".into(),
                retry_after: Some(Duration::from_secs(7))
            })
        );
    }

    fn settings(url: &str, allow: bool) -> HttpSettings {
        HttpSettings {
            id: "d".into(),
            url: url.parse().unwrap(),
            timeout: Duration::from_secs(1),
            headers: Vec::new(),
            signing_secrets: Vec::new(),
            allow_private_network: allow,
            proxy: None,
        }
    }

    #[test]
    fn private_literals_are_refused_unless_allowed() {
        for url in [
            "http://127.0.0.1:9/x",
            "http://localhost/x",
            "http://[::1]/",
            "http://10.0.0.1/",
        ] {
            assert!(HttpDestination::new(settings(url, false)).is_err(), "{url}");
            assert!(HttpDestination::new(settings(url, true)).is_ok(), "{url}");
        }
        assert!(HttpDestination::new(settings("ftp://example.com/", true)).is_err());
        assert!(HttpDestination::new(settings("https://example.com/hook", false)).is_ok());
    }

    /// A forward proxy on a real socket: records each request line, answers 200.
    struct RecordingProxy {
        addr: SocketAddr,
        requests: Arc<std::sync::Mutex<Vec<String>>>,
    }

    impl RecordingProxy {
        async fn start() -> RecordingProxy {
            use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            let requests = Arc::new(std::sync::Mutex::new(Vec::new()));
            let seen = requests.clone();
            tokio::spawn(async move {
                while let Ok((stream, _)) = listener.accept().await {
                    let seen = seen.clone();
                    tokio::spawn(async move {
                        let mut reader = tokio::io::BufReader::new(stream);
                        let mut line = String::new();
                        let mut first = None;
                        let mut length = 0usize;
                        while reader.read_line(&mut line).await.unwrap_or(0) > 0 {
                            let l = line.trim_end().to_owned();
                            line.clear();
                            if l.is_empty() {
                                break;
                            }
                            if let Some(v) = l.to_ascii_lowercase().strip_prefix("content-length:")
                            {
                                length = v.trim().parse().unwrap_or(0);
                            }
                            first.get_or_insert(l);
                        }
                        let mut body = vec![0; length];
                        let _ = reader.read_exact(&mut body).await;
                        seen.lock().unwrap().extend(first);
                        let _ = reader
                            .into_inner()
                            .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                            .await;
                    });
                }
            });
            RecordingProxy { addr, requests }
        }

        fn url(&self) -> url::Url {
            format!("http://{}", self.addr).parse().unwrap()
        }

        fn requests(&self) -> Vec<String> {
            self.requests.lock().unwrap().clone()
        }
    }

    fn message(body: &[u8]) -> Message<'_> {
        Message {
            inbox_id: "0190-test",
            idempotency_key: "0190-test",
            provider: "stripe",
            endpoint_id: "e",
            provider_event_id: "evt_1",
            event_type: None,
            body,
            content_type: None,
            timestamp: 1_700_000_000,
            traceparent: None,
        }
    }

    #[tokio::test]
    async fn an_explicit_proxy_carries_the_request() {
        let proxy = RecordingProxy::start().await;
        // `.invalid` never resolves: only the proxy can have answered.
        let mut s = settings("http://hookgate-destination.invalid/hook", true);
        s.proxy = Some(proxy.url());
        let destination = HttpDestination::new(s).unwrap();
        destination.deliver(&message(b"{}")).await.unwrap();
        assert_eq!(
            proxy.requests(),
            ["POST http://hookgate-destination.invalid/hook HTTP/1.1"]
        );
    }

    #[tokio::test]
    async fn through_an_explicit_proxy_a_private_target_is_refused_before_sending() {
        let proxy = RecordingProxy::start().await;
        let mut s = settings("http://localhost:9/hook", true);
        s.proxy = Some(proxy.url());
        let mut destination = HttpDestination::new(s).unwrap();
        // `localhost` is refused at construction without `allow_private_network`; clearing the
        // flag afterwards reaches the check every request makes for names that resolve later.
        destination.settings.allow_private_network = false;
        let refused = destination.deliver(&message(b"{}")).await;
        assert_eq!(
            refused,
            Err(DeliveryError::Permanent(PrivateAddress.to_string()))
        );
        assert!(proxy.requests().is_empty(), "{:?}", proxy.requests());

        let unresolvable: url::Url = "http://hookgate-destination.invalid/".parse().unwrap();
        assert!(matches!(
            check_public_name(&unresolvable, Duration::from_secs(5)).await,
            Err(DeliveryError::Transient { .. })
        ));
    }

    #[test]
    fn traceparent_header_only_with_a_trace_context_and_never_a_configured_one() {
        let mut s = settings("https://example.com/hook", false);
        s.headers.push((
            HeaderName::from_static("traceparent"),
            HeaderValue::from_static("00-configured-00"),
        ));
        let destination = HttpDestination::new(s).unwrap();
        let mut m = message(b"{}");
        let ours = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        m.traceparent = Some(ours);
        let h = destination.headers(&m);
        assert_eq!(h.get_all("traceparent").iter().count(), 1);
        assert_eq!(h.get("traceparent").unwrap(), ours);

        let plain = HttpDestination::new(settings("https://example.com/hook", false)).unwrap();
        assert!(plain.headers(&message(b"{}")).get("traceparent").is_none());
    }

    #[test]
    fn proxy_urls_are_validated() {
        let mut s = settings("https://example.com/hook", false);
        s.proxy = Some("socks5://127.0.0.1:1080".parse().unwrap());
        assert!(HttpDestination::new(s.clone()).is_err());
        s.proxy = Some("http://user:pw@proxy.internal:3128".parse().unwrap());
        assert!(HttpDestination::new(s.clone()).is_ok());
        let shown = format!("{s:?}");
        assert!(!shown.contains("pw"), "{shown}");
    }

    #[tokio::test]
    async fn names_resolving_to_private_addresses_are_refused() {
        use reqwest::dns::Resolve;
        let refused = PublicOnly.resolve("localhost".parse().unwrap()).await;
        let err = refused.err().expect("localhost resolves to loopback");
        assert!(err.downcast_ref::<PrivateAddress>().is_some(), "{err}");
    }
}
