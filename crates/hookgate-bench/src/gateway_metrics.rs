//! The gateway's own view of acknowledgement latency during a run.
//!
//! The load generator shares the machine's cores with the gateway, so under overload the
//! latency it measures includes its own queueing for CPU. The gateway's
//! `hookgate_ack_latency_seconds` histogram (admin `/metrics`) measures from the request's
//! arrival to its answer; scraping it before and after the run and subtracting gives that
//! histogram for the run alone. Its buckets are coarse, so the figure is the upper bound of
//! the bucket holding the 99th percentile.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

const ACK_BUCKET: &str = "hookgate_ack_latency_seconds_bucket{";

/// Cumulative bucket counts `(upper bound in seconds, count)` for one endpoint, ascending.
#[derive(Debug, Clone, PartialEq)]
pub struct AckHistogram(Vec<(f64, u64)>);

impl AckHistogram {
    /// Reads the endpoint's histogram from `GET /metrics` on the admin listener; `None` when
    /// the listener does not answer (the figure is then left out, the run is not failed).
    pub fn scrape(admin: SocketAddr, endpoint: &str) -> Option<AckHistogram> {
        let mut stream = TcpStream::connect_timeout(&admin, Duration::from_secs(2)).ok()?;
        stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
        write!(
            stream,
            "GET /metrics HTTP/1.1\r\nHost: {admin}\r\nConnection: close\r\n\r\n"
        )
        .ok()?;
        let mut text = String::new();
        stream.read_to_string(&mut text).ok()?;
        Some(Self::parse(&text, endpoint))
    }

    /// Parses Prometheus text: the `le` buckets of `endpoint`'s ack-latency histogram.
    pub fn parse(text: &str, endpoint: &str) -> AckHistogram {
        let label = format!("endpoint=\"{endpoint}\"");
        let mut buckets: Vec<(f64, u64)> = text
            .lines()
            .filter_map(|line| {
                let labels_and_value = line.strip_prefix(ACK_BUCKET)?;
                let (labels, value) = labels_and_value.split_once("} ")?;
                if !labels.split(',').any(|l| l == label) {
                    return None;
                }
                let le = labels.split(',').find_map(|l| l.strip_prefix("le=\""))?;
                let le = le.trim_end_matches('"');
                let le = if le == "+Inf" {
                    f64::INFINITY
                } else {
                    le.parse().ok()?
                };
                Some((le, value.trim().parse().ok()?))
            })
            .collect();
        buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
        AckHistogram(buckets)
    }

    /// Upper bound, in ms, of the bucket holding the 99th percentile of what was observed
    /// between `before` and `self`. `None` when nothing was observed or the 99th percentile
    /// lies beyond the last finite bucket.
    pub fn p99_upper_bound_ms(&self, before: &AckHistogram) -> Option<f64> {
        let earlier = |le: f64| {
            before
                .0
                .iter()
                .find(|(b, _)| *b == le)
                .map_or(0, |(_, c)| *c)
        };
        let diffs: Vec<(f64, u64)> = self
            .0
            .iter()
            .map(|(le, c)| (*le, c.saturating_sub(earlier(*le))))
            .collect();
        let total = diffs.last()?.1;
        if total == 0 {
            return None;
        }
        let wanted = (total as f64 * 0.99).ceil() as u64;
        diffs
            .iter()
            .find(|(_, c)| *c >= wanted)
            .filter(|(le, _)| le.is_finite())
            .map(|(le, _)| le * 1000.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(counts: &[(&str, u64)]) -> String {
        let mut out = String::from("# TYPE hookgate_ack_latency_seconds histogram\n");
        for (le, c) in counts {
            out.push_str(&format!(
                "hookgate_ack_latency_seconds_bucket{{endpoint=\"bench\",le=\"{le}\"}} {c}\n"
            ));
            out.push_str(&format!(
                "hookgate_ack_latency_seconds_bucket{{endpoint=\"other\",le=\"{le}\"}} 999\n"
            ));
        }
        out
    }

    #[test]
    fn p99_of_the_run_alone() {
        let before = AckHistogram::parse(
            &text(&[("0.01", 100), ("0.05", 100), ("0.1", 100), ("+Inf", 100)]),
            "bench",
        );
        // The run added 1,000 observations: 900 under 10 ms, 95 more under 50 ms, 5 more
        // under 100 ms. The 990th is in the 50 ms bucket.
        let after = AckHistogram::parse(
            &text(&[
                ("0.01", 1000),
                ("0.05", 1095),
                ("0.1", 1100),
                ("+Inf", 1100),
            ]),
            "bench",
        );
        assert_eq!(after.p99_upper_bound_ms(&before), Some(50.0));
        assert_eq!(before.p99_upper_bound_ms(&before), None, "nothing observed");
        let slow = AckHistogram::parse(
            &text(&[("0.01", 100), ("0.05", 100), ("0.1", 100), ("+Inf", 200)]),
            "bench",
        );
        assert_eq!(
            slow.p99_upper_bound_ms(&before),
            None,
            "beyond the last bucket"
        );
    }
}
