#!/usr/bin/env python3
"""Write scripts/testdata/fixture-vectors.txt: hand-encoded SPERLI v1 test
vectors in the format of docs/sperli-vectors.txt, built with struct.pack
straight from the byte tables of docs/sperli-protocol.md (independent of the checker's codec tables).

Run: python3 scripts/testdata/make_fixtures.py
"""

import hashlib
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "fixture-vectors.txt")

JOB = bytes.fromhex("00112233445566778899aabbccddeeff")
OTHER_JOB = bytes.fromhex("ffeeddccbbaa99887766554433221100")
SIG = b"\xaa" * 2484
SIZE = 3
RANK = 1       # the receiver
PEER = 2
INC = 4
EXPIRES = 1767225600000

entries = []


def add(**kv):
    entries.append(kv)


def hdr(length, typ, tag=0, epoch=0, flags=0, service=0, mepoch=0, job=JOB,
        source=PEER, target=RANK, inc=INC):
    return struct.pack("<IBBHI16sIIIIQ", length, typ, flags, service, mepoch,
                       job, source, target, inc, tag, epoch)


TYPES = {1: "HELLO", 2: "DATA", 3: "COLLECTIVE", 4: "HEARTBEAT", 5: "ABORT",
         6: "CKPT_BEGIN", 7: "CKPT_DATA", 8: "CKPT_ACK", 9: "CKPT_COMMIT",
         10: "RESUME", 11: "BYE"}

RECEIVER = "job=%s rank=%d peer=%d incarnation=%d size=%d" % (JOB.hex(), RANK, PEER, INC, SIZE)


def header_fields(length, typ, tag=0, epoch=0):
    return ("length=%d type=%s flags=0 service=0 membership_epoch=0 job=%s source=%d "
            "target=%d incarnation=%d tag=%d epoch=%d"
            % (length, TYPES[typ], JOB.hex(), PEER, RANK, INC, tag, epoch))


def frame_accept(name, typ, payload, pfields, tag=0, epoch=0, signed=None):
    e = dict(name=name, kind="frame", receiver=RECEIVER,
             bytes=(hdr(len(payload), typ, tag, epoch) + payload).hex(),
             verdict="accept", header=header_fields(len(payload), typ, tag, epoch),
             payload=pfields)
    if signed:
        e["signed"] = signed
    add(**e)


def frame_other(name, verdict, frame):
    add(name=name, kind="frame", receiver=RECEIVER, bytes=frame.hex(), verdict=verdict)


def token_msg(rank=PEER, host=b"node-2.example", job=JOB, size=SIZE, inc=INC):
    return job + struct.pack("<IIIQB", rank, size, inc, EXPIRES, len(host)) + host


def token_msg_fields(rank=PEER, host="node-2.example", prefix=""):
    return " ".join(prefix + x for x in (
        "job=%s" % JOB.hex(), "rank=%d" % rank, "size=%d" % SIZE,
        "incarnation=%d" % INC, "expires_at=%d" % EXPIRES,
        "host_len=%d" % len(host), "host=%s" % host))


def token(rank=PEER, host=b"node-2.example"):
    return token_msg(rank, host) + struct.pack("<H", 2484) + SIG


def token_fields(rank=PEER, host="node-2.example", prefix=""):
    return token_msg_fields(rank, host, prefix) + " %ssig_len=2484 %ssignature=%s" % (
        prefix, prefix, SIG.hex())


def commit(epoch=3, size=SIZE, job=JOB, reserved=0, sig_len=2484, hashes=None):
    if hashes is None:
        hashes = [hashlib.sha256(b"rank file %d" % i).digest() for i in range(size)]
    return (b"SPCM" + struct.pack("<I16sQII", 1, job, epoch, size, reserved)
            + b"".join(hashes) + struct.pack("<H", sig_len) + SIG)


def commit_fields(epoch=3, size=SIZE, prefix=""):
    hashes = [hashlib.sha256(b"rank file %d" % i).hexdigest() for i in range(size)]
    return " ".join(prefix + x for x in (
        "magic=SPCM", "version=1", "job=%s" % JOB.hex(), "epoch=%d" % epoch,
        "size=%d" % size, "reserved=0", "hashes=%s" % ",".join(hashes),
        "sig_len=2484", "signature=%s" % SIG.hex()))


# ----- frames: one accept per type --------------------------------------------

tok = token()
hello = struct.pack("<HHQH", 1, 0, 1, len(tok)) + tok
frame_accept("frame-hello", 1, hello,
             "protocol_version=1 reserved=0 features=1 token_len=%d " % len(tok)
             + token_fields(prefix="token."),
             signed="66..%d SPERLI-JOIN-1" % (66 + 37 + 14))
frame_accept("frame-data", 2, b"hello world", "message=%s" % b"hello world".hex(), tag=7)
frame_accept("frame-data-empty-max-tag", 2, b"", "message=", tag=2147483647)
coll = struct.pack("<BBBBIQ", 4, 6, 1, 0, 0, 5) + struct.pack("<d", 1.5)
frame_accept("frame-collective-allreduce", 3, coll,
             "operation=4 element_type=6 reduction=1 phase=0 root=0 sequence=5 data=%s"
             % struct.pack("<d", 1.5).hex())
frame_accept("frame-collective-barrier", 3, struct.pack("<BBBBIQ", 1, 0, 0, 1, 0, 1),
             "operation=1 element_type=0 reduction=0 phase=1 root=0 sequence=1 data=")
frame_accept("frame-heartbeat", 4, struct.pack("<Q", 1), "counter=1")
msg = "Fehler ü".encode("utf-8")
frame_accept("frame-abort", 5, struct.pack("<HHI", 3, 0, 1617) + msg,
             "reason=3 reserved=0 code=1617 message=%s" % msg.hex())
frame_accept("frame-ckpt-begin", 6, struct.pack("<II", 1, 3), "version=1 size=3", epoch=2)
chunk = bytes(range(40))
frame_accept("frame-ckpt-data-push", 7, struct.pack("<B3sIQQ", 0, b"\0\0\0", 2, 0, 120) + chunk,
             "kind=0 reserved=000000 owner=2 offset=0 total=120 chunk=%s" % chunk.hex(), epoch=2)
frame_accept("frame-ckpt-data-request", 7, struct.pack("<B3sIQQ", 1, b"\0\0\0", 1, 0, 0),
             "kind=1 reserved=000000 owner=1 offset=0 total=0 chunk=", epoch=2)
digest = hashlib.sha256(b"x").digest()
frame_accept("frame-ckpt-ack", 8, digest, "sha256=%s" % digest.hex(), epoch=2)
frame_accept("frame-ckpt-commit", 9, commit(), commit_fields(prefix="commit."), epoch=3,
             signed="52..%d SPERLI-COMMIT-1" % (52 + 40 + 32 * SIZE))
frame_accept("frame-resume-offer", 10, struct.pack("<B7s", 3, b"\0" * 7) + commit(epoch=3),
             "status=3 reserved=00000000000000 " + commit_fields(prefix="commit."), epoch=3,
             signed="60..%d SPERLI-COMMIT-1" % (60 + 40 + 32 * SIZE))
frame_accept("frame-resume-go-on", 10, struct.pack("<B7s", 0, b"\0" * 7),
             "status=0 reserved=00000000000000", epoch=0)
frame_accept("frame-bye", 11, b"", "")

# ----- frames: negatives -----------------------------------------------------

frame_other("frame-length-too-big", "reject H1610 length", hdr(16777217, 2))
frame_other("frame-type-0", "reject H1610 type", hdr(0, 0))
frame_other("frame-type-12", "reject H1610 type", hdr(0, 12))
frame_other("frame-flags", "reject H1610 flags", hdr(0, 11, flags=1))
frame_other("frame-service", "reject H1610 service", hdr(0, 11, service=1))
frame_other("frame-membership-epoch", "reject H1610 membership_epoch", hdr(0, 11, mepoch=1))
frame_other("frame-job", "reject H1610 job", hdr(0, 11, job=OTHER_JOB))
frame_other("frame-source", "reject H1610 source", hdr(0, 11, source=0))
frame_other("frame-target", "reject H1610 target", hdr(0, 11, target=0))
frame_other("frame-old-incarnation", "discard", hdr(3, 2, inc=INC - 1, tag=2147483648) + b"abc")
frame_other("frame-future-incarnation", "reject H1610 incarnation", hdr(0, 11, inc=INC + 1))
frame_other("frame-epoch-in-data", "reject H1610 epoch", hdr(0, 2, epoch=1))
frame_other("frame-ckpt-begin-epoch-0", "reject H1610 epoch",
            hdr(8, 6, epoch=0) + struct.pack("<II", 1, 3))
frame_other("frame-heartbeat-short", "reject H1610 payload_length", hdr(4, 4) + b"\1\0\0\0")
frame_other("frame-collective-no-header", "reject H1610 payload_length", hdr(8, 3) + bytes(8))
frame_other("frame-commit-wrong-size", "reject H1610 payload_length",
            hdr(2526 + 64, 9, epoch=3) + commit(size=2))
frame_other("frame-data-reserved-tag", "reject H1610 tag", hdr(1, 2, tag=2147483648) + b"x")
frame_other("frame-collective-tag", "reject H1610 tag",
            hdr(16, 3, tag=1) + struct.pack("<BBBBIQ", 1, 0, 0, 0, 0, 1))
frame_other("frame-hello-version-2", "reject H1610 payload",
            hdr(len(hello), 1) + struct.pack("<HHQH", 2, 0, 1, len(tok)) + tok)
frame_other("frame-hello-no-core-feature", "reject H1610 payload",
            hdr(len(hello), 1) + struct.pack("<HHQH", 1, 0, 2, len(tok)) + tok)
frame_other("frame-collective-bad-op", "reject H1610 payload",
            hdr(16, 3) + struct.pack("<BBBBIQ", 7, 0, 0, 0, 0, 1))
frame_other("frame-abort-reserved", "reject H1610 payload",
            hdr(8, 5) + struct.pack("<HHI", 2, 1, 0))
frame_other("frame-ckpt-data-kind-5", "reject H1610 payload",
            hdr(24, 7, epoch=1) + struct.pack("<B3sIQQ", 5, b"\0\0\0", 1, 0, 0))
frame_other("frame-resume-bad-commit", "reject H1610 payload",
            hdr(8 + 2526 + 96, 10, epoch=3) + struct.pack("<B7s", 0, b"\0" * 7)
            + commit(sig_len=2483))

# a RESUME's COMMIT has no length fixed by the header: another size decodes
frame_accept("frame-resume-commit-other-size", 10,
             struct.pack("<B7s", 0, b"\0" * 7) + commit(epoch=3, size=2),
             "status=0 reserved=00000000000000 " + commit_fields(size=2, prefix="commit."),
             epoch=3, signed="60..%d SPERLI-COMMIT-1" % (60 + 40 + 64))
frame_other("frame-resume-partial-commit", "reject H1610 payload",
            hdr(8 + 100, 10, epoch=3) + struct.pack("<B7s", 0, b"\0" * 7) + commit()[:100])
frame_other("frame-resume-reserved", "reject H1610 payload",
            hdr(8, 10) + struct.pack("<B7s", 1, b"\0\0\0\0\0\0\1"))
frame_other("frame-ckpt-data-kind-4-offset", "reject H1610 payload",
            hdr(24, 7, epoch=1) + struct.pack("<B3sIQQ", 4, b"\0\0\0", 1, 5, 0))
frame_other("frame-ckpt-data-kind-3-chunk", "reject H1610 payload",
            hdr(25, 7, epoch=1) + struct.pack("<B3sIQQ", 3, b"\0\0\0", 1, 0, 0) + b"x")
frame_other("frame-ckpt-data-reserved", "reject H1610 payload",
            hdr(24, 7, epoch=1) + struct.pack("<B3sIQQ", 1, b"\0\1\0", 1, 0, 0))
frame_other("frame-hello-token-len-short", "reject H1610 payload",
            hdr(len(hello), 1) + struct.pack("<HHQH", 1, 0, 1, len(tok) - 1) + tok)
frame_other("frame-hello-trailing-byte", "reject H1610 payload",
            hdr(len(hello) + 1, 1) + struct.pack("<HHQH", 1, 0, 1, len(tok) + 1) + tok + b"\0")
frame_other("frame-collective-barrier-with-type", "reject H1610 payload",
            hdr(16, 3) + struct.pack("<BBBBIQ", 1, 1, 0, 0, 0, 1))
frame_other("frame-collective-reduction-0", "reject H1610 payload",
            hdr(16, 3) + struct.pack("<BBBBIQ", 3, 1, 0, 0, 0, 1))
frame_other("frame-collective-phase-2", "reject H1610 payload",
            hdr(16, 3) + struct.pack("<BBBBIQ", 2, 0, 0, 2, 0, 1))
frame_other("frame-epoch-on-resume-any", "reject H1610 payload_length",
            hdr(7, 10, epoch=99) + bytes(7))
frame_other("frame-abort-1033", "reject H1610 payload_length", hdr(1033, 5) + bytes(1033))
frame_other("frame-old-incarnation-bad-everything-after", "discard",
            hdr(1, 1, inc=1, tag=5, epoch=9) + b"z")

# ----- rank files ------------------------------------------------------------


def rank_file(state, magic=b"SPCK", version=1, job=JOB, epoch=3, rank=1, size=SIZE,
              plen=None, digest=None):
    if plen is None:
        plen = len(state)
    if digest is None:
        digest = hashlib.sha256(state).digest()
    return magic + struct.pack("<I16sQIIQ", version, job, epoch, rank, size, plen) + digest + state


EXPECT_RANK = "job=%s epoch=3 rank=1 size=%d" % (JOB.hex(), SIZE)
state = b"checkpoint state of rank 1"
add(name="rank-file-ok", kind="rank-file", expect=EXPECT_RANK, bytes=rank_file(state).hex(),
    verdict="accept",
    header="magic=SPCK version=1 job=%s epoch=3 rank=1 size=%d payload_length=%d payload_sha256=%s"
    % (JOB.hex(), SIZE, len(state), hashlib.sha256(state).hexdigest()),
    state=state.hex())
add(name="rank-file-empty-state", kind="rank-file", expect=EXPECT_RANK, bytes=rank_file(b"").hex(),
    verdict="accept",
    header="magic=SPCK version=1 job=%s epoch=3 rank=1 size=%d payload_length=0 payload_sha256=%s"
    % (JOB.hex(), SIZE, hashlib.sha256(b"").hexdigest()),
    state="")
for nm, verdict, data in [
        ("truncated", "reject H1619 truncated", rank_file(state)[:79]),
        ("magic", "reject H1619 magic", rank_file(state, magic=b"SPCM")),
        ("version", "reject H1619 version", rank_file(state, version=2)),
        ("job", "reject H1619 job", rank_file(state, job=OTHER_JOB)),
        ("epoch", "reject H1619 epoch", rank_file(state, epoch=2)),
        ("rank", "reject H1619 rank", rank_file(state, rank=2)),
        ("size", "reject H1619 size", rank_file(state, size=4)),
        ("length", "reject H1619 length", rank_file(state, plen=len(state) + 1)),
        ("sha256", "reject H1620 sha256", rank_file(state, digest=bytes(32)))]:
    add(name="rank-file-" + nm, kind="rank-file", expect=EXPECT_RANK, bytes=data.hex(),
        verdict=verdict)

# ----- COMMIT files ----------------------------------------------------------

EXPECT_COMMIT = "job=%s epoch=3 size=%d" % (JOB.hex(), SIZE)
add(name="commit-file-ok", kind="commit-file", expect=EXPECT_COMMIT, bytes=commit().hex(),
    verdict="accept", fields=commit_fields(), signed="0..%d SPERLI-COMMIT-1" % (40 + 32 * SIZE))
c = commit()
for nm, verdict, data in [
        ("truncated", "reject H1621 truncated", c[:-1]),
        ("magic", "reject H1621 magic", b"SPCK" + c[4:]),
        ("version", "reject H1621 version", c[:4] + struct.pack("<I", 2) + c[8:]),
        ("job", "reject H1621 job", commit(job=OTHER_JOB)),
        ("epoch", "reject H1621 epoch", commit(epoch=4)),
        ("reserved", "reject H1621 reserved", commit(reserved=1)),
        ("sig-len", "reject H1621 sig_len", commit(sig_len=2483)),
        ("trailing", "reject H1621 trailing", c + b"\0"),
        ("other-size", "reject H1623 size", commit(size=2))]:
    add(name="commit-file-" + nm, kind="commit-file", expect=EXPECT_COMMIT, bytes=data.hex(),
        verdict=verdict)

# ----- job descriptions ------------------------------------------------------

PUB = bytes(range(256)) * 5 + bytes(64)
CA = b"-----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----\n"
RC = b"-----BEGIN CERTIFICATE-----\nRANK\n-----END CERTIFICATE-----\n"
RK = b"-----BEGIN PRIVATE KEY-----\nKEY\n-----END PRIVATE KEY-----\n"
SK = bytes(range(64))
HOSTS = [(b"node-0.example", 7000), (b"10.0.0.1", 7001), (b"node-2.example", 7002)]


def jobdesc(version=1, size=SIZE, rank=RANK, inc=INC, hosts=HOSTS, sk=None, tokb=None,
            trailing=b""):
    if sk is None:
        sk = SK if rank == 0 else b""
    if tokb is None:
        h = hosts[rank][0] if rank < len(hosts) else b"x"
        tokb = token_msg(rank=rank, host=h) + struct.pack("<H", 2484) + SIG
    out = struct.pack("<H16sIII", version, JOB, size, rank, inc)
    for h, p in hosts:
        out += struct.pack("<HB", p, len(h)) + h
    out += PUB + struct.pack("<H", len(tokb)) + tokb
    out += struct.pack("<I", len(CA)) + CA + struct.pack("<I", len(RC)) + RC
    out += struct.pack("<H", len(sk)) + sk + struct.pack("<I", len(RK)) + RK
    return out + trailing


def jobdesc_fields(rank=RANK):
    h = HOSTS[rank][0]
    tokb = token_msg(rank=rank, host=h) + struct.pack("<H", 2484) + SIG
    return ("version=1 job=%s size=%d rank=%d incarnation=%d hosts=%s job_public_key=%s "
            "join_token=%s ca_cert_pem=%s rank_cert_pem=%s job_secret_key=%s rank_key_pem=%s"
            % (JOB.hex(), SIZE, rank, INC,
               ",".join("%s:%d" % (h.decode(), p) for h, p in HOSTS), PUB.hex(), tokb.hex(),
               CA.hex(), RC.hex(), (SK if rank == 0 else b"").hex(), RK.hex()))


def token_offset():
    return 30 + sum(3 + len(h) for h, _ in HOSTS) + 1344 + 2


for r in (0, 1):
    off = token_offset()
    add(name="job-description-rank-%d" % r, kind="job-description", line=jobdesc(rank=r).hex(),
        verdict="accept", fields=jobdesc_fields(r),
        signed="%d..%d SPERLI-JOIN-1" % (off, off + 37 + len(HOSTS[r][0])))

good = jobdesc().hex()
for nm, verdict, line in [
        ("odd-hex", "reject H1615 hex", good + "0"),
        ("uppercase-hex", "reject H1615 hex", good[:-2] + "0A"),
        ("truncated", "reject H1615 truncated", good[:-2]),
        ("trailing", "reject H1615 trailing", jobdesc(trailing=b"\0").hex()),
        ("version", "reject H1615 version", jobdesc(version=2).hex()),
        ("size-0", "reject H1615 size", jobdesc(size=0, hosts=[]).hex()),
        ("size-4097", "reject H1615 size", jobdesc(size=4097).hex()),
        ("rank", "reject H1615 rank", jobdesc(rank=3).hex()),
        ("incarnation", "reject H1615 incarnation", jobdesc(inc=0).hex()),
        ("port", "reject H1615 port", jobdesc(hosts=[HOSTS[0], (b"10.0.0.1", 0), HOSTS[2]]).hex()),
        ("host-uppercase", "reject H1615 host",
         jobdesc(hosts=[(b"Node-0.example", 7000)] + HOSTS[1:]).hex()),
        ("host-ipv4-leading-zero", "reject H1615 host",
         jobdesc(hosts=[HOSTS[0], (b"10.0.0.01", 7001), HOSTS[2]]).hex()),
        ("host-three-numbers", "reject H1615 host",
         jobdesc(hosts=[HOSTS[0], (b"1.2.3", 7001), HOSTS[2]]).hex()),
        ("host-edge-hyphen", "reject H1615 host",
         jobdesc(hosts=[(b"node-.example", 7000)] + HOSTS[1:]).hex()),
        ("host-refused", "reject H1614 host",
         jobdesc(hosts=[HOSTS[0], HOSTS[1], (b"host-b.invalid", 7002)]).hex()),
        ("host-refused-subdomain", "reject H1614 host",
         jobdesc(hosts=[(b"a.host-a.invalid", 7000)] + HOSTS[1:]).hex()),
        ("secret-key-rank-1", "reject H1615 secret_key", jobdesc(sk=SK).hex()),
        ("secret-key-rank-0-missing", "reject H1615 secret_key", jobdesc(rank=0, sk=b"").hex()),
        ("token-sig-len", "reject H1615 token",
         jobdesc(tokb=token_msg(rank=1, host=b"10.0.0.1") + struct.pack("<H", 2483) + SIG[:-1]).hex())]:
    add(name="job-description-" + nm, kind="job-description", line=line, verdict=verdict)

# ----- join tokens -----------------------------------------------------------

add(name="join-token-message", kind="join-token-message", bytes=token_msg().hex(),
    fields=token_msg_fields())
add(name="join-token", kind="join-token", bytes=token().hex(), fields=token_fields(),
    signed="0..%d SPERLI-JOIN-1" % (37 + 14))
add(name="join-token-ipv4", kind="join-token", bytes=token(host=b"10.0.0.1").hex(),
    fields=token_fields(host="10.0.0.1"), signed="0..%d SPERLI-JOIN-1" % (37 + 8))

# ----- reductions ------------------------------------------------------------


def el(fmt, *vals):
    return " ".join(struct.pack(fmt, v).hex() for v in vals)


def red(name, typ, reduction, left, right, result):
    add(name="reduce-" + name, kind="reduce", type=typ, reduction=reduction,
        left=left, right=right, result=result)


red("i32-sum-overflow", "i32", "sum", el("<i", 2147483647, -5), el("<i", 1, 3),
    el("<i", -2147483648, -2))
red("u32-prod-wrap", "u32", "prod", el("<I", 65536, 3), el("<I", 65536, 5), el("<I", 0, 15))
red("i64-min-signed", "i64", "min", el("<q", -1, 5), el("<q", 1, -7), el("<q", -1, -7))
red("u64-max-unsigned", "u64", "max", el("<Q", 2**64 - 1, 5), el("<Q", 1, 7),
    el("<Q", 2**64 - 1, 7))
red("i32-land", "i32", "land", el("<i", 5, 0, 5), el("<i", -1, 3, 0), el("<i", 1, 0, 0))
red("u32-lor", "u32", "lor", el("<I", 0, 0, 9), el("<I", 0, 2, 0), el("<I", 0, 1, 1))
red("i64-lxor", "i64", "lxor", el("<q", 4, 4, 0), el("<q", 2, 0, 0), el("<q", 0, 1, 0))
red("u8-band", "u8", "band", "f0 0f", "3c 3c", "30 0c")
red("u8-bor", "u8", "bor", "f0 0f", "3c 3c", "fc 3f")
red("u8-bxor", "u8", "bxor", "f0 0f", "3c 3c", "cc 33")
red("u8-sum-refused", "u8", "sum", "01", "02", "reject H1618")
red("f32-band-refused", "f32", "band", el("<f", 1.0), el("<f", 2.0), "reject H1618")
red("f64-lor-refused", "f64", "lor", el("<d", 1.0), el("<d", 2.0), "reject H1618")
red("f32-sum-round", "f32", "sum", el("<f", 1.0, 3.4028234663852886e38),
    el("<f", 2.0**-24, 3.4028234663852886e38), el("<f", 1.0) + " " + "0000807f")
red("f64-prod", "f64", "prod", el("<d", 0.1, -0.0), el("<d", 3.0, 5.0),
    el("<d", 0.1 * 3.0, -0.0))
red("f64-min-zero", "f64", "min", el("<d", 0.0, -0.0), el("<d", -0.0, 0.0), el("<d", -0.0, -0.0))
red("f64-max-zero", "f64", "max", el("<d", 0.0, -0.0), el("<d", -0.0, 0.0), el("<d", 0.0, 0.0))
red("f32-min-nan", "f32", "min", "0100c07f 0000803f", "0000803f 0200c0ff", "0100c07f 0200c0ff")
red("f32-max-nan-left", "f32", "max", "0000c0ff 0000803f", "0100c07f 0000c0ff",
    "0000c0ff 0000c0ff")
red("f32-prod-tiny", "f32", "prod", el("<f", 1e-30), el("<f", 1e-20), "00000000")
red("i32-prod-neg", "i32", "prod", el("<i", -3, -2147483648), el("<i", 7, -1),
    el("<i", -21, -2147483648))
red("u8-band-empty", "u8", "band", "", "", "")
red("f64-sum-nan", "f64", "sum", el("<d", float("inf")), el("<d", float("-inf")), "nan")


# ----- write -----------------------------------------------------------------

KEY_ORDER = ["name", "kind", "receiver", "expect", "type", "reduction", "line", "bytes",
             "left", "right", "result", "verdict", "header", "payload", "fields", "state",
             "signed"]


def write():
    with open(OUT, "w") as f:
        f.write("# Hand-encoded SPERLI v1 fixtures for scripts/sperli-vectors.py\n")
        f.write("# (written by scripts/testdata/make_fixtures.py; format as in\n")
        f.write("# docs/sperli-vectors.txt)\n")
        for e in entries:
            f.write("\n")
            for k in KEY_ORDER:
                if k in e:
                    f.write("%s: %s\n" % (k, e[k]))
            assert set(e) <= set(KEY_ORDER), e.keys()


if __name__ == "__main__":
    write()
    print("wrote %d entries to %s" % (len(entries), OUT))
