//! A small pool of large byte buffers, shared by one rank's user thread
//! and I/O thread.
//!
//! Why: a fresh 1 MiB or 16 MiB `Vec` per message is served by glibc
//! `mmap` (or a freshly grown heap) and faulted in page by page, then
//! unmapped again when freed: a 2-rank collectives job took ~224 000 page
//! faults where OpenMPI took ~41 500. With the pool, a payload buffer
//! that was used once (a received frame the user or the collective layer
//! handed back, an outgoing frame once it is written into TLS) is kept
//! and handed out again, already faulted in.
//!
//! Only buffers of at least [`MIN_POOLED`] bytes of capacity are pooled
//! (smaller ones are cheap for malloc). The pool holds at most
//! [`MAX_BUFFERS`] buffers and [`MAX_BYTES`] bytes of capacity; beyond
//! that the smallest buffers are freed. It never holds more than what was
//! in use at once before (buffers come back only after use), so it does
//! not raise a rank's peak memory; it keeps up to [`MAX_BYTES`] after a
//! burst of large messages.
//!
//! [`BufPool::take`] is only ever called with a length that was checked
//! (a frame header that passed `sperli_wire::header::check`, or the
//! length of a message the user passed in): the pool allocates nothing
//! by an unchecked length.

use std::sync::Mutex;

/// Buffers with less capacity than this are not pooled.
pub const MIN_POOLED: usize = 32 * 1024;
/// The most buffers the pool keeps.
pub const MAX_BUFFERS: usize = 32;
/// The most capacity (bytes) the pool keeps.
pub const MAX_BYTES: usize = 128 << 20;

/// A pool of large, empty byte buffers (see the module docs).
#[derive(Debug, Default)]
pub struct BufPool {
    free: Mutex<Vec<Vec<u8>>>,
}

impl BufPool {
    /// An empty pool.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty vector with capacity for at least `len` bytes: a pooled
    /// buffer when one fits (the smallest whose capacity is at least
    /// `len` and at most twice `len`), else a fresh allocation of exactly
    /// `len`. The caller must have checked `len`.
    pub fn take(&self, len: usize) -> Vec<u8> {
        if len < MIN_POOLED {
            return Vec::with_capacity(len);
        }
        let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
        let best = free
            .iter()
            .enumerate()
            .filter(|(_, b)| b.capacity() >= len && b.capacity() / 2 <= len)
            .min_by_key(|(_, b)| b.capacity())
            .map(|(i, _)| i);
        match best {
            Some(i) => free.swap_remove(i),
            None => {
                drop(free);
                Vec::with_capacity(len)
            }
        }
    }

    /// Gives a buffer back (its contents are dropped). Buffers below
    /// [`MIN_POOLED`] are freed; beyond the pool's limits the smallest
    /// buffers are freed.
    pub fn put(&self, mut buf: Vec<u8>) {
        if buf.capacity() < MIN_POOLED {
            return;
        }
        buf.clear();
        let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
        free.push(buf);
        let mut bytes: usize = free.iter().map(Vec::capacity).sum();
        while free.len() > MAX_BUFFERS || bytes > MAX_BYTES {
            let Some((i, _)) = free.iter().enumerate().min_by_key(|(_, b)| b.capacity()) else {
                break;
            };
            bytes -= free.swap_remove(i).capacity();
        }
    }

    /// (buffers, bytes of capacity) held now.
    pub fn held(&self) -> (usize, usize) {
        let free = self.free.lock().unwrap_or_else(|e| e.into_inner());
        (free.len(), free.iter().map(Vec::capacity).sum())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reuses_a_fitting_buffer() {
        let p = BufPool::new();
        let mut a = p.take(1 << 20);
        a.extend_from_slice(&[7; 100]);
        let ptr = a.as_ptr();
        p.put(a);
        assert_eq!(p.held(), (1, 1 << 20));
        let b = p.take(1 << 20);
        assert_eq!(b.as_ptr(), ptr, "the same allocation comes back");
        assert!(b.is_empty(), "handed out empty");
        assert_eq!(p.held(), (0, 0));
    }

    #[test]
    fn small_and_ill_fitting_buffers() {
        let p = BufPool::new();
        p.put(Vec::with_capacity(MIN_POOLED - 1));
        assert_eq!(p.held().0, 0, "small buffers are not kept");
        p.put(Vec::with_capacity(16 << 20));
        // Too big for 64 KiB (more than twice), too small for 32 MiB.
        assert_eq!(p.take(64 << 10).capacity(), 64 << 10);
        assert_eq!(p.take(32 << 20).capacity(), 32 << 20);
        assert_eq!(p.held().0, 1);
        assert_eq!(p.take(9 << 20).capacity(), 16 << 20);
    }

    #[test]
    fn limits_free_the_smallest() {
        let p = BufPool::new();
        for _ in 0..MAX_BUFFERS + 5 {
            p.put(Vec::with_capacity(MIN_POOLED));
        }
        assert_eq!(p.held().0, MAX_BUFFERS);
        for _ in 0..9 {
            p.put(Vec::with_capacity(16 << 20));
        }
        let (n, bytes) = p.held();
        assert!(bytes <= MAX_BYTES, "{bytes}");
        assert!(n <= MAX_BUFFERS);
        // The big ones stayed, the small ones went first.
        assert_eq!(bytes / (16 << 20), MAX_BYTES / (16 << 20));
    }
}
