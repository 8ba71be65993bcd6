//! A pickle bomb that the scan's estimate cannot see: one memoised frames list shared by 2,000
//! blocks, filled with 2,000 frames only after every block refers to it (memo GET, then
//! APPENDS). 14 KB of pickle would decode to 4 million frames; `decode` charges the copies it
//! makes and refuses it as a bomb (found in review; the file is assembled here opcode by opcode).

use inferscope_formats::torch_memory_snapshot::{PickleError, decode, scan};

fn key(out: &mut Vec<u8>, s: &str) {
    out.push(b'X'); // BINUNICODE
    out.extend_from_slice(&(s.len() as u32).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

fn late_fill(blocks: usize, frames: usize) -> Vec<u8> {
    let mut p = vec![0x80, 2]; // PROTO 2
    p.extend_from_slice(b"]q\x000"); // EMPTY_LIST, BINPUT 0, POP: the shared frames list, empty
    p.extend_from_slice(b"}("); // top dict, MARK
    key(&mut p, "segments");
    p.extend_from_slice(b"](}("); // segments list, MARK, segment dict, MARK
    key(&mut p, "blocks");
    p.extend_from_slice(b"]("); // blocks list, MARK
    for _ in 0..blocks {
        p.extend_from_slice(b"}(");
        key(&mut p, "frames");
        p.extend_from_slice(b"h\x00u"); // BINGET 0 (the shared list), SETITEMS
    }
    p.extend_from_slice(b"eueu"); // APPENDS blocks, SETITEMS segment, APPENDS segments, SETITEMS top
    p.extend_from_slice(b"h\x00("); // the shared list again, MARK: now fill it
    for _ in 0..frames {
        p.extend_from_slice(b"}(");
        key(&mut p, "filename");
        key(&mut p, "a.py");
        key(&mut p, "line");
        p.extend_from_slice(b"K\x01"); // BININT1 1
        key(&mut p, "name");
        key(&mut p, "f");
        p.push(b'u');
    }
    p.extend_from_slice(b"e0."); // APPENDS, POP, STOP: the top dict is the result
    p
}

#[test]
fn shared_list_filled_late_is_refused_as_a_bomb() {
    let p = late_fill(2000, 2000);
    assert!(p.len() < 200_000, "{} bytes", p.len());
    // The streaming estimate accepts it: the list was empty when the blocks referred to it.
    assert!(scan(&p[..], p.len() as u64).is_ok());
    let err = decode(&p[..], p.len() as u64).unwrap_err();
    assert!(matches!(err, PickleError::Bomb(_)), "{err}");
    // The same shape at a small size decodes: 3 blocks × 2 frames.
    let small = late_fill(3, 2);
    let snap = decode(&small[..], small.len() as u64).unwrap();
    let blocks = &snap.segments[0].blocks;
    assert_eq!(blocks.len(), 3);
    assert!(
        blocks
            .iter()
            .all(|b| b.frames.len() == 2 && b.frames[0].filename == "a.py")
    );
}
