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
  pipeline          a features byte + `u16 len` records of COLLECTIVE
                    payloads: the COLLECTIVE frames of a `features=`
                    receiver, and the frames of each `collective-stream`
  host              `host NUL variable NUL deny-file`, from the hosts of the
                    vectors plus a few hand-written policies
  ckpt_chunks       the push chunks as `u16 len` records (tracker,
                    assembler)

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
    f = fields(value)
    return (bytes.fromhex(f["job"])
            + struct.pack("<IIII", int(f["rank"]), int(f["peer"]),
                          int(f["incarnation"]), int(f["size"])))


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
        elif kind == "reduce":
            t = ELEMENT_TYPES.index(e["type"])
            r = REDUCTIONS.index(e["reduction"]) + 1
            left = bytes.fromhex(e["left"].replace(" ", ""))
            right = bytes.fromhex(e["right"].replace(" ", ""))
            corpus.add("reduce", bytes([t, r, 0]) + left + right)

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
    for small in (b"", b"00", b"0aff", b"0AFF", b"abc"):
        corpus.add("hex", small)
    host_seeds(corpus, hosts)

    total = sum(len(files) for _, _, files in os.walk(out))
    print(f"seed corpus: {total} files under {out}")


if __name__ == "__main__":
    main(sys.argv)
