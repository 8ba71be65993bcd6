//! A TCP stream whose writes fail after a stretch without progress: hyper has header read
//! timeouts but none for writes, and a client that never reads its response would otherwise
//! hold its connection slot for ever.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::Sleep;

/// `inner`, with writes (and flush/shutdown) failing with `TimedOut` after `limit` without
/// progress.
pub struct WriteTimeout {
    inner: TcpStream,
    limit: Duration,
    // Started when a write first stalls, dropped on progress.
    stalled: Option<Pin<Box<Sleep>>>,
}

impl WriteTimeout {
    /// Wrap a stream.
    pub fn new(inner: TcpStream, limit: Duration) -> Self {
        WriteTimeout {
            inner,
            limit,
            stalled: None,
        }
    }

    fn check<T>(&mut self, cx: &mut Context<'_>, r: Poll<io::Result<T>>) -> Poll<io::Result<T>> {
        if r.is_ready() {
            self.stalled = None;
            return r;
        }
        let limit = self.limit;
        let sleep = self
            .stalled
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        if sleep.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "client did not read the response",
            )));
        }
        Poll::Pending
    }
}

impl AsyncRead for WriteTimeout {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for WriteTimeout {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.check(cx, r)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.check(cx, r)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let r = Pin::new(&mut self.inner).poll_flush(cx);
        self.check(cx, r)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let r = Pin::new(&mut self.inner).poll_shutdown(cx);
        self.check(cx, r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_to_a_client_that_never_reads_fails_after_the_limit() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            // Connected, and never read from.
            let client = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
            let (server, _) = l.accept().await.unwrap();
            let limit = Duration::from_millis(300);
            let mut w = WriteTimeout::new(server, limit);
            let buf = vec![0u8; 1 << 16];
            let mut written = 0usize;
            let err = loop {
                let r = std::future::poll_fn(|cx| Pin::new(&mut w).poll_write(cx, &buf)).await;
                match r {
                    Ok(n) => written += n,
                    Err(e) => break e,
                }
            };
            assert_eq!(err.kind(), io::ErrorKind::TimedOut);
            // The kernel's buffers took something first: only the stall counted.
            assert!(written > 0);
            drop(client);
        });
    }
}
