//! An endpoint's sequenced deltas (`sequence_pointer`, `sequence_gap_seconds`,
//! `sequence_gap_max`, `sequence_start`): raw keys resolved into [`Sequencing`], refused at
//! load naming the key when they cannot work.

use std::time::Duration;

use hookgate_providers::pack::Pack;
use hookgate_store::SequenceStart;

use super::{ConfigError, err};

/// How long a gap may stay open by default before its waiting events are held.
pub const DEFAULT_GAP_SECONDS: u64 = 300;
/// How many events of one object may wait in a gap by default.
pub const DEFAULT_GAP_MAX: u32 = 100;
/// The longest gap window accepted (a week: events wait unprocessed meanwhile).
const MAX_GAP_SECONDS: u64 = 7 * 24 * 3600;
/// The most waiting events per object accepted (each is a stored, unprocessed row).
const MAX_GAP_MAX: u32 = 10_000;

/// An endpoint whose events are applied in each object's sequence order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sequencing {
    /// JSON pointer to the event's sequence (an integer, one more per event of its object).
    pub pointer: String,
    /// `sequence_gap_seconds`: how long the object's waiting events wait for a missing one.
    pub gap: Duration,
    /// `sequence_gap_max`: at most this many events of one object wait.
    pub gap_max: u32,
    pub start: SequenceStart,
}

/// The endpoint's raw sequence keys.
pub(super) struct RawSequencing {
    pub pointer: Option<String>,
    pub gap_seconds: Option<u64>,
    pub gap_max: Option<u32>,
    pub start: Option<String>,
}

/// Resolves the keys of endpoint `i`; `object_id_pointer` is the endpoint's, `pointer` was
/// already checked as a JSON pointer.
pub(super) fn resolve(
    raw: RawSequencing,
    i: usize,
    pack: &Pack,
    object_id_pointer: Option<&str>,
) -> Result<Option<Sequencing>, ConfigError> {
    let at = |key: &str| format!("endpoints[{i}].{key}");
    let Some(pointer) = raw.pointer else {
        for (key, set) in [
            ("sequence_gap_seconds", raw.gap_seconds.is_some()),
            ("sequence_gap_max", raw.gap_max.is_some()),
            ("sequence_start", raw.start.is_some()),
        ] {
            if set {
                return Err(err(at(key), "has no effect without sequence_pointer"));
            }
        }
        return Ok(None);
    };
    if object_id_pointer.is_none() && !pack.reads_object_id() {
        return Err(err(
            at("sequence_pointer"),
            format!(
                "needs an object id: provider {} names none, so set object_id_pointer",
                pack.id()
            ),
        ));
    }
    let gap_seconds = raw.gap_seconds.unwrap_or(DEFAULT_GAP_SECONDS);
    if !(1..=MAX_GAP_SECONDS).contains(&gap_seconds) {
        return Err(err(
            at("sequence_gap_seconds"),
            format!("must be between 1 and {MAX_GAP_SECONDS}"),
        ));
    }
    let gap_max = raw.gap_max.unwrap_or(DEFAULT_GAP_MAX);
    if !(1..=MAX_GAP_MAX).contains(&gap_max) {
        return Err(err(
            at("sequence_gap_max"),
            format!("must be between 1 and {MAX_GAP_MAX}"),
        ));
    }
    let start = match raw.start.as_deref() {
        None => SequenceStart::One,
        Some("any") => SequenceStart::Any,
        Some(_) => {
            return Err(err(
                at("sequence_start"),
                "must be \"any\" (leave it out for sequences that start at 1)",
            ));
        }
    };
    Ok(Some(Sequencing {
        pointer,
        gap: Duration::from_secs(gap_seconds),
        gap_max,
        start,
    }))
}

/// `hookgate config check`'s lines for it.
pub(super) fn render(out: &mut String, s: &Sequencing) {
    use std::fmt::Write;
    let _ = writeln!(out, "sequence_pointer = {:?}", s.pointer);
    let _ = writeln!(out, "sequence_gap_seconds = {}", s.gap.as_secs());
    let _ = writeln!(out, "sequence_gap_max = {}", s.gap_max);
    if s.start == SequenceStart::Any {
        let _ = writeln!(out, "sequence_start = \"any\"");
    }
}
