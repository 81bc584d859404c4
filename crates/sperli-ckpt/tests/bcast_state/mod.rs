//! `bcast_state` between real ranks: TLS 1.3 endpoints on 127.0.0.x, one
//! thread per rank, at 1, 2, 3 and 8 ranks.

use sperli_ckpt::{checkpointable, BcastState};
use sperli_collective::Comm;
use sperli_tls::job_plan::JobPlan;
use sperli_transport::{Endpoint, ErrorMode, Settings};

#[derive(Debug, Clone, PartialEq, Default)]
struct Params {
    steps: u64,
    tol: f64,
    grid: Vec<i32>,
    name: String,
    restart: Option<u32>,
}
checkpointable!(Params {
    steps,
    tol,
    grid,
    name,
    restart
});

fn params() -> Params {
    Params {
        steps: 1000,
        tol: 1e-10,
        grid: (-50..50).collect(),
        name: "cg".into(),
        restart: Some(3),
    }
}

#[test]
fn bcast_state_reaches_every_tls_rank_at_1_2_3_and_8_ranks() {
    for size in [1u32, 2, 3, 8] {
        let plan = JobPlan::localhost_bound(size).unwrap();
        let root = size / 2;
        let got: Vec<(Params, u64)> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..size)
                .map(|r| {
                    let desc = plan.description(r);
                    let listener = plan.take_listener(r);
                    s.spawn(move || {
                        let settings = Settings {
                            errors: ErrorMode::Return,
                            listener,
                            ..Settings::default()
                        };
                        let ep = Endpoint::start(&desc, settings).expect("start");
                        let c = Comm::new(&ep);
                        let mut p = if r == root {
                            params()
                        } else {
                            Params::default()
                        };
                        c.bcast_state(root, &mut p).unwrap();
                        let seq = c.sequence();
                        drop(c);
                        let _ = ep.finish();
                        (p, seq)
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for (p, seq) in got {
            assert_eq!(p, params());
            assert_eq!(seq, 1, "one bcast call with feature bit 1");
        }
    }
}
