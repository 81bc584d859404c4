//! The CPU time of this process, every thread's time on a CPU in ns, from
//! `/proc/self/task/*/schedstat` (Linux; ns resolution where the process
//! clock of `/proc/self/stat` counts 10 ms ticks).

use std::fs;

/// Every live thread's CPU time so far (ns); `None` where the kernel has
/// no schedstat. A thread that ends between the listing and its read is
/// left out (the transport's threads live as long as the job).
pub fn process_cpu_ns() -> Option<u64> {
    let mut total = 0u64;
    for task in fs::read_dir("/proc/self/task").ok()? {
        let Ok(task) = task else { continue };
        let Ok(text) = fs::read_to_string(task.path().join("schedstat")) else {
            continue;
        };
        total += text.split_whitespace().next()?.parse::<u64>().ok()?;
    }
    Some(total)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    #[test]
    fn counts_the_work_of_another_thread() {
        // Another thread spins while this one mostly sleeps: the process's
        // CPU time grows by 20 ms only if that thread's time is counted
        // (this one's polls cost well under 10 ms in the 2 s allowed).
        let before = process_cpu_ns().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let spinner = {
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                let mut x = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    x = std::hint::black_box(x.wrapping_add(1));
                }
            })
        };
        let t = Instant::now();
        let grown = loop {
            std::thread::sleep(Duration::from_millis(1));
            if process_cpu_ns().unwrap() - before >= 20_000_000 {
                break true;
            }
            if t.elapsed() > Duration::from_secs(2) {
                break false;
            }
        };
        stop.store(true, Ordering::Relaxed);
        spinner.join().unwrap();
        assert!(grown, "the spinning thread's CPU time is not counted");
    }
}
