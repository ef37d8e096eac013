//! The version gate (DESIGN.md §6), as a pure decision. The store runs the same rule as a
//! compare-and-set on `object_state` inside the processing transaction; this function is the
//! rule's specification and what sans-I/O code (tests, tools) uses.

/// What the gate says about an incoming object version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GateDecision {
    /// Newer than anything applied: apply it (and it becomes the stored version).
    Apply,
    /// Not newer: a processed no-op (outcome `stale`).
    Stale,
}

/// Applies only when `incoming > stored`; an equal version is stale (already applied).
pub fn decide(incoming: i64, stored: Option<i64>) -> GateDecision {
    match stored {
        Some(stored) if incoming <= stored => GateDecision::Stale,
        _ => GateDecision::Apply,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_strictly_newer_applies() {
        assert_eq!(decide(1, None), GateDecision::Apply);
        assert_eq!(decide(3, Some(2)), GateDecision::Apply);
        assert_eq!(decide(2, Some(2)), GateDecision::Stale);
        assert_eq!(decide(1, Some(3)), GateDecision::Stale);
        assert_eq!(decide(i64::MIN, None), GateDecision::Apply);
    }
}
