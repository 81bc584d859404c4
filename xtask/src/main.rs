//! Project tasks: `cargo xtask vectors [--check]`, `cargo xtask bench`.
fn main() {
    eprintln!("xtask: no task yet");
    std::process::exit(2);
}
