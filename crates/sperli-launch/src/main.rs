//! The `sperli` launcher (issue 6).
fn main() {
    eprintln!("sperli: the launcher is not built yet");
    std::process::exit(2);
}
