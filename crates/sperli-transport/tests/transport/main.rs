//! Multi-rank tests over real TLS 1.3 on 127.0.0.0/8 (one binary to keep
//! build time low). Every test runs under a watchdog so it cannot hang.

mod behind_hello;
mod buffer_reuse;
mod close_grace;
mod common;
mod fast_path;
mod hostile;
mod leaving;
mod matching;
mod mesh;
mod owned_handles;
mod procs;
mod recovery;
mod reliability;
mod vectors;
