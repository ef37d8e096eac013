//! Status values, stored as these strings: the inbox and outbox `status` columns and the
//! processing `outcome` hold exactly these spellings (ARCHITECTURE.md, "Storage and group commit").

use std::fmt;
use std::str::FromStr;

#[derive(Debug, thiserror::Error)]
#[error("unknown {kind} value")]
pub struct UnknownStatus {
    kind: &'static str,
}

macro_rules! string_enum {
    ($(#[$meta:meta])* $name:ident, $kind:literal, { $($variant:ident => $text:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name { $($variant),+ }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant),+];
            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl FromStr for $name {
            type Err = UnknownStatus;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                $(if s.eq_ignore_ascii_case($text) { return Ok($name::$variant); })+
                Err(UnknownStatus { kind: $kind })
            }
        }
    };
}

string_enum!(
    /// Lifecycle of an inbox row.
    InboxStatus, "inbox status", {
        Received => "RECEIVED",
        Processed => "PROCESSED",
        Failed => "FAILED",
        Ignored => "IGNORED",
        Held => "HELD",
    }
);

string_enum!(
    /// Where an inbox row came from: signed by the provider and received (`webhook`), or found
    /// through the provider's API by reconciliation (`reconciled`).
    EventSource, "event source", {
        Webhook => "webhook",
        Reconciled => "reconciled",
    }
);

string_enum!(
    /// How a PROCESSED inbox row ended.
    Outcome, "outcome", {
        Applied => "applied",
        Stale => "stale",
    }
);

string_enum!(
    /// Lifecycle of one delivery to one destination.
    OutboxStatus, "outbox status", {
        Pending => "PENDING",
        Delivered => "DELIVERED",
        Failed => "FAILED",
    }
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_every_value() {
        for s in InboxStatus::ALL {
            assert_eq!(s.as_str().parse::<InboxStatus>().unwrap(), *s);
        }
        for s in Outcome::ALL {
            assert_eq!(s.as_str().parse::<Outcome>().unwrap(), *s);
        }
        for s in EventSource::ALL {
            assert_eq!(s.as_str().parse::<EventSource>().unwrap(), *s);
        }
        for s in OutboxStatus::ALL {
            assert_eq!(s.as_str().parse::<OutboxStatus>().unwrap(), *s);
        }
        assert!("bogus".parse::<InboxStatus>().is_err());
    }
}
