//! Flood protection before verification, and budgets on verified traffic.
//!
//! Before verification only cheap, unforgeable-by-payload limits apply: a per-client-address
//! rate and a global in-flight cap. Per-endpoint budgets count *verified* requests only, so
//! forged traffic cannot starve a real provider.

use std::net::IpAddr;
use std::num::NonZeroU32;
use std::sync::Arc;

use governor::clock::{Clock as _, DefaultClock};
use governor::{DefaultDirectRateLimiter, DefaultKeyedRateLimiter, Quota, RateLimiter};
use http::HeaderMap;
use ipnet::IpNet;

use crate::config::Rate;

fn quota(rate: Rate) -> Quota {
    Quota::per_second(NonZeroU32::new(rate.per_second).expect("validated > 0"))
        .allow_burst(NonZeroU32::new(rate.burst).expect("validated > 0"))
}

/// Seconds until the limiter would admit the next request (at least 1).
fn retry_after(not_until: governor::NotUntil<governor::clock::QuantaInstant>) -> u64 {
    let wait = not_until.wait_time_from(DefaultClock::default().now());
    wait.as_secs() + u64::from(wait.subsec_nanos() > 0)
}

/// Per-client-address limiter.
pub struct ClientLimiter {
    limiter: DefaultKeyedRateLimiter<IpAddr>,
}

impl ClientLimiter {
    pub fn new(rate: Rate) -> Self {
        Self {
            limiter: RateLimiter::keyed(quota(rate)),
        }
    }

    /// `Err(retry_after_secs)` when the client is over its rate.
    pub fn check(&self, client: IpAddr) -> Result<(), u64> {
        self.limiter.check_key(&client).map_err(retry_after)
    }

    /// Forgets idle clients so the table stays bounded.
    pub fn prune(&self) {
        self.limiter.retain_recent();
        self.limiter.shrink_to_fit();
    }
}

/// Budget on verified traffic of one endpoint.
pub struct EndpointBudget {
    limiter: DefaultDirectRateLimiter,
}

impl EndpointBudget {
    pub fn new(rate: Rate) -> Arc<Self> {
        Arc::new(Self {
            limiter: RateLimiter::direct(quota(rate)),
        })
    }

    pub fn check(&self) -> Result<(), u64> {
        self.limiter.check().map_err(retry_after)
    }
}

/// The address to rate-limit: the peer, or — when the peer is a trusted proxy — the
/// right-most `X-Forwarded-For` entry that is not itself a trusted proxy.
pub fn client_address(peer: IpAddr, headers: &HeaderMap, trusted: &[IpNet]) -> IpAddr {
    if !is_trusted(peer, trusted) {
        return peer;
    }
    let forwarded = headers
        .get_all("x-forwarded-for")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|s| s.trim().parse::<IpAddr>().ok())
        .collect::<Vec<_>>();
    forwarded
        .into_iter()
        .rev()
        .find(|ip| !is_trusted(*ip, trusted))
        .unwrap_or(peer)
}

pub fn is_trusted(ip: IpAddr, trusted: &[IpNet]) -> bool {
    trusted.iter().any(|net| net.contains(&ip))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forwarded_for_only_from_trusted_proxies() {
        let trusted: Vec<IpNet> = vec!["10.0.0.0/8".parse().unwrap()];
        let mut h = HeaderMap::new();
        h.insert("x-forwarded-for", "203.0.113.9, 10.1.1.1".parse().unwrap());
        let proxy: IpAddr = "10.0.0.2".parse().unwrap();
        let stranger: IpAddr = "198.51.100.1".parse().unwrap();
        assert_eq!(
            client_address(proxy, &h, &trusted),
            "203.0.113.9".parse::<IpAddr>().unwrap()
        );
        assert_eq!(client_address(stranger, &h, &trusted), stranger);
    }

    #[test]
    fn client_limiter_refuses_over_burst() {
        let l = ClientLimiter::new(Rate {
            per_second: 1,
            burst: 2,
        });
        let ip: IpAddr = "192.0.2.1".parse().unwrap();
        assert!(l.check(ip).is_ok());
        assert!(l.check(ip).is_ok());
        let wait = l.check(ip).unwrap_err();
        assert!(wait >= 1);
        assert!(l.check("192.0.2.2".parse().unwrap()).is_ok());
    }
}
