#!/usr/bin/env python3
"""Tests of scripts/sperli-vectors.py (standard library only).

Run:  python3 -m unittest discover -s scripts -p 'test_*.py'
  or  python3 scripts/test_sperli_vectors.py
"""

import importlib.util
import os
import struct
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CHECKER = os.path.join(HERE, "sperli-vectors.py")
FIXTURE = os.path.join(HERE, "testdata", "fixture-vectors.txt")
VECTORS = os.path.join(ROOT, "docs", "sperli-vectors.txt")

_spec = importlib.util.spec_from_file_location("sperli_vectors", CHECKER)
sv = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sv)


def load(path):
    with open(path, encoding="utf-8") as f:
        return sv.parse_file(f.read())


def sources():
    """The vector files whose entries the property tests mutate."""
    out = [FIXTURE]
    if os.path.exists(VECTORS):
        out.append(VECTORS)
    return out


def mutations(data):
    for i in range(len(data)):
        for bit in (0x01, 0x80):
            m = bytearray(data)
            m[i] ^= bit
            yield i, bit, bytes(m)


class CheckerOnFiles(unittest.TestCase):
    def run_checker(self, path):
        return subprocess.run([sys.executable, CHECKER, path], capture_output=True,
                              text=True, timeout=300)

    def test_fixture_passes(self):
        r = self.run_checker(FIXTURE)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertRegex(r.stdout.splitlines()[-1], r"^[1-9][0-9]* passed, 0 failed$")

    def test_project_vectors_pass(self):
        # docs/sperli-vectors.txt is written by `cargo xtask vectors`; it must
        # exist and every entry must pass the independent checker.
        self.assertTrue(os.path.exists(VECTORS), "%s is missing" % VECTORS)
        r = self.run_checker(VECTORS)
        self.assertEqual(r.returncode, 0, r.stdout[-5000:] + r.stderr)
        self.assertRegex(r.stdout.splitlines()[-1], r"^[1-9][0-9]* passed, 0 failed$")

    def test_project_vectors_cover_every_kind(self):
        self.assertTrue(os.path.exists(VECTORS), "%s is missing" % VECTORS)
        kinds = {e["kind"] for e in load(VECTORS)}
        for k in sv.KIND_KEYS:
            self.assertIn(k, kinds)

    def test_exit_codes(self):
        with tempfile.TemporaryDirectory() as d:
            empty = os.path.join(d, "empty.txt")
            with open(empty, "w") as f:
                f.write("# nothing\n")
            self.assertEqual(self.run_checker(empty).returncode, 1)
            bad = os.path.join(d, "bad.txt")
            with open(bad, "w") as f:
                f.write("name: x\nkind: reduce\nnonsense line\n")
            self.assertEqual(self.run_checker(bad).returncode, 2)
            wrong = os.path.join(d, "wrong.txt")
            with open(wrong, "w") as f:
                f.write("name: x\nkind: reduce\ntype: u8\nreduction: band\n"
                        "left: 0f\nright: ff\nresult: ff\n")
            r = self.run_checker(wrong)
            self.assertEqual(r.returncode, 1)
            self.assertIn("x", r.stdout)
            self.assertEqual(r.stdout.splitlines()[-1], "0 passed, 1 failed")


class Parsing(unittest.TestCase):
    GOOD = ("# c\nname: a\nkind: reduce\ntype: u8\nreduction: band\nleft: 0f\n"
            "right: ff\nresult: 0f\n\n\nname: b\nkind: reduce\ntype: u8\n"
            "reduction: bor\nleft: \nright: \nresult: \n")

    def test_good(self):
        es = sv.parse_file(self.GOOD)
        self.assertEqual([e["name"] for e in es], ["a", "b"])
        self.assertEqual(es[1]["left"], "")
        for e in es:
            self.assertEqual(sv.check_entry(e), [])

    def bad(self, text):
        with self.assertRaises(sv.MalformedFile):
            sv.parse_file(text)

    def test_duplicate_name(self):
        self.bad(self.GOOD.replace("name: b", "name: a"))

    def test_duplicate_key(self):
        self.bad(self.GOOD.replace("left: 0f\n", "left: 0f\nleft: 0f\n"))

    def test_unknown_kind(self):
        self.bad(self.GOOD.replace("kind: reduce", "kind: reduction", 1))

    def test_unknown_key(self):
        self.bad(self.GOOD.replace("left: 0f\n", "left: 0f\ncomment: hi\n"))

    def test_missing_key(self):
        self.bad(self.GOOD.replace("left: 0f\n", ""))

    def test_name_first(self):
        self.bad("kind: reduce\nname: a\n")

    def test_two_spaces(self):
        self.bad(self.GOOD.replace("left: 0f", "left:  0f"))


class MutationProperty(unittest.TestCase):
    """Changing any single byte of a positive entry must be noticed."""

    def mutate_all(self, kinds, field):
        checked = 0
        for path in sources():
            for e in load(path):
                if e["kind"] not in kinds or e.get("verdict", "accept") != "accept":
                    continue
                self.assertEqual(sv.check_entry(e), [], "%s: %s" % (path, e["name"]))
                data = bytes.fromhex(e[field])
                for i, bit, m in mutations(data):
                    me = dict(e)
                    me[field] = m.hex()
                    if not sv.check_entry(me):
                        self.fail("%s: %s: byte %d ^ 0x%02x not detected"
                                  % (os.path.basename(path), e["name"], i, bit))
                checked += 1
        self.assertGreater(checked, 0)

    def test_frames(self):
        self.mutate_all(("frame",), "bytes")

    def test_job_descriptions(self):
        self.mutate_all(("job-description",), "line")

    def test_rank_files(self):
        self.mutate_all(("rank-file",), "bytes")

    def test_commit_files(self):
        self.mutate_all(("commit-file",), "bytes")

    def test_join_tokens(self):
        self.mutate_all(("join-token", "join-token-message"), "bytes")

    def test_collective_streams(self):
        # Protocol 14.4: every byte a receiver judges (the collective header,
        # the OPEN body or the chunk header) changes the verdict or what was
        # taken; the chunk bytes and a v1 star frame's data (phases 0 and 1,
        # protocol 8.4) are not judged.
        checked = 0
        for e in load(VECTORS):
            if e["kind"] != "collective-stream" or e["verdict"] != "accept":
                continue
            self.assertEqual(sv.check_entry(e), [], e["name"])
            frames = e["frames"].split(" ")
            for k, f in enumerate(frames):
                data = bytes.fromhex(f)
                judged = 16 if data[3] in (0, 1) else 32
                for i, bit, m in mutations(data[:judged]):
                    me = dict(e)
                    me["frames"] = " ".join(frames[:k] + [(m + data[judged:]).hex()]
                                            + frames[k + 1:])
                    if not sv.check_entry(me):
                        self.fail("%s: frame %d byte %d ^ 0x%02x not detected"
                                  % (e["name"], k, i, bit))
            checked += 1
        self.assertGreater(checked, 5)

    def test_owner_fold_due_is_derived(self):
        # Protocol 20.3: rank 3 takes from rank 7 the PARTIAL stream of
        # block 3 or the FINAL stream of block 7, nothing else; the stream's
        # length is the block's, not the contribution's.
        e = next(x for x in load(VECTORS)
                 if x["name"] == "owner-fold-rank-3-takes-its-block-from-rank-7")
        self.assertEqual(sv.check_entry(e), [])
        for due in ("phase=3 root=7", "phase=4 root=3", "phase=1 root=0"):
            me = dict(e)
            me["due"] = due
            probs = sv.check_entry(me)
            self.assertTrue(probs and probs[0].startswith("due:"), (due, probs))
        me = dict(e)
        me["receiver"] = me["receiver"].replace("features=131", "features=3")
        self.assertNotEqual(sv.check_entry(me), [])

    def test_bit_9_exchange_due_is_derived(self):
        # Protocol 22.1: with bits 1, 6 and 9 an allreduce of T up to
        # 1 MiB on two ranks is the exchange (phase 0) at both ranks; from
        # 1 MiB the chain.
        e = next(x for x in load(VECTORS)
                 if x["name"] == "pair-bit-9-rank-1-partial-chunk-at-t")
        self.assertEqual(sv.check_entry(e), [])
        me = dict(e)
        me["due"] = "phase=3 root=0"
        probs = sv.check_entry(me)
        self.assertTrue(probs and probs[0].startswith("due:"), probs)
        self.assertTrue(sv.exchange_replaces_chain(579, 2, 1048568))
        self.assertFalse(sv.exchange_replaces_chain(579, 2, 1048576))
        self.assertFalse(sv.exchange_replaces_chain(579, 2, 262143))
        self.assertFalse(sv.exchange_replaces_chain(579 & ~512, 2, 262144))
        self.assertFalse(sv.exchange_replaces_chain(579 | 128, 2, 262144))  # the owner fold

    def test_binomial_tree_is_derived(self):
        # Protocol 21.2: at 8 ranks from root 3, rank 7 (position 4) takes
        # from the root and sends on to position 6 then 5 (ranks 1, 0).
        e = next(x for x in load(VECTORS)
                 if x["name"] == "binomial-tree-size-8-root-3-rank-7")
        self.assertEqual((e["parent"], e["children"]), ("3", "1 0"))
        self.assertEqual(sv.check_entry(e), [])
        for key, value in (("parent", "4"), ("children", "0 1"), ("children", "none")):
            me = dict(e)
            me[key] = value
            probs = sv.check_entry(me)
            self.assertTrue(probs and probs[0].startswith(key + ":"), (key, probs))
        me = dict(e)
        me["tree"] = "size=8 root=8 rank=7"
        self.assertNotEqual(sv.check_entry(me), [])
        # Every rank of a size that is no power of two has one parent that
        # lists it once.
        for size in range(1, 40):
            for root in (0, size - 1):
                listed = [c for r in range(size) for c in sv.binomial_children(r, root, size)]
                self.assertEqual(sorted(listed), [r for r in range(size) if r != root])
                for r in range(size):
                    for c in sv.binomial_children(r, root, size):
                        self.assertEqual(sv.binomial_parent(c, root, size), r)


VERDICTS = {
    "frame": ["accept", "discard"] + ["reject H1610 " + c for c in sv.FRAME_CHECKS],
    "rank-file": ["accept", "reject H1620 sha256"] + ["reject H1619 " + c for c in sv.RANK_CHECKS],
    "commit-file": ["accept", "reject H1623 size"] + ["reject H1621 " + c for c in sv.COMMIT_CHECKS],
    "job-description": ["accept", "reject H1614 host"]
    + ["reject H1615 " + c for c in sv.JOBDESC_CHECKS],
    "collective-stream": ["accept"] + ["reject %s %s" % (h, c) for h in ("H1610", "H1617", "H1618")
                                       for c in sv.STREAM_CHECKS],
    "communicator-split": list(sv.SPLIT_VERDICTS),
    "communicator-take": ["accept", "reject H1617 communicator"],
}


class PerturbEveryEntry(unittest.TestCase):
    """Every entry of the fixture and the project file: any other verdict, a
    shifted signed range and a changed reduce result must be reported."""

    def entries(self):
        for path in sources():
            for e in load(path):
                yield os.path.basename(path), e

    def test_other_verdicts(self):
        n = 0
        for src, e in self.entries():
            if e["kind"] not in VERDICTS:
                continue
            for v in VERDICTS[e["kind"]]:
                if v == e["verdict"]:
                    continue
                me = dict(e)
                me["verdict"] = v
                self.assertTrue(sv.check_entry(me), "%s: %s with verdict %r passes"
                                % (src, e["name"], v))
                n += 1
        self.assertGreater(n, 0)

    def test_shifted_signed_ranges(self):
        n = 0
        for src, e in self.entries():
            if "signed" not in e:
                continue
            ranges = sv.parse_signed(e["signed"])
            for i, (a, b, ctx) in enumerate(ranges):
                other = "SPERLI-COMMIT-1" if ctx == "SPERLI-JOIN-1" else "SPERLI-JOIN-1"
                for na, nb, nctx in ((a - 1, b, ctx), (a + 1, b, ctx), (a, b - 1, ctx),
                                     (a, b + 1, ctx), (a, b, other)):
                    if na < 0:
                        continue
                    r = list(ranges)
                    r[i] = (na, nb, nctx)
                    me = dict(e)
                    me["signed"] = sv.fmt_signed(r)
                    self.assertTrue(sv.check_entry(me), "%s: %s with signed %r passes"
                                    % (src, e["name"], me["signed"]))
                    n += 1
            me = dict(e)
            del me["signed"]
            if e.get("verdict", "accept") == "accept":
                self.assertTrue(sv.check_entry(me), "%s: %s without signed passes"
                                % (src, e["name"]))
        self.assertGreater(n, 0)

    def test_changed_reduce_results(self):
        n = 0
        for src, e in self.entries():
            if e["kind"] != "reduce":
                continue
            if e["result"] == "reject H1618":
                me = dict(e)
                me["result"] = e["left"]
                self.assertTrue(sv.check_entry(me), "%s: %s" % (src, e["name"]))
                n += 1
                continue
            items = e["result"].split(" ")
            for i, item in enumerate(items):
                if item == "nan":
                    continue
                for bit in (0x01, 0x80):
                    for pos in range(len(item) // 2):
                        b = bytearray.fromhex(item)
                        b[pos] ^= bit
                        me = dict(e)
                        me["result"] = " ".join(items[:i] + [b.hex()] + items[i + 1:])
                        self.assertTrue(sv.check_entry(me), "%s: %s result %r passes"
                                        % (src, e["name"], me["result"]))
                        n += 1
            me = dict(e)
            me["result"] = "reject H1618"
            self.assertTrue(sv.check_entry(me), "%s: %s" % (src, e["name"]))
        self.assertGreater(n, 0)


def fixture_entry(name):
    for e in load(FIXTURE):
        if e["name"] == name:
            return dict(e)
    raise KeyError(name)


class NegativeChecks(unittest.TestCase):
    """The checker must report wrong entries."""

    def assertProblem(self, entry, text):
        probs = sv.check_entry(entry)
        self.assertTrue(probs, "no problem reported")
        self.assertTrue(any(text in p for p in probs), probs)

    def test_wrong_frame_verdict(self):
        e = fixture_entry("frame-flags")
        e["verdict"] = "reject H1610 service"
        self.assertProblem(e, "verdict")
        e = fixture_entry("frame-old-incarnation")
        e["verdict"] = "reject H1610 tag"
        self.assertProblem(e, "verdict")

    def test_accept_claimed_for_rejected(self):
        e = fixture_entry("frame-heartbeat")
        b = bytearray.fromhex(e["bytes"])
        b[40] = 1  # tag
        e["bytes"] = b.hex()
        self.assertProblem(e, "reject H1610 tag")

    def test_wrong_header_field(self):
        e = fixture_entry("frame-data")
        e["header"] = e["header"].replace("tag=7", "tag=8")
        self.assertProblem(e, "tag")

    def test_incomplete_field_list(self):
        e = fixture_entry("frame-abort")
        e["payload"] = e["payload"].rsplit(" ", 1)[0]
        self.assertProblem(e, "field names")

    def test_wrong_signed_range(self):
        for name, old, new in [("frame-hello", "66..", "52.."),
                               ("frame-hello", "SPERLI-JOIN-1", "SPERLI-COMMIT-1"),
                               ("frame-ckpt-commit", "..188", "..190"),
                               ("frame-resume-offer", "60..", "52.."),
                               ("commit-file-ok", "0..", "1.."),
                               ("join-token", "..51", "..53")]:
            e = fixture_entry(name)
            self.assertIn(old, e["signed"])
            e["signed"] = e["signed"].replace(old, new)
            self.assertProblem(e, "signed")

    def test_missing_signed(self):
        e = fixture_entry("job-description-rank-1")
        del e["signed"]
        self.assertProblem(e, "signed")

    def test_signature_not_placeholder(self):
        e = fixture_entry("join-token")
        e["bytes"] = e["bytes"][:-2] + "ab"
        e["fields"] = e["fields"][:-2] + "ab"
        self.assertProblem(e, "0xaa")

    def test_wrong_reduce_result(self):
        e = fixture_entry("reduce-i32-sum-overflow")
        e["result"] = "ffffff7f feffffff"  # no wrap
        self.assertProblem(e, "result")
        e = fixture_entry("reduce-f64-min-zero")
        e["result"] = "0000000000000000 0000000000000000"  # +0: -0 < +0 ignored
        self.assertProblem(e, "result")
        e = fixture_entry("reduce-f32-min-nan")
        e["result"] = "nan nan"  # min fixes the NaN's bits: still a NaN, accepted
        self.assertEqual(sv.check_entry(e), [])
        e["result"] = "0000803f 0200c0ff"  # NaN dropped
        self.assertProblem(e, "result")
        e = fixture_entry("reduce-u8-sum-refused")
        e["result"] = "03"
        self.assertProblem(e, "reject H1618")
        e = fixture_entry("reduce-u8-band")
        e["result"] = "reject H1618"
        self.assertProblem(e, "result")

    def test_wrong_file_verdicts(self):
        e = fixture_entry("rank-file-sha256")
        e["verdict"] = "reject H1619 length"
        self.assertProblem(e, "verdict")
        e = fixture_entry("commit-file-other-size")
        e["verdict"] = "reject H1621 size"
        self.assertProblem(e, "verdict")
        e = fixture_entry("job-description-host-refused")
        e["verdict"] = "reject H1615 host"
        self.assertProblem(e, "verdict")


class Semantics(unittest.TestCase):
    def test_hosts(self):
        ok = ["a", "node-1.example", "10.0.0.1", "0.0.0.0", "255.255.255.255",
              "1a.2b", "x" * 63 + ".y", "1.2.3.4x"]
        bad = ["", "A.example", "node-.x", "-node.x", "a..b", "a.", ".a", "1.2.3",
               "999.1.1.1", "01.2.3.4", "1.2.3.4.5", "123", "a_b", "x" * 64,
               ".".join(["abc"] * 64), "1.2.3.256"]
        for h in ok:
            self.assertTrue(sv.host_valid(h), h)
        for h in bad:
            self.assertFalse(sv.host_valid(h), h)
        self.assertTrue(sv.host_refused("host-a.invalid"))
        self.assertTrue(sv.host_refused("x.y.host-b.invalid"))
        self.assertFalse(sv.host_refused("xhost-a.invalid"))
        self.assertFalse(sv.host_refused("host-a.invalid.example"))

    def test_f32_overflow_and_rounding(self):
        import struct
        f = lambda x: struct.pack("<f", x)
        self.assertEqual(sv.combine_element("f32", "prod", f(3e38), f(10.0)), b"\0\0\x80\x7f")
        self.assertEqual(sv.combine_element("f32", "sum", f(-3e38), f(-3e38)), b"\0\0\x80\xff")
        self.assertEqual(sv.combine_element("f32", "sum", f(0.1), f(0.2)),
                         struct.pack("<f", 0.30000001192092896))
        self.assertEqual(sv.combine_element("f32", "prod", f(float("inf")), f(0.0)), "nan")


class PipelinedChecks(unittest.TestCase):
    """Feature bit 1 (protocol 14): the stream lines and the decode rules."""

    assertProblem = NegativeChecks.assertProblem

    def test_wrong_stream_lines(self):
        by_name = {e["name"]: e for e in load(VECTORS)}
        e = dict(by_name["stream-partial-three-chunks"])
        e["taken"] = "0..16 16..32 32..41"
        self.assertProblem(e, "taken")
        e = dict(by_name["stream-partial-incomplete"])
        e["complete"] = "yes"
        self.assertProblem(e, "complete")
        e = dict(by_name["stream-chunk-out-of-order"])
        e["at"] = "0"
        self.assertProblem(e, "at")
        # The same frames judged without bit 1 do not decode.
        e = dict(by_name["stream-partial-three-chunks"])
        e["receiver"] = "size=4 features=1"
        self.assertProblem(e, "reject H1610 phase")
        e = dict(by_name["frame-collective-partial"])
        e["receiver"] = e["receiver"].replace(" features=3", "")
        self.assertProblem(e, "reject H1610 payload")

    def test_pair_exchange_due(self):
        # Feature bit 6 (protocol 19.3): rank 1 of two takes rank 0's
        # contribution; without the bit, the result.
        by_name = {e["name"]: e for e in load(VECTORS)}
        e = dict(by_name["pair-rank-1-takes-the-contribution"])
        self.assertEqual(sv.check_entry(e), [])
        e["receiver"] = e["receiver"].replace("features=67", "features=3")
        self.assertProblem(e, "due: rank 1 takes phase 1")
        e = dict(by_name["pair-without-bit-6-rank-1-takes-the-result"])
        e["receiver"] = e["receiver"].replace("features=3", "features=67")
        self.assertProblem(e, "due: rank 1 takes phase 0")
        e["receiver"] = e["receiver"].replace("size=2", "size=3")
        self.assertEqual(sv.check_entry(e), [])

    def test_collective_rules(self):
        rule = sv.collective_rule
        head = lambda op, et, red, ph: bytes([op, et, red, ph]) + bytes(12)
        chunk = lambda off, total, n: (off.to_bytes(8, "little") + total.to_bytes(8, "little")
                                       + bytes(n))
        self.assertIsNone(rule(head(4, 6, 1, 0) + bytes(8), 1))
        self.assertEqual(rule(head(4, 6, 1, 3) + chunk(0, 8, 8), 1), "phase")
        self.assertEqual(rule(head(7, 0, 0, 4) + chunk(0, 8, 8), 1), "operation")
        self.assertIsNone(rule(head(4, 6, 1, 3) + chunk(0, 8, 8), 3))
        self.assertEqual(rule(head(2, 0, 0, 3) + chunk(0, 8, 8), 3), "phase")
        self.assertEqual(rule(head(4, 6, 1, 3) + chunk(2**64 - 1, 8, 8), 3), "chunk_end")
        self.assertEqual(rule(head(4, 6, 1, 3) + chunk(0, 16, 4), 3), "chunk_align")
        self.assertIsNone(rule(head(4, 6, 1, 3) + chunk(8, 12, 4), 3))


class Communicators(unittest.TestCase):
    """Feature bit 2 (protocol 15): tags, splits and takes."""

    assertProblem = NegativeChecks.assertProblem

    def test_tag_needs_bit_2(self):
        by_name = {e["name"]: e for e in load(VECTORS)}
        e = dict(by_name["frame-collective-communicator-3"])
        e["receiver"] = e["receiver"].replace(" features=5", " features=3")
        self.assertProblem(e, "reject H1610 tag")

    def test_wrong_split_lines(self):
        by_name = {e["name"]: e for e in load(VECTORS)}
        for key, value in (("id", "7"), ("members", "2,0,4"), ("rank", "0"),
                           ("records", "0/0/0")):
            e = dict(by_name["split-uneven-groups-rank-4"])
            e[key] = value
            self.assertProblem(e, key)
        e = dict(by_name["split-uneven-groups-rank-4"])
        e["parent"] = "size=6 rank=3"
        self.assertProblem(e, "members")

    def test_split_compute(self):
        rec = lambda c, k, h: ((2**64 - 1 if c is None else c).to_bytes(8, "little")
                               + (k % 2**64).to_bytes(8, "little") + h.to_bytes(8, "little"))
        x = rec(1, 0, 2) + rec(0, 5, 2) + rec(1, -3, 2) + rec(None, 0, 2)
        v, _, new_id, members, rank = sv.split_compute(x, 4, 0)
        self.assertEqual((v, new_id, members, rank), ("accept", 3, [2, 0], 1))
        self.assertEqual(sv.split_compute(x, 4, 3)[3], None)
        self.assertEqual(sv.split_compute(x[:-1], 4, 0)[0], "reject H1617 length")

    def test_wrong_take_lines(self):
        by_name = {e["name"]: e for e in load(VECTORS)}
        e = dict(by_name["take-passes-over-a-shared-communicator"])
        e["at"] = "0"
        self.assertProblem(e, "at")
        e = dict(by_name["take-id-above-highest-while-making"])
        e["receiver"] = "rank=1 highest=5 making=no"
        self.assertProblem(e, "verdict")


class PointToPoint(unittest.TestCase):
    """Feature bit 3 (protocol 16): the DATA header and message streams."""

    assertProblem = NegativeChecks.assertProblem

    def test_data_rules(self):
        rule = sv.data_rule
        head = lambda comm, kind, msg, total: (comm.to_bytes(4, "little") + bytes([kind])
                                               + bytes(3) + msg.to_bytes(8, "little")
                                               + total.to_bytes(8, "little"))
        self.assertIsNone(rule(head(3, 1, 1, 5) + b"hello"))
        self.assertEqual(rule(head(3, 1, 1, 5)[:23]), "data_header")
        self.assertEqual(rule(head(2**31, 9, 1, 0)), "communicator_id")
        self.assertEqual(rule(head(0, 3, 1, 0)), "kind")
        self.assertEqual(rule(head(0, 0, 0, 0)), "message_zero")
        self.assertEqual(rule(head(0, 0, 1, 4) + b"hello"), "data_length")
        self.assertIsNone(rule(head(0, 2, 1, 0)))
        self.assertEqual(rule(head(0, 2, 1, 1)), "notice_body")
        self.assertEqual(rule(head(0, 2, 1, 0) + b"x"), "notice_body")

    def test_bit_3_decides_the_data_form(self):
        by_name = {e["name"]: e for e in load(VECTORS)}
        e = dict(by_name["reject-data-v1-payload-with-bit-3"])
        e["receiver"] = e["receiver"].replace(" features=9", "")
        self.assertProblem(e, "accept")
        e = dict(by_name["frame-data-synchronous-on-communicator-3"])
        e["payload"] = e["payload"].replace("kind=1", "kind=0")
        self.assertProblem(e, "payload")

    def test_wrong_stream_lines(self):
        by_name = {e["name"]: e for e in load(VECTORS)}
        e = dict(by_name["stream-message-of-three-frames"])
        e["outcomes"] = "part:1 keep:1 part:1 keep:2"
        self.assertProblem(e, "outcomes")
        e = dict(by_name["stream-pending-communicator-being-made"])
        e["receiver"] = e["receiver"].replace("features=13", "features=9")
        self.assertProblem(e, "reject H1610 communicator")
        e = dict(by_name["stream-notice-twice"])
        e["at"] = "0"
        self.assertProblem(e, "at")
        e = dict(by_name["stream-notices-in-any-order"])
        e["sent"] = "2/3/7"
        self.assertProblem(e, "reject H1610 notice")


class ElementTypes(unittest.TestCase):
    """Feature bit 4 (protocol 17): new types, folds, header codes."""

    assertProblem = NegativeChecks.assertProblem

    def test_combine(self):
        c = sv.combine_element
        f = lambda re_, im: struct.pack("<ff", re_, im)
        # (1+2i)(3+4i) = -5+10i; 16777217 is not a binary32: products round
        self.assertEqual(c("complex64", "prod", f(1, 2), f(3, 4)), f(-5, 10))
        self.assertEqual(c("bool", "land", b"\x02", b"\xff"), b"\x01")
        pair = lambda v, i: struct.pack("<ii", v, i)
        self.assertEqual(c("i32_i32", "minloc", pair(3, 5), pair(3, 2)), pair(3, 2))
        self.assertEqual(c("i32_i32", "maxloc", pair(3, 5), pair(4, 9)), pair(4, 9))
        d = lambda v, i: struct.pack("<di", v, i)
        self.assertEqual(c("f64_i32", "minloc", d(0.0, 1), d(-0.0, 2)), d(-0.0, 2))
        self.assertFalse(sv.reduction_allowed("f64", "minloc"))
        self.assertFalse(sv.reduction_allowed("f64_i32", "min"))
        self.assertFalse(sv.reduction_allowed("complex128", "max"))

    def test_header_codes_need_bit_4(self):
        rule = sv.collective_rule
        head = lambda et, red: bytes([4, et, red, 0]) + bytes(12)
        self.assertIsNone(rule(head(17, 13), 17))
        self.assertEqual(rule(head(17, 1), 1), "element_type")
        self.assertEqual(rule(head(6, 11), 3), "reduction")
        self.assertEqual(rule(head(18, 1), 17), "element_type")
        chunk = lambda n, total: (bytes([4, 14, 11, 3]) + bytes(12) + bytes(8)
                                  + total.to_bytes(8, "little") + bytes(n))
        self.assertIsNone(rule(chunk(24, 48), 19))
        self.assertEqual(rule(chunk(16, 48), 19), "chunk_align")
        self.assertEqual(rule(chunk(24, 48), 3), "element_type")  # bit 1 alone

    def test_wrong_fold_and_reduce_lines(self):
        by_name = {e["name"]: e for e in load(VECTORS)}
        e = dict(by_name["fold-complex128-sum-3-ranks-order-matters"])
        e["ranks"] = " | ".join(reversed(e["ranks"].split(" | ")))
        self.assertProblem(e, "result")
        e = dict(by_name["fold-i32_i32-minloc-5-ranks-ties-take-the-smaller-index"])
        e["result"] = "0200000003000000"
        self.assertProblem(e, "result")
        e = dict(by_name["reduce-refused-f64-minloc"])
        e["result"] = "0101010101010101"
        self.assertProblem(e, "reject H1618")



def membership_record(mode=1):
    """A record of section 18.3 built by hand: a job of 3, rank 2 replaced
    (mode 1) or removed (mode 2), epoch 2."""
    incs = [1, 1, 2] if mode == 1 else [1, 1, 0]
    b = b"SPMB" + struct.pack("<HBB", 1, mode, 1) + b"\x5b" * 16
    b += struct.pack("<IIII", 1, 2, 3, 1)
    b += struct.pack("<Q", 4 if mode == 1 else 2**64 - 1)
    b += b"".join(struct.pack("<I", i) for i in incs)
    if mode == 1:
        b += struct.pack("<I", 2) + b"\x2c" * 32 + struct.pack("<HB", 7002, 9) + b"127.0.0.3"
    else:
        b += struct.pack("<I", 2) + b"\x00" * 32 + struct.pack("<HB", 0, 0)
    return b + struct.pack("<H", 2484) + b"\xaa" * 2484


class MembershipTests(unittest.TestCase):
    """Feature bit 5 (protocol section 18): the checker's own decoders."""

    def test_records_decode_and_every_prefix_is_truncated(self):
        for mode in (1, 2):
            data = membership_record(mode)
            m = sv.decode_membership(data)
            self.assertEqual((m["mode"], m["epoch"], m["size"]), (mode, 2, 3))
            for n in range(len(data)):
                with self.assertRaises(sv.RecordReject) as cm:
                    sv.decode_membership(data[:n])
                self.assertEqual(cm.exception.check, "truncated")

    def test_state_verdicts(self):
        data = membership_record(1)
        m = sv.decode_membership(data)
        rx = {"job": "5b" * 16, "size": "3", "start_incarnation": "1", "epoch": "1",
              "incarnations": "1,1,1", "held": "none", "rank": "0", "incarnation": "1"}
        self.assertEqual(sv.membership_state_verdict(m, data, rx), "accept")
        self.assertEqual(sv.membership_state_verdict(m, data, dict(rx, rank="2")),
                         "reject H1613 fenced")
        self.assertEqual(sv.membership_state_verdict(m, data, dict(rx, epoch="2", held="other")),
                         "reject H1610 equivocation")
        self.assertEqual(sv.membership_state_verdict(m, data, dict(rx, epoch="3")), "discard")

    def test_decode_checks(self):
        data = membership_record(1)
        for off, byte, check in ((0, b"X", "magic"), (6, b"\x03", "mode"),
                                 (7, b"\x02", "agreed"), (28, b"\x01", "epoch")):
            bad = data[:off] + byte + data[off + 1:]
            with self.assertRaises(sv.RecordReject) as cm:
                sv.decode_membership(bad)
            self.assertEqual(cm.exception.check, check)
        with self.assertRaises(sv.RecordReject) as cm:
            sv.decode_membership(data + b"\x00")
        self.assertEqual(cm.exception.check, "trailing")

    def test_recover_revoke_communicator(self):
        def entry(data, verdict, fields=None):
            e = {"receiver": "size=4 sender=1", "bytes": data.hex(), "verdict": verdict}
            if fields is not None:
                e["fields"] = fields
            return e
        ok = bytes([3, 0, 0, 0]) + struct.pack("<I", 2147483647)
        self.assertEqual(sv.check_recover_payload(
            entry(ok, "accept", "kind=revoke_communicator comm=2147483647")), [])
        # a wrong id in the fields line, and an accept claimed for a reject
        self.assertNotEqual(sv.check_recover_payload(
            entry(ok, "accept", "kind=revoke_communicator comm=7")), [])
        above = bytes([3, 0, 0, 0]) + struct.pack("<I", 2147483648)
        self.assertEqual(sv.check_recover_payload(entry(above, "reject H1610 comm")), [])
        self.assertNotEqual(sv.check_recover_payload(entry(above, "accept")), [])
        for data, check in ((ok[:7], "truncated"), (ok + b"\x00", "trailing"),
                            (bytes([3, 0, 1, 0]) + ok[4:], "reserved"),
                            (bytes([4, 0, 0, 0]) + ok[4:], "kind")):
            self.assertEqual(sv.check_recover_payload(
                entry(data, "reject H1610 " + check)), [], check)

    def test_header_checks_2_and_5(self):
        v = sv.membership_header_verdict
        self.assertEqual(v(1, 12, 0, 0), "reject H1610 type")
        self.assertEqual(v(33, 12, 2, 3), "read")
        self.assertEqual(v(33, 2, 2, 3), "discard")
        self.assertEqual(v(33, 2, 4, 3), "reject H1610 membership_epoch")
        self.assertEqual(v(33, 1, 0, 3), "accept")

    def test_vectors_hold_every_kind_of_bit_5(self):
        if not os.path.exists(VECTORS):
            self.skipTest("no vectors file")
        kinds = {e["kind"] for e in load(VECTORS)}
        for k in ("membership-header", "membership-record", "recover-payload",
                  "recovery-report"):
            self.assertIn(k, kinds)

if __name__ == "__main__":
    unittest.main()
