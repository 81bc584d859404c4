//! The mailbox layout, version 1 (docs/mailbox.md §2): a fixed 256-byte
//! header, then two 16 MiB regions (request, reply). Pure: no I/O.
//!
//! Every integer is little-endian and naturally aligned (the two state
//! words at 24 and 28 are 32-bit futex words). Bytes 80 to 255 are reserved
//! and zero in version 1; both attach paths refuse a header whose reserved
//! bytes are not (docs/mailbox.md §2.3: "fail closed").

use std::fmt;

/// `SMPIBOX\0`.
pub const MAGIC: [u8; 8] = *b"SMPIBOX\0";
/// The layout version this crate implements.
pub const VERSION: u32 = 1;
/// Bytes of the header.
pub const HEADER_LEN: usize = 256;
/// Bytes of each payload region (16 MiB).
pub const REGION_LEN: usize = 16 << 20;
/// Offset of the request region.
pub const REQUEST_REGION: usize = HEADER_LEN;
/// Offset of the reply region.
pub const REPLY_REGION: usize = HEADER_LEN + REGION_LEN;
/// Bytes of the whole mailbox file: 256 + 2 × 16 MiB = 33554688.
pub const LAYOUT_SIZE: u64 = (HEADER_LEN + 2 * REGION_LEN) as u64;
/// The first reserved byte; 80..256 are zero in version 1.
pub const RESERVED_START: usize = 80;
/// The largest world size (as the job description's, protocol §4).
pub const MAX_WORLD: u32 = 4096;

/// Byte offsets of the header fields (docs/mailbox.md §2.1).
pub mod off {
    /// magic, 8 bytes.
    pub const MAGIC: usize = 0;
    /// version, u32.
    pub const VERSION: usize = 8;
    /// world size, u32.
    pub const WORLD_SIZE: usize = 12;
    /// layout size, u64.
    pub const LAYOUT_SIZE: usize = 16;
    /// group state, u32 (futex word).
    pub const GROUP_STATE: usize = 24;
    /// request state, u32 (futex word).
    pub const REQUEST_STATE: usize = 28;
    /// sequence id, u64.
    pub const SEQUENCE: usize = 32;
    /// opcode, u32.
    pub const OPCODE: usize = 40;
    /// target, u32.
    pub const TARGET: usize = 44;
    /// target rank, u32.
    pub const TARGET_RANK: usize = 48;
    /// handler id, u32.
    pub const HANDLER: usize = 52;
    /// payload count, u32.
    pub const PAYLOAD_COUNT: usize = 56;
    /// request length in bytes, u32.
    pub const REQUEST_LEN: usize = 60;
    /// reply record count, u32.
    pub const REPLY_COUNT: usize = 64;
    /// reply length in bytes, u32.
    pub const REPLY_LEN: usize = 68;
    /// terminal reason, u32.
    pub const TERMINAL_REASON: usize = 72;
    /// pid of the client holding the lease, u32 (informational).
    pub const CLIENT_PID: usize = 76;
}

macro_rules! code_enum {
    ($(#[$m:meta])* $name:ident { $($(#[$vm:meta])* $v:ident = $c:literal => $s:literal,)+ }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name {
            $($(#[$vm])* $v = $c,)+
        }

        impl $name {
            /// Every value, ascending.
            pub const ALL: &'static [$name] = &[$($name::$v,)+];

            /// The code in the header.
            pub fn code(self) -> u32 {
                self as u32
            }

            /// The value of a code, if it is one.
            pub fn from_code(c: u32) -> Option<Self> {
                match c {
                    $($c => Some($name::$v),)+
                    _ => None,
                }
            }

            /// The name docs/mailbox.md uses.
            pub fn name(self) -> &'static str {
                match self {
                    $($name::$v => $s,)+
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}

code_enum! {
    /// The group state (offset 24; docs/mailbox.md §3.1).
    GroupState {
        /// Created; rank 0 has not attached yet.
        Initializing = 1 => "INITIALIZING",
        /// Rank 0 attached after the readiness allgather; requests are served.
        Ready = 2 => "READY",
        /// Failed for good (absorbing).
        Terminal = 3 => "TERMINAL",
        /// Shut down normally.
        Closed = 4 => "CLOSED",
    }
}

code_enum! {
    /// The request state (offset 28; docs/mailbox.md §3.2).
    RequestState {
        /// No request in flight.
        Idle = 1 => "IDLE",
        /// The client published a request.
        RequestReady = 2 => "REQUEST_READY",
        /// Rank 0 copied the request; the request region is the client's again.
        TaskAccepted = 3 => "TASK_ACCEPTED",
        /// Every target succeeded; the reply region holds the replies.
        TaskDone = 4 => "TASK_DONE",
        /// Some target failed; the reply region holds every reply and error.
        TaskFailed = 5 => "TASK_FAILED",
        /// The client published SHUTDOWN.
        ShutdownReady = 6 => "SHUTDOWN_READY",
        /// Every rank left its loop; the group is CLOSED.
        ShutdownDone = 7 => "SHUTDOWN_DONE",
    }
}

code_enum! {
    /// The opcode of a request (offset 40; 0 before the first request).
    Opcode {
        /// Run a task handler.
        Task = 1 => "TASK",
        /// Run a control handler.
        Control = 2 => "CONTROL",
        /// Every rank answers, no handler.
        Ping = 3 => "PING",
        /// Every rank leaves its loop.
        Shutdown = 4 => "SHUTDOWN",
    }
}

code_enum! {
    /// Who executes a request (offset 44; 0 before the first request).
    TargetKind {
        /// Every rank, the same payload.
        Group = 1 => "GROUP",
        /// One rank (target rank at offset 48).
        Rank = 2 => "RANK",
        /// Every rank, rank i its own payload i.
        PerRank = 3 => "PER_RANK",
    }
}

code_enum! {
    /// Why the group became TERMINAL (offset 72; 0 while it is not).
    TerminalReason {
        /// The readiness allgather failed or the ranks' handler tables differ.
        Startup = 1 => "startup failed",
        /// A collective broke or a rank was lost.
        Collective = 2 => "collective broken or rank lost",
        /// A duplicate or decreasing sequence id.
        Sequence = 3 => "duplicate or decreasing sequence id",
        /// The client's lease ended with a request in flight.
        ClientLost = 4 => "client lost with a request in flight",
        /// The launcher the client started exited.
        LauncherExit = 5 => "launcher exited",
        /// A request passed the client's timeout.
        Timeout = 6 => "request timed out",
        /// A state word changed in a way the state machine does not allow.
        Protocol = 7 => "state machine violated",
    }
}

/// Why a header is refused (H1640; docs/mailbox.md §2.3), in check order.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LayoutError {
    /// Fewer than 256 bytes.
    #[error("header needs {HEADER_LEN} bytes, {len} given")]
    Short {
        /// Bytes given.
        len: usize,
    },
    /// Not `SMPIBOX\0`.
    #[error("magic: expected \"SMPIBOX\\0\", got {got:02x?}")]
    Magic {
        /// The 8 bytes found.
        got: [u8; 8],
    },
    /// A version this crate does not implement.
    #[error("version: expected {VERSION}, got {got}")]
    Version {
        /// The version found.
        got: u32,
    },
    /// Not the version-1 layout size.
    #[error("layout size: expected {LAYOUT_SIZE}, got {got}")]
    LayoutSize {
        /// The size found.
        got: u64,
    },
    /// Outside 1..=4096, or not the job's.
    #[error("world size: expected {}, got {got}", match .expected { Some(e) => e.to_string(), None => format!("1..={MAX_WORLD}") })]
    WorldSize {
        /// The job's size, when the check knows it.
        expected: Option<u32>,
        /// The size found.
        got: u32,
    },
    /// A reserved byte (80..=255) that is not zero.
    #[error("reserved byte {offset} is {value:#04x}, must be 0 in version 1")]
    Reserved {
        /// Its offset.
        offset: usize,
        /// Its value.
        value: u8,
    },
    /// A state, opcode, target or reason code that is not one.
    #[error("{field}: {got} is not a valid code")]
    Code {
        /// The field.
        field: &'static str,
        /// The value found.
        got: u32,
    },
    /// A length larger than its region.
    #[error("{field}: {got} bytes, the region holds {REGION_LEN}")]
    Length {
        /// The field.
        field: &'static str,
        /// The value found.
        got: u32,
    },
    /// Rank 0 attaches to a fresh mailbox only: every field at its initial value.
    #[error("{field}: a fresh mailbox has {expected}, got {got}")]
    NotFresh {
        /// The field.
        field: &'static str,
        /// The initial value.
        expected: u64,
        /// The value found.
        got: u64,
    },
}

/// A decoded header (docs/mailbox.md §2.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Header {
    /// The job's size.
    pub world_size: u32,
    /// The group state.
    pub group: GroupState,
    /// The request state.
    pub request: RequestState,
    /// The sequence id of the last published request (0: none yet).
    pub sequence: u64,
    /// The opcode of the last request (`None` before the first).
    pub opcode: Option<Opcode>,
    /// Its target kind (`None` before the first).
    pub target: Option<TargetKind>,
    /// Its target rank (RANK), else 0.
    pub target_rank: u32,
    /// Its handler id (TASK, CONTROL), else 0.
    pub handler: u32,
    /// Payloads in the request region.
    pub payload_count: u32,
    /// Bytes used in the request region.
    pub request_len: u32,
    /// Records in the reply region.
    pub reply_count: u32,
    /// Bytes used in the reply region.
    pub reply_len: u32,
    /// Why the group is TERMINAL (`None` while it is not).
    pub terminal: Option<TerminalReason>,
    /// The pid of the client that holds the lease (informational; 0: none yet).
    pub client_pid: u32,
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(w)
}

fn code<T>(
    b: &[u8],
    at: usize,
    field: &'static str,
    f: fn(u32) -> Option<T>,
) -> Result<T, LayoutError> {
    let got = u32_at(b, at);
    f(got).ok_or(LayoutError::Code { field, got })
}

/// A code field where 0 means "none yet".
fn opt_code<T>(
    b: &[u8],
    at: usize,
    field: &'static str,
    f: fn(u32) -> Option<T>,
) -> Result<Option<T>, LayoutError> {
    match u32_at(b, at) {
        0 => Ok(None),
        got => f(got).map(Some).ok_or(LayoutError::Code { field, got }),
    }
}

fn len(b: &[u8], at: usize, field: &'static str) -> Result<u32, LayoutError> {
    let got = u32_at(b, at);
    if got as usize > REGION_LEN {
        return Err(LayoutError::Length { field, got });
    }
    Ok(got)
}

impl Header {
    /// The header the creator writes: INITIALIZING, IDLE, every other
    /// field 0 (docs/mailbox.md §2.2).
    pub fn fresh(world_size: u32) -> Self {
        Self {
            world_size,
            group: GroupState::Initializing,
            request: RequestState::Idle,
            sequence: 0,
            opcode: None,
            target: None,
            target_rank: 0,
            handler: 0,
            payload_count: 0,
            request_len: 0,
            reply_count: 0,
            reply_len: 0,
            terminal: None,
            client_pid: 0,
        }
    }

    /// The 256 header bytes (reserved bytes zero).
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        let mut put32 = |at: usize, v: u32| b[at..at + 4].copy_from_slice(&v.to_le_bytes());
        put32(off::VERSION, VERSION);
        put32(off::WORLD_SIZE, self.world_size);
        put32(off::GROUP_STATE, self.group.code());
        put32(off::REQUEST_STATE, self.request.code());
        put32(off::OPCODE, self.opcode.map_or(0, Opcode::code));
        put32(off::TARGET, self.target.map_or(0, TargetKind::code));
        put32(off::TARGET_RANK, self.target_rank);
        put32(off::HANDLER, self.handler);
        put32(off::PAYLOAD_COUNT, self.payload_count);
        put32(off::REQUEST_LEN, self.request_len);
        put32(off::REPLY_COUNT, self.reply_count);
        put32(off::REPLY_LEN, self.reply_len);
        put32(
            off::TERMINAL_REASON,
            self.terminal.map_or(0, TerminalReason::code),
        );
        put32(off::CLIENT_PID, self.client_pid);
        b[off::MAGIC..off::MAGIC + 8].copy_from_slice(&MAGIC);
        b[off::LAYOUT_SIZE..off::LAYOUT_SIZE + 8].copy_from_slice(&LAYOUT_SIZE.to_le_bytes());
        b[off::SEQUENCE..off::SEQUENCE + 8].copy_from_slice(&self.sequence.to_le_bytes());
        b
    }

    /// Decodes and checks a header, in the order of docs/mailbox.md §2.3:
    /// length, magic, version, layout size, world size (1..=4096), the
    /// reserved bytes in ascending order, then the codes (group state,
    /// request state, opcode, target, terminal reason) and the lengths.
    /// Bytes after the first 256 are not looked at.
    pub fn decode(b: &[u8]) -> Result<Self, LayoutError> {
        let world_size = Self::decode_fixed(b)?;
        Ok(Self {
            world_size,
            group: code(b, off::GROUP_STATE, "group state", GroupState::from_code)?,
            request: code(
                b,
                off::REQUEST_STATE,
                "request state",
                RequestState::from_code,
            )?,
            sequence: u64_at(b, off::SEQUENCE),
            opcode: opt_code(b, off::OPCODE, "opcode", Opcode::from_code)?,
            target: opt_code(b, off::TARGET, "target", TargetKind::from_code)?,
            target_rank: u32_at(b, off::TARGET_RANK),
            handler: u32_at(b, off::HANDLER),
            payload_count: u32_at(b, off::PAYLOAD_COUNT),
            request_len: len(b, off::REQUEST_LEN, "request length")?,
            reply_count: u32_at(b, off::REPLY_COUNT),
            reply_len: len(b, off::REPLY_LEN, "reply length")?,
            terminal: opt_code(
                b,
                off::TERMINAL_REASON,
                "terminal reason",
                TerminalReason::from_code,
            )?,
            client_pid: u32_at(b, off::CLIENT_PID),
        })
    }

    /// Rank 0's look at the fixed fields while it serves (docs/mailbox.md
    /// §2.3, "after the attach"): length, magic, version, layout size,
    /// world size (in 1..=4096 and the job's) and the reserved bytes, in
    /// the order of [`Header::decode`]. Only bytes 0-23 and 80-255 are
    /// looked at: no one writes them after the creation.
    pub fn check_fixed(b: &[u8], world_size: u32) -> Result<(), LayoutError> {
        let got = Self::decode_fixed(b)?;
        if got != world_size {
            return Err(LayoutError::WorldSize {
                expected: Some(world_size),
                got,
            });
        }
        Ok(())
    }

    /// Checks 1-6 of docs/mailbox.md §2.3; returns the world size.
    fn decode_fixed(b: &[u8]) -> Result<u32, LayoutError> {
        if b.len() < HEADER_LEN {
            return Err(LayoutError::Short { len: b.len() });
        }
        let mut magic = [0u8; 8];
        magic.copy_from_slice(&b[..8]);
        if magic != MAGIC {
            return Err(LayoutError::Magic { got: magic });
        }
        let version = u32_at(b, off::VERSION);
        if version != VERSION {
            return Err(LayoutError::Version { got: version });
        }
        let layout = u64_at(b, off::LAYOUT_SIZE);
        if layout != LAYOUT_SIZE {
            return Err(LayoutError::LayoutSize { got: layout });
        }
        let world_size = u32_at(b, off::WORLD_SIZE);
        if !(1..=MAX_WORLD).contains(&world_size) {
            return Err(LayoutError::WorldSize {
                expected: None,
                got: world_size,
            });
        }
        if let Some(i) = b[RESERVED_START..HEADER_LEN].iter().position(|&x| x != 0) {
            return Err(LayoutError::Reserved {
                offset: RESERVED_START + i,
                value: b[RESERVED_START + i],
            });
        }
        Ok(world_size)
    }

    /// The world-size check of both attach paths: the job's size.
    pub fn check_world(&self, world_size: u32) -> Result<(), LayoutError> {
        if self.world_size != world_size {
            return Err(LayoutError::WorldSize {
                expected: Some(world_size),
                got: self.world_size,
            });
        }
        Ok(())
    }

    /// Rank 0's attach (docs/mailbox.md §2.3): the job's world size and a
    /// fresh lane, every field at its [`Header::fresh`] value. Checked
    /// field by field in header order, so the error names the first
    /// field that differs.
    pub fn check_fresh(&self, world_size: u32) -> Result<(), LayoutError> {
        self.check_world(world_size)?;
        let fresh = Header::fresh(world_size);
        let fields: [(&'static str, u64, u64); 13] = [
            (
                "group state",
                fresh.group.code().into(),
                self.group.code().into(),
            ),
            (
                "request state",
                fresh.request.code().into(),
                self.request.code().into(),
            ),
            ("sequence id", 0, self.sequence),
            ("opcode", 0, self.opcode.map_or(0, Opcode::code).into()),
            ("target", 0, self.target.map_or(0, TargetKind::code).into()),
            ("target rank", 0, self.target_rank.into()),
            ("handler", 0, self.handler.into()),
            ("payload count", 0, self.payload_count.into()),
            ("request length", 0, self.request_len.into()),
            ("reply count", 0, self.reply_count.into()),
            ("reply length", 0, self.reply_len.into()),
            (
                "terminal reason",
                0,
                self.terminal.map_or(0, TerminalReason::code).into(),
            ),
            ("client pid", 0, self.client_pid.into()),
        ];
        for (field, expected, got) in fields {
            if expected != got {
                return Err(LayoutError::NotFresh {
                    field,
                    expected,
                    got,
                });
            }
        }
        Ok(())
    }
}

/// The handler id of a handler name: 32-bit FNV-1a of its UTF-8 bytes
/// (docs/mailbox.md §4.3).
///
/// ```
/// assert_eq!(sperli_mailbox::layout::handler_id(""), 0x811c9dc5);
/// assert_eq!(sperli_mailbox::layout::handler_id("a"), 0xe40c292c);
/// ```
pub fn handler_id(name: &str) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for &b in name.as_bytes() {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fresh_round_trips_and_is_fresh() {
        let h = Header::fresh(4);
        let b = h.encode();
        assert_eq!(b.len(), 256);
        assert_eq!(&b[..8], b"SMPIBOX\0");
        assert!(b[RESERVED_START..].iter().all(|&x| x == 0));
        let d = Header::decode(&b).unwrap();
        assert_eq!(d, h);
        d.check_fresh(4).unwrap();
        assert_eq!(
            d.check_fresh(5),
            Err(LayoutError::WorldSize {
                expected: Some(5),
                got: 4
            })
        );
    }

    #[test]
    fn every_proper_prefix_fails() {
        let b = Header::fresh(2).encode();
        for n in 0..HEADER_LEN {
            assert_eq!(Header::decode(&b[..n]), Err(LayoutError::Short { len: n }));
        }
    }

    #[test]
    fn layout_size_is_the_documented_number() {
        assert_eq!(LAYOUT_SIZE, 33_554_688);
        assert_eq!(REPLY_REGION, 16_777_472);
    }

    #[test]
    fn every_reserved_byte_is_refused() {
        let good = Header::fresh(3).encode();
        for offset in RESERVED_START..HEADER_LEN {
            let mut b = good;
            b[offset] = 0x01;
            assert_eq!(
                Header::decode(&b),
                Err(LayoutError::Reserved { offset, value: 1 })
            );
        }
    }

    #[test]
    fn the_fixed_fields_check_ignores_the_lane_words() {
        let mut b = Header::fresh(4).encode();
        // The state words, sequence, lengths: not fixed.
        b[off::REQUEST_STATE] = 0xee;
        b[off::REQUEST_LEN + 3] = 0xff;
        Header::check_fixed(&b, 4).unwrap();
        assert_eq!(
            Header::check_fixed(&b, 3),
            Err(LayoutError::WorldSize {
                expected: Some(3),
                got: 4
            })
        );
        b[RESERVED_START + 9] = 2;
        assert_eq!(
            Header::check_fixed(&b, 4),
            Err(LayoutError::Reserved {
                offset: RESERVED_START + 9,
                value: 2
            })
        );
        b[RESERVED_START + 9] = 0;
        b[off::VERSION] = 2;
        assert_eq!(
            Header::check_fixed(&b, 4),
            Err(LayoutError::Version { got: 2 })
        );
    }

    #[test]
    fn codes_round_trip_and_zero_is_no_state() {
        for s in GroupState::ALL {
            assert_eq!(GroupState::from_code(s.code()), Some(*s));
        }
        for s in RequestState::ALL {
            assert_eq!(RequestState::from_code(s.code()), Some(*s));
        }
        assert_eq!(GroupState::from_code(0), None);
        assert_eq!(RequestState::from_code(0), None);
        assert_eq!(RequestState::from_code(8), None);
    }

    #[test]
    fn handler_ids_are_fnv1a() {
        // Published FNV-1a 32 test values.
        assert_eq!(handler_id("foobar"), 0xbf9c_f968);
        assert_eq!(handler_id("sum"), handler_id("sum"));
        assert_ne!(handler_id("sum"), handler_id("poly"));
    }

    proptest::proptest! {
        #[test]
        fn decode_never_panics(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..300)) {
            let _ = Header::decode(&bytes);
        }

        #[test]
        fn decoded_headers_re_encode_to_the_same_bytes(
            world in 1u32..=4096, group in 1u32..=4, req in 1u32..=7, seq: u64,
            opcode in 0u32..=4, target in 0u32..=3, trank: u32, handler: u32,
            count: u32, rlen in 0u32..=(16 << 20), pid: u32,
        ) {
            let mut b = Header::fresh(world).encode();
            for (at, v) in [(off::GROUP_STATE, group), (off::REQUEST_STATE, req), (off::OPCODE, opcode),
                (off::TARGET, target), (off::TARGET_RANK, trank), (off::HANDLER, handler),
                (off::PAYLOAD_COUNT, count), (off::REQUEST_LEN, rlen), (off::CLIENT_PID, pid)] {
                b[at..at + 4].copy_from_slice(&v.to_le_bytes());
            }
            b[off::SEQUENCE..off::SEQUENCE + 8].copy_from_slice(&seq.to_le_bytes());
            let h = Header::decode(&b).unwrap();
            proptest::prop_assert_eq!(h.encode(), b);
        }
    }
}
