// An open receive handle is no checkpoint state.
use sperli_ckpt::Checkpointer;
use sperli_transport::Endpoint;

fn save(ck: &mut Checkpointer<&Endpoint>, ep: &Endpoint) {
    let h = ep.irecv(0, Some(1)).unwrap();
    let _ = ck.checkpoint(&(1u64, h));
}

fn main() {}
