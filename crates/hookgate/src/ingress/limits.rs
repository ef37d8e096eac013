//! Flood protection before verification, and budgets on verified traffic.
//!
//! Before verification only cheap, unforgeable-by-payload limits apply: a per-client-address
//! rate and a global in-flight cap. Per-endpoint budgets count *verified* requests only, so
//! forged traffic cannot starve a real provider.

use std::collections::HashMap;
use std::net::IpAddr;
use std::num::NonZeroU32;
use std::sync::{Arc, Mutex};

use governor::clock::{Clock as _, DefaultClock};
use governor::{DefaultDirectRateLimiter, DefaultKeyedRateLimiter, Quota, RateLimiter};
use http::HeaderMap;
use ipnet::IpNet;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

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

/// The address to rate-limit, canonical (an IPv4-mapped IPv6 peer is its IPv4 address): the
/// peer, or — when the peer is a trusted proxy — the right-most `X-Forwarded-For` entry that
/// is not itself a trusted proxy. An entry that does not parse (`ip:port`, garbage) ends the
/// walk at the proxy's own address: the client must not choose its key by writing one.
pub fn client_address(peer: IpAddr, headers: &HeaderMap, trusted: &[IpNet]) -> IpAddr {
    let peer = peer.to_canonical();
    if !is_trusted(peer, trusted) {
        return peer;
    }
    let entries = headers
        .get_all("x-forwarded-for")
        .iter()
        .map(|v| v.to_str().ok())
        .collect::<Vec<_>>();
    for value in entries.into_iter().rev() {
        let Some(value) = value else { return peer };
        for entry in value.rsplit(',') {
            let Ok(ip) = entry.trim().parse::<IpAddr>() else {
                return peer;
            };
            let ip = ip.to_canonical();
            if !is_trusted(ip, trusted) {
                return ip;
            }
        }
    }
    peer
}

/// The per-client key of an address: IPv4 as is, IPv6 by its /64 (one subscriber's prefix,
/// where every address is the client's to pick).
pub fn client_key(client: IpAddr) -> IpAddr {
    match client.to_canonical() {
        IpAddr::V6(v6) => {
            let bits = u128::from(v6) & !((1u128 << 64) - 1);
            IpAddr::V6(bits.into())
        }
        v4 => v4,
    }
}

pub fn is_trusted(ip: IpAddr, trusted: &[IpNet]) -> bool {
    let ip = ip.to_canonical();
    trusted.iter().any(|net| net.contains(&ip))
}

/// Whether every address of `net` is private, loopback, link-local or shared (CGNAT) space:
/// where a proxy in front of the gateway normally sits.
pub fn is_non_public(net: &IpNet) -> bool {
    const RANGES: &[&str] = &[
        "10.0.0.0/8",
        "172.16.0.0/12",
        "192.168.0.0/16",
        "127.0.0.0/8",
        "169.254.0.0/16",
        "100.64.0.0/10",
        "::1/128",
        "fc00::/7",
        "fe80::/10",
    ];
    let net = match net {
        IpNet::V6(v6) => match v6.addr().to_ipv4_mapped() {
            Some(v4) if v6.prefix_len() >= 96 => {
                IpNet::new(v4.into(), v6.prefix_len() - 96).expect("prefix within 32")
            }
            _ => *net,
        },
        IpNet::V4(_) => *net,
    };
    RANGES.iter().any(|r| {
        let range: IpNet = r.parse().expect("static range");
        range.contains(&net)
    })
}

/// Bodies being read at once: a global cap and one per client key, so slow or forged
/// uploads from one place cannot hold every reader.
pub struct BodyReaders {
    global: Arc<Semaphore>,
    per_client: Arc<Mutex<HashMap<IpAddr, usize>>>,
    per_client_max: usize,
}

/// Why no body reader slot was given.
#[derive(Debug, PartialEq, Eq)]
pub enum ReadersFull {
    Global,
    Client,
}

/// A body reader slot, released on drop.
pub struct BodyReaderSlot {
    _global: OwnedSemaphorePermit,
    per_client: Arc<Mutex<HashMap<IpAddr, usize>>>,
    key: IpAddr,
}

impl Drop for BodyReaderSlot {
    fn drop(&mut self) {
        let mut map = self.per_client.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = map.get_mut(&self.key) {
            *n -= 1;
            if *n == 0 {
                map.remove(&self.key);
            }
        }
    }
}

impl BodyReaders {
    pub fn new(global: usize, per_client: usize) -> Self {
        Self {
            global: Arc::new(Semaphore::new(global)),
            per_client: Arc::default(),
            per_client_max: per_client,
        }
    }

    /// A slot for a body from `key` (see [`client_key`]), or which cap is full.
    pub fn try_enter(&self, key: IpAddr) -> Result<BodyReaderSlot, ReadersFull> {
        let global = self
            .global
            .clone()
            .try_acquire_owned()
            .map_err(|_| ReadersFull::Global)?;
        let mut map = self.per_client.lock().unwrap_or_else(|e| e.into_inner());
        let n = map.entry(key).or_insert(0);
        if *n >= self.per_client_max {
            return Err(ReadersFull::Client);
        }
        *n += 1;
        Ok(BodyReaderSlot {
            _global: global,
            per_client: self.per_client.clone(),
            key,
        })
    }

    /// Slots free under the global cap.
    pub fn available(&self) -> usize {
        self.global.available_permits()
    }
}

/// The drain budget: 64 shed bodies of the largest drained size at once.
pub const SHED_DRAIN_BUDGET_BYTES: usize = 64 * 64 * 1024;

/// Bytes that shed requests may hold while their small bodies are drained: beyond it a shed
/// request is answered without draining (its connection closes) instead of adding memory
/// outside the caps.
pub struct DrainBudget {
    bytes: Arc<Semaphore>,
}

impl DrainBudget {
    pub fn new(bytes: usize) -> Self {
        Self {
            bytes: Arc::new(Semaphore::new(bytes)),
        }
    }

    /// Reserves `len` bytes for one drain, `None` when the budget has no room.
    pub fn try_reserve(&self, len: usize) -> Option<OwnedSemaphorePermit> {
        let len = u32::try_from(len).ok()?;
        self.bytes.clone().try_acquire_many_owned(len).ok()
    }
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

    fn forwarded(value: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert("x-forwarded-for", value.parse().unwrap());
        h
    }

    #[test]
    fn unparseable_forwarded_entry_keys_the_proxy() {
        let trusted: Vec<IpNet> = vec!["10.0.0.0/8".parse().unwrap()];
        let proxy: IpAddr = "10.0.0.2".parse().unwrap();
        for value in [
            "203.0.113.9:4711",
            "203.0.113.1, 198.51.100.7:80",
            "nonsense",
        ] {
            assert_eq!(
                client_address(proxy, &forwarded(value), &trusted),
                proxy,
                "{value}"
            );
        }
        // A trusted hop to the right is skipped; a bad entry to its left still fails closed.
        let h = forwarded("garbage, 10.9.9.9");
        assert_eq!(client_address(proxy, &h, &trusted), proxy);
        let h = forwarded("garbage, 198.51.100.7");
        assert_eq!(
            client_address(proxy, &h, &trusted),
            "198.51.100.7".parse::<IpAddr>().unwrap()
        );
    }

    #[test]
    fn mapped_peers_are_canonical_ipv4() {
        let trusted: Vec<IpNet> = vec!["10.0.0.0/8".parse().unwrap()];
        let mapped: IpAddr = "::ffff:10.0.0.2".parse().unwrap();
        assert!(is_trusted(mapped, &trusted));
        assert_eq!(
            client_address(mapped, &forwarded("::ffff:203.0.113.9"), &trusted),
            "203.0.113.9".parse::<IpAddr>().unwrap()
        );
        let stranger: IpAddr = "::ffff:198.51.100.1".parse().unwrap();
        assert_eq!(
            client_address(stranger, &HeaderMap::new(), &trusted),
            "198.51.100.1".parse::<IpAddr>().unwrap()
        );
    }

    #[test]
    fn ipv6_clients_are_keyed_per_64() {
        let a: IpAddr = "2001:db8:1:2:aaaa::1".parse().unwrap();
        let b: IpAddr = "2001:db8:1:2:ffff:1:2:3".parse().unwrap();
        let other: IpAddr = "2001:db8:1:3::1".parse().unwrap();
        assert_eq!(client_key(a), client_key(b));
        assert_eq!(client_key(a), "2001:db8:1:2::".parse::<IpAddr>().unwrap());
        assert_ne!(client_key(a), client_key(other));
        let v4: IpAddr = "192.0.2.1".parse().unwrap();
        assert_eq!(client_key(v4), v4);
        let l = ClientLimiter::new(Rate {
            per_second: 1,
            burst: 1,
        });
        assert!(l.check(client_key(a)).is_ok());
        assert!(l.check(client_key(b)).is_err(), "same /64, same budget");
    }

    #[test]
    fn public_and_private_proxy_ranges() {
        for private in [
            "10.1.0.0/16",
            "192.168.1.1/32",
            "127.0.0.1/32",
            "fd00::/8",
            "::ffff:10.0.0.1/128",
        ] {
            assert!(is_non_public(&private.parse().unwrap()), "{private}");
        }
        for public in [
            "203.0.113.0/24",
            "8.0.0.0/7",
            "10.0.0.0/7",
            "2001:db8::/32",
            "::/0",
        ] {
            assert!(!is_non_public(&public.parse().unwrap()), "{public}");
        }
    }

    #[test]
    fn body_readers_cap_per_client_and_globally() {
        let readers = BodyReaders::new(3, 2);
        let a: IpAddr = "192.0.2.1".parse().unwrap();
        let b: IpAddr = "192.0.2.2".parse().unwrap();
        let a1 = readers.try_enter(a).unwrap();
        let _a2 = readers.try_enter(a).unwrap();
        assert_eq!(readers.try_enter(a).err(), Some(ReadersFull::Client));
        let _b1 = readers.try_enter(b).unwrap();
        assert_eq!(readers.try_enter(b).err(), Some(ReadersFull::Global));
        drop(a1);
        assert!(readers.try_enter(a).is_ok());
    }

    #[test]
    fn drain_budget_bounds_draining_bytes() {
        let budget = DrainBudget::new(100 * 1024);
        let first = budget.try_reserve(64 * 1024).expect("room for one");
        assert!(
            budget.try_reserve(64 * 1024).is_none(),
            "beyond the budget: no drain"
        );
        let small = budget.try_reserve(30 * 1024).expect("what is left");
        drop(first);
        assert!(budget.try_reserve(64 * 1024).is_some());
        drop(small);
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
