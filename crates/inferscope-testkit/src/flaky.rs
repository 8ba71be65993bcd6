//! [`Mode::Flaky`]: a healthy server that closes keep-alive connections at the worst moments.

use crate::Shared;
use crate::http::{SSE_HEAD, done, event, read_request};
use crate::modes::{Mode, get};
use std::sync::atomic::Ordering;
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

/// splitmix64: the flaky server's per-connection randomness, reproducible per seed.
fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Serve one connection of [`Mode::Flaky`]. A connection is only ever closed between requests
/// (before reading the next one: the request that raced the close was never processed) or, for
/// a cut, after the response started.
pub(crate) async fn serve(
    mut sock: TcpStream,
    mode: Mode,
    shared: Shared,
    seed: u64,
) -> std::io::Result<()> {
    let Mode::Flaky {
        tokens,
        idle_max,
        max_uses,
        cut_every,
    } = mode
    else {
        return Ok(());
    };
    let truth = shared.truth.clone();
    let mut rng = seed.wrapping_mul(0x2545_F491_4F6C_DD1D) ^ 0x1234_5678;
    let uses = 1 + splitmix(&mut rng) % u64::from(max_uses.max(1));
    let mut buf = Vec::new();
    let mut served = 0u64;
    loop {
        let req = if served == 0 {
            read_request(&mut sock, &mut buf).await?
        } else {
            let idle_ns = u64::try_from(idle_max.as_nanos())
                .unwrap_or(u64::MAX)
                .max(1);
            let idle = Duration::from_nanos(splitmix(&mut rng) % idle_ns);
            tokio::select! {
                r = read_request(&mut sock, &mut buf) => r?,
                () = tokio::time::sleep(idle) => {
                    truth.keepalive_closes.fetch_add(1, Ordering::Relaxed);
                    return Ok(());
                }
            }
        };
        let Some(req) = req else {
            return Ok(());
        };
        if req.method == "GET" {
            get(&mut sock, &req, &shared).await?;
            continue;
        }
        let n = truth.requests.fetch_add(1, Ordering::Relaxed) + 1;
        let id = format!("cmpl-{}", shared.next_id.fetch_add(1, Ordering::Relaxed));
        let chat = req.chat();
        let mut out = SSE_HEAD.to_vec();
        out.extend(event(&id, chat, " tok0", None, None));
        if cut_every > 0 && n.is_multiple_of(cut_every) {
            sock.write_all(&out).await?;
            sock.flush().await?;
            truth.cut.fetch_add(1, Ordering::Relaxed);
            return Ok(());
        }
        for i in 1..tokens {
            out.extend(event(&id, chat, &format!(" tok{i}"), None, None));
        }
        out.extend(event(&id, chat, "", Some("length"), Some(tokens)));
        out.extend(done());
        sock.write_all(&out).await?;
        served += 1;
        if served >= uses {
            // Its last response ended normally, without `Connection: close`. The close then comes
            // the moment the next request arrives, unread (a reset): the outcome of the client
            // losing the race between the server's idle close and its reuse, forced here instead
            // of waited for. The request was never processed.
            let _ = sock.peek(&mut [0u8; 1]).await;
            truth.keepalive_closes.fetch_add(1, Ordering::Relaxed);
            return Ok(());
        }
    }
}
