// A struct holding a connection (the transport Endpoint) is no checkpoint
// state: the macro needs every field to be Checkpointable.
use sperli_transport::Endpoint;

struct Sim {
    step: u64,
    link: Endpoint,
}
sperli_ckpt::checkpointable!(Sim { step, link });

fn main() {}
