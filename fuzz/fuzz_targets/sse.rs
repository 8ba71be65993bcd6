//! A server's SSE stream cut into arbitrary network chunks: the events must not depend on where
//! the chunks are cut, and the parser's buffer stays bounded.
#![no_main]
use inferscope_bench::sse::{SseEvent, SseParser, MAX_EVENT, MAX_LINE};
use libfuzzer_sys::fuzz_target;

fn run(stream: &[u8], cuts: &[usize]) -> (Result<(), String>, Vec<(bool, String)>) {
    let mut p = SseParser::new();
    let mut events = Vec::new();
    let mut sink = |e: SseEvent<'_>| match e {
        SseEvent::Data(d) => events.push((true, d.to_string())),
        SseEvent::Error(d) => events.push((false, d.to_string())),
    };
    let mut at = 0;
    let mut r = Ok(());
    for &c in cuts.iter().chain(std::iter::once(&stream.len())) {
        let c = c.clamp(at, stream.len());
        if let Err(e) = p.feed(&stream[at..c], &mut sink) {
            r = Err(e.to_string());
            break;
        }
        assert!(p.buffered() <= MAX_LINE + MAX_EVENT);
        at = c;
    }
    if r.is_ok() {
        r = p.finish(&mut sink).map_err(|e| e.to_string());
    }
    (r, events)
}

fuzz_target!(|data: &[u8]| {
    // First byte: how many cut points follow (each one byte, scaled); the rest is the stream.
    let Some((&n, rest)) = data.split_first() else { return };
    let n = usize::from(n % 8).min(rest.len());
    let (cut_bytes, stream) = rest.split_at(n);
    let mut cuts: Vec<usize> = cut_bytes
        .iter()
        .map(|&b| usize::from(b) * stream.len() / 256)
        .collect();
    cuts.sort_unstable();
    let whole = run(stream, &[]);
    let split = run(stream, &cuts);
    assert_eq!(whole, split, "events depend on chunk boundaries {cuts:?}");
});
