//! Outside maturin (`cargo test`, `cargo clippy`) PyO3 links libpython as
//! an ordinary shared library; an interpreter outside the loader's paths
//! (pyenv, the base of a venv) is then found through an rpath, so the unit
//! test binary starts. maturin sets `PYO3_BUILD_EXTENSION_MODULE`: the
//! extension links no libpython and gets no rpath.
fn main() {
    println!("cargo:rerun-if-env-changed=PYO3_BUILD_EXTENSION_MODULE");
    if std::env::var_os("PYO3_BUILD_EXTENSION_MODULE").is_some() {
        return;
    }
    if let Some(dir) = pyo3_build_config::get().lib_dir() {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
    }
}
