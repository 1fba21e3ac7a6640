//! Shared test support: a reader that hands out a few bytes per `read`, and item rendering.

#![allow(dead_code, unreachable_pub)]

use std::io::{self, Read};

use session_jsonl::Item;

/// Hands out at most `chunk` bytes per `read` call (lines straddle every buffer edge).
pub struct Chunked<R> {
    pub inner: R,
    pub chunk: usize,
}

impl<R: Read> Read for Chunked<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = buf.len().min(self.chunk);
        self.inner.read(&mut buf[..n])
    }
}

/// One line of text per item, stable across API changes of the item types.
pub fn render(item: &Item) -> String {
    match item {
        Item::Record(r) => {
            let mut s = format!(
                "record line={} offset={} len={} type={}",
                r.line,
                r.offset,
                r.len,
                r.parsed.value.kind()
            );
            if r.parsed.was_repaired() {
                s.push_str(" repaired");
            }
            s
        }
        Item::Damage(d) => {
            let mut s = format!(
                "damage {} line={} offset={} len={}",
                d.kind, d.line, d.offset, d.len
            );
            if let Some(raw) = &d.raw {
                s.push_str(" raw=");
                s.push_str(raw);
            }
            s
        }
    }
}
