//! The one module that needs `unsafe` (docs/mailbox.md §6): the shared
//! mapping of a mailbox file, atomics on its header words, bulk copies in
//! and out of its regions, and futex wait/wake on its state words.
//!
//! The mapping is a [`memmap2::MmapRaw`]: it maps the file `MAP_SHARED`
//! and hands out only a raw pointer, never a Rust reference to memory
//! another process writes. Every access goes through that pointer:
//!
//! - header fields as `AtomicU32`/`AtomicU64` (the other process is outside
//!   Rust's model, so a plain reference to its bytes would be unsound);
//! - region bytes with one `copy_nonoverlapping` into or out of private
//!   memory, in the state that gives this side the region (docs/mailbox.md
//!   §3.3), after an acquire load of the state word that published it.
//!
//! A peer that breaks the ownership rule can only make the copy read bytes
//! it is changing: `u8` has no invalid values, the copy goes to private
//! memory, and everything copied is checked before it is used.
//!
//! Futex wait and wake come from rustix, whose functions take
//! `&AtomicU32`: they need no `unsafe` here. The futexes are shared (no
//! `FUTEX_PRIVATE_FLAG`): waiter and waker are different processes.
#![allow(unsafe_code)]

use std::fs::File;
use std::io;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use memmap2::{MmapOptions, MmapRaw};
use rustix::thread::futex;

use crate::layout::{HEADER_LEN, LAYOUT_SIZE};

/// A mailbox file mapped shared, read-write, all 33554688 bytes.
#[derive(Debug)]
pub struct Mapping {
    map: MmapRaw,
}

impl Mapping {
    /// Maps `file` (which must be at least [`LAYOUT_SIZE`] bytes long; the
    /// attach paths check its length first).
    pub fn map(file: &File) -> io::Result<Self> {
        let map = MmapOptions::new().len(LAYOUT_SIZE as usize).map_raw(file)?;
        Ok(Self { map })
    }

    fn word32(&self, off: usize) -> &AtomicU32 {
        assert!(off % 4 == 0 && off + 4 <= HEADER_LEN, "header word {off}");
        // SAFETY: `off` is a 4-aligned offset inside the 256-byte header
        // (asserted), the mapping is page-aligned, at least LAYOUT_SIZE
        // bytes long and lives as long as `self`, so the pointer is valid
        // and aligned for an AtomicU32 for the lifetime of the returned
        // reference. The bytes are only ever accessed atomically by this
        // crate (in this and the other process), never through a
        // non-atomic reference.
        unsafe { AtomicU32::from_ptr(self.map.as_mut_ptr().add(off).cast::<u32>()) }
    }

    fn word64(&self, off: usize) -> &AtomicU64 {
        assert!(off % 8 == 0 && off + 8 <= HEADER_LEN, "header word {off}");
        // SAFETY: as in `word32`, for an 8-aligned offset inside the header.
        unsafe { AtomicU64::from_ptr(self.map.as_mut_ptr().add(off).cast::<u64>()) }
    }

    /// Loads the u32 header field at `off` (acquire).
    pub fn load32(&self, off: usize) -> u32 {
        self.word32(off).load(Ordering::Acquire)
    }

    /// Stores the u32 header field at `off` (release: what this side wrote
    /// before is visible to a side that loads this value).
    pub fn store32(&self, off: usize, v: u32) {
        self.word32(off).store(v, Ordering::Release)
    }

    /// Compare-and-swap of the u32 header field at `off` (acquire-release);
    /// returns the value found.
    pub fn cas32(&self, off: usize, current: u32, new: u32) -> u32 {
        match self
            .word32(off)
            .compare_exchange(current, new, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(v) | Err(v) => v,
        }
    }

    /// Loads the u64 header field at `off` (acquire).
    pub fn load64(&self, off: usize) -> u64 {
        self.word64(off).load(Ordering::Acquire)
    }

    /// Stores the u64 header field at `off` (release).
    pub fn store64(&self, off: usize, v: u64) {
        self.word64(off).store(v, Ordering::Release)
    }

    fn check_range(&self, off: usize, len: usize) {
        assert!(
            off.checked_add(len)
                .is_some_and(|end| end as u64 <= LAYOUT_SIZE),
            "range {off}+{len} outside the mailbox"
        );
    }

    /// Copies `dst.len()` bytes at `off` out of the mapping.
    pub fn read(&self, off: usize, dst: &mut [u8]) {
        self.check_range(off, dst.len());
        // SAFETY: the source range lies inside the live mapping (checked),
        // the destination is a private buffer that cannot overlap it, and
        // any byte pattern is a valid u8. The protocol gives this side the
        // range now (module docs); a peer that writes it anyway only
        // changes which bytes are copied.
        unsafe {
            std::ptr::copy_nonoverlapping(self.map.as_ptr().add(off), dst.as_mut_ptr(), dst.len())
        }
    }

    /// Copies `src` into the mapping at `off`.
    pub fn write(&self, off: usize, src: &[u8]) {
        self.check_range(off, src.len());
        // SAFETY: the destination range lies inside the live, writable
        // mapping (checked) and cannot overlap the private source; the
        // protocol gives this side the range now (module docs).
        unsafe {
            std::ptr::copy_nonoverlapping(src.as_ptr(), self.map.as_mut_ptr().add(off), src.len())
        }
    }

    /// Waits while the u32 header field at `off` holds `expected`, at most
    /// `timeout` (FUTEX_WAIT, shared). Returns at once if the value differs;
    /// may return early (a wake, a signal): the caller looks again.
    pub fn wait(&self, off: usize, expected: u32, timeout: Duration) {
        let ts = futex::Timespec {
            tv_sec: timeout.as_secs().min(i64::MAX as u64) as i64,
            tv_nsec: i64::from(timeout.subsec_nanos()),
        };
        // EAGAIN (the value differs), EINTR and ETIMEDOUT all mean: look again.
        let _ = futex::wait(self.word32(off), futex::Flags::empty(), expected, Some(&ts));
    }

    /// Wakes every waiter on the u32 header field at `off` (FUTEX_WAKE,
    /// shared).
    pub fn wake(&self, off: usize) {
        let _ = futex::wake(self.word32(off), futex::Flags::empty(), i32::MAX as u32);
    }
}
