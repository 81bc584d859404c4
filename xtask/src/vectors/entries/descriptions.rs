//! Job-description entries (protocol §4) and join-token entries
//! (protocol §7.1.2).

use super::*;

pub(super) fn description(rank: u32) -> JobDescription {
    let hosts = ["127.0.0.1", "node-b.example", "localhost"];
    JobDescription {
        job_id: JOB,
        size: SIZE,
        rank,
        incarnation: INC,
        hosts: hosts
            .iter()
            .enumerate()
            .map(|(i, h)| HostEntry {
                host: (*h).into(),
                port: 7100 + i as u16,
            })
            .collect(),
        job_public_key: (0..PUBLIC_KEY_LEN).map(|i| (i % 251) as u8).collect(),
        join_token: token_bytes(rank, hosts[rank as usize]),
        ca_cert_pem: b"-----BEGIN CERTIFICATE-----\n(placeholder CA)\n-----END CERTIFICATE-----\n"
            .to_vec(),
        rank_cert_pem:
            b"-----BEGIN CERTIFICATE-----\n(placeholder rank)\n-----END CERTIFICATE-----\n".to_vec(),
        job_secret_key: if rank == 0 { vec![0xcc; 64] } else { vec![] },
        rank_key_pem:
            b"-----BEGIN PRIVATE KEY-----\n(placeholder key)\n-----END PRIVATE KEY-----\n".to_vec(),
    }
}

pub(super) fn descriptions() -> Vec<Entry> {
    let jd = |name: &str, line: String| {
        derive(Entry::new(name, "job-description").with("line", line))
            .unwrap_or_else(|w| panic!("{name}: {w}"))
    };
    let line = |d: &JobDescription| hex::encode(&d.to_vec());
    let mut v = vec![
        jd("job-description-rank-0", line(&description(0))),
        jd("job-description-rank-1", line(&description(1))),
    ];
    let good = line(&description(1));
    v.push(jd("job-description-trailing-byte", format!("{good}00")));
    v.push(jd(
        "job-description-truncated",
        good[..good.len() - 2].into(),
    ));
    v.push(jd(
        "job-description-odd-digits",
        good[..good.len() - 1].into(),
    ));
    v.push(jd("job-description-uppercase-hex", good.to_uppercase()));
    let mutate = |f: &dyn Fn(&mut JobDescription)| {
        let mut d = description(1);
        f(&mut d);
        line(&d)
    };
    v.push(jd("job-description-version-2", format!("02{}", &good[2..])));
    v.push(jd("job-description-size-0", mutate(&|d| d.size = 0)));
    v.push(jd("job-description-size-4097", mutate(&|d| d.size = 4097)));
    v.push(jd(
        "job-description-rank-equals-size",
        mutate(&|d| d.rank = 3),
    ));
    v.push(jd(
        "job-description-incarnation-0",
        mutate(&|d| d.incarnation = 0),
    ));
    v.push(jd(
        "job-description-port-0",
        mutate(&|d| d.hosts[2].port = 0),
    ));
    v.push(jd(
        "job-description-host-uppercase",
        mutate(&|d| d.hosts[1].host = "Node-B.example".into()),
    ));
    v.push(jd(
        "job-description-host-leading-zero-ipv4",
        mutate(&|d| d.hosts[0].host = "127.0.0.01".into()),
    ));
    v.push(jd(
        "job-description-host-refused",
        mutate(&|d| d.hosts[2].host = "host-a.invalid".into()),
    ));
    v.push(jd(
        "job-description-host-refused-subdomain",
        mutate(&|d| d.hosts[1].host = "x.host-b.invalid".into()),
    ));
    v.push(jd(
        "job-description-secret-key-on-rank-1",
        mutate(&|d| d.job_secret_key = vec![0xcc; 64]),
    ));
    v.push(jd(
        "job-description-bad-token",
        mutate(&|d| {
            d.join_token.pop();
        }),
    ));
    v
}

pub(super) fn tokens() -> Vec<Entry> {
    let m = JoinTokenMessage {
        job_id: JOB,
        rank: 2,
        size: SIZE,
        incarnation: INC,
        expires_at_ms: EXPIRES,
        host: "localhost",
    };
    let mut v = Vec::new();
    for (kind, bytes) in [
        ("join-token-message", m.to_vec()),
        ("join-token", token_bytes(2, "localhost")),
    ] {
        v.push(
            derive(Entry::new(kind, kind).with("bytes", hex::encode(&bytes)))
                .unwrap_or_else(|w| panic!("{kind}: {w}")),
        );
    }
    v
}
