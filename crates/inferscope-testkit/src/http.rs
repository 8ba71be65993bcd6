//! Just enough HTTP/1.1 and OpenAI SSE for the scripted server.

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// One request: method, path and body.
pub(crate) struct Request {
    pub method: String,
    pub path: String,
    pub body: String,
}

impl Request {
    /// Whether it asks the chat API (answered with `delta.content` / `message.content`).
    pub fn chat(&self) -> bool {
        self.path.contains("/chat/")
    }

    /// The request's `max_tokens`, if it has one.
    pub fn max_tokens(&self) -> Option<u32> {
        let v: serde_json::Value = serde_json::from_str(&self.body).ok()?;
        u32::try_from(v["max_tokens"].as_u64()?).ok()
    }
}

/// Read one request (headers and a `content-length` body); `None` at EOF.
pub(crate) async fn read_request(
    sock: &mut TcpStream,
    buf: &mut Vec<u8>,
) -> std::io::Result<Option<Request>> {
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_string();
            let mut lines = head.split("\r\n");
            let mut first = lines.next().unwrap_or("").split(' ');
            let method = first.next().unwrap_or("").to_string();
            let path = first.next().unwrap_or("").to_string();
            let len: usize = lines
                .filter_map(|l| l.split_once(':'))
                .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
                .and_then(|(_, v)| v.trim().parse().ok())
                .unwrap_or(0);
            let total = end + 4 + len;
            while buf.len() < total {
                if !fill(sock, buf).await? {
                    return Ok(None);
                }
            }
            let body = String::from_utf8_lossy(&buf[end + 4..total]).into_owned();
            buf.drain(..total);
            return Ok(Some(Request { method, path, body }));
        }
        if !fill(sock, buf).await? {
            return Ok(None);
        }
    }
}

async fn fill(sock: &mut TcpStream, buf: &mut Vec<u8>) -> std::io::Result<bool> {
    let mut tmp = [0u8; 8192];
    let n = sock.read(&mut tmp).await?;
    buf.extend_from_slice(&tmp[..n]);
    Ok(n > 0)
}

/// One chunk of a chunked-encoding body.
pub(crate) fn chunk(data: &[u8]) -> Vec<u8> {
    let mut v = format!("{:x}\r\n", data.len()).into_bytes();
    v.extend_from_slice(data);
    v.extend_from_slice(b"\r\n");
    v
}

/// Status line and headers of a streamed (chunked) SSE answer.
pub(crate) const SSE_HEAD: &[u8] =
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";

/// A complete response with a body (keep-alive).
pub(crate) async fn respond(
    sock: &mut TcpStream,
    status: &str,
    content_type: &str,
    body: &str,
) -> std::io::Result<()> {
    let resp = format!(
        "HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    sock.write_all(resp.as_bytes()).await
}

/// An SSE event (one chunk) carrying `text` as the completions or chat API sends it, or the
/// final event with `finish_reason` (and usage, when `usage` is `Some(completion_tokens)`).
pub(crate) fn event(
    id: &str,
    chat: bool,
    text: &str,
    finish: Option<&str>,
    usage: Option<u32>,
) -> Vec<u8> {
    let choice = if chat {
        serde_json::json!({"index": 0, "delta": {"content": text}, "finish_reason": finish})
    } else {
        serde_json::json!({"index": 0, "text": text, "finish_reason": finish})
    };
    let mut v = serde_json::json!({"id": id, "choices": [choice]});
    if let Some(n) = usage {
        v["usage"] = serde_json::json!({"prompt_tokens": 5, "completion_tokens": n});
    }
    chunk(format!("data: {v}\n\n").as_bytes())
}

/// The end of a stream: `[DONE]` and the last (empty) chunk.
pub(crate) fn done() -> Vec<u8> {
    let mut out = chunk(b"data: [DONE]\n\n");
    out.extend_from_slice(b"0\r\n\r\n");
    out
}

/// A whole (non-streamed) completion with this text and no usage.
pub(crate) fn whole(id: &str, chat: bool, text: &str) -> String {
    let choice = if chat {
        serde_json::json!({"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "length"})
    } else {
        serde_json::json!({"index": 0, "text": text, "finish_reason": "length"})
    };
    serde_json::json!({"id": id, "choices": [choice]}).to_string()
}
