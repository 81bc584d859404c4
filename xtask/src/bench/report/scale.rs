//! "## Scale": memory and descriptors per rank of `docs/performance.md`.

use std::fmt::Write;

use super::{cell, num};
use crate::bench::{group, rss_ranks, Samples, RSS_GOAL_RANKS};

/// Descriptors a rank asks for beyond one per peer (RLIMIT_NOFILE >= size +
/// 64, `needed` in crates/sperli-transport/src/fd_limit.rs).
const FD_MARGIN: u32 = 64;

/// "## Scale": peak RSS and descriptors per rank at each job size of the
/// memory job, the per-connection cost between the smallest and the largest
/// size, and what a rank of the largest job (4096 ranks) needs by that cost.
pub(super) fn scale_section(o: &mut String, s: &Samples, quick: bool) {
    let sizes = rss_ranks(quick);
    let get = |n: u32, name: &str| s.get(&group("sperli", "rss", n), name, 0);
    let max_size = sperli_wire::limits::MAX_SIZE;
    let _ = writeln!(o, "## Scale: memory and descriptors per rank\n");
    let _ = writeln!(
        o,
        "A job of N ranks (`sperli run -n N -H 127.0.0.1,...`, rank r on 127.0.0.(r+1), \
         `sperli-bench rank rss`); after set-up, a barrier and 20 allreduces of 8 B every \
         rank reads VmHWM (peak RSS) and VmRSS from /proc/self/status and counts its open \
         file descriptors (the entries of /proc/self/fd, without the one that reads them). \
         VmHWM in KiB; descriptors: the largest count of any rank. Each figure is the \
         median (min..max) of the runs. The start-up time at the same sizes is in the \
         start-up table above.\n"
    );
    let _ = writeln!(
        o,
        "| ranks | peers per rank | largest VmHWM (KiB) | median VmHWM (KiB) | descriptors per rank |"
    );
    let _ = writeln!(o, "|---|---|---|---|---|");
    for &n in sizes {
        let _ = writeln!(
            o,
            "| {n} | {} | {} | {} | {} |",
            n - 1,
            cell(get(n, "rss_hwm_max_kib")),
            cell(get(n, "rss_hwm_median_kib")),
            cell(get(n, "fds_max"))
        );
    }
    o.push('\n');
    let (lo, hi) = (sizes[0], sizes[sizes.len() - 1]);
    let figures = (
        get(lo, "rss_hwm_median_kib"),
        get(hi, "rss_hwm_median_kib"),
        get(lo, "fds_max"),
        get(hi, "fds_max"),
    );
    if let (Some(m_lo), Some(m_hi), Some(f_lo), Some(f_hi)) = figures {
        let (p_lo, p_hi, p_max) = (
            f64::from(lo - 1),
            f64::from(hi - 1),
            f64::from(max_size - 1),
        );
        let slope = (m_hi.median - m_lo.median) / (p_hi - p_lo);
        let base = m_lo.median - p_lo * slope;
        let fd_slope = (f_hi.median - f_lo.median) / (p_hi - p_lo);
        let fds_max = f_hi.median - p_hi + p_max;
        let mem_max = base + p_max * slope;
        let limit = max_size + FD_MARGIN;
        let _ = writeln!(
            o,
            "Per-connection cost, from the medians of the median VmHWM: slope = (VmHWM at \
             {hi} ranks - VmHWM at {lo}) / ({} - {} peers) = ({} - {}) / {} = **{slope:.2} KiB \
             per peer**; base = VmHWM at {lo} - {} x slope = **{base:.0} KiB**. Descriptors: \
             ({} - {}) / {} = {fd_slope:.2} per peer (a socket each); the rest, {} at {hi} \
             ranks and {} at {lo}, is stdio, the poller's epoll and eventfd and a few \
             more.\n",
            hi - 1,
            lo - 1,
            num(m_hi.median),
            num(m_lo.median),
            hi - lo,
            lo - 1,
            num(f_hi.median),
            num(f_lo.median),
            hi - lo,
            num(f_hi.median - p_hi),
            num(f_lo.median - p_lo),
        );
        let _ = writeln!(
            o,
            "A rank of a {max_size}-rank job ({} peers), computed from these figures, not \
             measured:\n",
            max_size - 1
        );
        let _ = writeln!(
            o,
            "- descriptors = descriptors at {hi} ranks - {} + {} = {} - {} + {} = **{fds_max:.0}**; \
             the transport asks for RLIMIT_NOFILE >= size + {FD_MARGIN} = {limit} at start \
             (`crates/sperli-transport/src/fd_limit.rs`: it raises the soft limit up to the \
             hard limit and fails when the hard limit is lower): {fds_max:.0} is {} {limit};",
            hi - 1,
            max_size - 1,
            num(f_hi.median),
            hi - 1,
            max_size - 1,
            if fds_max <= f64::from(limit) {
                "within"
            } else {
                "MORE than"
            }
        );
        let _ = writeln!(
            o,
            "- memory = base + {} x slope = {base:.0} + {} x {slope:.2} = **{mem_max:.0} KiB \
             ({:.1} MiB)** of peak RSS, plus its messages (the model is linear in the peers: \
             per-connection state such as TLS sessions and buffers; what a rank receives from \
             many peers at once comes on top).\n",
            max_size - 1,
            max_size - 1,
            mem_max / 1024.0
        );
    } else {
        let _ = writeln!(
            o,
            "No per-connection cost: the median VmHWM or the descriptor count at {lo} or \
             {hi} ranks is missing.\n"
        );
    }
    let g = group("sperli", "rss", RSS_GOAL_RANKS);
    let kib = |name: &str| cell(s.get(&g, name, 0));
    let _ = writeln!(o, "### A rank with {} peers\n", RSS_GOAL_RANKS - 1);
    let _ = writeln!(o, "| figure | KiB, median (min..max) of runs |");
    let _ = writeln!(o, "|---|---|");
    let _ = writeln!(
        o,
        "| largest VmHWM of the ranks | {} |",
        kib("rss_hwm_max_kib")
    );
    let _ = writeln!(
        o,
        "| median VmHWM of the ranks | {} |",
        kib("rss_hwm_median_kib")
    );
    let _ = writeln!(o, "| rank 0's VmHWM | {} |", kib("rss_hwm_rank0_kib"));
    let _ = writeln!(
        o,
        "| largest VmRSS at the end | {} |",
        kib("rss_now_max_kib")
    );
    let _ = writeln!(
        o,
        "| threads of rank 0 | {} |\n",
        cell(s.get(&g, "threads_rank0", 0))
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Figures of a memory job at `n` ranks, as `record` files them.
    fn rss(s: &mut Samples, n: u32, median_kib: f64, fds: f64) {
        let g = group("sperli", "rss", n);
        s.add(&g, "rss_hwm_max_kib", 0, median_kib + 100.0);
        s.add(&g, "rss_hwm_median_kib", 0, median_kib);
        s.add(&g, "fds_max", 0, fds);
    }

    #[test]
    fn scale_section_computes_the_4096_rank_figures() {
        let mut s = Samples::default();
        // 7 and 63 peers: 10 KiB and one descriptor per peer, base 5000 KiB.
        rss(&mut s, 8, 5070.0, 14.0);
        rss(&mut s, 64, 5630.0, 70.0);
        let mut o = String::new();
        scale_section(&mut o, &s, true);
        assert!(o.contains("**10.00 KiB per peer**"), "{o}");
        assert!(o.contains("**5000 KiB**"), "{o}");
        assert!(o.contains("1.00 per peer"), "{o}");
        // 70 - 63 + 4095 descriptors, 5000 + 4095 x 10 KiB.
        assert!(o.contains("= **4102**"), "{o}");
        assert!(o.contains("4102 is within 4160"), "{o}");
        assert!(o.contains("**45950 KiB (44.9 MiB)**"), "{o}");
        assert!(
            o.contains("| 64 | 63 | 5730 (5730..5730) | 5630 (5630..5630) | 70.0 (70.0..70.0) |")
        );
    }

    #[test]
    fn scale_section_says_when_a_size_is_missing() {
        let mut s = Samples::default();
        rss(&mut s, 64, 5630.0, 70.0);
        let mut o = String::new();
        scale_section(&mut o, &s, true);
        assert!(o.contains("No per-connection cost"), "{o}");
        assert!(o.contains("| 8 | 7 | n/a | n/a | n/a |"), "{o}");
    }
}
