//! Named crash points for tests of the real binary.
//!
//! Built only with the `failpoints` cargo feature: release builds without it contain no
//! failpoint code, because [`crate::fail_point!`] expands to nothing. With the feature,
//! `HOOKGATE_FAILPOINTS="name=action;name=action"` is read once, on first use. Actions:
//! `abort` calls [`std::process::abort`] at that point; `error` makes the operation fail there.

/// What a triggered failpoint asks the code at that point to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailAction {
    Abort,
    Error,
}

#[cfg(feature = "failpoints")]
mod imp {
    use super::FailAction;
    use std::collections::HashMap;
    use std::sync::OnceLock;

    static TABLE: OnceLock<HashMap<String, FailAction>> = OnceLock::new();

    pub(super) fn parse(spec: &str) -> HashMap<String, FailAction> {
        spec.split(';')
            .filter_map(|item| {
                let (name, action) = item.trim().split_once('=')?;
                let action = match action.trim() {
                    "abort" => FailAction::Abort,
                    "error" => FailAction::Error,
                    _ => return None,
                };
                Some((name.trim().to_owned(), action))
            })
            .collect()
    }

    pub fn action(name: &str) -> Option<FailAction> {
        TABLE
            .get_or_init(|| parse(&std::env::var("HOOKGATE_FAILPOINTS").unwrap_or_default()))
            .get(name)
            .copied()
    }
}

#[cfg(feature = "failpoints")]
pub use imp::action;

/// Evaluates a named failpoint. `abort` aborts the process; `error` evaluates `$on_error`
/// (typically an early `return Err(..)`). Without the `failpoints` feature this is empty.
#[macro_export]
macro_rules! fail_point {
    ($name:literal, $on_error:expr) => {
        #[cfg(feature = "failpoints")]
        {
            match $crate::failpoint::action($name) {
                Some($crate::failpoint::FailAction::Abort) => std::process::abort(),
                Some($crate::failpoint::FailAction::Error) => {
                    $on_error;
                }
                None => {}
            }
        }
    };
    ($name:literal) => {
        $crate::fail_point!($name, {})
    };
}

#[cfg(all(test, feature = "failpoints"))]
mod tests {
    use super::*;

    #[test]
    fn parses_actions_and_ignores_junk() {
        let t = imp::parse("a=abort; b = error;c=bogus;;d");
        assert_eq!(t.get("a"), Some(&FailAction::Abort));
        assert_eq!(t.get("b"), Some(&FailAction::Error));
        assert_eq!(t.len(), 2);
    }
}
