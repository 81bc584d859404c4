//! The example rank programs as a binary of their own: see
//! `sperli_launch::example`.

fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    sperli_launch::example::run(&args)
}
