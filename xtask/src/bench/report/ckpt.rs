//! "## Checkpoints" of `docs/performance.md`: `checkpoint(state)` next to
//! write+fsync and transfer of the same bytes.

use std::fmt::Write;

use super::{cell, size_name};
use crate::bench::{ckpt_sizes, group, Samples, CKPT_RANKS};

/// The group of the checkpoint benchmark's figures.
pub(super) fn ckpt_group() -> String {
    group("sperli", "ckpt", CKPT_RANKS)
}

/// "## Checkpoints": `checkpoint(state)` at 4 ranks next to write+fsync and
/// transfer of the same bytes, measured in the same job.
pub(super) fn ckpt_section(o: &mut String, s: &Samples, quick: bool) {
    let g = ckpt_group();
    let sizes = ckpt_sizes(quick);
    let base = s
        .info
        .get("ckpt_base")
        .map_or("the system temp dir", String::as_str);
    let reps = sizes
        .iter()
        .map(|(b, r)| format!("{}: {r}", size_name(*b)))
        .collect::<Vec<_>>()
        .join(", ");
    let _ = writeln!(o, "## Checkpoints\n");
    let _ = writeln!(
        o,
        "`checkpoint(state)` (sperli-ckpt, docs/sperli-protocol.md §9.4: own file, buddy \
         copy, signed COMMIT) at {CKPT_RANKS} ranks with N bytes of `Vec<u8>` state per \
         rank, in one job `sperli run -n {CKPT_RANKS} -H 127.0.0.1,...,127.0.0.{CKPT_RANKS} \
         --checkpoint-dir DIR -- sperli-bench rank ckpt` (DIR: a fresh directory under \
         {base}, removed after the job), next to what a checkpoint cannot avoid, measured \
         in the same job on the same ranks: *write+fsync* = every rank writes the same \
         bytes plus the 92 bytes a checkpoint adds (rank file header, state prefix) to a \
         file of its own in its checkpoint directory and fsyncs it (all ranks at once); \
         *transfer* = every rank sends the same bytes once to rank (r+1) mod \
         {CKPT_RANKS} and receives its predecessor's (`send_large` / `recv_large`, all \
         ranks at once: the buddy push). Each is rank 0's wall clock between two \
         barriers; a run's figure is the median of its repetitions ({reps}) after two \
         untimed rounds of all three (a job checkpoints the same state again and again: \
         the first checkpoints of a size write new files, later ones write over the files \
         recycled from epoch e - 2), the table shows the median (min..max) of the runs. write+fsync+transfer and the \
         ratio (checkpoint over write+fsync+transfer) are taken per run. Goal: \
         ratio <= 1.5.\n"
    );
    let _ = writeln!(
        o,
        "| state/rank | checkpoint (ms) | write+fsync (ms) | transfer (ms) | write+fsync+transfer (ms) | ratio |"
    );
    let _ = writeln!(o, "|---|---|---|---|---|---|");
    for (size, _) in sizes {
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} | {} | {} |",
            size_name(size),
            cell(s.get(&g, "ckpt_ms", size)),
            cell(s.get(&g, "ckpt_write_fsync_ms", size)),
            cell(s.get(&g, "ckpt_transfer_ms", size)),
            cell(s.get(&g, "ckpt_baseline_ms", size)),
            cell(s.get(&g, "ckpt_ratio", size))
        );
    }
    crate::bench::ckpt::resume_rows(o, s, quick);
    let _ = writeln!(
        o,
        "\nThe same three measurements with the 4 ranks as threads of one process \
         (`sperli-bench ckpt-threads [MIB...]`) and where the time of a checkpoint goes are \
         under \"sperli-ckpt\" below.\n"
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::report::{goals_section, MIB};

    #[test]
    fn checkpoint_goal_uses_the_largest_size_per_run_ratios() {
        let mut s = Samples::default();
        let g = ckpt_group();
        for (c, w, t) in [
            (300.0, 100.0, 100.0),
            (200.0, 50.0, 50.0),
            (900.0, 100.0, 200.0),
        ] {
            s.add(&g, "ckpt_ms", 64 * MIB, c);
            s.add(&g, "ckpt_write_fsync_ms", 64 * MIB, w);
            s.add(&g, "ckpt_transfer_ms", 64 * MIB, t);
            s.add(&g, "ckpt_baseline_ms", 64 * MIB, w + t);
            s.add(&g, "ckpt_ratio", 64 * MIB, c / (w + t));
        }
        let goals = goals_section(&s, false);
        let row = goals
            .lines()
            .find(|l| l.contains("checkpoint within 1.5 x"))
            .expect("a checkpoint goal row");
        // Ratios 1.5, 2.0, 3.0: median 2.0.
        assert!(row.contains("64 MiB per rank at 4 ranks"), "{row}");
        assert!(row.contains(": 2.00 (1.50..3.00) x"), "{row}");
        assert!(row.ends_with("| **not met** |"), "{row}");
        let quick = goals_section(&s, true);
        let row = quick
            .lines()
            .find(|l| l.contains("checkpoint within 1.5 x"))
            .unwrap_or("");
        assert!(row.contains("16 MiB per rank"), "{row}");
        assert!(row.ends_with("| n/a (not measured) |"), "{row}");
        let mut o = String::new();
        ckpt_section(&mut o, &s, false);
        assert!(o.contains("| 64 MiB | 300 (200..900) | 100 (50.0..100) | 100 (50.0..200) | 200 (100..300) | 2.00 (1.50..3.00) |"), "{o}");
        assert!(o.contains("| 1 MiB | n/a | n/a | n/a | n/a | n/a |"), "{o}");
    }
}
