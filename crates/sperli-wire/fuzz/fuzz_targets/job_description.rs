//! JobDescription::from_line (builtin refused-host policy) on the input as
//! a stdin line, and JobDescription::decode on the input as binary. A
//! decoded description must re-encode to the same line / bytes; the binary
//! and line forms must agree.
#![no_main]

mod common;

use libfuzzer_sys::fuzz_target;
use sperli_wire::error::Error;
use sperli_wire::host;
use sperli_wire::job_description::{check_name, JobDescription};
use sperli_wire::join_token::JoinToken;
use sperli_wire::limits::{PUBLIC_KEY_LEN, SECRET_KEY_LEN};
use sperli_wire::refused_hosts::RefusedHosts;
use sperli_wire::Codec;

fn check_decoded(d: &JobDescription) {
    assert!(d.size >= 1 && d.rank < d.size && d.incarnation >= 1);
    assert_eq!(d.hosts.len(), d.size as usize);
    assert!(d.own_host().is_some());
    for e in &d.hosts {
        assert!(e.port >= 1);
        assert!(host::validate(&e.host).is_ok(), "decoded an invalid host {:?}", e.host);
    }
    assert_eq!(d.job_public_key.len(), PUBLIC_KEY_LEN);
    let key = if d.rank == 0 { SECRET_KEY_LEN } else { 0 };
    assert_eq!(d.job_secret_key.len(), key);
    assert!(JoinToken::decode(&d.join_token).is_ok());
    let _ = format!("{d:?}");
}

fuzz_target!(|data: &[u8]| {
    let policy = RefusedHosts::builtin();
    match JobDescription::from_line(data, &policy) {
        Ok(d) => {
            check_decoded(&d);
            assert!(d.check_hosts(&policy).is_ok());
            common::assert_same("job description line", data, d.to_line().as_bytes());
        }
        Err(Error::HostRefused { .. }) => {
            // Decoded, then refused: the binary form must decode.
            let digits = &data[..data.len() - 1];
            let bytes = sperli_wire::hex::decode(digits).expect("refused line is hex");
            let d = JobDescription::decode(&bytes).expect("refused line decodes");
            assert!(d.check_hosts(&policy).is_err());
        }
        Err(e) => common::touch_error(&e),
    }
    match JobDescription::decode(data) {
        Ok(d) => {
            check_decoded(&d);
            common::assert_same("job description", data, &d.to_vec());
            let line = d.to_line();
            match JobDescription::from_line(line.as_bytes(), &policy) {
                Ok(d2) => assert_eq!(d2, d),
                Err(Error::HostRefused { .. }) => assert!(d.check_hosts(&policy).is_err()),
                Err(e) => panic!("to_line of a decoded description does not decode: {e}"),
            }
        }
        Err(e) => {
            let _ = check_name(&e);
            common::touch(&e);
        }
    }
});
