//! Reading a peer's body with a bound (the project's rule for network input, clippy.toml).

use bytes::{Bytes, BytesMut};
use http_body_util::BodyExt;

/// Reads `body` whole, failing once it passes `limit` bytes.
pub(crate) async fn read_bounded<B>(mut body: B, limit: usize) -> anyhow::Result<Bytes>
where
    B: hyper::body::Body<Data = Bytes> + Unpin,
    B::Error: std::error::Error + Send + Sync + 'static,
{
    let mut out = BytesMut::new();
    while let Some(frame) = body.frame().await {
        if let Ok(data) = frame?.into_data() {
            if out.len() + data.len() > limit {
                anyhow::bail!("body over {limit} bytes");
            }
            out.extend_from_slice(&data);
        }
    }
    Ok(out.freeze())
}
