#!/usr/bin/env python3
"""Independent checker for the SPERLI v1 test-vector file.

Usage: python3 scripts/sperli-vectors.py docs/sperli-vectors.txt

This is a second implementation of the SPERLI v1 codecs, written from
docs/sperli-protocol.md (the frame and its checks: sections 6 and 7; the
job description: section 4; reductions: section 8.3; collective headers:
sections 7.3 and 8.4; rank and COMMIT files: sections 9.2 and 9.3) and the
format header of the vectors file (xtask/src/vectors_header.txt); the
pipelined collectives of HELLO feature bit 1 (the `features=` receivers
and the `collective-stream` kind) from its section 14, the communicators
of feature bit 2 (communicator ids in COLLECTIVE tags, the
`communicator-split` and `communicator-take` kinds) from its section 15,
point-to-point on communicators of feature bit 3 (the DATA header, the
`message-stream` kind) from its section 16, and the element types and
reductions of feature bit 4 (new `reduce` types, the `fold` kind) from its
section 17, and the pair exchange of feature bit 6 (`collective-stream`
receivers that name their rank) from its section 19. It never calls the
Rust code.

Every entry is checked on its own: the verdict is recomputed from the bytes,
the stated fields are compared with what the bytes decode to, the bytes are
re-encoded from the stated fields, signatures must be 2484 bytes of 0xaa and
every `signed:` range must be exactly the signed message located in the bytes.

Exit status: 0 if every entry passed (and there was at least one), 1 if any
entry failed, 2 if the file is malformed (or cannot be read).
"""

import functools
import hashlib
import math
import re
import struct
import sys

# ---------------------------------------------------------------------------
# Constants (docs/sperli-protocol.md, section 1.3)
# ---------------------------------------------------------------------------

MAX_PAYLOAD = 16777216
MAX_COLLECTIVE_DATA = 16777200
MAX_CHUNK = 1048576
MAX_ABORT_MESSAGE = 1024
SIG_LEN = 2484
PUBKEY_LEN = 1344
SECRET_KEY_LEN = 64
HEADER_LEN = 52
RANK_HEADER_LEN = 80
COMMIT_HEADER_LEN = 40
JOIN_CONTEXT = "SPERLI-JOIN-1"
COMMIT_CONTEXT = "SPERLI-COMMIT-1"
REFUSED_HOSTS = ("host-a.invalid", "host-b.invalid")

TYPE_NAMES = {
    1: "HELLO", 2: "DATA", 3: "COLLECTIVE", 4: "HEARTBEAT", 5: "ABORT",
    6: "CKPT_BEGIN", 7: "CKPT_DATA", 8: "CKPT_ACK", 9: "CKPT_COMMIT",
    10: "RESUME", 11: "BYE",
}
TYPE_CODES = {v: k for k, v in TYPE_NAMES.items()}
HELLO, DATA, COLLECTIVE, HEARTBEAT, ABORT = 1, 2, 3, 4, 5
CKPT_BEGIN, CKPT_DATA, CKPT_ACK, CKPT_COMMIT, RESUME, BYE = 6, 7, 8, 9, 10, 11
CKPT_TYPES = (CKPT_BEGIN, CKPT_DATA, CKPT_ACK, CKPT_COMMIT)

FRAME_CHECKS = ("length", "type", "flags", "service", "membership_epoch", "job",
                "source", "target", "incarnation", "epoch", "payload_length",
                "tag", "payload")
RANK_CHECKS = ("truncated", "magic", "version", "job", "epoch", "rank", "size",
               "length")
COMMIT_CHECKS = ("truncated", "magic", "version", "job", "epoch", "reserved",
                 "sig_len", "trailing")
JOBDESC_CHECKS = ("hex", "truncated", "trailing", "version", "size", "rank",
                  "incarnation", "port", "host", "secret_key", "token")

# element types: name -> (code, width, kind) ; kind: 'u' unsigned, 's' signed, 'f' float
ELEMENT_TYPES = {
    "u8": (0, 1, "u"), "i32": (1, 4, "s"), "u32": (2, 4, "u"),
    "i64": (3, 8, "s"), "u64": (4, 8, "u"), "f32": (5, 4, "f"),
    "f64": (6, 8, "f"),
}
REDUCTIONS = ("sum", "prod", "min", "max", "land", "lor", "lxor", "band",
              "bor", "bxor")
# feature bit 4 (section 17.2): kind 'b' bool, 'c' complex, 'p' a pair
ELEMENT_TYPES.update({
    "bool": (7, 1, "b"), "i8": (8, 1, "s"), "i16": (9, 2, "s"),
    "u16": (10, 2, "u"), "complex64": (11, 8, "c"), "complex128": (12, 16, "c"),
    "f32_i32": (13, 8, "p"), "f64_i32": (14, 12, "p"), "i64_i32": (15, 12, "p"),
    "i32_i32": (16, 8, "p"), "i16_i32": (17, 6, "p"),
})
# a pair's value: (kind, width); the index is an i32 after it
PAIR_VALUE = {"f32_i32": ("f", 4), "f64_i32": ("f", 8), "i64_i32": ("s", 8),
              "i32_i32": ("s", 4), "i16_i32": ("s", 2)}
REDUCTIONS = REDUCTIONS + ("minloc", "maxloc")

# ---------------------------------------------------------------------------
# Vectors file parsing
# ---------------------------------------------------------------------------

KIND_KEYS = {
    "fold": (("type", "reduction", "ranks", "result"), ()),
    "message-stream": (("receiver", "communicators", "sent", "frames",
                        "outcomes", "verdict"), ("at",)),
    # kind: (required keys, optional keys) -- besides name and kind
    "frame": (("receiver", "bytes", "verdict"), ("header", "payload", "signed")),
    "rank-file": (("expect", "bytes", "verdict"), ("header", "state")),
    "commit-file": (("expect", "bytes", "verdict"), ("fields", "signed")),
    "job-description": (("line", "verdict"), ("fields", "signed")),
    "join-token-message": (("bytes", "fields"), ()),
    "join-token": (("bytes", "fields", "signed"), ()),
    "reduce": (("type", "reduction", "left", "right", "result"), ()),
    "collective-stream": (("receiver", "call", "due", "frames", "verdict"),
                          ("at", "taken", "complete")),
    "communicator-split": (("parent", "exchange", "verdict"),
                           ("records", "id", "members", "rank")),
    "communicator-take": (("receiver", "communicators", "take", "frames",
                           "verdict", "at"), ()),
    "membership-record": (("receiver", "bytes", "verdict"), ("fields", "signed")),
    "recover-payload": (("receiver", "bytes", "verdict"), ("fields",)),
    "recovery-report": (("bytes", "verdict"), ("fields",)),
    "membership-header": (("receiver", "header", "verdict"), ()),
    "binomial-tree": (("tree", "parent", "children"), ()),
}

KEY_RE = re.compile(r"[a-z][a-z0-9_]*\Z")


class MalformedFile(Exception):
    """The vectors file does not follow the format header."""


def parse_file(text):
    """Parse the vectors file; return a list of entries.

    Each entry is a dict key -> value (insertion order = file order) plus the
    key '__line__' holding the line number of its `name:` line.  Raises
    MalformedFile on any deviation from the format.
    """
    entries = []
    current = None
    names = set()

    def finish(entry):
        if entry is None:
            return
        validate_entry_keys(entry)
        if entry["name"] in names:
            raise MalformedFile("line %d: duplicate entry name %r"
                                % (entry["__line__"], entry["name"]))
        names.add(entry["name"])
        entries.append(entry)

    for lineno, line in enumerate(text.split("\n"), 1):
        if line.endswith("\r"):
            raise MalformedFile("line %d: carriage return" % lineno)
        if line.startswith("#"):
            continue
        if line.strip() == "":
            if line != "":
                raise MalformedFile("line %d: blank line with whitespace" % lineno)
            finish(current)
            current = None
            continue
        colon = line.find(":")
        if colon <= 0:
            raise MalformedFile("line %d: not a `key: value` line: %r" % (lineno, line[:80]))
        key = line[:colon]
        rest = line[colon + 1:]
        if not KEY_RE.match(key):
            raise MalformedFile("line %d: bad key %r" % (lineno, key))
        if rest == "":
            value = ""  # an empty value, written without the space
        elif rest.startswith(" ") and not rest.startswith("  "):
            value = rest[1:]
        elif rest == " ":
            value = ""
        else:
            raise MalformedFile("line %d: expected exactly one space after %r:" % (lineno, key))
        if current is None:
            current = {"__line__": lineno}
            if key != "name":
                raise MalformedFile("line %d: entry does not start with name:" % lineno)
        elif len(current) == 2 and key != "kind":
            raise MalformedFile("line %d: second line of an entry must be kind:" % lineno)
        if key in current:
            raise MalformedFile("line %d: duplicate key %r in entry %r"
                                % (lineno, key, current.get("name")))
        current[key] = value
    finish(current)
    return entries


def validate_entry_keys(entry):
    line = entry["__line__"]
    name = entry.get("name", "")
    if name == "" or " " in name:
        raise MalformedFile("line %d: bad entry name %r" % (line, name))
    if "kind" not in entry:
        raise MalformedFile("line %d: entry %r has no kind:" % (line, name))
    kind = entry["kind"]
    if kind not in KIND_KEYS:
        raise MalformedFile("line %d: entry %r has unknown kind %r" % (line, name, kind))
    required, optional = KIND_KEYS[kind]
    for key in entry:
        if key in ("__line__", "name", "kind"):
            continue
        if key not in required and key not in optional:
            raise MalformedFile("line %d: entry %r (kind %s) has unknown key %r"
                                % (line, name, kind, key))
    for key in required:
        if key not in entry:
            raise MalformedFile("line %d: entry %r (kind %s) lacks key %r"
                                % (line, name, kind, key))


# ---------------------------------------------------------------------------
# Value notation helpers
# ---------------------------------------------------------------------------

class Problem(Exception):
    """A value in an entry does not follow the notation."""


DEC_RE = re.compile(r"(0|[1-9][0-9]*)\Z")


def dec(s, bits=64):
    if not DEC_RE.match(s):
        raise Problem("not a decimal number: %r" % s[:40])
    v = int(s)
    if v >= 1 << bits:
        raise Problem("number %s does not fit in %d bits" % (s, bits))
    return v


def is_hex(s):
    """s is lowercase hex digits, an even number of them, nothing else."""
    if len(s) % 2:
        return False
    try:
        return bytes.fromhex(s).hex() == s
    except ValueError:
        return False


def unhex(s):
    if not is_hex(s):
        raise Problem("not lowercase hex bytes: %r" % s[:40])
    return bytes.fromhex(s)


@functools.lru_cache(maxsize=1024)
def parse_field_list(s):
    """`a=1 b=2` -> tuple of (name, value). Empty string -> ()."""
    if s == "":
        return ()
    items = []
    seen = set()
    for part in s.split(" "):
        if "=" not in part:
            raise Problem("field list item without '=': %r" % part[:40])
        k, v = part.split("=", 1)
        if k == "":
            raise Problem("field list item without a name: %r" % part[:40])
        if k in seen:
            raise Problem("field %r given twice" % k)
        seen.add(k)
        items.append((k, v))
    return tuple(items)


def short(v, n=48):
    return v if len(v) <= n else v[:n] + "...(%d chars)" % len(v)


def compare_fields(what, expected, stated):
    """expected: list of (name, canonical value) decoded from the bytes;
    stated: list of (name, value) from the entry.  Returns problems."""
    en = [k for k, _ in expected]
    sn = [k for k, _ in stated]
    if en != sn:
        return ["%s: field names/order differ: decoded %s, entry has %s"
                % (what, " ".join(en), " ".join(sn))]
    probs = []
    for (k, ev), (_, sv) in zip(expected, stated):
        if ev != sv:
            probs.append("%s: %s: decoded %s, entry says %s" % (what, k, short(ev), short(sv)))
    return probs


# ---------------------------------------------------------------------------
# Generic layout codec
#
# A spec is a list of (name, kind, arg):
#   ('u8'|'u16'|'u32'|'u64', None)  unsigned little-endian, decimal
#   ('hex', n)      n bytes, hex
#   ('hexlen', ref) bytes, count given by the earlier field `ref`, hex
#   ('ascii', ref)  bytes, count given by the earlier field `ref`, ASCII
#   ('magic', n)    n bytes, ASCII
#   ('hashes', ref) 32-byte digests, count from `ref`, hex joined by commas
#   ('rest', None)  every remaining byte, hex
#   ('typename', None) u8 frame type, written as its name
# ---------------------------------------------------------------------------

INT_WIDTH = {"u8": 1, "u16": 2, "u32": 4, "u64": 8}


class Truncated(Exception):
    pass


def prefixed(prefix, spec):
    out = []
    for name, kind, arg in spec:
        if kind in ("hexlen", "ascii", "hashes"):
            arg = prefix + arg
        out.append((prefix + name, kind, arg))
    return tuple(out)


def ascii_text(b):
    return b.decode("latin-1")


def decode_spec(spec, data, pos=0, want_canon=True):
    """Decode `data[pos:]` by spec. Returns (values dict, canonical list, new pos).
    Raises Truncated if the data ends early."""
    vals = {}
    canon = []
    for name, kind, arg in spec:
        if kind in INT_WIDTH or kind == "typename":
            w = INT_WIDTH.get(kind, 1)
            if pos + w > len(data):
                raise Truncated(name)
            v = int.from_bytes(data[pos:pos + w], "little")
            pos += w
            vals[name] = v
            if not want_canon:
                continue
            if kind == "typename":
                canon.append((name, TYPE_NAMES.get(v, "?%d" % v)))
            else:
                canon.append((name, str(v)))
            continue
        if kind == "rest":
            n = len(data) - pos
        elif kind in ("hex", "magic"):
            n = arg
        elif kind in ("hexlen", "ascii"):
            n = vals[arg]
        elif kind == "hashes":
            n = 32 * vals[arg]
        else:
            raise AssertionError(kind)
        if pos + n > len(data):
            raise Truncated(name)
        b = data[pos:pos + n]
        pos += n
        vals[name] = b
        if not want_canon:
            continue
        if kind in ("hex", "hexlen", "rest"):
            canon.append((name, b.hex()))
        elif kind in ("ascii", "magic"):
            canon.append((name, ascii_text(b)))
        else:
            canon.append((name, ",".join(b[i:i + 32].hex() for i in range(0, n, 32))))
    return vals, canon, pos


@functools.lru_cache(maxsize=512)
def encode_spec(spec, stated):
    """Encode from the entry's stated (name, value) list, which must name the
    spec's fields in order (a trailing optional part is handled by callers)."""
    names = [n for n, _, _ in spec]
    got = [k for k, _ in stated]
    if names != got:
        raise Problem("cannot encode: fields %s expected, entry has %s"
                      % (" ".join(names), " ".join(got)))
    out = bytearray()
    for (name, kind, arg), (_, v) in zip(spec, stated):
        try:
            if kind in INT_WIDTH:
                out += dec(v, 8 * INT_WIDTH[kind]).to_bytes(INT_WIDTH[kind], "little")
            elif kind == "typename":
                if v not in TYPE_CODES:
                    raise Problem("unknown type name %r" % v)
                out.append(TYPE_CODES[v])
            elif kind in ("hex", "hexlen", "rest"):
                b = unhex(v)
                if kind == "hex" and len(b) != arg:
                    raise Problem("%d bytes expected" % arg)
                out += b
            elif kind in ("ascii", "magic"):
                try:
                    b = v.encode("ascii")
                except UnicodeEncodeError:
                    raise Problem("not ASCII")
                if kind == "magic" and len(b) != arg:
                    raise Problem("%d bytes expected" % arg)
                out += b
            elif kind == "hashes":
                if v == "":
                    continue
                for h in v.split(","):
                    b = unhex(h)
                    if len(b) != 32:
                        raise Problem("a digest is not 32 bytes")
                    out += b
        except Problem as e:
            raise Problem("field %s: %s" % (name, e))
    return bytes(out)


U8, U16, U32, U64 = "u8", "u16", "u32", "u64"

HEADER_SPEC = [
    ("length", U32, None), ("type", "typename", None), ("flags", U8, None),
    ("service", U16, None), ("membership_epoch", U32, None), ("job", "hex", 16),
    ("source", U32, None), ("target", U32, None), ("incarnation", U32, None),
    ("tag", U32, None), ("epoch", U64, None),
]
TOKEN_MSG_SPEC = [
    ("job", "hex", 16), ("rank", U32, None), ("size", U32, None),
    ("incarnation", U32, None), ("expires_at", U64, None), ("host_len", U8, None),
    ("host", "ascii", "host_len"),
]
TOKEN_SPEC = TOKEN_MSG_SPEC + [("sig_len", U16, None), ("signature", "hexlen", "sig_len")]
COMMIT_SPEC = [
    ("magic", "magic", 4), ("version", U32, None), ("job", "hex", 16),
    ("epoch", U64, None), ("size", U32, None), ("reserved", U32, None),
    ("hashes", "hashes", "size"), ("sig_len", U16, None),
    ("signature", "hexlen", "sig_len"),
]
RANK_HEADER_SPEC = [
    ("magic", "magic", 4), ("version", U32, None), ("job", "hex", 16),
    ("epoch", U64, None), ("rank", U32, None), ("size", U32, None),
    ("payload_length", U64, None), ("payload_sha256", "hex", 32),
]
HELLO_FIXED = [("protocol_version", U16, None), ("reserved", U16, None),
               ("features", U64, None), ("token_len", U16, None)]
RESUME_FIXED = [("status", U8, None), ("reserved", "hex", 7)]
PAYLOAD_SPECS = {
    HELLO: tuple(HELLO_FIXED) + prefixed("token.", TOKEN_SPEC),
    DATA: [("message", "rest", None)],
    COLLECTIVE: [("operation", U8, None), ("element_type", U8, None),
                 ("reduction", U8, None), ("phase", U8, None), ("root", U32, None),
                 ("sequence", U64, None), ("data", "rest", None)],
    HEARTBEAT: [("counter", U64, None)],
    ABORT: [("reason", U16, None), ("reserved", U16, None), ("code", U32, None),
            ("message", "rest", None)],
    CKPT_BEGIN: [("version", U32, None), ("size", U32, None)],
    CKPT_DATA: [("kind", U8, None), ("reserved", "hex", 3), ("owner", U32, None),
                ("offset", U64, None), ("total", U64, None), ("chunk", "rest", None)],
    CKPT_ACK: [("sha256", "hex", 32)],
    CKPT_COMMIT: prefixed("commit.", COMMIT_SPEC),
    RESUME: RESUME_FIXED,  # + commit.* when a COMMIT follows
    BYE: [],
}
RESUME_WITH_COMMIT = tuple(RESUME_FIXED) + prefixed("commit.", COMMIT_SPEC)

# specs are tuples, so that encode_spec can be cached
HEADER_SPEC = tuple(HEADER_SPEC)
TOKEN_MSG_SPEC = tuple(TOKEN_MSG_SPEC)
TOKEN_SPEC = tuple(TOKEN_SPEC)
COMMIT_SPEC = tuple(COMMIT_SPEC)
RANK_HEADER_SPEC = tuple(RANK_HEADER_SPEC)
RESUME_FIXED = tuple(RESUME_FIXED)
PAYLOAD_SPECS = {t: tuple(sp) for t, sp in PAYLOAD_SPECS.items()}


def commit_valid_structure(data):
    """True if data is exactly one well-formed COMMIT file (structure only:
    magic, version 1, reserved 0, sig_len 2484, no missing or extra byte)."""
    if len(data) < COMMIT_HEADER_LEN:
        return False
    try:
        vals, _, pos = decode_spec(COMMIT_SPEC, data, want_canon=False)
    except Truncated:
        return False
    return (vals["magic"] == b"SPCM" and vals["version"] == 1
            and vals["reserved"] == 0 and vals["sig_len"] == SIG_LEN
            and pos == len(data))


def token_valid(data):
    """A join token parses: message (host_len 1..=253), sig_len 2484, the
    signature, and nothing after it."""
    try:
        vals, _, pos = decode_spec(TOKEN_SPEC, data, want_canon=False)
    except Truncated:
        return False
    return (1 <= vals["host_len"] <= 253 and vals["sig_len"] == SIG_LEN
            and pos == len(data))


# ---------------------------------------------------------------------------
# Signed ranges and signatures
# ---------------------------------------------------------------------------

SIGNED_RE = re.compile(r"(0|[1-9][0-9]*)\.\.(0|[1-9][0-9]*) (\S+)\Z")


def parse_signed(s):
    out = []
    for part in s.split("; "):
        m = SIGNED_RE.match(part)
        if not m:
            raise Problem("signed: cannot parse %r" % part)
        out.append((int(m.group(1)), int(m.group(2)), m.group(3)))
    return out


def fmt_signed(ranges):
    return "; ".join("%d..%d %s" % r for r in ranges)


def check_signed(entry, expected, required=True):
    """expected: list of (start, end, context) located by this checker."""
    probs = []
    if "signed" not in entry:
        if expected and required:
            probs.append("signed: missing (expected %s)" % fmt_signed(expected))
        return probs
    try:
        stated = parse_signed(entry["signed"])
    except Problem as e:
        return [str(e)]
    if stated != expected:
        probs.append("signed: entry says %s, the signed message is %s"
                     % (entry["signed"], fmt_signed(expected) or "(none)"))
    return probs


def check_signature_bytes(what, sig):
    if sig != b"\xaa" * SIG_LEN:
        return ["%s: signature is not %d bytes of 0xaa" % (what, SIG_LEN)]
    return []


# ---------------------------------------------------------------------------
# Frames
# ---------------------------------------------------------------------------

RECEIVER_KEYS = ("job", "rank", "peer", "incarnation", "size")


def parse_receiver(s):
    items = parse_field_list(s)
    keys = [k for k, _ in items]
    # protocol 12, 14.8: an optional trailing features= (absent: 1, v1 only)
    if keys != list(RECEIVER_KEYS) and keys != list(RECEIVER_KEYS) + ["features"]:
        raise Problem("receiver: fields must be %s [features]" % " ".join(RECEIVER_KEYS))
    d = dict(items)
    job = unhex(d["job"])
    if len(job) != 16:
        raise Problem("receiver: job is not 16 bytes")
    features = dec(d["features"], 64) if "features" in d else 1
    return {"job": job, "rank": dec(d["rank"], 32), "peer": dec(d["peer"], 32),
            "incarnation": dec(d["incarnation"], 32), "size": dec(d["size"], 32),
            "features": features}


def payload_length_ok(t, n, size):
    if t == HELLO:
        return n >= 14
    if t == COLLECTIVE:
        return n >= 16
    if t == HEARTBEAT:
        return n == 8
    if t == ABORT:
        return 8 <= n <= 8 + MAX_ABORT_MESSAGE
    if t == CKPT_BEGIN:
        return n == 8
    if t == CKPT_DATA:
        return 24 <= n <= 24 + MAX_CHUNK
    if t == CKPT_ACK:
        return n == 32
    if t == CKPT_COMMIT:
        return n == 2526 + 32 * size
    if t == RESUME:
        return n >= 8
    if t == BYE:
        return n == 0
    return True  # DATA


def header_verdict(h, rx):
    """The receiver's header checks, in order. Returns None if the header
    passes, else the verdict string."""
    if h["length"] > MAX_PAYLOAD:
        return "reject H1610 length"
    t = h["type"]
    if not 1 <= t <= 11:
        return "reject H1610 type"
    if h["flags"] != 0:
        return "reject H1610 flags"
    if h["service"] != 0:
        return "reject H1610 service"
    if h["membership_epoch"] != 0:
        return "reject H1610 membership_epoch"
    if h["job"] != rx["job"]:
        return "reject H1610 job"
    if h["source"] != rx["peer"]:
        return "reject H1610 source"
    if h["target"] != rx["rank"]:
        return "reject H1610 target"
    if h["incarnation"] < rx["incarnation"]:
        return "discard"
    if h["incarnation"] > rx["incarnation"]:
        return "reject H1610 incarnation"
    if t in CKPT_TYPES:
        if h["epoch"] < 1:
            return "reject H1610 epoch"
    elif t != RESUME:
        if h["epoch"] != 0:
            return "reject H1610 epoch"
    if not payload_length_ok(t, h["length"], rx["size"]):
        return "reject H1610 payload_length"
    if t == DATA:
        if h["tag"] >= 1 << 31:
            return "reject H1610 tag"
    elif t == COLLECTIVE and rx["features"] & FEATURE_COMMUNICATORS:
        # 15.2: with bit 2 the tag is the communicator id, 0..=2^31-1
        if h["tag"] > MAX_COMMUNICATOR_ID:
            return "reject H1610 tag"
    elif h["tag"] != 0:
        return "reject H1610 tag"
    return None


def payload_spec_for(t, payload, features=1):
    if t == RESUME and len(payload) > 8:
        return RESUME_WITH_COMMIT
    if t == COLLECTIVE and features & FEATURE_PIPELINED and len(payload) > 3:
        return pipelined_spec(payload[3])
    return PAYLOAD_SPECS[t]


def decode_payload(t, payload, features=1):
    """Decode and validate a payload (whose length already passed the
    per-type rule). Returns (values, canonical list) or None if it does not
    decode."""
    if t == COLLECTIVE and features & (FEATURE_PIPELINED | FEATURE_ELEMENT_TYPES):
        if collective_rule(payload, features) is not None:
            return None
        v, canon, _ = decode_spec(pipelined_spec(payload[3]), payload)
        return v, canon
    if t == DATA and features & FEATURE_P2P:
        if data_rule(payload) is not None:
            return None
        v, canon, _ = decode_spec(DATA3_SPEC, payload)
        return v, canon
    spec = payload_spec_for(t, payload)
    try:
        v, canon, pos = decode_spec(spec, payload)
    except Truncated:
        return None
    if pos != len(payload):
        return None
    ok = True
    if t == HELLO:
        ok = (v["protocol_version"] == 1 and v["reserved"] == 0
              and v["features"] & 1 == 1
              and len(payload) == 14 + v["token_len"]
              and token_valid(payload[14:]))
    elif t == COLLECTIVE:
        op, et, red = v["operation"], v["element_type"], v["reduction"]
        ok = (1 <= op <= 6 and v["phase"] <= 1
              and len(v["data"]) <= MAX_COLLECTIVE_DATA)
        if ok:
            if op in (3, 4):
                ok = et <= 6 and 1 <= red <= 10
            else:
                ok = et == 0 and red == 0
    elif t == ABORT:
        ok = v["reserved"] == 0 and len(v["message"]) <= MAX_ABORT_MESSAGE
    elif t == CKPT_BEGIN:
        ok = v["version"] == 1
    elif t == CKPT_DATA:
        ok = (v["kind"] <= 4 and v["reserved"] == b"\0\0\0"
              and len(v["chunk"]) <= MAX_CHUNK)
        if ok and v["kind"] in (1, 3, 4):
            ok = v["offset"] == 0 and v["total"] == 0 and v["chunk"] == b""
    elif t == CKPT_COMMIT:
        ok = commit_valid_structure(payload)
    elif t == RESUME:
        ok = v["status"] <= 3 and v["reserved"] == b"\0" * 7
        if ok and len(payload) > 8:
            ok = commit_valid_structure(payload[8:])
    return (v, canon) if ok else None


def frame_signed_ranges(t, payload):
    """Locate signed messages in a frame (offsets into the whole frame).
    Returns (ranges, signatures) or None when they cannot be located."""
    try:
        if t == HELLO:
            v, _, _ = decode_spec(TOKEN_SPEC, payload, 14, want_canon=False)
            start = HEADER_LEN + 14
            return ([(start, start + 37 + v["host_len"], JOIN_CONTEXT)], [v["signature"]])
        if t in (CKPT_COMMIT, RESUME):
            off = 0 if t == CKPT_COMMIT else 8
            if t == RESUME and len(payload) <= 8:
                return [], []
            v, _, _ = decode_spec(COMMIT_SPEC, payload, off, want_canon=False)
            start = HEADER_LEN + off
            return ([(start, start + COMMIT_HEADER_LEN + 32 * v["size"], COMMIT_CONTEXT)],
                    [v["signature"]])
    except Truncated:
        return None
    return [], []


def check_frame(entry):
    probs = []
    try:
        rx = parse_receiver(entry["receiver"])
        data = unhex(entry["bytes"])
    except Problem as e:
        return [str(e)]
    if len(data) < HEADER_LEN:
        return ["bytes: %d bytes, shorter than the 52-byte header" % len(data)]
    h, hcanon, _ = decode_spec(HEADER_SPEC, data)
    payload = data[HEADER_LEN:]
    verdict = header_verdict(h, rx)
    decoded = None
    if verdict is None:
        if len(payload) != h["length"]:
            return ["bytes: header says length %d but %d payload bytes follow"
                    % (h["length"], len(payload))]
        decoded = decode_payload(h["type"], payload, rx["features"])
        verdict = "accept" if decoded is not None else "reject H1610 payload"
    elif verdict == "discard":
        if len(payload) != h["length"]:
            probs.append("bytes: discard frame must carry its %d payload bytes, has %d"
                         % (h["length"], len(payload)))
    else:
        # rejected on the header: the payload is never read; the entry may
        # carry it or stop after the header
        if len(payload) not in (0, h["length"]):
            probs.append("bytes: header says length %d but %d payload bytes follow"
                         % (h["length"], len(payload)))

    stated = entry["verdict"]
    if not valid_verdict(stated, ("accept", "discard"), {"H1610": FRAME_CHECKS}):
        probs.append("verdict: not a valid frame verdict: %r" % stated)
    if stated != verdict:
        probs.append("verdict: entry says %r, computed %r" % (stated, verdict))

    if stated != "accept":
        for key in ("header", "payload"):
            if key in entry:
                probs.append("%s: given for a non-accept entry" % key)
        if "signed" in entry and h["type"] in TYPE_NAMES:
            loc = frame_signed_ranges(h["type"], payload)
            if loc is None:
                probs.append("signed: given but no signed message can be located")
            else:
                probs += check_signed(entry, loc[0], required=False)
        return probs
    if verdict != "accept":
        return probs

    # accept: compare every field both ways
    t = h["type"]
    for key in ("header", "payload"):
        if key not in entry:
            probs.append("%s: missing in an accept entry" % key)
    if probs:
        return probs
    try:
        sh = parse_field_list(entry["header"])
        sp = parse_field_list(entry["payload"])
    except Problem as e:
        return probs + [str(e)]
    _, pcanon = decoded
    probs += compare_fields("header", hcanon, sh)
    probs += compare_fields("payload", pcanon, sp)
    try:
        pspec = PAYLOAD_SPECS[t]
        if t == RESUME and len(sp) > len(RESUME_FIXED):
            pspec = RESUME_WITH_COMMIT
        if t == COLLECTIVE and rx["features"] & (FEATURE_PIPELINED | FEATURE_ELEMENT_TYPES):
            phase = dict(sp).get("phase", "")
            pspec = pipelined_spec(dec(phase, 8) if DEC_RE.match(phase) else 0)
        if t == DATA and rx["features"] & FEATURE_P2P:
            pspec = DATA3_SPEC
        enc = encode_spec(HEADER_SPEC, sh) + encode_spec(pspec, sp)
        if enc != data:
            probs.append("bytes: re-encoding the stated fields gives different bytes%s"
                         % first_diff(enc, data))
    except Problem as e:
        probs.append("re-encode: %s" % e)
    ranges, sigs = frame_signed_ranges(t, payload)
    for s in sigs:
        probs += check_signature_bytes("payload", s)
    probs += check_signed(entry, ranges)
    return probs


def first_diff(a, b):
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        if len(a) != len(b):
            return " (lengths %d and %d)" % (len(a), len(b))
        return ""
    lo, hi = 0, n  # a[:lo] == b[:lo], a[:hi] != b[:hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid
    return " (first difference at byte %d)" % lo


def valid_verdict(v, plain, rejects):
    if v in plain:
        return True
    parts = v.split(" ")
    return (len(parts) == 3 and parts[0] == "reject" and parts[1] in rejects
            and parts[2] in rejects[parts[1]])


# ---------------------------------------------------------------------------
# Rank files
# ---------------------------------------------------------------------------

def parse_expect(s, keys):
    items = parse_field_list(s)
    if [k for k, _ in items] != list(keys):
        raise Problem("expect: fields must be %s" % " ".join(keys))
    d = dict(items)
    out = {}
    for k in keys:
        if k == "job":
            out[k] = unhex(d[k])
            if len(out[k]) != 16:
                raise Problem("expect: job is not 16 bytes")
        else:
            out[k] = dec(d[k], 64 if k == "epoch" else 32)
    return out


def rank_file_verdict(data, exp):
    if len(data) < RANK_HEADER_LEN:
        return "reject H1619 truncated", None
    v, canon, _ = decode_spec(RANK_HEADER_SPEC, data)
    if v["magic"] != b"SPCK":
        return "reject H1619 magic", None
    if v["version"] != 1:
        return "reject H1619 version", None
    if v["job"] != exp["job"]:
        return "reject H1619 job", None
    if v["epoch"] != exp["epoch"]:
        return "reject H1619 epoch", None
    if v["rank"] != exp["rank"]:
        return "reject H1619 rank", None
    if v["size"] != exp["size"]:
        return "reject H1619 size", None
    if len(data) != RANK_HEADER_LEN + v["payload_length"]:
        return "reject H1619 length", None
    if sha256(data[RANK_HEADER_LEN:]) != v["payload_sha256"]:
        return "reject H1620 sha256", None
    return "accept", canon


def sha256(b):
    return hashlib.sha256(b).digest()


def check_rank_file(entry):
    try:
        exp = parse_expect(entry["expect"], ("job", "epoch", "rank", "size"))
        data = unhex(entry["bytes"])
    except Problem as e:
        return [str(e)]
    verdict, canon = rank_file_verdict(data, exp)
    return check_simple_verdict(
        entry, verdict, ("accept",),
        {"H1619": RANK_CHECKS, "H1620": ("sha256",)},
        ("header", "state"),
        lambda: check_rank_file_fields(entry, data, canon))


def check_rank_file_fields(entry, data, canon):
    probs = []
    try:
        sh = parse_field_list(entry["header"])
        state = unhex(entry["state"])
    except Problem as e:
        return [str(e)]
    probs += compare_fields("header", canon, sh)
    if state != data[RANK_HEADER_LEN:]:
        probs.append("state: differs from the bytes after the header")
    try:
        enc = encode_spec(RANK_HEADER_SPEC, sh) + state
        if enc != data:
            probs.append("bytes: re-encoding the stated fields gives different bytes%s"
                         % first_diff(enc, data))
    except Problem as e:
        probs.append("re-encode: %s" % e)
    return probs


def check_simple_verdict(entry, verdict, plain, rejects, accept_keys, accept_check):
    probs = []
    stated = entry["verdict"]
    if not valid_verdict(stated, plain, rejects):
        probs.append("verdict: not a valid verdict for kind %s: %r" % (entry["kind"], stated))
    if stated != verdict:
        probs.append("verdict: entry says %r, computed %r" % (stated, verdict))
    if stated != "accept":
        for key in accept_keys:
            if key in entry:
                probs.append("%s: given for a non-accept entry" % key)
        return probs
    if verdict != "accept":
        return probs
    for key in accept_keys:
        if key not in entry:
            probs.append("%s: missing in an accept entry" % key)
    if probs:
        return probs
    return accept_check()


# ---------------------------------------------------------------------------
# COMMIT files
# ---------------------------------------------------------------------------

def commit_file_verdict(data, exp):
    if len(data) < COMMIT_HEADER_LEN:
        return "reject H1621 truncated"
    magic = data[0:4]
    version, = struct.unpack_from("<I", data, 4)
    job = data[8:24]
    epoch, size, reserved = struct.unpack_from("<QII", data, 24)
    if magic != b"SPCM":
        return "reject H1621 magic"
    if version != 1:
        return "reject H1621 version"
    if job != exp["job"]:
        return "reject H1621 job"
    if epoch != exp["epoch"]:
        return "reject H1621 epoch"
    if reserved != 0:
        return "reject H1621 reserved"
    sl_off = COMMIT_HEADER_LEN + 32 * size
    if len(data) < sl_off + 2:
        return "reject H1621 truncated"
    sig_len, = struct.unpack_from("<H", data, sl_off)
    if sig_len != SIG_LEN:
        return "reject H1621 sig_len"
    end = sl_off + 2 + SIG_LEN
    if len(data) < end:
        return "reject H1621 truncated"
    if len(data) > end:
        return "reject H1621 trailing"
    if size != exp["size"]:
        return "reject H1623 size"
    return "accept"


def check_commit_file(entry):
    try:
        exp = parse_expect(entry["expect"], ("job", "epoch", "size"))
        data = unhex(entry["bytes"])
    except Problem as e:
        return [str(e)]
    verdict = commit_file_verdict(data, exp)
    probs = check_simple_verdict(
        entry, verdict, ("accept",),
        {"H1621": COMMIT_CHECKS, "H1623": ("size",)},
        ("fields", "signed"),
        lambda: check_commit_fields(entry, data))
    return probs


def check_commit_fields(entry, data):
    probs = []
    v, canon, _ = decode_spec(COMMIT_SPEC, data)
    try:
        stated = parse_field_list(entry["fields"])
    except Problem as e:
        return [str(e)]
    probs += compare_fields("fields", canon, stated)
    try:
        enc = encode_spec(COMMIT_SPEC, stated)
        if enc != data:
            probs.append("bytes: re-encoding the stated fields gives different bytes%s"
                         % first_diff(enc, data))
    except Problem as e:
        probs.append("re-encode: %s" % e)
    probs += check_signature_bytes("fields", v["signature"])
    probs += check_signed(entry, [(0, COMMIT_HEADER_LEN + 32 * v["size"], COMMIT_CONTEXT)])
    return probs


# ---------------------------------------------------------------------------
# Hosts
# ---------------------------------------------------------------------------

LABEL_RE = re.compile(r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\Z")
IPV4_PART_RE = re.compile(r"(0|[1-9][0-9]{0,2})\Z")


def host_valid(h):
    """h: str. DNS name (lowercase) or dotted IPv4 per docs/sperli-protocol.md, section 4.3."""
    if not 1 <= len(h) <= 253:
        return False
    if all(c in "0123456789." for c in h):
        parts = h.split(".")
        return (len(parts) == 4
                and all(IPV4_PART_RE.match(p) and int(p) <= 255 for p in parts))
    return all(LABEL_RE.match(label) for label in h.split("."))


def host_refused(h, refused=REFUSED_HOSTS):
    for r in refused:
        if h == r or h.endswith("." + r):
            return True
    return False


# ---------------------------------------------------------------------------
# Job descriptions
# ---------------------------------------------------------------------------

class JobDescReject(Exception):
    def __init__(self, verdict):
        Exception.__init__(self, verdict)
        self.verdict = verdict


class Reader:
    def __init__(self, data):
        self.data = data
        self.pos = 0

    def take(self, n):
        if self.pos + n > len(self.data):
            raise JobDescReject("reject H1615 truncated")
        b = self.data[self.pos:self.pos + n]
        self.pos += n
        return b

    def uint(self, n):
        return int.from_bytes(self.take(n), "little")


def decode_job_description(line):
    """Returns (verdict, canonical fields or None, signed ranges, signatures)."""
    if not is_hex(line):
        return "reject H1615 hex", None, [], []
    data = bytes.fromhex(line)
    r = Reader(data)
    try:
        version = r.uint(2)
        if version != 1:
            raise JobDescReject("reject H1615 version")
        job = r.take(16)
        size = r.uint(4)
        if not 1 <= size <= 4096:
            raise JobDescReject("reject H1615 size")
        rank = r.uint(4)
        if rank >= size:
            raise JobDescReject("reject H1615 rank")
        incarnation = r.uint(4)
        if incarnation < 1:
            raise JobDescReject("reject H1615 incarnation")
        hosts = []
        for _ in range(size):
            port = r.uint(2)
            if port < 1:
                raise JobDescReject("reject H1615 port")
            host_len = r.uint(1)
            if not 1 <= host_len <= 253:
                raise JobDescReject("reject H1615 host")
            hb = r.take(host_len)
            try:
                host = hb.decode("ascii")
            except UnicodeDecodeError:
                raise JobDescReject("reject H1615 host")
            if not host_valid(host):
                raise JobDescReject("reject H1615 host")
            if host_refused(host):
                raise JobDescReject("reject H1614 host")
            hosts.append((host, port))
        pubkey = r.take(PUBKEY_LEN)
        token_len = r.uint(2)
        token_off = r.pos
        token = r.take(token_len)
        if not token_valid(token):
            raise JobDescReject("reject H1615 token")
        ca = r.take(r.uint(4))
        rc = r.take(r.uint(4))
        sk_len = r.uint(2)
        if sk_len != (SECRET_KEY_LEN if rank == 0 else 0):
            raise JobDescReject("reject H1615 secret_key")
        sk = r.take(sk_len)
        rk = r.take(r.uint(4))
        if r.pos != len(data):
            raise JobDescReject("reject H1615 trailing")
    except JobDescReject as e:
        return e.verdict, None, [], []
    canon = [
        ("version", str(version)), ("job", job.hex()), ("size", str(size)),
        ("rank", str(rank)), ("incarnation", str(incarnation)),
        ("hosts", ",".join("%s:%d" % hp for hp in hosts)),
        ("job_public_key", pubkey.hex()), ("join_token", token.hex()),
        ("ca_cert_pem", ca.hex()), ("rank_cert_pem", rc.hex()),
        ("job_secret_key", sk.hex()), ("rank_key_pem", rk.hex()),
    ]
    tv, _, _ = decode_spec(TOKEN_SPEC, token, want_canon=False)
    ranges = [(token_off, token_off + 37 + tv["host_len"], JOIN_CONTEXT)]
    return "accept", canon, ranges, [tv["signature"]]


@functools.lru_cache(maxsize=64)
def encode_job_description(stated):
    names = ["version", "job", "size", "rank", "incarnation", "hosts",
             "job_public_key", "join_token", "ca_cert_pem", "rank_cert_pem",
             "job_secret_key", "rank_key_pem"]
    if [k for k, _ in stated] != names:
        raise Problem("cannot encode: fields %s expected" % " ".join(names))
    d = dict(stated)
    out = bytearray()
    out += dec(d["version"], 16).to_bytes(2, "little")
    job = unhex(d["job"])
    if len(job) != 16:
        raise Problem("job is not 16 bytes")
    out += job
    for k in ("size", "rank", "incarnation"):
        out += dec(d[k], 32).to_bytes(4, "little")
    if d["hosts"] != "":
        for item in d["hosts"].split(","):
            if ":" not in item:
                raise Problem("hosts: item without a port: %r" % item)
            host, port = item.rsplit(":", 1)
            hb = host.encode("ascii", "replace")
            if len(hb) > 255:
                raise Problem("hosts: host too long to encode")
            out += dec(port, 16).to_bytes(2, "little") + bytes([len(hb)]) + hb
    out += unhex(d["job_public_key"])
    tok = unhex(d["join_token"])
    out += len(tok).to_bytes(2, "little") + tok
    for k, w in (("ca_cert_pem", 4), ("rank_cert_pem", 4), ("job_secret_key", 2),
                 ("rank_key_pem", 4)):
        b = unhex(d[k])
        out += len(b).to_bytes(w, "little") + b
    return bytes(out)


def check_job_description(entry):
    line = entry["line"]
    verdict, canon, ranges, sigs = decode_job_description(line)
    data = bytes.fromhex(line) if verdict == "accept" else b""

    def accept_check():
        probs = []
        try:
            stated = parse_field_list(entry["fields"])
        except Problem as e:
            return [str(e)]
        probs += compare_fields("fields", canon, stated)
        try:
            enc = encode_job_description(stated)
            if enc != data:
                probs.append("line: re-encoding the stated fields gives a different line%s"
                             % first_diff(enc, data))
        except Problem as e:
            probs.append("re-encode: %s" % e)
        for s in sigs:
            probs += check_signature_bytes("join_token", s)
        probs += check_signed(entry, ranges)
        return probs

    return check_simple_verdict(
        entry, verdict, ("accept",),
        {"H1615": JOBDESC_CHECKS, "H1614": ("host",)},
        ("fields",), accept_check) + (
        check_signed_nonaccept_jobdesc(entry) if verdict != "accept"
        and entry["verdict"] != "accept" else [])


def check_signed_nonaccept_jobdesc(entry):
    """A rejected description may still carry `signed:`; if so it must name
    the token message as far as it can be located."""
    if "signed" not in entry:
        return []
    line = entry["line"]
    if not is_hex(line):
        return ["signed: given, but the line is not hex"]
    data = bytes.fromhex(line)
    try:
        r = Reader(data)
        r.take(22)
        size = r.uint(4)
        r.take(8)
        for _ in range(min(size, 1 << 20)):
            r.take(2)
            r.take(r.uint(1))
        r.take(PUBKEY_LEN)
        r.uint(2)
        off = r.pos
        tv, _, _ = decode_spec(TOKEN_MSG_SPEC, data, off, want_canon=False)
    except (JobDescReject, Truncated):
        return ["signed: given but no token message can be located"]
    return check_signed(entry, [(off, off + 37 + tv["host_len"], JOIN_CONTEXT)])


# ---------------------------------------------------------------------------
# Join tokens
# ---------------------------------------------------------------------------

def check_join_token_message(entry):
    return check_token_kind(entry, TOKEN_MSG_SPEC, with_sig=False)


def check_join_token(entry):
    return check_token_kind(entry, TOKEN_SPEC, with_sig=True)


def check_token_kind(entry, spec, with_sig):
    try:
        data = unhex(entry["bytes"])
        stated = parse_field_list(entry["fields"])
    except Problem as e:
        return [str(e)]
    probs = []
    try:
        v, canon, pos = decode_spec(spec, data)
    except Truncated as e:
        return ["bytes: truncated at field %s" % e]
    if pos != len(data):
        probs.append("bytes: %d bytes after the %s" % (len(data) - pos,
                                                       "token" if with_sig else "message"))
    if not 1 <= v["host_len"] <= 253:
        probs.append("bytes: host_len %d not in 1..=253" % v["host_len"])
    if with_sig and v["sig_len"] != SIG_LEN:
        probs.append("bytes: sig_len %d, not %d" % (v["sig_len"], SIG_LEN))
    probs += compare_fields("fields", canon, stated)
    try:
        enc = encode_spec(spec, stated)
        if enc != data:
            probs.append("bytes: re-encoding the stated fields gives different bytes%s"
                         % first_diff(enc, data))
    except Problem as e:
        probs.append("re-encode: %s" % e)
    if with_sig:
        probs += check_signature_bytes("fields", v["signature"])
        probs += check_signed(entry, [(0, 37 + v["host_len"], JOIN_CONTEXT)])
    return probs


# ---------------------------------------------------------------------------
# Reductions (docs/sperli-protocol.md, section 8.3)
# ---------------------------------------------------------------------------

def reduction_allowed(tname, red):
    kind = ELEMENT_TYPES[tname][2]
    # 17.2: minloc and maxloc only on the pairs, the pairs only them
    if (kind == "p") != (red in ("minloc", "maxloc")):
        return False
    if kind == "p":
        return True
    if kind == "b":
        return red in ("land", "lor", "lxor")
    if kind == "c":
        return red in ("sum", "prod")
    if tname == "u8":
        return red in ("band", "bor", "bxor")
    if kind == "f":
        return red in ("sum", "prod", "min", "max")
    return True


def f32_round(x):
    """Round a double to binary32 (nearest even), overflow to infinity."""
    try:
        return struct.unpack("<f", struct.pack("<f", x))[0]
    except OverflowError:
        return math.copysign(math.inf, x)


def float_minmax(a_bits, b_bits, width, want_min):
    fmt = "<f" if width == 4 else "<d"
    a = struct.unpack(fmt, a_bits)[0]
    b = struct.unpack(fmt, b_bits)[0]
    if math.isnan(a):
        return a_bits
    if math.isnan(b):
        return b_bits
    if a == b:
        if a == 0:
            a_neg = math.copysign(1.0, a) < 0
            b_neg = math.copysign(1.0, b) < 0
            if want_min:
                return a_bits if a_neg else b_bits
            return a_bits if not a_neg else b_bits
        return a_bits
    if want_min:
        return a_bits if a < b else b_bits
    return a_bits if a > b else b_bits


def f_op(x, y, op, width):
    """One IEEE operation of binary32 (width 4) or binary64: Python's
    doubles give binary64; a binary32 operation computed in binary64 and
    rounded once to binary32 is exact for + - * (53 >= 2*24 + 2)."""
    r = x + y if op == "+" else (x - y if op == "-" else x * y)
    return f32_round(r) if width == 4 else r


def complex_combine(red, a_bits, b_bits, w):
    """17.3: complex sum and the textbook product, one rounding per
    operation of the component format. Returns bytes, or 'nan' when a part
    is NaN."""
    fmt = "<f" if w == 4 else "<d"
    ar, ai = struct.unpack(fmt, a_bits[:w])[0], struct.unpack(fmt, a_bits[w:])[0]
    br, bi = struct.unpack(fmt, b_bits[:w])[0], struct.unpack(fmt, b_bits[w:])[0]
    if red == "sum":
        re_, im = f_op(ar, br, "+", w), f_op(ai, bi, "+", w)
    else:
        re_ = f_op(f_op(ar, br, "*", w), f_op(ai, bi, "*", w), "-", w)
        im = f_op(f_op(ar, bi, "*", w), f_op(ai, br, "*", w), "+", w)
    if math.isnan(re_) or math.isnan(im):
        return "nan"
    return struct.pack(fmt, re_) + struct.pack(fmt, im)


def loc_combine(tname, red, a_bits, b_bits):
    """17.3: minloc/maxloc; the left NaN wins, then the smaller (larger)
    value with -0 below +0, equal values the smaller index."""
    kind, w = PAIR_VALUE[tname]

    def key(bits):
        v = bits[:w]
        if kind == "f":
            x = struct.unpack("<f" if w == 4 else "<d", v)[0]
            return x, math.isnan(x), math.copysign(1.0, x) < 0
        return int.from_bytes(v, "little", signed=True), False, False

    u, unan, uneg = key(a_bits)
    v, vnan, vneg = key(b_bits)
    if unan:
        return a_bits
    if vnan:
        return b_bits

    def below(x, xneg, y, yneg):
        return x < y or (x == y and xneg and not yneg)

    if red == "minloc":
        if below(v, vneg, u, uneg):
            return b_bits
    elif below(u, uneg, v, vneg):
        return b_bits
    if not below(u, uneg, v, vneg) and not below(v, vneg, u, uneg):
        i = int.from_bytes(a_bits[w:], "little", signed=True)
        j = int.from_bytes(b_bits[w:], "little", signed=True)
        if j < i:
            return a_bits[:w] + b_bits[w:]
    return a_bits


def combine_element(tname, red, a_bits, b_bits):
    """Returns the result element's bytes, or the string 'nan' for a NaN
    whose bits are not fixed (float sum/prod)."""
    _, width, kind = ELEMENT_TYPES[tname]
    if kind == "c":
        return complex_combine(red, a_bits, b_bits, width // 2)
    if kind == "p":
        return loc_combine(tname, red, a_bits, b_bits)
    if kind == "b":
        x, y = a_bits[0] != 0, b_bits[0] != 0
        r = {"land": x and y, "lor": x or y, "lxor": x != y}[red]
        return bytes([int(r)])
    bits = 8 * width
    mask = (1 << bits) - 1
    if kind == "f":
        if red in ("min", "max"):
            return float_minmax(a_bits, b_bits, width, red == "min")
        fmt = "<f" if width == 4 else "<d"
        a = struct.unpack(fmt, a_bits)[0]
        b = struct.unpack(fmt, b_bits)[0]
        try:
            r = a + b if red == "sum" else a * b
        except OverflowError:  # pragma: no cover - floats do not raise here
            r = math.inf
        if width == 4:
            r = f32_round(r)
        if math.isnan(r):
            return "nan"
        return struct.pack(fmt, r)
    ua = int.from_bytes(a_bits, "little")
    ub = int.from_bytes(b_bits, "little")
    if kind == "s":
        sa = ua - (1 << bits) if ua >> (bits - 1) else ua
        sb = ub - (1 << bits) if ub >> (bits - 1) else ub
    else:
        sa, sb = ua, ub
    if red == "sum":
        r = ua + ub
    elif red == "prod":
        r = ua * ub
    elif red == "min":
        r = ua if sa <= sb else ub
    elif red == "max":
        r = ua if sa >= sb else ub
    elif red == "land":
        r = int(ua != 0 and ub != 0)
    elif red == "lor":
        r = int(ua != 0 or ub != 0)
    elif red == "lxor":
        r = int((ua != 0) != (ub != 0))
    elif red == "band":
        r = ua & ub
    elif red == "bor":
        r = ua | ub
    elif red == "bxor":
        r = ua ^ ub
    else:
        raise AssertionError(red)
    return (r & mask).to_bytes(width, "little")


def combine(tname, red, left, right):
    """left, right: lists of element byte strings. Returns list of results
    (bytes or 'nan'), or the string 'reject H1618'."""
    if not reduction_allowed(tname, red):
        return "reject H1618"
    return [combine_element(tname, red, a, b) for a, b in zip(left, right)]


def parse_elements(s, width, what):
    if s == "":
        return []
    out = []
    for item in s.split(" "):
        b = unhex(item)
        if len(b) != width:
            raise Problem("%s: element %r is not %d bytes" % (what, item, width))
        out.append(b)
    return out


def is_nan_bits(b, width):
    fmt = "<f" if width == 4 else "<d"
    return math.isnan(struct.unpack(fmt, b)[0])


def check_reduce(entry):
    tname = entry["type"]
    red = entry["reduction"]
    if tname not in ELEMENT_TYPES:
        return ["type: unknown element type %r" % tname]
    if red not in REDUCTIONS:
        return ["reduction: unknown reduction %r" % red]
    width = ELEMENT_TYPES[tname][1]
    kind = ELEMENT_TYPES[tname][2]
    try:
        left = parse_elements(entry["left"], width, "left")
        right = parse_elements(entry["right"], width, "right")
    except Problem as e:
        return [str(e)]
    if len(left) != len(right):
        return ["left has %d elements, right %d" % (len(left), len(right))]
    got = combine(tname, red, left, right)
    stated = entry["result"]
    if got == "reject H1618":
        if stated != got:
            return ["result: entry says %r, computed 'reject H1618'" % short(stated)]
        return []
    if stated == "reject H1618":
        return ["result: entry says 'reject H1618', computed %s" % fmt_elements(got)]
    items = stated.split(" ") if stated != "" else []
    if len(items) != len(got):
        return ["result: %d elements, computed %d" % (len(items), len(got))]
    probs = []
    for i, (s, g) in enumerate(zip(items, got)):
        if s == "nan":
            if kind not in ("f", "c"):
                probs.append("result[%d]: `nan` for an integer type" % i)
            elif g != "nan" and (kind == "c" or not is_nan_bits(g, width)):
                probs.append("result[%d]: entry says nan, computed %s" % (i, g.hex()))
            continue
        try:
            sb = unhex(s)
        except Problem as e:
            probs.append("result[%d]: %s" % (i, e))
            continue
        if len(sb) != width:
            probs.append("result[%d]: %r is not %d bytes" % (i, s, width))
        elif g == "nan":
            probs.append("result[%d]: entry says %s, computed a NaN (write `nan`: "
                         "sum and prod do not fix NaN bits)" % (i, s))
        elif sb != g:
            probs.append("result[%d]: entry says %s, computed %s" % (i, s, g.hex()))
    return probs


def fmt_elements(got):
    return " ".join(g if isinstance(g, str) else g.hex() for g in got)


def check_fold(entry):
    """17.3: the ascending left fold of 2 or more ranks' contributions."""
    tname, red = entry["type"], entry["reduction"]
    if tname not in ELEMENT_TYPES:
        return ["type: unknown element type %r" % tname]
    if red not in REDUCTIONS:
        return ["reduction: unknown reduction %r" % red]
    width = ELEMENT_TYPES[tname][1]
    try:
        ranks = [parse_elements(p, width, "ranks") for p in entry["ranks"].split(" | ")]
    except Problem as e:
        return [str(e)]
    if len(ranks) < 2:
        return ["ranks: a fold needs at least 2 ranks"]
    if any(len(r) != len(ranks[0]) for r in ranks):
        return ["ranks: contributions of different lengths"]
    if not reduction_allowed(tname, red):
        got = "reject H1618"
    else:
        acc = ranks[0]
        for r in ranks[1:]:
            if any(isinstance(x, str) for x in acc):
                return ["ranks: a NaN with unfixed bits in the middle of the fold"]
            acc = [combine_element(tname, red, a, b) for a, b in zip(acc, r)]
        got = fmt_elements(acc)
    if entry["result"] != got:
        return ["result: entry says %r, computed %r" % (short(entry["result"]), short(got))]
    return []


# ---------------------------------------------------------------------------
# Pipelined collectives: HELLO feature bit 1 (docs/sperli-protocol.md, 14)
# ---------------------------------------------------------------------------

FEATURE_PIPELINED = 2
FEATURE_COMMUNICATORS = 4
FEATURE_P2P = 8
FEATURE_ELEMENT_TYPES = 16
ELEMENT_WIDTH_BY_CODE = {c: w for c, w, _ in ELEMENT_TYPES.values()}
MAX_COMMUNICATOR_ID = (1 << 31) - 1
MAX_CHUNK_DATA = MAX_PAYLOAD - 16 - 16
REDUCING_OPS = (3, 4, 8)          # reduce, allreduce, reduce_scatter
COLL_HEAD = [("operation", U8, None), ("element_type", U8, None),
             ("reduction", U8, None), ("phase", U8, None), ("root", U32, None),
             ("sequence", U64, None)]
PIPE_OPEN_SPEC = tuple(COLL_HEAD + [("open.total", U64, None),
                                    ("open.fanout", U32, None),
                                    ("open.reserved", U32, None)])
PIPE_CHUNK_SPEC = tuple(COLL_HEAD + [("chunk.offset", U64, None),
                                     ("chunk.total", U64, None),
                                     ("chunk", "rest", None)])
PIPE_STAR_SPEC = tuple(COLL_HEAD + [("data", "rest", None)])


def pipelined_spec(phase):
    """14.2: the layout after the collective header depends on the phase."""
    if phase == 2:
        return PIPE_OPEN_SPEC
    if phase in (3, 4):
        return PIPE_CHUNK_SPEC
    return PIPE_STAR_SPEC


FEATURE_PAIR_EXCHANGE = 64


def pair_exchange(size, features):
    """19.1: two ranks of a job with feature bit 6 exchange."""
    return size == 2 and features & FEATURE_PAIR_EXCHANGE != 0


FEATURE_OWNER_FOLD = 128
OWNER_FOLD_MIN_BYTES = 65536       # T7 (20.1)
OWNER_FOLD_CHUNK = 16384           # 20.3


def runs_owner_fold(features, size, length):
    """20.1: an allreduce of `length` bytes per rank runs the owner fold."""
    bits = FEATURE_PIPELINED | FEATURE_OWNER_FOLD
    return features & bits == bits and size >= 2 and \
        length >= OWNER_FOLD_MIN_BYTES and length // 4096 >= size


FEATURE_LARGE_PAIR_EXCHANGE = 512
PIPELINE_T = 262144                # T (14.5)
PAIR_EXCHANGE_BELOW = 1048576      # 22.1


def exchange_replaces_chain(features, size, length):
    """22.1: an allreduce of T up to 1 MiB (exclusive) on two ranks with
    bits 1, 6 and 9 runs the pair exchange (unless it runs the owner
    fold)."""
    bits = FEATURE_PIPELINED | FEATURE_PAIR_EXCHANGE | FEATURE_LARGE_PAIR_EXCHANGE
    return features & bits == bits and size == 2 and \
        PIPELINE_T <= length < PAIR_EXCHANGE_BELOW and \
        not runs_owner_fold(features, size, length)


def owner_fold_block(length, width, size, b):
    """20.2: block b's byte range: q + 1 elements for b < r, else q."""
    e = length // width
    q, r = divmod(e, size)
    start = b * q + min(b, r)
    return start * width, (start + q + (1 if b < r else 0)) * width


def owner_fold_stream(rx, call, due):
    """20.3: for an owner-fold entry (rank and peer given), the stream due
    from the peer: (total, L_b); None for any other entry. Raises Problem
    when `due` is not what that rank takes from that peer."""
    rank, peer = rx.get("rank"), rx.get("peer")
    if rank is None or peer is None or call["operation"] != 4 or call["length"] is None:
        return None
    if not runs_owner_fold(rx["features"], rx["size"], call["length"]):
        return None
    if due["phase"] not in (3, 4):
        raise Problem("due: an owner fold takes phase 3 or 4 from a peer, not %d" % due["phase"])
    b = rank if due["phase"] == 3 else peer
    if due["root"] != b or rank == peer or rank >= rx["size"] or peer >= rx["size"]:
        raise Problem("due: rank %d takes phase %d root=%d from rank %d, not root=%d"
                      % (rank, due["phase"], b, peer, due["root"]))
    w = ELEMENT_WIDTH_BY_CODE[call["element_type"]]
    start, end = owner_fold_block(call["length"], w, rx["size"], b)
    total = end - start
    align = 8 * w // math.gcd(8, w)
    chunk = max(OWNER_FOLD_CHUNK - OWNER_FOLD_CHUNK % align, align)
    return total, max(min(chunk, total), 1)


def collective_rule(p, features):
    """The decode rules of 7.3/8.4 and, with bit 1, 14.2. Returns None when
    the payload decodes, else the name of the rule it breaks."""
    if len(p) < 16:
        return "payload_length"
    op, et, red, ph = p[0], p[1], p[2], p[3]
    bit1 = features & FEATURE_PIPELINED
    if not 1 <= op <= (8 if bit1 else 6):
        return "operation"
    if not bit1 or op in (1, 5, 6):
        phases = (0, 1)
    elif op in (7, 8):
        phases = (2, 3, 4)
    else:
        phases = (0, 1, 2, 3, 4)
    if ph not in phases or (ph == 3 and op not in REDUCING_OPS):
        return "phase"
    if op in REDUCING_OPS:
        bit4 = features & FEATURE_ELEMENT_TYPES
        if et > (17 if bit4 else 6):
            return "element_type"
        if not 1 <= red <= (13 if bit4 else 10):
            return "reduction"
    else:
        if et != 0:
            return "element_type"
        if red != 0:
            return "reduction"
    body = p[16:]
    if ph == 2:
        if len(body) != 16:
            return "open_length"
        total = int.from_bytes(body[0:8], "little")
        fanout = int.from_bytes(body[8:12], "little")
        if body[12:16] != b"\0\0\0\0":
            return "open_reserved"
        if total == 0:
            return "open_total"
        if not 1 <= fanout <= (4095 if op == 2 else 1):
            return "open_fanout"
    elif ph in (3, 4):
        if len(body) < 16:
            return "chunk_header"
        offset = int.from_bytes(body[0:8], "little")
        total = int.from_bytes(body[8:16], "little")
        n = len(body) - 16
        if n == 0:
            return "chunk_empty"
        if offset + n > total:       # Python ints: an overflow is past the end too
            return "chunk_end"
        align = 8
        if features & FEATURE_ELEMENT_TYPES and op in REDUCING_OPS:
            # 17.3: lcm(8, width) of the header's element type
            w = ELEMENT_WIDTH_BY_CODE[et]
            align = 8 * w // math.gcd(8, w)
        if offset + n < total and n % align != 0:
            return "chunk_align"
    elif len(body) > MAX_COLLECTIVE_DATA:
        return "payload_length"
    return None


STREAM_CHECKS = ("operation", "phase", "element_type", "reduction",
                 "open_length", "open_total", "open_fanout", "open_reserved",
                 "chunk_header", "chunk_empty", "chunk_end", "chunk_align",
                 "payload_length", "shape", "root", "sequence", "fanout",
                 "total", "offset", "length")
RANGE_RE = re.compile(r"(0|[1-9][0-9]*)\.\.(0|[1-9][0-9]*)\Z")


def length_code(op):
    """14.4: lengths that differ are H1618 for the reducing calls (8.4)."""
    return "H1618" if op in REDUCING_OPS else "H1617"


def other_shape(call, due, op, ph, seq):
    """14.4 check 2 (at the collector): the opening frame of the other shape."""
    if seq != call["sequence"]:
        return False
    if due["phase"] == 2 and ph == 0:
        star_form = {3: 3, 4: 4, 8: 3, 7: 5}.get(call["operation"])
        return op == star_form
    if due["phase"] == 0 and ph == 2:
        c = call["operation"]
        return (op == c and c in (3, 4)) or (c == 3 and op == 8 and due["root"] == 0) \
            or (c == 5 and op == 7 and due["root"] == 0)
    return False


def stream_take(rx, call, due, p, st):
    """Judge one frame by 14.4; returns (verdict or None, what it took)."""
    rule = collective_rule(p, rx["features"])
    if rule is not None:
        return "reject H1610 " + rule, None
    op, et, red, ph = p[0], p[1], p[2], p[3]
    root = int.from_bytes(p[4:8], "little")
    seq = int.from_bytes(p[8:16], "little")
    if other_shape(call, due, op, ph, seq):
        return "reject %s shape" % length_code(call["operation"]), None
    for name, want, got in (("operation", call["operation"], op),
                            ("element_type", call["element_type"], et),
                            ("reduction", call["reduction"], red),
                            ("phase", due["phase"], ph), ("root", due["root"], root),
                            ("sequence", call["sequence"], seq)):
        if want != got:
            return "reject H1617 " + name, None
    body = p[16:]
    if ph in (0, 1):
        return None, "star:%d" % len(body)
    if ph == 2:
        total = int.from_bytes(body[0:8], "little")
        fanout = int.from_bytes(body[8:12], "little")
        if op == 2 and fanout >= rx["size"]:
            return "reject H1617 fanout", None
        if call["length"] is not None and total != call["length"]:
            return "reject %s total" % length_code(op), None
        return None, "open:%d/%d" % (total, fanout)
    if st is None:
        raise Problem("call: a chunk stream needs a length, not `any`")
    offset = int.from_bytes(body[0:8], "little")
    total = int.from_bytes(body[8:16], "little")
    n = len(body) - 16
    if total != st["total"]:
        first = st["next"] == 0
        return "reject %s total" % ("H1618" if first and ph == 3 else "H1617"), None
    if offset != st["next"]:
        return "reject H1617 offset", None
    if st["chunk"] is None:
        st["chunk"] = n          # the first chunk fixes L
    elif n != min(st["chunk"], st["total"] - st["next"]):
        return "reject H1617 length", None
    if st.get("fixed") is not None and n != min(st["fixed"], st["total"] - st["next"]):
        return "reject H1617 length", None      # 20.4: every chunk is L_b
    start = st["next"]
    st["next"] += n
    return None, "%d..%d" % (start, st["next"])


def check_collective_stream(entry):
    rxf = dict(parse_field_list(entry["receiver"]))
    if sorted(rxf) not in (["features", "size"], ["features", "rank", "size"],
                           ["features", "peer", "rank", "size"]):
        return ["receiver: fields must be size features [rank [peer]]"]
    rx = {"size": dec(rxf["size"], 32), "features": dec(rxf["features"], 64)}
    for k in ("rank", "peer"):
        if k in rxf:
            rx[k] = dec(rxf[k], 32)
    cf = parse_field_list(entry["call"])
    if [k for k, _ in cf] != ["operation", "element_type", "reduction", "sequence", "length"]:
        return ["call: fields must be operation element_type reduction sequence length"]
    c = dict(cf)
    call = {"operation": dec(c["operation"], 8), "element_type": dec(c["element_type"], 8),
            "reduction": dec(c["reduction"], 8), "sequence": dec(c["sequence"], 64),
            "length": None if c["length"] == "any" else dec(c["length"], 64)}
    df = parse_field_list(entry["due"])
    if [k for k, _ in df] != ["phase", "root"]:
        return ["due: fields must be phase root"]
    due = {"phase": dec(dict(df)["phase"], 8), "root": dec(dict(df)["root"], 32)}
    if "rank" in rxf and call["operation"] == 4 and call["length"] is not None \
            and exchange_replaces_chain(rx["features"], rx["size"], call["length"]) \
            and due["phase"] != 0:
        # 22.1: the exchange at both ranks
        return ["due: an allreduce of %d bytes on two ranks with bit 9 takes phase 0, not %d"
                % (call["length"], due["phase"])]
    if "rank" in rxf and call["operation"] == 4 and due["phase"] in (0, 1):
        # 8.2, 19.3: what a rank of the star's allreduce takes
        rank = dec(rxf["rank"], 32)
        want = 0 if rank == 0 or pair_exchange(rx["size"], rx["features"]) else 1
        if due["phase"] != want:
            return ["due: rank %d takes phase %d, not %d" % (rank, want, due["phase"])]
    frames = [unhex(f) for f in entry["frames"].split(" ")] if entry["frames"] else []
    try:
        fold = owner_fold_stream(rx, call, due)
    except Problem as p:
        return [str(p)]
    st = None
    if due["phase"] in (3, 4) and fold is not None:
        st = {"total": fold[0], "next": 0, "chunk": None, "fixed": fold[1]}
    elif due["phase"] in (3, 4) and call["length"] is not None:
        st = {"total": call["length"], "next": 0, "chunk": None}
    verdict, at, taken = "accept", None, []
    for i, f in enumerate(frames):
        v, t = stream_take(rx, call, due, f, st)
        if v is not None:
            verdict, at = v, i
            break
        taken.append(t)
    probs = []
    stated = entry["verdict"]
    if not valid_verdict(stated, ("accept",), {"H1610": STREAM_CHECKS,
                                               "H1617": STREAM_CHECKS,
                                               "H1618": STREAM_CHECKS}):
        probs.append("verdict: not a valid stream verdict: %r" % stated)
    if stated != verdict:
        probs.append("verdict: entry says %r, computed %r" % (stated, verdict))
        return probs
    if verdict == "accept":
        for k in ("at",):
            if k in entry:
                probs.append("%s: given for an accept entry" % k)
        complete = "yes" if st is None or st["next"] == st["total"] else "no"
        if entry.get("taken") != " ".join(taken):
            probs.append("taken: entry says %r, computed %r" % (entry.get("taken"), " ".join(taken)))
        if entry.get("complete") != complete:
            probs.append("complete: entry says %r, computed %r" % (entry.get("complete"), complete))
    else:
        for k in ("taken", "complete"):
            if k in entry:
                probs.append("%s: given for a reject entry" % k)
        if entry.get("at") != str(at):
            probs.append("at: entry says %r, computed %d" % (entry.get("at"), at))
    return probs


# ---------------------------------------------------------------------------
# Communicators: HELLO feature bit 2 (docs/sperli-protocol.md, 15)
# ---------------------------------------------------------------------------

NO_COLOR = (1 << 64) - 1
SPLIT_RECORD = 24
SPLIT_VERDICTS = ("accept", "reject H1617 exchange", "reject H1617 length",
                  "reject H1618 ids")


def split_compute(x, size, me):
    """15.3: from the allgathered records (24 bytes per parent rank),
    (verdict, records, id, members, rank) for parent rank `me`."""
    if len(x) != SPLIT_RECORD * size:
        return "reject H1617 length", None, None, None, None
    recs = []
    for i in range(size):
        color, key, highest = struct.unpack_from("<QQQ", x, SPLIT_RECORD * i)
        if color != NO_COLOR and color > 0xFFFFFFFF:
            return "reject H1617 exchange", None, None, None, None
        if key >= 1 << 63:
            key -= 1 << 64            # two's complement i64
        if not -(1 << 31) <= key < 1 << 31:
            return "reject H1617 exchange", None, None, None, None
        if highest > MAX_COMMUNICATOR_ID:
            return "reject H1617 exchange", None, None, None, None
        recs.append((None if color == NO_COLOR else color, key, highest))
    new_id = 1 + max(h for _, _, h in recs)
    if new_id > MAX_COMMUNICATOR_ID:
        return "reject H1618 ids", None, None, None, None
    mine = recs[me][0]
    if mine is None:
        return "accept", recs, new_id, None, None
    group = sorted((k, p) for p, (c, k, _) in enumerate(recs) if c == mine)
    members = [p for _, p in group]
    return "accept", recs, new_id, members, members.index(me)


def check_communicator_split(entry):
    probs = []
    par = dict(parse_field_list(entry["parent"]))
    if sorted(par) != ["rank", "size"]:
        return ["parent: fields must be size rank"]
    size, me = dec(par["size"], 32), dec(par["rank"], 32)
    if not 1 <= size or me >= size:
        return ["parent: rank %d is not below size %d" % (me, size)]
    x = unhex(entry["exchange"])
    verdict, recs, new_id, members, rank = split_compute(x, size, me)
    stated = entry["verdict"]
    if stated not in SPLIT_VERDICTS:
        probs.append("verdict: not a split verdict: %r" % stated)
    if stated != verdict:
        probs.append("verdict: entry says %r, computed %r" % (stated, verdict))
    keys = ("records", "id", "members", "rank")
    if verdict != "accept":
        for k in keys:
            if k in entry:
                probs.append("%s: given for a rejected split" % k)
        return probs
    for k in keys:
        if k not in entry:
            probs.append("%s: missing in an accepted split" % k)
    if probs:
        return probs
    want = {
        "records": " ".join("%s/%d/%d" % ("none" if c is None else c, k, h)
                            for c, k, h in recs),
        "id": str(new_id),
        "members": "none" if members is None else ",".join(map(str, members)),
        "rank": "none" if rank is None else str(rank),
    }
    for k in keys:
        if entry[k] != want[k]:
            probs.append("%s: entry says %r, computed %r" % (k, entry[k], want[k]))
    return probs


def check_communicator_take(entry):
    probs = []
    rx = dict(parse_field_list(entry["receiver"]))
    if sorted(rx) != ["highest", "making", "rank"]:
        return ["receiver: fields must be rank highest making"]
    me, highest = dec(rx["rank"], 32), dec(rx["highest"], 32)
    if rx["making"] not in ("yes", "no"):
        return ["receiver: making is yes or no"]
    making = rx["making"] == "yes"
    comms = {}
    for item in entry["communicators"].split(" "):
        cid, _, mem = item.partition(":")
        members = [dec(m, 32) for m in mem.split(",")]
        if me not in members:
            probs.append("communicators: %s does not hold the receiver" % cid)
        comms[dec(cid, 32)] = members
    tk = dict(parse_field_list(entry["take"]))
    if sorted(tk) != ["communicator", "from"]:
        return probs + ["take: fields must be from communicator"]
    frm, c = dec(tk["from"], 32), dec(tk["communicator"], 32)
    if frm not in comms.get(c, []):
        probs.append("take: rank %d is not a member of communicator %d" % (frm, c))
    tags = [dec(t, 32) for t in entry["frames"].split(" ") if t != ""]
    verdict, at = "accept", "none"
    for i, t in enumerate(tags):
        if t == c:
            at = str(i)
            break
        # 15.4 table: kept for a shared communicator of which the sender is
        # a member, or above highest while making one; else H1617
        kept = (frm in comms[t]) if t in comms else (making and t > highest)
        if not kept:
            verdict, at = "reject H1617 communicator", str(i)
            break
    if entry["verdict"] != verdict:
        probs.append("verdict: entry says %r, computed %r" % (entry["verdict"], verdict))
    if entry["at"] != at:
        probs.append("at: entry says %r, computed %r" % (entry["at"], at))
    return probs


# ---------------------------------------------------------------------------
# Point-to-point on communicators: HELLO feature bit 3 (section 16)
# ---------------------------------------------------------------------------

DATA_HEADER_LEN = 24
MAX_MESSAGE_FRAME_DATA = MAX_PAYLOAD - DATA_HEADER_LEN
DATA3_SPEC = ((("communicator", U32, None), ("kind", U8, None),
               ("reserved", "hex", 3), ("message", U64, None),
               ("total", U64, None), ("data", "rest", None)))
MESSAGE_CHECKS = ("continuation", "message_number", "length", "communicator",
                  "notice", "notice_fields")


def data_rule(p):
    """16.2: the decode rules of a DATA payload with bit 3, in order.
    Returns None when it decodes, else the rule's word."""
    if len(p) < DATA_HEADER_LEN:
        return "data_header"
    comm = int.from_bytes(p[0:4], "little")
    kind = p[4]
    message = int.from_bytes(p[8:16], "little")
    total = int.from_bytes(p[16:24], "little")
    n = len(p) - DATA_HEADER_LEN
    if comm > MAX_COMMUNICATOR_ID:
        return "communicator_id"
    if kind > 2:
        return "kind"
    if p[5:8] != b"\0\0\0":
        return "reserved"
    if message == 0:
        return "message_zero"
    if kind < 2 and n > total:
        return "data_length"
    if kind == 2 and (total != 0 or n != 0):
        return "notice_body"
    return None


def slash_numbers(item, n, what):
    parts = item.split("/")
    if len(parts) != n or not all(DEC_RE.match(x) for x in parts):
        raise Problem("%s: %r is not %d numbers separated by /" % (what, item, n))
    return [int(x) for x in parts]


def check_message_stream(entry):
    """16.4: the DATA frames one receiver takes from one peer."""
    rx = dict(parse_field_list(entry["receiver"]))
    if sorted(rx) != ["features", "frame_data", "highest", "peer", "rank"]:
        return ["receiver: fields must be rank peer features highest frame_data"]
    me, peer = dec(rx["rank"], 32), dec(rx["peer"], 32)
    features, highest = dec(rx["features"], 64), dec(rx["highest"], 32)
    max_data = dec(rx["frame_data"], 64)
    if not features & FEATURE_P2P or max_data == 0:
        return ["receiver: needs bit 3 and frame_data >= 1"]
    comms = {}
    for item in entry["communicators"].split(" "):
        if item in ("", "none"):
            continue
        cid, _, mem = item.partition(":")
        members = [dec(m, 32) for m in mem.split(",")]
        if me not in members:
            return ["communicators: %s does not hold the receiver" % cid]
        comms[dec(cid, 32)] = members
    waiting = {}
    for item in entry["sent"].split(" "):
        if item in ("", "none"):
            continue
        number, comm, tag = slash_numbers(item, 3, "sent")
        waiting[number] = (comm, tag)
    can_make = bool(features & FEATURE_COMMUNICATORS)

    def route(c):
        # 16.4 check 4: kept, kept pending, or rejected
        if c == 0 or (c in comms and peer in comms[c]):
            return "keep"
        if c not in comms and can_make and c > highest:
            return "pending"
        return None

    last, coming, outcomes = 0, None, []
    verdict, at = "accept", None
    items = [x for x in entry["frames"].split(" ") if x not in ("", "none")]
    for i, item in enumerate(items):
        tag, comm, kind, number, total, n = slash_numbers(item, 6, "frames")
        if tag > MAX_COMMUNICATOR_ID or comm > MAX_COMMUNICATOR_ID or kind > 2:
            return ["frames: %r is not a frame that decodes" % item]
        if number == 0 or (kind < 2 and (n > total or n > MAX_MESSAGE_FRAME_DATA)) \
                or (kind == 2 and (total or n)):
            return ["frames: %r breaks a decode rule of 16.2" % item]
        fail = None
        if kind == 2:
            if number not in waiting:
                fail = "notice"
            elif waiting[number] != (comm, tag):
                fail = "notice_fields"
            else:
                del waiting[number]
                outcomes.append("notice:%d" % number)
        else:
            if coming is not None:
                first = False
                if coming["fields"] != (comm, kind, number, total, tag):
                    fail = "continuation"
                received = coming["received"]
            else:
                first = True
                if number != last + 1:
                    fail = "message_number"
                received = 0
            if fail is None and n != min(max_data, total - received):
                fail = "length"
            if fail is None:
                r = route(comm) if first else coming["route"]
                if r is None:
                    fail = "communicator"
            if fail is None:
                if first:
                    last = number
                received += n
                if received == total:
                    coming = None
                    outcomes.append("%s:%d" % (r, number))
                else:
                    coming = {"fields": (comm, kind, number, total, tag),
                              "received": received, "route": r}
                    outcomes.append("part:%d" % number)
        if fail is not None:
            verdict, at = "reject H1610 " + fail, str(i)
            break
    probs = []
    if entry["verdict"] != verdict:
        probs.append("verdict: entry says %r, computed %r" % (entry["verdict"], verdict))
    if entry.get("at") != at:
        probs.append("at: entry says %r, computed %r" % (entry.get("at"), at))
    want = " ".join(outcomes) if outcomes else "none"
    if entry["outcomes"] != want:
        probs.append("outcomes: entry says %r, computed %r" % (entry["outcomes"], want))
    return probs



# ---------------------------------------------------------------------------
# Feature bit 5: membership epochs (protocol section 18)
# ---------------------------------------------------------------------------

MEMBER_CONTEXT = "SPERLI-MEMBER-1"
NO_ROLLBACK = 2**64 - 1


class RecordReject(Exception):
    """A record of section 18 fails the named check (H1610 unless said)."""

    def __init__(self, check, code="H1610"):
        Exception.__init__(self, check)
        self.check = check
        self.code = code


class RecordReader(Reader):
    """Reads fields in order; a field that does not fit is `truncated`."""

    def take(self, n):
        if self.pos + n > len(self.data):
            raise RecordReject("truncated")
        return Reader.take(self, n)

    def end(self):
        if self.pos != len(self.data):
            raise RecordReject("trailing")


def read_suspect_list(r, count, size, own):
    out = []
    for _ in range(count):
        s = r.uint(4)
        low = out[-1] + 1 if out else 0
        if s >= size or s < low or s == own:
            raise RecordReject("suspects")
        out.append(s)
    return out


def entry_field(r, n, ok):
    """An n-byte field of a change entry that must satisfy ok (check `entry`)."""
    v = r.uint(n)
    if not ok(v):
        raise RecordReject("entry")
    return v


def decode_membership(data):
    """Section 18.3 checks 1-13, field by field. Returns a dict."""
    r = RecordReader(data)
    if r.take(4) != b"SPMB":
        raise RecordReject("magic")
    if r.uint(2) != 1:
        raise RecordReject("version")
    mode = r.uint(1)
    if mode not in (1, 2):
        raise RecordReject("mode")
    agreed = r.uint(1)
    if agreed > 1:
        raise RecordReject("agreed")
    job = r.take(16)
    start = r.uint(4)
    if start == 0:
        raise RecordReject("epoch")
    epoch = r.uint(4)
    if epoch < 2:
        raise RecordReject("epoch")
    size = r.uint(4)
    if not 1 <= size <= 4096:
        raise RecordReject("size")
    changed = r.uint(4)
    if not 1 <= changed <= size - 1:
        raise RecordReject("changed")
    rollback = r.uint(8)
    if (mode == 2) != (rollback == NO_ROLLBACK):
        raise RecordReject("rollback")
    incs = [r.uint(4) for _ in range(size)]
    changes = []
    for _ in range(changed):
        rank = r.uint(4)
        low = changes[-1][0] + 1 if changes else 0
        if rank >= size or rank < low:
            raise RecordReject("entry")
        cert = r.take(32)
        if mode == 1:
            port = entry_field(r, 2, lambda v: v >= 1)
            host = r.take(entry_field(r, 1, lambda v: 1 <= v <= 253))
            host = host.decode("latin-1")
            if not (host.isascii() and host_valid(host)) or incs[rank] == 0:
                raise RecordReject("entry")
            changes.append((rank, cert, port, host))
        else:
            if any(cert):
                raise RecordReject("entry")
            if r.uint(2) != 0 or r.uint(1) != 0 or incs[rank] != 0:
                raise RecordReject("entry")
            changes.append((rank, None, None, None))
    if not any(incs):
        raise RecordReject("members")
    signed_end = r.pos
    if r.uint(2) != 2484:
        raise RecordReject("sig_len")
    sig = r.take(2484)
    r.end()
    return {"mode": mode, "agreed": agreed, "job": job, "start": start,
            "epoch": epoch, "size": size, "rollback": rollback, "incs": incs,
            "changes": changes, "signed_end": signed_end, "sig": sig}


def membership_fields(m):
    def change(c):
        rank, cert, port, host = c
        if cert is None:
            return "%d:none" % rank
        return "%d:%s:%d:%s" % (rank, cert.hex(), port, host)
    return ("magic=SPMB version=1 mode=%s agreed=%d job=%s start_incarnation=%d "
            "epoch=%d size=%d changed=%d rollback=%d incarnations=%s changes=%s "
            "sig_len=2484 signature=%s"
            % ("replace" if m["mode"] == 1 else "shrink", m["agreed"],
               m["job"].hex(), m["start"], m["epoch"], m["size"],
               len(m["changes"]), m["rollback"],
               ",".join(map(str, m["incs"])),
               ",".join(change(c) for c in m["changes"]), m["sig"].hex()))


def membership_state_verdict(m, data, rx):
    """Section 18.3 checks 14, 15, 17, 18 (16, the signature, not judged)."""
    incs_now = [dec(x, 32) for x in rx["incarnations"].split(",")]
    if (m["job"] != unhex(rx["job"]) or m["size"] != dec(rx["size"], 32)
            or m["start"] != dec(rx["start_incarnation"], 32)):
        return "reject H1610 job"
    cur = dec(rx["epoch"], 32)
    if m["epoch"] < cur:
        return "discard"
    if m["epoch"] == cur:
        return "discard" if rx["held"] == "same" else "reject H1610 equivocation"
    skipped = m["epoch"] > cur + 1
    changed = dict((c[0], c) for c in m["changes"])
    for n, (new, old) in enumerate(zip(m["incs"], incs_now)):
        if old == 0 and new != 0:
            return "reject H1610 history"
        if n in changed:
            if m["mode"] == 1 and new <= old:
                return "reject H1610 history"
        elif (not skipped and new != old) or (skipped and new != 0 and new < old):
            return "reject H1610 history"
        if n in changed and changed[n][3] is not None and changed[n][3].endswith(".invalid"):
            return "reject H1614 history"
    if m["incs"][dec(rx["rank"], 32)] != dec(rx["incarnation"], 32):
        return "reject H1613 fenced"
    return "accept"


def membership_header_verdict(features, t, got, current):
    """Checks 2 and 5 of the header, section 6.2 and, with bit 5, 18.2."""
    bit5 = features & (1 << 5) != 0
    if not 1 <= t <= (12 if bit5 else 11):
        return "reject H1610 type"
    if not bit5:
        return "accept" if got == 0 else "reject H1610 membership_epoch"
    if t == 1:
        return "accept" if got == 0 else "reject H1610 membership_epoch"
    if t in (4, 5, 11):
        # HEARTBEAT, ABORT, BYE: frames of the connection, any epoch up to
        # the current one, 0 included (section 18.2).
        return "accept" if got <= current else "reject H1610 membership_epoch"
    if got == 0 or got > current:
        return "reject H1610 membership_epoch"
    if got < current:
        return "read" if t == 12 else "discard"
    return "accept"


def check_membership_header(entry):
    rx = dict(parse_field_list(entry["receiver"]))
    h = dict(parse_field_list(entry["header"]))
    if sorted(rx) != ["epoch", "features"] or sorted(h) != ["membership_epoch", "type"]:
        return ["receiver: features= epoch=; header: type= membership_epoch="]
    want = membership_header_verdict(dec(rx["features"]), dec(h["type"], 8),
                                     dec(h["membership_epoch"], 32), dec(rx["epoch"], 32))
    if entry["verdict"] != want:
        return ["verdict: entry says %r, computed %r" % (entry["verdict"], want)]
    return []


def stated_or_absent(entry, key, want, probs):
    if want is None:
        if key in entry:
            probs.append("%s: given, but the record does not decode" % key)
    elif entry.get(key) != want:
        probs.append("%s: entry says %r, computed %r"
                     % (key, short(entry.get(key, "")), short(want)))


def stated_lines(entry, probs, verdict, **optional):
    """Compares the optional lines (None: must be absent) and the verdict."""
    for key, want in optional.items():
        stated_or_absent(entry, key, want, probs)
    if entry["verdict"] != verdict:
        probs.append("verdict: entry says %r, computed %r" % (entry["verdict"], verdict))
    return probs


def check_membership_record(entry):
    probs = []
    rx = dict(parse_field_list(entry["receiver"]))
    want_keys = ["epoch", "held", "incarnation", "incarnations", "job", "rank",
                 "size", "start_incarnation"]
    if sorted(rx) != want_keys or rx["held"] not in ("none", "same", "other"):
        return ["receiver: fields must be " + " ".join(want_keys)]
    data = unhex(entry["bytes"])
    try:
        m = decode_membership(data)
    except RecordReject as e:
        m, verdict = None, "reject %s %s" % (e.code, e.check)
    fields = signed = None
    if m is not None:
        verdict = membership_state_verdict(m, data, rx)
        fields = membership_fields(m)
        signed = "0..%d %s" % (m["signed_end"], MEMBER_CONTEXT)
        if m["sig"] != b"\xaa" * 2484:
            probs.append("signature: not 2484 bytes of 0xaa")
    return stated_lines(entry, probs, fields=fields, signed=signed, verdict=verdict)


def check_recover_payload(entry):
    probs = []
    rx = dict(parse_field_list(entry["receiver"]))
    if sorted(rx) != ["sender", "size"]:
        return ["receiver: fields must be size sender"]
    size, sender = dec(rx["size"], 32), dec(rx["sender"], 32)
    data = unhex(entry["bytes"])
    fields = None
    try:
        r = RecordReader(data)
        kind = r.uint(1)
        if kind not in (1, 2, 3):
            raise RecordReject("kind")
        if any(r.take(3)):
            raise RecordReject("reserved")
        if kind == 3:
            # section 18.5: a communicator id as section 15.2 names it
            comm = r.uint(4)
            if comm > 2147483647:
                raise RecordReject("comm")
            r.end()
            fields = "kind=revoke_communicator comm=%d" % comm
        elif kind == 2:
            record = data[4:]
            inner = membership_fields(decode_membership(record)).split(" ")
            fields = "kind=membership record_len=%d %s" % (
                len(record), " ".join("record." + kv for kv in inner))
        else:
            count = r.uint(4)
            if not 1 <= count <= size - 1:
                raise RecordReject("count")
            sus = read_suspect_list(r, count, size, sender)
            r.end()
            fields = "kind=revoke count=%d suspects=%s" % (count, ",".join(map(str, sus)))
        verdict = "accept"
    except RecordReject as e:
        verdict = "reject %s %s" % (e.code, e.check)
    return stated_lines(entry, probs, fields=fields, verdict=verdict)


def check_recovery_report(entry):
    probs = []
    data = unhex(entry["bytes"])
    fields = None
    try:
        r = RecordReader(data)
        if r.take(4) != b"SPRP":
            raise RecordReject("magic")
        if r.uint(2) != 1:
            raise RecordReject("version")
        flag = r.uint(1)
        if flag > 1:
            raise RecordReject("flag")
        if r.uint(1) != 0:
            raise RecordReject("reserved")
        job = r.take(16)
        rank = r.uint(4)
        if rank >= 4096:
            raise RecordReject("rank")
        inc = r.uint(4)
        epoch = r.uint(4)
        if epoch == 0:
            raise RecordReject("epoch")
        count = r.uint(4)
        if count > 4095:
            raise RecordReject("count")
        best = r.uint(8)
        sus = read_suspect_list(r, count, 4096, rank)
        r.end()
        fields = ("magic=SPRP version=1 flag=%d job=%s rank=%d incarnation=%d epoch=%d "
                  "count=%d best_commit=%d suspects=%s"
                  % (flag, job.hex(), rank, inc, epoch, count, best, ",".join(map(str, sus))))
        verdict = "accept"
    except RecordReject as e:
        verdict = "reject %s %s" % (e.code, e.check)
    return stated_lines(entry, probs, fields=fields, verdict=verdict)


# ---------------------------------------------------------------------------
# binomial-tree (feature bit 8, section 21.2)
# ---------------------------------------------------------------------------

def binomial_parent(rank, root, size):
    """21.2: the rank at position p & (p - 1), p = (rank - root) mod size;
    None at the root."""
    p = (rank - root) % size
    if p == 0:
        return None
    return (root + (p & (p - 1))) % size


def binomial_children(rank, root, size):
    """21.2: positions p + m for every power of two m below the lowest set
    bit of p (below size at the root), p + m < size, m descending."""
    p = (rank - root) % size
    if p == 0:
        limit = 1
        while limit < size:
            limit *= 2
    else:
        limit = p & -p
    out = []
    m = limit // 2
    while m > 0:
        if p + m < size:
            out.append((root + p + m) % size)
        m //= 2
    return out


def check_binomial_tree(entry):
    """21.2: the parent and the children of a rank in a bcast's tree."""
    tree = dict(parse_field_list(entry["tree"]))
    for key in ("size", "root", "rank"):
        if key not in tree:
            return ["tree: no %s=" % key]
    size, root, rank = (dec(tree[k], 32) for k in ("size", "root", "rank"))
    if size == 0 or root >= size or rank >= size:
        return ["tree: root and rank must be below size"]
    problems = []
    parent = binomial_parent(rank, root, size)
    want = "none" if parent is None else str(parent)
    if entry["parent"] != want:
        problems.append("parent: entry says %r, derived %r" % (entry["parent"], want))
    kids = binomial_children(rank, root, size)
    want = " ".join(str(k) for k in kids) if kids else "none"
    if entry["children"] != want:
        problems.append("children: entry says %r, derived %r"
                        % (short(entry["children"]), short(want)))
    return problems


# ---------------------------------------------------------------------------
# Driver
# ---------------------------------------------------------------------------

CHECKERS = {
    "frame": check_frame,
    "rank-file": check_rank_file,
    "commit-file": check_commit_file,
    "job-description": check_job_description,
    "join-token-message": check_join_token_message,
    "join-token": check_join_token,
    "reduce": check_reduce,
    "collective-stream": check_collective_stream,
    "communicator-split": check_communicator_split,
    "communicator-take": check_communicator_take,
    "message-stream": check_message_stream,
    "fold": check_fold,
    "membership-record": check_membership_record,
    "recover-payload": check_recover_payload,
    "recovery-report": check_recovery_report,
    "membership-header": check_membership_header,
    "binomial-tree": check_binomial_tree,
}


def check_entry(entry):
    """Check one parsed entry; return a list of problems (empty = pass)."""
    try:
        return CHECKERS[entry["kind"]](entry)
    except Problem as e:
        return [str(e)]


def check_text(text):
    """Returns (results list of (name, problems), passed, failed).
    Raises MalformedFile."""
    entries = parse_file(text)
    results = []
    for e in entries:
        results.append((e["name"], check_entry(e)))
    failed = sum(1 for _, p in results if p)
    return results, len(results) - failed, failed


def main(argv):
    if len(argv) != 2:
        sys.stderr.write("usage: sperli-vectors.py FILE\n")
        return 2
    try:
        with open(argv[1], "rb") as f:
            raw = f.read()
        text = raw.decode("utf-8")
    except (OSError, UnicodeDecodeError) as e:
        sys.stderr.write("%s: cannot read: %s\n" % (argv[1], e))
        return 2
    try:
        results, passed, failed = check_text(text)
    except MalformedFile as e:
        sys.stderr.write("%s: malformed: %s\n" % (argv[1], e))
        print("0 passed, 0 failed")
        return 2
    for name, probs in results:
        if probs:
            print("FAIL %s: %s" % (name, "; ".join(probs)))
    print("%d passed, %d failed" % (passed, failed))
    if failed or passed == 0:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
