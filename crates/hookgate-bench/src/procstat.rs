//! The gateway's resource use from `/proc` (Linux): CPU seconds from `/proc/PID/stat`, resident
//! memory from `/proc/PID/status` (`VmRSS` now, `VmHWM` the peak since the process started).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Clock ticks per second of `/proc/PID/stat` (`getconf CLK_TCK`; 100 on every common Linux).
fn clock_ticks() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse::<f64>().ok())
        .filter(|t| *t > 0.0)
        .unwrap_or(100.0)
}

/// User + system CPU seconds of `pid` (`self` for this process).
pub fn cpu_seconds(pid: &str) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may contain spaces and parentheses: fields start after the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After ')': state is field 3 of the man page, utime 14, stime 15.
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) / clock_ticks())
}

/// A `kB` line of `/proc/PID/status`, in MiB.
pub fn status_mib(pid: &str, key: &str) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status.lines().find_map(|l| {
        let v = l.strip_prefix(key)?.strip_prefix(':')?;
        let kb: f64 = v.trim().trim_end_matches("kB").trim().parse().ok()?;
        Some(kb / 1024.0)
    })
}

/// Samples `VmRSS` every 100 ms until dropped; the peak seen, in KiB.
pub struct RssSampler {
    peak_kib: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl RssSampler {
    pub fn start(pid: String) -> RssSampler {
        let peak_kib = Arc::new(AtomicU64::new(0));
        let peak = peak_kib.clone();
        let task = tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(100));
            loop {
                tick.tick().await;
                if let Some(mib) = status_mib(&pid, "VmRSS") {
                    peak.fetch_max((mib * 1024.0) as u64, Ordering::Relaxed);
                }
            }
        });
        RssSampler { peak_kib, task }
    }

    pub fn peak_mib(&self) -> f64 {
        self.peak_kib.load(Ordering::Relaxed) as f64 / 1024.0
    }
}

impl Drop for RssSampler {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_own_process() {
        assert!(cpu_seconds("self").is_some());
        assert!(status_mib("self", "VmRSS").unwrap() > 0.0);
        assert!(status_mib("self", "VmHWM").unwrap() > 0.0);
    }
}
