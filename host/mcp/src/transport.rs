//! The size of one MCP message, the same on every transport, and the stdio transport that
//! holds to it.
//!
//! [`MAX_MESSAGE_BYTES`] is derived from the documented cap on `skill_run`'s inputs
//! ([`MAX_INPUT_BYTES`], counted decoded): the inputs as base64 plus room for the rest of
//! the message, so a request under the cap is never too long to be read. A message over
//! it is answered, never dropped: a JSON-RPC error `-32600` naming the limit in bytes and
//! what to do instead ([`too_long`]), with the request's `id` when the bytes read hold one
//! at the top level of the message, `null` otherwise ([`IdScan`]). Over stdio
//! ([`LineTransport`]) the rest of the line is read and dropped without being held, and
//! the session answers what comes next; over HTTP (`http.rs`) the body is refused with a
//! 413 whose body is that error, by its `Content-Length` before a byte is read, or as
//! soon as what was read passes the limit.

use std::sync::Arc;

use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::service::RoleServer;
use serde_json::{Value, json};
use skillhost_core::run::MAX_INPUT_BYTES;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};

/// The longest message any transport reads, in bytes: the base64 of [`MAX_INPUT_BYTES`]
/// (21.3 MiB for 16 MiB) and 2.7 MiB for the rest (command, paths, JSON framing), 24 MiB
/// in all.
pub const MAX_MESSAGE_BYTES: usize = 24 << 20;

/// Room left in a message beside its inputs as base64.
const MESSAGE_ROOM: usize = 2 << 20;

const _: () = assert!(MAX_MESSAGE_BYTES >= (MAX_INPUT_BYTES as usize).div_ceil(3) * 4 + MESSAGE_ROOM);

/// The JSON-RPC error code of a message over the limit (Invalid Request).
pub(crate) const TOO_LONG_CODE: i64 = -32600;

/// The text of the error answering a message over [`MAX_MESSAGE_BYTES`]; `read` says how
/// many bytes it had, or at least had, when known.
pub(crate) fn too_long(read: Option<(usize, bool)>) -> String {
    let size = match read {
        Some((n, true)) => format!(" ({n} bytes)"),
        Some((n, false)) => format!(" (at least {n} bytes)"),
        None => String::new(),
    };
    format!(
        "message too long{size}: skillhost reads at most {MAX_MESSAGE_BYTES} bytes as one message; skill_run's inputs may hold {} MiB in all \
         (counted decoded, which fits as base64), so send fewer or smaller inputs, or put larger files in a host directory granted with \
         `skillhost policy SKILL --path DIR`",
        MAX_INPUT_BYTES >> 20
    )
}

/// The JSON-RPC error answering a message over the limit, as a JSON value.
pub(crate) fn too_long_error(id: Value, read: Option<(usize, bool)>) -> Value {
    json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {"code": TOO_LONG_CODE, "message": too_long(read), "data": {"max_message_bytes": MAX_MESSAGE_BYTES}},
    })
}

/// Finds the top-level `"id"` of a JSON-RPC message read piece by piece, holding only the
/// id's own bytes: the megabytes around it (and any `"id"` inside a string or a nested
/// object) are passed over.
#[derive(Default)]
pub(crate) struct IdScan {
    /// How deep in objects and arrays the next byte is.
    depth: usize,
    /// Inside a string.
    string: bool,
    /// Inside a string, after a backslash.
    escaped: bool,
    /// Where the top-level object stands (at depth 1).
    at: At,
    /// The first bytes of the key of the value at hand (three are enough to tell `id`).
    key: Vec<u8>,
    /// The raw bytes of an `id` value being read (dropped past [`IdScan::MAX_ID`]).
    value: Option<Vec<u8>>,
    /// The raw bytes of the last whole `id` value.
    id: Option<Vec<u8>>,
}

#[derive(Default, Clone, Copy, PartialEq, Eq)]
enum At {
    /// Not in a top-level object (before it, or a batch).
    #[default]
    Outside,
    Key,
    InKey,
    Colon,
    Value,
    InValue,
    Comma,
}

impl IdScan {
    /// The longest id kept, in bytes.
    const MAX_ID: usize = 256;

    /// Read `bytes`, the next bytes of the message.
    pub(crate) fn feed(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.byte(b);
        }
    }

    /// The id found (a number or a string), `null` when none was.
    pub(crate) fn id(&self) -> Value {
        self.id
            .as_deref()
            .and_then(|raw| serde_json::from_slice::<Value>(raw).ok())
            .filter(|id| id.is_string() || id.is_i64() || id.is_u64())
            .unwrap_or(Value::Null)
    }

    fn byte(&mut self, b: u8) {
        let top = self.depth == 1;
        if self.string {
            if self.escaped {
                self.escaped = false;
            } else if b == b'\\' {
                self.escaped = true;
            } else if b == b'"' {
                self.string = false;
            }
            match self.at {
                At::InKey if top && self.string && self.key.len() < 3 => self.key.push(b),
                At::InKey if top && !self.string => self.at = At::Colon,
                At::InValue if top => {
                    self.push(b);
                    if !self.string {
                        self.end_value();
                    }
                }
                _ => {}
            }
            return;
        }
        if top && self.at == At::InValue {
            // A number, `true`, `false` or `null` ends at a delimiter or a space.
            if !(matches!(b, b',' | b'}' | b']') || b.is_ascii_whitespace()) {
                self.push(b);
                return;
            }
            self.end_value();
        }
        match b {
            b'"' => {
                self.string = true;
                match self.at {
                    At::Key if top => {
                        self.key.clear();
                        self.at = At::InKey;
                    }
                    At::Value if top => self.start_value(b),
                    _ => {}
                }
            }
            b'{' | b'[' => {
                if self.depth == 0 {
                    self.at = if b == b'{' { At::Key } else { At::Outside };
                } else if top && self.at == At::Value {
                    // An object or array is no id.
                    self.at = At::Comma;
                }
                self.depth += 1;
            }
            b'}' | b']' => {
                self.depth = self.depth.saturating_sub(1);
                if self.depth == 1 {
                    self.at = At::Comma;
                } else if self.depth == 0 {
                    self.at = At::Outside;
                }
            }
            b':' if top && self.at == At::Colon => self.at = At::Value,
            b',' if top && self.at != At::Outside => self.at = At::Key,
            _ if b.is_ascii_whitespace() => {}
            _ if top && self.at == At::Value => self.start_value(b),
            _ => {}
        }
    }

    fn start_value(&mut self, first: u8) {
        self.value = (self.key == b"id").then(|| vec![first]);
        self.at = At::InValue;
    }

    fn push(&mut self, b: u8) {
        match &mut self.value {
            Some(value) if value.len() < Self::MAX_ID => value.push(b),
            Some(_) => self.value = None,
            None => {}
        }
    }

    fn end_value(&mut self) {
        if let Some(value) = self.value.take() {
            self.id = Some(value);
        }
        self.at = At::Comma;
    }
}

/// MCP over a byte stream as newline-delimited JSON (stdio), reading at most
/// [`MAX_MESSAGE_BYTES`] of a line: a longer one is read to its end without being held,
/// answered with the error of [`too_long`], and the session goes on. rmcp's own stdio
/// transport drops such a line with a log line, and its sender waits for ever.
pub struct LineTransport<R, W> {
    read: BufReader<R>,
    /// The line read so far.
    line: Vec<u8>,
    /// A line over the limit being passed over: its bytes so far and its id.
    over: Option<(usize, IdScan)>,
    write: Arc<tokio::sync::Mutex<Option<W>>>,
}

impl<R: AsyncRead, W> LineTransport<R, W> {
    /// Read messages from `read`, write them to `write`.
    pub fn new(read: R, write: W) -> Self {
        Self {
            read: BufReader::with_capacity(64 << 10, read),
            line: Vec::new(),
            over: None,
            write: Arc::new(tokio::sync::Mutex::new(Some(write))),
        }
    }
}

impl<R, W> LineTransport<R, W>
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    /// Write `line` (a whole message and its newline) in a task of its own, so that a
    /// cancelled `receive` never leaves half a line written.
    fn answer(&self, message: &Value) {
        let mut line = message.to_string().into_bytes();
        line.push(b'\n');
        let write = self.write.clone();
        tokio::spawn(async move {
            if let Err(error) = write_line(&write, &line).await {
                tracing::debug!(%error, "cannot answer a message over the limit");
            }
        });
    }

    /// Answer the line passed over.
    fn refuse(&self, read: usize, scan: &IdScan) {
        let id = scan.id();
        tracing::warn!(bytes = read, limit = MAX_MESSAGE_BYTES, %id, "refused an MCP message over the size limit");
        self.answer(&too_long_error(id, Some((read, true))));
    }

    /// What a whole line holds: a message, or `None` when it is to be skipped (answered
    /// already when it deserves an answer).
    fn parse(&self, line: &[u8]) -> Option<ClientJsonRpcMessage> {
        let line = line.strip_suffix(b"\n").unwrap_or(line);
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
        if line.is_empty() {
            return None;
        }
        let error = match serde_json::from_slice::<ClientJsonRpcMessage>(line) {
            Ok(message) => return Some(message),
            Err(error) => error,
        };
        // Not JSON: nothing to answer to (as rmcp and the other SDKs, against error storms).
        let Ok(value) = serde_json::from_slice::<Value>(line) else {
            tracing::debug!(%error, "ignoring an unparsable message");
            return None;
        };
        // A notification is never answered (and a client's unknown ones are ignored).
        let Some(id) = value.get("id").cloned() else {
            tracing::debug!(%error, "ignoring a notification that is not MCP's");
            return None;
        };
        let id = if id.is_string() || id.is_i64() || id.is_u64() { id } else { Value::Null };
        self.answer(&json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32600, "message": format!("invalid request: {error}")}}));
        None
    }
}

async fn write_line<W: AsyncWrite + Unpin>(write: &tokio::sync::Mutex<Option<W>>, line: &[u8]) -> std::io::Result<()> {
    let mut write = write.lock().await;
    let write = write.as_mut().ok_or_else(|| std::io::Error::new(std::io::ErrorKind::NotConnected, "the transport is closed"))?;
    write.write_all(line).await?;
    write.flush().await
}

impl<R, W> rmcp::transport::Transport<RoleServer> for LineTransport<R, W>
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    type Error = std::io::Error;

    fn send(&mut self, item: ServerJsonRpcMessage) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let line = serde_json::to_vec(&item).map(|mut line| {
            line.push(b'\n');
            line
        });
        let write = self.write.clone();
        async move { write_line(&write, &line.map_err(std::io::Error::other)?).await }
    }

    // Cancel-safe: `fill_buf` is the only await, and what it returned is taken into
    // `self` before the next one, so a dropped call loses nothing.
    async fn receive(&mut self) -> Option<ClientJsonRpcMessage> {
        loop {
            let available = match self.read.fill_buf().await {
                Ok(available) => available,
                Err(error) => {
                    tracing::warn!(%error, "cannot read the MCP client's messages");
                    return None;
                }
            };
            if available.is_empty() {
                // The client is gone mid-line: answer it all the same.
                if let Some((read, scan)) = self.over.take() {
                    self.refuse(read, &scan);
                }
                return None;
            }
            let newline = available.iter().position(|&b| b == b'\n');
            let take = newline.map_or(available.len(), |at| at + 1);
            let content = take - usize::from(newline.is_some());
            if let Some((read, scan)) = &mut self.over {
                scan.feed(&available[..content]);
                *read += content;
            } else if self.line.len() + content > MAX_MESSAGE_BYTES {
                let mut scan = IdScan::default();
                scan.feed(&self.line);
                scan.feed(&available[..content]);
                self.over = Some((self.line.len() + content, scan));
                self.line = Vec::new();
            } else {
                self.line.extend_from_slice(&available[..take]);
            }
            self.read.consume(take);
            if newline.is_none() {
                continue;
            }
            if let Some((read, scan)) = self.over.take() {
                self.refuse(read, &scan);
                continue;
            }
            let message = self.parse(&self.line);
            // A large message's buffer goes back; a small one's is kept for the next.
            if self.line.capacity() > 1 << 20 {
                self.line = Vec::new();
            } else {
                self.line.clear();
            }
            if message.is_some() {
                return message;
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        let mut write = self.write.lock().await;
        if let Some(mut write) = write.take() {
            write.shutdown().await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id_of(message: &str) -> Value {
        let mut scan = IdScan::default();
        // Piece by piece, as a stream comes.
        for piece in message.as_bytes().chunks(3) {
            scan.feed(piece);
        }
        scan.id()
    }

    #[test]
    fn the_top_level_id_is_found_wherever_it_stands() {
        assert_eq!(id_of(r#"{"jsonrpc":"2.0","id":7,"method":"x"}"#), json!(7));
        assert_eq!(id_of(r#"{"jsonrpc":"2.0","method":"x","params":{"id":1,"a":"\"id\": 3, "},"id":"late-8"}"#), json!("late-8"));
        assert_eq!(id_of(r#"{ "id" : "a\"b" , "method":"x"}"#), json!("a\"b"));
        assert_eq!(id_of(r#"{"method":"x","params":{"id":1}}"#), Value::Null, "a nested id is not the message's");
        assert_eq!(id_of(r#"{"method":"x","params":"\"id\":4"}"#), Value::Null, "nor one inside a string");
        assert_eq!(id_of(r#"{"idx":1,"id":{"a":1}}"#), Value::Null, "an object is no id");
        assert_eq!(id_of(r#"[{"id":1}]"#), Value::Null);
        assert_eq!(id_of(r#"{"method":"x","params":{"text":"aaaa"#), Value::Null, "cut short");
        assert_eq!(id_of(&format!(r#"{{"id":"{}"}}"#, "a".repeat(300))), Value::Null, "too long to keep");
    }

    #[test]
    fn the_limit_holds_a_run_under_the_input_cap() {
        let message = too_long(Some((MAX_MESSAGE_BYTES + 1, true)));
        assert!(message.contains(&MAX_MESSAGE_BYTES.to_string()) && message.contains("16 MiB") && message.contains("--path"), "{message}");
    }
}
