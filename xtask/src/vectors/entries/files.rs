//! Rank-file and COMMIT-file entries (protocol §9.2, §9.3).

use super::*;

pub(super) fn files() -> Vec<Entry> {
    let mut v = Vec::new();
    let expect = |rank: u32| format!("job={JOB} epoch={EPOCH} rank={rank} size={SIZE}");
    let rf = |name: &str, bytes: Vec<u8>| {
        derive(
            Entry::new(name, "rank-file")
                .with("expect", expect(1))
                .with("bytes", hex::encode(&bytes)),
        )
        .unwrap_or_else(|w| panic!("{name}: {w}"))
    };
    let good = rank_file(1);
    v.push(rf("rank-file", good.clone()));
    v.push(rf(
        "rank-file-empty-state",
        build_rank_file(JOB, EPOCH, 1, SIZE, b""),
    ));
    v.push(rf("rank-file-truncated-header", good[..79].to_vec()));
    let mut m = good.clone();
    m[0] = b'X';
    v.push(rf("rank-file-wrong-magic", m));
    let mut m = good.clone();
    m[4] = 2;
    v.push(rf("rank-file-wrong-version", m));
    v.push(rf(
        "rank-file-other-job",
        build_rank_file(OTHER_JOB, EPOCH, 1, SIZE, &state(1)),
    ));
    v.push(rf(
        "rank-file-wrong-epoch",
        build_rank_file(JOB, EPOCH + 1, 1, SIZE, &state(1)),
    ));
    v.push(rf("rank-file-wrong-rank", rank_file(2)));
    v.push(rf(
        "rank-file-wrong-size",
        build_rank_file(JOB, EPOCH, 1, SIZE + 1, &state(1)),
    ));
    let mut m = good.clone();
    m.push(0);
    v.push(rf("rank-file-trailing-byte", m));
    v.push(rf(
        "rank-file-truncated-state",
        good[..good.len() - 1].to_vec(),
    ));
    let mut m = good.clone();
    let last = m.len() - 1;
    m[last] ^= 0x20;
    v.push(rf("rank-file-wrong-sha256", m));

    let cf = |name: &str, expect: String, bytes: Vec<u8>| {
        derive(
            Entry::new(name, "commit-file")
                .with("expect", expect)
                .with("bytes", hex::encode(&bytes)),
        )
        .unwrap_or_else(|w| panic!("{name}: {w}"))
    };
    let ex = |size: u32| format!("job={JOB} epoch={EPOCH} size={size}");
    let c = commit_bytes(JOB, EPOCH, SIZE);
    v.push(cf("commit-file", ex(SIZE), c.clone()));
    let mut m = c.clone();
    m[3] = b'K';
    v.push(cf("commit-file-wrong-magic", ex(SIZE), m));
    let mut m = c.clone();
    m[4] = 2;
    v.push(cf("commit-file-wrong-version", ex(SIZE), m));
    v.push(cf(
        "commit-file-truncated",
        ex(SIZE),
        c[..c.len() - 1].to_vec(),
    ));
    let mut m = c.clone();
    m.push(0);
    v.push(cf("commit-file-trailing-byte", ex(SIZE), m));
    let mut m = c.clone();
    m[36] = 1;
    v.push(cf("commit-file-reserved", ex(SIZE), m));
    v.push(cf(
        "commit-file-other-job",
        ex(SIZE),
        commit_bytes(OTHER_JOB, EPOCH, SIZE),
    ));
    v.push(cf(
        "commit-file-other-epoch",
        ex(SIZE),
        commit_bytes(JOB, EPOCH + 1, SIZE),
    ));
    v.push(cf("commit-file-other-size", ex(SIZE + 1), c));
    v
}
