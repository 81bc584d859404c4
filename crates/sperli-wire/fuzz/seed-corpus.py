#!/usr/bin/env python3
"""Writes the seed corpus of the sperli-wire fuzz targets from the vectors.

Usage: python3 crates/sperli-wire/fuzz/seed-corpus.py [VECTORS] [CORPUS_DIR]

Defaults: docs/sperli-vectors.txt (found from this file's place in the repo)
and crates/sperli-wire/fuzz/corpus. Each entry's `bytes:` (or, for a job
description, `line:`) hex is written into the corpus dirs of the targets
that read that kind of input, in the layout each target expects (see the
comment at the top of each fuzz_targets/*.rs):

  frame             32-byte receiver (from `receiver:`) + the frame bytes
  header_check      the 52-byte header + the 32-byte receiver
  payload           frame type code + the payload bytes
  hello, collective, abort, ckpt_data, resume, commit_file
                    the payload of frames of that type
  commit_file       also the `commit-file` entries (and a RESUME's COMMIT)
  join_token        join tokens and messages (also the token of a HELLO)
  rank_file         the `rank-file` entries (and CKPT_DATA chunks that are
                    whole rank files)
  job_description   the line + "\\n", and the decoded binary form
  hex               the lines of job descriptions (without "\\n")
  reduce            type code, reduction code, 0 (split in halves), left,
                    right
  communicator      size, rank, then a split's exchange (the
                    `communicator-split` entries)
  pipeline          a features byte + `u16 len` records of COLLECTIVE
                    payloads: the COLLECTIVE frames of a `features=`
                    receiver, and the frames of each `collective-stream`
  host              `host NUL variable NUL deny-file`, from the hosts of the
                    vectors plus a few hand-written policies
  ckpt_chunks       the push chunks as `u16 len` records (tracker,
                    assembler)
  data_header, match_notice
                    the DATA payloads of `features=` receivers with bit 3,
                    and a few hand-written notices
  message_stream    the `message-stream` entries: 8 config bytes (frame
                    data length - 1 | can make communicators << 4 | peer
                    << 5, highest, three ids, their member masks), then
                    `u16 len` records: 0 + message u64 + communicator u32 +
                    tag u32 for each `sent:`, 1 + tag u32 + DATA payload
                    (data bytes 0) for each frame
  element_ext       type code, reduction code, the left operand of each
                    `reduce` and `fold` entry, and a few refused codes
  reduce_ext        type code, reduction code - 1, a shape byte (number of
                    contributions - 1, a cut of 1 element << 4), then the
                    contributions of each `reduce` and `fold` entry
  failure_record    hand-written record lines
  recovery          0 + each `membership-record`, 1 + each
                    `recovery-report`, 2 + size u32 + sender u32 + each
                    `recover-payload` entry's bytes

File names are the SHA-1 of the content (like libFuzzer's), so running the
script twice gives the same files. Only the Python standard library is used.
"""

import hashlib
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))

FRAME_TYPES = {
    1: "hello", 2: None, 3: "collective", 4: None, 5: "abort", 6: None,
    7: "ckpt_data", 8: None, 9: "commit_file", 10: "resume", 11: None,
}
ELEMENT_TYPES = ["u8", "i32", "u32", "i64", "u64", "f32", "f64"]
REDUCTIONS = ["sum", "prod", "min", "max", "land", "lor", "lxor", "band",
              "bor", "bxor"]
# Feature bit 4 (protocol section 17.2): codes 0..=17 and 1..=13.
EXT_ELEMENT_TYPES = ELEMENT_TYPES + [
    "bool", "i8", "i16", "u16", "complex64", "complex128", "f32_i32",
    "f64_i32", "i64_i32", "i32_i32", "i16_i32"]
EXT_REDUCTIONS = REDUCTIONS + ["minloc", "maxloc", "user"]
FEATURE_COMMUNICATORS = 1 << 2
FEATURE_P2P_COMMUNICATORS = 1 << 3
DATA_KIND_NOTICE = 2
FAILURE_RECORDS = [
    "H1613 blame=3\n",
    "H1616 blame=- missing=1,2\n",
    "H1612 blame=7 reason=1 code=1613 msg=H1613 peer rank 2 lost silent\n",
    "H1610 blame=-",
    "H1613 blame=1 cause=silence\n",
    "H1612 blame=0 reason=2 code=0\n",
    "H0 blame=- missing=0\n",
]
MAX_SEED = 64 * 1024


def entries(path):
    """Yields each entry of the vectors file as a dict key -> value."""
    entry = {}
    with open(path, encoding="utf-8") as f:
        for raw in f:
            line = raw.rstrip("\n")
            if line.startswith("#"):
                continue
            if not line.strip():
                if entry:
                    yield entry
                entry = {}
                continue
            key, _, value = line.partition(":")
            entry[key.strip()] = value[1:] if value.startswith(" ") else value
    if entry:
        yield entry


def fields(value):
    """`a=1 b=2` -> {'a': '1', 'b': '2'}."""
    out = {}
    for item in value.split():
        k, _, v = item.partition("=")
        out[k] = v
    return out


def receiver_bytes(value):
    # fuzz_targets/common: the job's features 1 and 2 ride in bits 1 and 2
    # of the size's top byte
    f = fields(value)
    feats = int(f.get("features", "1")) & 0b110
    return (bytes.fromhex(f["job"])
            + struct.pack("<IIII", int(f["rank"]), int(f["peer"]),
                          int(f["incarnation"]), int(f["size"]) | (feats << 24)))


class Corpus:
    def __init__(self, root):
        self.root = root
        self.seen = set()

    def add(self, target, data):
        if len(data) > MAX_SEED:
            return
        name = hashlib.sha1(data).hexdigest()
        if (target, name) in self.seen:
            return
        self.seen.add((target, name))
        d = os.path.join(self.root, target)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, name), "wb") as f:
            f.write(data)


def token_of_hello(payload):
    """The join token inside a HELLO payload, if the length fits."""
    if len(payload) < 14:
        return None
    (n,) = struct.unpack_from("<H", payload, 12)
    tok = payload[14:14 + n]
    return tok if len(tok) == n else None


def data_header(communicator, kind, message, total):
    """The 24-byte DATA header of protocol section 16.2."""
    return struct.pack("<IB3xQQ", communicator, kind, message, total)


def message_stream_seed(e):
    """A `message-stream` entry in the layout of the message_stream
    target, or None if it does not fit the config bytes."""
    rx = fields(e["receiver"])
    frame_data = int(rx["frame_data"])
    ids = []
    for c in e["communicators"].split():
        cid, _, members = c.partition(":")
        mask = sum(1 << int(m) for m in members.split(",") if int(m) < 8)
        if int(cid) != 0:
            ids.append((int(cid), mask))
    if not 1 <= frame_data <= 16 or len(ids) > 3 or any(i > 255 for i, _ in ids):
        return None
    ids += [(0, 0)] * (3 - len(ids))
    can_make = 1 if int(rx["features"]) & FEATURE_COMMUNICATORS else 0
    config = bytes([(frame_data - 1) | can_make << 4 | (int(rx["peer"]) & 7) << 5,
                    min(int(rx["highest"]), 255)]
                   + [i for i, _ in ids] + [m for _, m in ids])
    recs = []
    if e["sent"] != "none":
        for sent in e["sent"].split():
            message, communicator, tag = (int(x) for x in sent.split("/"))
            recs.append(b"\0" + struct.pack("<QII", message, communicator, tag))
    for f in e["frames"].split():
        tag, communicator, kind, message, total, length = (int(x) for x in f.split("/"))
        recs.append(b"\1" + struct.pack("<I", tag)
                    + data_header(communicator, kind, message, total) + bytes(length))
    return config + b"".join(struct.pack("<H", len(r)) + r for r in recs)


def reduce_seeds(corpus, e):
    """A `reduce` or `fold` entry for reduce, reduce_ext, element_ext."""
    ty, red = e["type"], e["reduction"]
    if "ranks" in e:
        ranks = [bytes.fromhex(x.replace(" ", "")) for x in e["ranks"].split("|")]
    else:
        ranks = [bytes.fromhex(e[k].replace(" ", "")) for k in ("left", "right")]
    t, r = EXT_ELEMENT_TYPES.index(ty), EXT_REDUCTIONS.index(red) + 1
    if len(ranks) == 2 and ty in ELEMENT_TYPES and red in REDUCTIONS:
        corpus.add("reduce", bytes([t, r, 0]) + ranks[0] + ranks[1])
    corpus.add("element_ext", bytes([t, r]) + ranks[0])
    if len(ranks) <= 5 and len(set(map(len, ranks))) == 1:
        shape = (len(ranks) - 1) | 1 << 4
        corpus.add("reduce_ext", bytes([t, r - 1, shape]) + b"".join(ranks))


def host_seeds(corpus, hosts):
    policies = [
        ("", ""),
        ("bad.example, 10.0.0.9", ""),
        ("", "# deny file\nevil.example.\n  Node.Bad.Example  \n192.168.1.1\n"),
        ("a.b.c\tlocalhost", "127.0.0.1\n#localhost\n"),
    ]
    extra = ["host-a.invalid", "sub.host-b.invalid", "node-1.example",
             "127.0.0.1", "255.255.255.255", "01.2.3.4", "1.2.3", "Node",
             "a-.b", "x" * 63 + ".y", "bad.example", "sub.bad.example"]
    for i, h in enumerate(sorted(hosts) + extra):
        var, deny = policies[i % len(policies)]
        corpus.add("host", f"{h}\0{var}\0{deny}".encode())
        corpus.add("host", h.encode())


def main(argv):
    vectors = argv[1] if len(argv) > 1 else os.path.join(ROOT, "docs", "sperli-vectors.txt")
    out = argv[2] if len(argv) > 2 else os.path.join(HERE, "corpus")
    corpus = Corpus(out)
    hosts = set()
    push_records = []

    for e in entries(vectors):
        kind = e.get("kind")
        if kind == "frame":
            frame = bytes.fromhex(e["bytes"])
            rx = receiver_bytes(e["receiver"])
            feats = int(fields(e["receiver"]).get("features", "1"))
            if len(frame) > 52 and frame[4] == 3:
                p = frame[52:]
                corpus.add("pipeline", bytes([feats]) + struct.pack("<H", len(p)) + p)
            corpus.add("frame", rx + frame)
            corpus.add("header_check", frame[:52] + rx)
            if len(frame) >= 52:
                t = frame[4]
                payload = frame[52:]
                corpus.add("payload", bytes([t]) + payload)
                target = FRAME_TYPES.get(t)
                if target and payload:
                    corpus.add(target, payload)
                if t == 1:
                    tok = token_of_hello(payload)
                    if tok:
                        corpus.add("join_token", tok)
                if t == 10 and len(payload) > 8:
                    corpus.add("commit_file", payload[8:])
                if t == 2 and feats & FEATURE_P2P_COMMUNICATORS:
                    corpus.add("data_header", payload)
                    corpus.add("match_notice", payload)
                if t == 7 and len(payload) > 24:
                    corpus.add("rank_file", payload[24:])
                    if payload[0] == 0:
                        push_records.append(payload)
            for k in ("payload", "fields"):
                if k in e:
                    h = fields(e[k]).get("token.host")
                    if h:
                        hosts.add(h)
        elif kind == "collective-stream":
            feats = int(fields(e["receiver"])["features"])
            recs = b"".join(struct.pack("<H", len(f)) + f
                            for f in (bytes.fromhex(x) for x in e["frames"].split()))
            corpus.add("pipeline", bytes([feats]) + recs)
        elif kind == "communicator-split":
            f = fields(e["parent"])
            corpus.add("communicator", bytes([int(f["size"]), int(f["rank"])])
                       + bytes.fromhex(e["exchange"]))
        elif kind == "rank-file":
            corpus.add("rank_file", bytes.fromhex(e["bytes"]))
        elif kind == "commit-file":
            corpus.add("commit_file", bytes.fromhex(e["bytes"]))
        elif kind in ("join-token", "join-token-message"):
            corpus.add("join_token", bytes.fromhex(e["bytes"]))
            h = fields(e.get("fields", "")).get("host")
            if h:
                hosts.add(h)
        elif kind == "job-description":
            line = e["line"]
            corpus.add("job_description", line.encode() + b"\n")
            corpus.add("hex", line.encode())
            try:
                corpus.add("job_description", bytes.fromhex(line))
            except ValueError:
                pass  # odd digits: no binary form
            f = fields(e.get("fields", ""))
            for hp in filter(None, f.get("hosts", "").split(",")):
                hosts.add(hp.rpartition(":")[0])
        elif kind in ("reduce", "fold"):
            reduce_seeds(corpus, e)
        elif kind == "membership-record":
            corpus.add("recovery", b"\x00" + bytes.fromhex(e["bytes"]))
        elif kind == "recovery-report":
            corpus.add("recovery", b"\x01" + bytes.fromhex(e["bytes"]))
        elif kind == "recover-payload":
            f = fields(e["receiver"])
            corpus.add("recovery", b"\x02" + struct.pack("<II", int(f["size"]), int(f["sender"]))
                       + bytes.fromhex(e["bytes"]))
        elif kind == "message-stream":
            seed = message_stream_seed(e)
            if seed is not None:
                corpus.add("message_stream", seed)

    # The push chunks as assembler records (u16 len + payload), and the same
    # file sent as two chunks.
    for p in push_records:
        corpus.add("ckpt_chunks", struct.pack("<H", len(p)) + p)
        chunk = p[24:]
        if len(chunk) >= 2:
            half = len(chunk) // 2
            total = struct.unpack_from("<Q", p, 16)[0]
            head = p[:8]
            a = head + struct.pack("<QQ", 0, total) + chunk[:half]
            b = head + struct.pack("<QQ", half, total) + chunk[half:]
            corpus.add("ckpt_chunks", struct.pack("<H", len(a)) + a
                       + struct.pack("<H", len(b)) + b)
    for communicator, message in ((0, 1), (3, 4), (0x7fffffff, 2**64 - 1)):
        notice = data_header(communicator, DATA_KIND_NOTICE, message, 0)
        corpus.add("match_notice", notice)
        corpus.add("data_header", notice)
    for code in (18, 255):
        corpus.add("element_ext", bytes([code, 1]))
    for code in (0, 14, 255):
        corpus.add("element_ext", bytes([0, code]))
    for line in FAILURE_RECORDS:
        corpus.add("failure_record", line.encode())
    for small in (b"", b"00", b"0aff", b"0AFF", b"abc"):
        corpus.add("hex", small)
    host_seeds(corpus, hosts)

    total = sum(len(files) for _, _, files in os.walk(out))
    print(f"seed corpus: {total} files under {out}")


if __name__ == "__main__":
    main(sys.argv)
