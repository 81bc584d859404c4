//! Fatal errors and panics: what ends the process and what a panicking
//! program says to its peers (crate docs, "Errors" and "Panics").

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, Once, Weak};
use std::time::{Duration, Instant};

use sperli_wire::abort::AbortReason;
use sperli_wire::Error;

use crate::io::shared::{Command, Shared};
use crate::proto::ending::{fatal_status, AbortFrame};

static EXITING: AtomicBool = AtomicBool::new(false);

/// Ends the process with `status` after a fatal `error` of rank `rank`,
/// saying so on stderr (the error record is written already). Only the
/// first thread to get here exits; any other waits for it.
pub(crate) fn exit_process(rank: u32, error: &Error, status: i32) -> ! {
    if EXITING.swap(true, Ordering::SeqCst) {
        loop {
            std::thread::park();
        }
    }
    let _ = std::io::stdout().flush();
    let _ = writeln!(
        std::io::stderr(),
        "rank {rank}: {error}; errors are fatal: the process ends with status {status} \
         (ErrorMode::Return in Settings::errors or Endpoint::set_errors returns them instead)"
    );
    std::process::exit(status)
}

/// A caller that met the job's fatal error: it never returns, the I/O
/// thread ends the process once the ABORT is out (within the linger). Should
/// the I/O thread not, the caller ends the process itself after the
/// linger and two seconds more.
pub(crate) fn stop(shared: &Shared, error: &Error) -> ! {
    let deadline = Instant::now() + shared.linger + Duration::from_secs(2);
    while Instant::now() < deadline {
        std::thread::park_timeout(Duration::from_millis(50));
    }
    exit_process(shared.ctx.rank, error, fatal_status(error))
}

/// The message of the last panic (`panicked at <location>: <payload>`).
static LAST_PANIC: Mutex<Option<String>> = Mutex::new(None);

/// The endpoints alive in this process, for a panic that aborts the
/// process without unwinding.
static LIVE: Mutex<Vec<Weak<Shared>>> = Mutex::new(Vec::new());

/// Installs (once per process) the panic hook: it notes the panic's
/// message for the ABORT a panicking program sends, and, when panics abort
/// the process instead of unwinding (so no `Drop` runs), sends ABORT
/// reason 2 from every live endpoint before the process goes. The hook
/// that was installed before still runs first.
pub(crate) fn install_panic_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            previous(info);
            let payload = info
                .payload()
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| info.payload().downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a non-string payload".to_owned());
            let at = info
                .location()
                .map_or(String::new(), |l| format!(" at {}:{}", l.file(), l.line()));
            let msg = format!("panicked{at}: {payload}");
            if let Ok(mut g) = LAST_PANIC.try_lock() {
                *g = Some(msg.clone());
            }
            if cfg!(panic = "abort") {
                abort_all_live(&msg);
            }
        }));
    });
}

/// The message of the panic in progress, for the ABORT of rank `rank`.
pub(crate) fn panic_message(rank: u32) -> String {
    let last = LAST_PANIC
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone()
        .unwrap_or_else(|| "panicked".to_owned());
    format!("rank {rank} {last}")
}

/// Notes a live endpoint.
pub(crate) fn register_live(shared: Weak<Shared>) {
    let mut live = LIVE.lock().unwrap_or_else(|e| e.into_inner());
    live.retain(|w| w.strong_count() > 0);
    live.push(shared);
}

/// Sends ABORT reason 2 with `msg` from every live endpoint and waits up
/// to its linger for the I/O thread to flush it.
fn abort_all_live(msg: &str) {
    let live: Vec<_> = match LIVE.try_lock() {
        Ok(g) => g.iter().filter_map(Weak::upgrade).collect(),
        Err(_) => return,
    };
    for shared in live {
        let frame = AbortFrame {
            reason: AbortReason::Application,
            code: 0,
            message: format!("rank {} {msg}", shared.ctx.rank),
        };
        let error = Error::AbortedByPeer {
            from: shared.ctx.rank,
            reason: frame.reason.code(),
            code: 0,
            message: frame.message.clone(),
        };
        if shared.fail(error, true) {
            shared.command(Command::Abort(frame));
        }
        let deadline = Instant::now() + shared.linger;
        while !shared.io_ended.load(Ordering::SeqCst) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}
