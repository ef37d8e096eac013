//! NATS subject templates: `webhooks.{provider}.{event_type}`.
//!
//! A template is dot-separated tokens; a token is either literal text or exactly one
//! placeholder (`{provider}`, `{endpoint}`, `{event_type}`, `{destination}`). Rendered values
//! are sanitised so an event type chosen by a sender can never add subject tokens or
//! wildcards: `.`, `*`, `>`, whitespace and control characters become `_`, and an empty value
//! becomes `_`. The stream's subject filter is the template with every placeholder as `*`.

/// A placeholder in a subject template.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placeholder {
    Provider,
    Endpoint,
    EventType,
    Destination,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Literal(String),
    Value(Placeholder),
}

/// A parsed, validated subject template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubjectTemplate {
    tokens: Vec<Token>,
}

/// Values for the placeholders.
#[derive(Debug, Clone, Copy)]
pub struct SubjectValues<'a> {
    pub provider: &'a str,
    pub endpoint: &'a str,
    pub event_type: Option<&'a str>,
    pub destination: &'a str,
}

impl SubjectTemplate {
    pub fn parse(template: &str) -> Result<SubjectTemplate, String> {
        if template.is_empty() {
            return Err("must not be empty".into());
        }
        let mut tokens = Vec::new();
        for part in template.split('.') {
            if part.is_empty() {
                return Err("has an empty token (`..`, or a leading or trailing `.`)".into());
            }
            if let Some(name) = part.strip_prefix('{').and_then(|p| p.strip_suffix('}')) {
                let p = match name {
                    "provider" => Placeholder::Provider,
                    "endpoint" => Placeholder::Endpoint,
                    "event_type" => Placeholder::EventType,
                    "destination" => Placeholder::Destination,
                    other => {
                        return Err(format!(
                            "unknown placeholder {{{other}}}; known: {{provider}}, {{endpoint}}, {{event_type}}, {{destination}}"
                        ));
                    }
                };
                tokens.push(Token::Value(p));
            } else if part
                .chars()
                .any(|c| matches!(c, '{' | '}' | '*' | '>') || c.is_whitespace() || c.is_control())
            {
                return Err(format!(
                    "token {part:?}: a placeholder must be a whole token, and literal tokens contain no wildcards or whitespace"
                ));
            } else {
                tokens.push(Token::Literal(part.to_owned()));
            }
        }
        Ok(SubjectTemplate { tokens })
    }

    /// The subject for one message; every placeholder renders to exactly one safe token.
    pub fn render(&self, v: &SubjectValues<'_>) -> String {
        self.tokens
            .iter()
            .map(|t| match t {
                Token::Literal(s) => s.clone(),
                Token::Value(p) => sanitize(match p {
                    Placeholder::Provider => v.provider,
                    Placeholder::Endpoint => v.endpoint,
                    Placeholder::EventType => v.event_type.unwrap_or(""),
                    Placeholder::Destination => v.destination,
                }),
            })
            .collect::<Vec<_>>()
            .join(".")
    }

    /// The stream's subject filter: placeholders as `*`.
    pub fn filter(&self) -> String {
        self.tokens
            .iter()
            .map(|t| match t {
                Token::Literal(s) => s.as_str(),
                Token::Value(_) => "*",
            })
            .collect::<Vec<_>>()
            .join(".")
    }
}

/// One subject token from untrusted text: no separators, wildcards, whitespace or controls;
/// at most 128 bytes; never empty.
pub fn sanitize(value: &str) -> String {
    let mut out: String = value
        .chars()
        .map(|c| {
            if matches!(c, '.' | '*' | '>') || c.is_whitespace() || c.is_control() {
                '_'
            } else {
                c
            }
        })
        .collect();
    if out.len() > 128 {
        let mut cut = 128;
        while !out.is_char_boundary(cut) {
            cut -= 1;
        }
        out.truncate(cut);
    }
    if out.is_empty() {
        out.push('_');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values<'a>(event_type: Option<&'a str>) -> SubjectValues<'a> {
        SubjectValues {
            provider: "stripe",
            endpoint: "ep-1",
            event_type,
            destination: "bus",
        }
    }

    #[test]
    fn renders_and_filters() {
        let t = SubjectTemplate::parse("webhooks.{provider}.{event_type}").unwrap();
        assert_eq!(
            t.render(&values(Some("payment_intent.succeeded"))),
            "webhooks.stripe.payment_intent_succeeded"
        );
        assert_eq!(t.filter(), "webhooks.*.*");
        assert_eq!(t.render(&values(None)), "webhooks.stripe._");
    }

    #[test]
    fn event_types_cannot_inject_tokens_or_wildcards() {
        let t = SubjectTemplate::parse("webhooks.{event_type}").unwrap();
        for evil in ["a.b", "*", ">", "a b", "x\r\ny", "a.>", "", "\t"] {
            let s = t.render(&values(Some(evil)));
            let tokens: Vec<&str> = s.split('.').collect();
            assert_eq!(tokens.len(), 2, "{evil:?} -> {s:?}");
            assert!(!tokens[1].is_empty());
            assert!(
                !tokens[1]
                    .chars()
                    .any(|c| matches!(c, '*' | '>') || c.is_whitespace() || c.is_control()),
                "{evil:?} -> {s:?}"
            );
        }
        assert_eq!(sanitize(&"é".repeat(100)).len(), 128);
    }

    #[test]
    fn bad_templates() {
        for bad in [
            "",
            "a..b",
            ".a",
            "a.",
            "a.{nope}",
            "a.x{provider}",
            "a.*",
            "a.>",
            "a b",
        ] {
            assert!(SubjectTemplate::parse(bad).is_err(), "{bad:?}");
        }
    }
}
