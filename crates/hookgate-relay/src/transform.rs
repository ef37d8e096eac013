//! Destination transforms: a jq program (the `jaq` interpreter) that reshapes what one
//! destination is sent. Compiled once when the config loads; run at delivery on the verified
//! body, which is never changed in the store.
//!
//! Sandboxed: the program sees only its input. Nothing reads files, modules, the environment,
//! the clock or other inputs (`input`, `inputs`, `$ENV`, `import` are undefined; `env`, `now`,
//! `localtime`, `strflocaltime` and `halt` fail; `debug` and `stderr` print nothing), so the
//! same body always gives the same output. Bounded: every run gets [`MAX_STEPS`] evaluation
//! steps (each call, each value of `range`), [`TIME_LIMIT`] and a stack budget, all checked as
//! it runs — a `repeat`, an `until(false; .)`, a `[range(1e12)]` or a runaway recursion ends
//! with an error instead of holding a relay loop — and at most [`MAX_OUTPUT_BYTES`] of output.
//! A run happens on its own thread with a large stack, so no bound is ever met by a crash.
//!
//! Outputs: none or `null` → the delivery is skipped; one string → sent as `text/plain` (its
//! bytes as they are); any other single value → JSON (`application/json`); more than one →
//! an error. Errors never quote the payload: jq error messages embed values, so only their
//! kind is kept.

use std::cell::Cell;
use std::fmt;
use std::io::Write;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::Arc;
use std::time::{Duration, Instant};

use jaq_core::box_iter::box_once;
use jaq_core::data::{DataT, HasLut};
use jaq_core::load::{Arena, File, Loader};
use jaq_core::native::Fun;
use jaq_core::{Ctx, Cv, Error, Exn, Native, ValXs, Vars};
use jaq_json::Val;

/// Evaluation steps of one run: ample for reshaping an event (a Stripe event's reshape takes
/// a few hundred), small enough to end a runaway program quickly.
pub const MAX_STEPS: u64 = 2_000_000;
/// Wall-clock bound of one run, checked while it runs.
pub const TIME_LIMIT: Duration = Duration::from_secs(2);
/// Largest output sent.
pub const MAX_OUTPUT_BYTES: usize = 4 * 1024 * 1024;
/// Stack of the thread a run happens on, and how much of it the program may use; the rest is
/// for dropping and writing the values it built.
const THREAD_STACK: usize = 256 * 1024 * 1024;
const PROGRAM_STACK: usize = 32 * 1024 * 1024;

/// What to send instead of the stored body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transformed {
    /// The program gave `null` (or nothing): send nothing.
    Skip,
    Body {
        bytes: Vec<u8>,
        content_type: &'static str,
    },
}

/// Why a run failed, without any payload value in it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct TransformError(String);

/// A compiled program, shared by every delivery of its destination.
pub struct Transform {
    filter: jaq_core::Filter<Sandbox>,
    source: String,
}

impl fmt::Debug for Transform {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Transform")
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

/// Values and the run-time data every native filter sees: the step meter.
struct Sandbox;

impl DataT for Sandbox {
    type V<'a> = Val;
    type Data<'a> = Metered<'a>;
}

/// The interpreter clones its context at every call, so cloning is where steps are counted.
struct Metered<'a> {
    lut: &'a jaq_core::Lut<Sandbox>,
    meter: &'a Meter,
}

impl Clone for Metered<'_> {
    fn clone(&self) -> Self {
        self.meter.tick();
        Metered {
            lut: self.lut,
            meter: self.meter,
        }
    }
}

impl<'a> HasLut<'a, Sandbox> for Metered<'a> {
    fn lut(&self) -> &'a jaq_core::Lut<Sandbox> {
        self.lut
    }
}

/// Which bound a run met; carried by the unwind that stops it.
#[derive(Debug, Clone, Copy)]
enum Overrun {
    Steps,
    Time,
    Stack,
}

struct Meter {
    steps: Cell<u64>,
    deadline: Instant,
    /// The address of a local near the top of the run's stack.
    stack_top: usize,
}

impl Meter {
    fn tick(&self) {
        let steps = self.steps.get() + 1;
        self.steps.set(steps);
        if steps > MAX_STEPS {
            overrun(Overrun::Steps);
        }
        let here = 0u8;
        let depth = self
            .stack_top
            .saturating_sub(std::ptr::addr_of!(here) as usize);
        if depth > PROGRAM_STACK {
            overrun(Overrun::Stack);
        }
        if steps.is_multiple_of(1024) && Instant::now() > self.deadline {
            overrun(Overrun::Time);
        }
    }
}

/// Stops the run from inside the interpreter: no jq error can be raised from a clone, and
/// `resume_unwind` does not run the panic hook (nothing is printed); [`run`] catches it.
fn overrun(why: Overrun) -> ! {
    resume_unwind(Box::new(why))
}

/// `env`, `now`, `localtime`, `strflocaltime`, `halt`: not deterministic or not sandboxed.
fn unavailable<'a>(cv: Cv<'a, Sandbox>) -> ValXs<'a, Val> {
    drop(cv);
    box_once(Err(Exn::from(Error::str(
        "not available in a transform (it reads the environment or the clock, or exits)",
    ))))
}

/// `debug` and `stderr` print nothing (logs never carry payload values).
fn silent<'a>(cv: Cv<'a, Sandbox>) -> ValXs<'a, Val> {
    drop(cv);
    Box::new(std::iter::empty())
}

/// `range($from; $to; $by)` as jaq's own, each value a step (a `[range(1e12)]` would
/// otherwise build its array without a single call).
fn metered_range<'a>(mut cv: Cv<'a, Sandbox>) -> ValXs<'a, Val> {
    let meter = cv.0.data().meter;
    let by = cv.0.pop_var();
    let to = cv.0.pop_var();
    let from = cv.0.pop_var();
    let ascending = by.partial_cmp(&Val::from(0isize));
    let mut next = Some(from);
    Box::new(std::iter::from_fn(move || {
        meter.tick();
        let x = next.take()?;
        let more = match ascending {
            Some(std::cmp::Ordering::Greater) => x < to,
            Some(std::cmp::Ordering::Less) => x > to,
            _ => x != to,
        };
        if !more {
            return None;
        }
        match x.clone() + by.clone() {
            Ok(y) => next = Some(y),
            Err(e) => return Some(Err(Exn::from(e))),
        }
        Some(Ok(x))
    }))
}

/// The native filters of jaq's core, standard library and JSON values, with the ones that
/// reach outside the program replaced.
fn natives() -> Vec<Fun<Sandbox>> {
    let replace = |(name, args, native): Fun<Sandbox>| -> Fun<Sandbox> {
        let native = match name {
            "env" | "now" | "localtime" | "strflocaltime" | "halt" => {
                Native::<Sandbox>::new(unavailable)
            }
            "debug_empty" | "stderr_empty" => Native::<Sandbox>::new(silent),
            "range" => Native::<Sandbox>::new(metered_range),
            _ => native,
        };
        (name, args, native)
    };
    jaq_core::funs::<Sandbox>()
        .chain(jaq_std::funs::<Sandbox>())
        .chain(jaq_json::funs::<Sandbox>())
        .map(replace)
        .collect()
}

impl Transform {
    /// Parses and compiles `program`; the error says what is wrong and where (a byte offset
    /// into the program).
    pub fn compile(program: &str) -> Result<Transform, String> {
        let arena = Arena::default();
        let defs = jaq_core::defs()
            .chain(jaq_std::defs())
            .chain(jaq_json::defs());
        let offset = |at: &str| {
            (at.as_ptr() as usize)
                .checked_sub(program.as_ptr() as usize)
                .filter(|o| *o <= program.len())
        };
        let place = |at: &str| match offset(at) {
            Some(o) => format!("at byte {o}"),
            None => "in the program".to_owned(),
        };
        let modules = Loader::new(defs)
            .load(
                &arena,
                File {
                    code: program,
                    path: (),
                },
            )
            .map_err(|errors| {
                let mut out = Vec::new();
                for (_, e) in errors {
                    match e {
                        jaq_core::load::Error::Io(items) => {
                            for (path, why) in items {
                                out.push(format!("cannot import {path:?}: {why}"));
                            }
                        }
                        jaq_core::load::Error::Lex(items) => {
                            for (expect, at) in items {
                                out.push(format!("expected {} {}", expect.as_str(), place(at)));
                            }
                        }
                        jaq_core::load::Error::Parse(items) => {
                            for (expect, at) in items {
                                out.push(format!("expected {} {}", expect.as_str(), place(at)));
                            }
                        }
                    }
                }
                format!("jq syntax error: {}", out.join("; "))
            })?;
        let filter = jaq_core::Compiler::default()
            .with_funs(natives())
            .compile(modules)
            .map_err(|errors| {
                let out: Vec<String> = errors
                    .into_iter()
                    .flat_map(|(_, es)| es)
                    .map(|(name, undefined)| {
                        format!("undefined {} {name:?} {}", undefined.as_str(), place(name))
                    })
                    .collect();
                format!("jq error: {}", out.join("; "))
            })?;
        Ok(Transform {
            filter,
            source: program.to_owned(),
        })
    }

    /// The program as written (for `config check`).
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Runs the program on `body` on its own thread and waits for it (bounded by the run's own
    /// limits; see the module docs). A body that is not JSON is given as a string.
    pub async fn apply(self: &Arc<Self>, body: &[u8]) -> Result<Transformed, TransformError> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let this = Arc::clone(self);
        let body = body.to_vec();
        std::thread::Builder::new()
            .name("hookgate-transform".into())
            .stack_size(THREAD_STACK)
            .spawn(move || {
                let _ = tx.send(this.run(&body));
            })
            .map_err(|e| TransformError(format!("cannot start the transform: {e}")))?;
        // The run ends itself within its time limit; this bound only guards against a bug.
        match tokio::time::timeout(TIME_LIMIT * 4, rx).await {
            Ok(Ok(result)) => result,
            Ok(Err(_)) => Err(TransformError("the transform stopped unexpectedly".into())),
            Err(_) => Err(TransformError(format!(
                "the transform did not end within {} ms",
                (TIME_LIMIT * 4).as_millis()
            ))),
        }
    }

    /// One run on the calling thread (blocking).
    pub fn run(&self, body: &[u8]) -> Result<Transformed, TransformError> {
        let marker = 0u8;
        let meter = Meter {
            steps: Cell::new(0),
            deadline: Instant::now() + TIME_LIMIT,
            stack_top: std::ptr::addr_of!(marker) as usize,
        };
        let result = catch_unwind(AssertUnwindSafe(|| self.evaluate(body, &meter)));
        match result {
            Ok(result) => result,
            Err(cause) => Err(TransformError(match cause.downcast_ref::<Overrun>() {
                Some(Overrun::Steps) => {
                    format!("the transform exceeded {MAX_STEPS} evaluation steps")
                }
                Some(Overrun::Time) => format!(
                    "the transform exceeded its time limit ({} ms)",
                    TIME_LIMIT.as_millis()
                ),
                Some(Overrun::Stack) => {
                    "the transform recursed too deeply (stack limit)".to_owned()
                }
                // A panic of the interpreter itself: its message may quote values.
                None => "the transform failed inside the interpreter".to_owned(),
            })),
        }
    }

    fn evaluate(&self, body: &[u8], meter: &Meter) -> Result<Transformed, TransformError> {
        let input = parse_input(body);
        let ctx = Ctx::<Sandbox>::new(
            Metered {
                lut: &self.filter.lut,
                meter,
            },
            Vars::new([]),
        );
        let mut outputs = self.filter.id.run((ctx, input));
        let first = match outputs.next() {
            None => return Ok(Transformed::Skip),
            Some(first) => first.map_err(redacted)?,
        };
        if let Some(second) = outputs.next() {
            second.map_err(redacted)?;
            return Err(TransformError(
                "the transform gave more than one output (wrap it in [...] to send an array)"
                    .into(),
            ));
        }
        drop(outputs);
        encode(first)
    }
}

/// The body as the program's input: JSON (nesting bounded by the parser), else a string.
fn parse_input(body: &[u8]) -> Val {
    use serde::Deserialize;
    let mut de = serde_json::Deserializer::from_slice(body);
    match Val::deserialize(&mut de).and_then(|v| de.end().map(|()| v)) {
        Ok(v) => v,
        Err(_) => Val::utf8_str(body.to_vec()),
    }
}

/// The output as the bytes to send, with their content type.
fn encode(value: Val) -> Result<Transformed, TransformError> {
    let too_large = || {
        TransformError(format!(
            "the transform output exceeds {MAX_OUTPUT_BYTES} bytes"
        ))
    };
    match value {
        Val::Null => Ok(Transformed::Skip),
        Val::TStr(bytes) | Val::BStr(bytes) => {
            if bytes.len() > MAX_OUTPUT_BYTES {
                return Err(too_large());
            }
            Ok(Transformed::Body {
                bytes: bytes.to_vec(),
                content_type: "text/plain; charset=utf-8",
            })
        }
        other => {
            let mut out = Bounded(Vec::new());
            jaq_json::write::write(&mut out, &jaq_json::write::Pp::default(), 0, &other)
                .map_err(|_| too_large())?;
            // jaq writes what JSON cannot say (NaN, byte strings, non-string keys) in its own
            // notation: that is not sent as JSON.
            if serde_json::from_slice::<serde::de::IgnoredAny>(&out.0).is_err() {
                return Err(TransformError(
                    "the transform output is not valid JSON (NaN, infinity, byte strings or non-string object keys)"
                        .into(),
                ));
            }
            Ok(Transformed::Body {
                bytes: out.0,
                content_type: "application/json",
            })
        }
    }
}

/// A writer that refuses to grow past [`MAX_OUTPUT_BYTES`].
struct Bounded(Vec<u8>);

impl Write for Bounded {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.0.len() + buf.len() > MAX_OUTPUT_BYTES {
            return Err(std::io::Error::other("output limit"));
        }
        self.0.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A jq error without the values it quotes: only its kind is kept.
fn redacted(e: Exn<'_, Val>) -> TransformError {
    let Ok(error) = e.get_err() else {
        return TransformError("the transform stopped (break or halt outside a label)".into());
    };
    let message = error.to_string();
    const TYPES: &[&str] = &[
        "integer",
        "number",
        "string",
        "array",
        "object",
        "boolean",
        "iterable (array or object)",
        "rangeable (array or string)",
    ];
    let kind = if message.starts_with("cannot use ") {
        TYPES
            .iter()
            .find(|t| message.ends_with(&format!(" as {t}")))
            .map(|t| format!("a value cannot be used as {t}"))
            .unwrap_or_else(|| "a value of the wrong type".to_owned())
    } else if message.starts_with("cannot index ") {
        "a value cannot be indexed that way".to_owned()
    } else if message.starts_with("cannot calculate ") {
        "arithmetic on values of the wrong types".to_owned()
    } else if message.starts_with("invalid path expression") {
        "invalid path expression".to_owned()
    } else if message.starts_with("not available in a transform") {
        message
    } else {
        "error raised (its message is withheld: it may quote the payload)".to_owned()
    };
    TransformError(format!("transform error: {kind}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const STRIPE: &[u8] = include_bytes!("../../../examples/events/stripe.json");

    /// On a thread like the one `apply` starts (a test thread's stack is small).
    fn run(program: &str, body: &[u8]) -> Result<Transformed, TransformError> {
        let t = Transform::compile(program).unwrap_or_else(|e| panic!("{program}: {e}"));
        let body = body.to_vec();
        std::thread::Builder::new()
            .stack_size(THREAD_STACK)
            .spawn(move || t.run(&body))
            .unwrap()
            .join()
            .unwrap()
    }

    fn json(program: &str, body: &[u8]) -> serde_json::Value {
        match run(program, body) {
            Ok(Transformed::Body {
                bytes,
                content_type: "application/json",
            }) => serde_json::from_slice(&bytes).unwrap(),
            other => panic!("{program}: {other:?}"),
        }
    }

    #[test]
    fn reshapes_a_stripe_event() {
        let out = json(
            "{id, type, amount: .data.object.amount, currency: (.data.object.currency | ascii_upcase)}",
            STRIPE,
        );
        assert_eq!(
            out,
            serde_json::json!({"id": "evt_1QdevExample0001", "type": "payment_intent.succeeded",
                               "amount": 2000, "currency": "USD"})
        );
        assert_eq!(
            json(".", STRIPE),
            serde_json::from_slice::<serde_json::Value>(STRIPE).unwrap()
        );
    }

    /// The worked examples of docs/destinations.md ("Transforms"), as printed there.
    #[test]
    fn the_documented_examples() {
        let billing = r#"
{ event: .id, type: .type, object: .data.object.id,
  amount: .data.object.amount, currency: (.data.object.currency | ascii_upcase) }
"#;
        assert_eq!(
            run(billing, STRIPE),
            Ok(Transformed::Body {
                bytes: br#"{"event":"evt_1QdevExample0001","type":"payment_intent.succeeded","object":"pi_3QdevExample0001","amount":2000,"currency":"USD"}"#.to_vec(),
                content_type: "application/json",
            })
        );
        let notify = r#"if .data.object.amount >= 100000 then "\(.type): \(.data.object.amount / 100 | floor) \(.data.object.currency)" else null end"#;
        assert_eq!(run(notify, STRIPE), Ok(Transformed::Skip));
        let large = String::from_utf8(STRIPE.to_vec())
            .unwrap()
            .replace("\"amount\": 2000", "\"amount\": 150000");
        assert_eq!(
            run(notify, large.as_bytes()),
            Ok(Transformed::Body {
                bytes: b"payment_intent.succeeded: 1500 usd".to_vec(),
                content_type: "text/plain; charset=utf-8",
            })
        );
    }

    #[test]
    fn null_and_empty_skip_strings_are_text() {
        assert_eq!(run("null", STRIPE), Ok(Transformed::Skip));
        assert_eq!(run("empty", STRIPE), Ok(Transformed::Skip));
        assert_eq!(
            run("if .data.object.amount > 5000 then . else null end", STRIPE),
            Ok(Transformed::Skip)
        );
        assert_eq!(
            run(r#""\(.type) \(.data.object.amount)""#, STRIPE),
            Ok(Transformed::Body {
                bytes: b"payment_intent.succeeded 2000".to_vec(),
                content_type: "text/plain; charset=utf-8",
            })
        );
        // A body that is not JSON is a string.
        assert_eq!(
            run("split(\"&\") | length", b"a=1&b=2"),
            Ok(Transformed::Body {
                bytes: b"2".to_vec(),
                content_type: "application/json",
            })
        );
    }

    #[test]
    fn several_outputs_and_errors_fail_without_quoting_the_payload() {
        let e = run(".data.object.amount, .id", STRIPE).unwrap_err();
        assert!(e.0.contains("more than one output"), "{e}");
        for (program, kind) in [
            (".data.object.currency + 1", "arithmetic"),
            (".data.object.currency | .[0]", "indexed"),
            (".data.object.currency | keys", "cannot be used as"),
            ("error(.data.object.id)", "withheld"),
            (".id | tonumber", "withheld"),
        ] {
            let e = run(program, STRIPE).unwrap_err().0;
            assert!(e.contains(kind), "{program}: {e}");
            for secret in ["usd", "pi_3QdevExample0001", "evt_1QdevExample0001"] {
                assert!(!e.contains(secret), "{program} quoted the payload: {e}");
            }
        }
    }

    #[test]
    fn sandboxed() {
        for program in [
            "env",
            "$ENV",
            "input",
            "inputs",
            "now",
            "import \"x\" as x; 1",
            "halt",
        ] {
            let outcome = Transform::compile(program).map(|_| run(program, b"{}"));
            assert!(!matches!(outcome, Ok(Ok(_))), "{program} ran: {outcome:?}");
        }
        // `debug` passes its input on and prints nothing.
        assert_eq!(json("debug | .a", br#"{"a": 1}"#), serde_json::json!(1));
    }

    #[test]
    fn runaway_programs_end_with_an_error() {
        for program in [
            "[repeat(1)]",
            "until(false; .)",
            "[range(1e12)]",
            "last(range(1e12))",
            "def f: 1 + f; f",
            "def f: [f]; f",
            "reduce range(1e9) as $i (0; [.])",
            "[limit(1e9; repeat(.))] | length",
        ] {
            let started = Instant::now();
            let e = run(program, b"{}").unwrap_err();
            assert!(
                started.elapsed() < TIME_LIMIT * 3,
                "{program} took {:?}",
                started.elapsed()
            );
            assert!(
                e.0.starts_with("the transform exceeded") || e.0.contains("too deeply"),
                "{program}: {e}"
            );
        }
    }

    #[test]
    fn outputs_are_bounded_and_json() {
        let e = run("\"0123456789abcdef\" * 300000", b"{}").unwrap_err();
        assert!(e.0.contains("exceeds"), "{e}");
        let e = run("nan", b"{}").unwrap_err();
        assert!(e.0.contains("not valid JSON"), "{e}");
    }

    #[test]
    fn syntax_errors_say_where() {
        let e = Transform::compile("{id: .id,, }").unwrap_err();
        assert!(e.starts_with("jq syntax error: expected"), "{e}");
        assert!(e.contains("at byte"), "{e}");
        let e = Transform::compile("nosuchfunction(1)").unwrap_err();
        assert!(
            e.contains("undefined filter") && e.contains("nosuchfunction"),
            "{e}"
        );
    }

    #[tokio::test]
    async fn applies_on_its_own_thread() {
        let t = Arc::new(Transform::compile("{amount: .data.object.amount}").unwrap());
        assert_eq!(
            t.apply(STRIPE).await,
            Ok(Transformed::Body {
                bytes: br#"{"amount":2000}"#.to_vec(),
                content_type: "application/json",
            })
        );
    }
}
