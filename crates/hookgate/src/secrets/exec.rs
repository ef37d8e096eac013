//! `exec:` secrets: a command run without a shell (how any vault CLI plugs in). Its standard
//! output is the secret; it has `[secrets] exec_timeout_ms` to finish, is killed after that,
//! and a non-zero exit is a failure. Its standard error may echo the secret, so only its
//! length is ever reported.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::AsyncReadExt;

use super::{MAX_SECRET_BYTES, SecretError};

/// What of a failing command's standard error is kept (only its length is reported).
const STDERR_LIMIT: u64 = 64 * 1024;

pub(super) async fn run(
    program: &Path,
    args: &[String],
    timeout: Duration,
) -> Result<String, SecretError> {
    let fail = |reason: String| SecretError::Exec {
        program: program.to_owned(),
        reason,
    };
    let mut child = tokio::process::Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| fail(format!("cannot start: {}", e.kind())))?;
    let mut stdout = child.stdout.take().expect("piped");
    let mut stderr = child.stderr.take().expect("piped");
    let outcome = tokio::time::timeout(timeout, async {
        let mut out = zeroize::Zeroizing::new(Vec::new());
        let mut err = zeroize::Zeroizing::new(Vec::new());
        let mut bounded_out = (&mut stdout).take(MAX_SECRET_BYTES as u64 + 1);
        let mut bounded_err = (&mut stderr).take(STDERR_LIMIT);
        let (read_out, _) = tokio::join!(
            bounded_out.read_to_end(&mut out),
            bounded_err.read_to_end(&mut err)
        );
        read_out.map_err(|e| fail(format!("reading its output: {}", e.kind())))?;
        if out.len() > MAX_SECRET_BYTES {
            return Err(fail("printed more than 64 KiB".into()));
        }
        let status = child
            .wait()
            .await
            .map_err(|e| fail(format!("waiting for it: {}", e.kind())))?;
        Ok((status, out, err.len()))
    })
    .await;
    let (status, out, stderr_len) = match outcome {
        Ok(result) => result?,
        Err(_) => {
            // kill_on_drop covers early returns; here kill and reap before reporting.
            let _ = child.start_kill();
            let _ = tokio::time::timeout(Duration::from_secs(1), child.wait()).await;
            return Err(fail(format!(
                "did not finish within {} ms (secrets.exec_timeout_ms): killed",
                timeout.as_millis()
            )));
        }
    };
    if !status.success() {
        let code = status
            .code()
            .map_or_else(|| "a signal".to_owned(), |c| format!("status {c}"));
        return Err(fail(format!(
            "exited with {code} ({stderr_len} bytes on standard error, not shown)"
        )));
    }
    let text = std::str::from_utf8(&out).map_err(|_| fail("output is not UTF-8".into()))?;
    Ok(text.trim_end_matches(['\n', '\r']).to_owned())
}
