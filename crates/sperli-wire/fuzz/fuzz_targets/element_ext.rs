//! element_ext (HELLO feature bit 4, protocol §17.2): byte 0 is an element
//! type code, byte 1 a reduction code (any byte: both are read from a
//! COLLECTIVE header), the length of the rest the length of a call's
//! data. `from_code` must take exactly 0..=17 and 1..=13 and give back the
//! code; names, widths, the v1 types and the chunk alignment must agree;
//! `check` must follow the table of §17.2 (with §8.3 for the v1 types);
//! `check_args` must pass exactly when the pair is allowed and the
//! length is whole elements. Every refusal is H1618.
#![no_main]

mod common;

use libfuzzer_sys::fuzz_target;
use sperli_wire::reduce::check_args;
use sperli_wire::{ElementType, Error, HCode, Reduction};

fn refused(e: sperli_wire::error::ArgumentError) {
    let e = Error::from(e);
    assert_eq!(e.h_code(), Some(HCode::H1618));
    common::touch_error(&e);
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

fn element_type(code: u8) -> Option<ElementType> {
    let t = match ElementType::from_code(code) {
        Ok(t) => t,
        Err(e) => {
            assert!(code > 17, "element type {code} refused");
            refused(e);
            return None;
        }
    };
    assert!(code <= 17, "element type {code} taken");
    assert_eq!(t.code(), code);
    assert_eq!(ElementType::ALL[usize::from(code)], t);
    assert_eq!(ElementType::from_name(t.name()), Some(t));
    assert_eq!(t.to_string(), t.name());
    let w = t.width();
    assert!(matches!(w, 1 | 2 | 4 | 6 | 8 | 12 | 16), "{t} width {w}");
    assert_eq!(t.needs_bit4(), code > 6);
    assert_eq!(ElementType::V1.contains(&t), code <= 6);
    assert_eq!(t.is_pair(), code >= 13);
    assert_eq!(t.is_complex(), code == 11 || code == 12);
    assert_eq!(t.chunk_align(), 8 * w / gcd(8, w), "{t}: lcm(8, width)");
    Some(t)
}

fn reduction(code: u8) -> Option<Reduction> {
    let r = match Reduction::from_code(code) {
        Ok(r) => r,
        Err(e) => {
            assert!(code == 0 || code > 13, "reduction {code} refused");
            refused(e);
            return None;
        }
    };
    assert!((1..=13).contains(&code), "reduction {code} taken");
    assert_eq!(r.code(), code);
    assert_eq!(Reduction::from_name(r.name()), Some(r));
    assert_eq!(r.to_string(), r.name());
    assert_eq!(Reduction::ALL.into_iter().nth(usize::from(code) - 1), Some(r));
    assert_eq!(r.needs_bit4(), code > 10);
    assert_eq!(Reduction::V1.contains(&r), code <= 10);
    Some(r)
}

fuzz_target!(|data: &[u8]| {
    let [t, r, rest @ ..] = data else {
        return;
    };
    let (t, r) = (element_type(*t), reduction(*r));
    let (Some(t), Some(r)) = (t, r) else {
        return;
    };
    let allowed = r.check(t);
    // The table of protocol §17.2 as reduction-code masks per type (the
    // v1 types: §8.3, which `Reduction::check` holds, and user).
    const USER: u16 = 1 << 13;
    let mask: u16 = match t.code() {
        7 => 0b111 << 5 | USER,       // bool: land lor lxor
        8..=10 => 0x3ff << 1 | USER,  // i8 i16 u16: every v1 reduction
        11 | 12 => 0b11 << 1 | USER,  // complex: sum prod
        13..=17 => 0b11 << 11 | USER, // the pairs: minloc maxloc
        // The v1 types: §8.3's table for the v1 reductions, and user.
        _ if !r.needs_bit4() && r.check(t).is_ok() => 1 << r.code() | USER,
        _ => USER,
    };
    let table = mask >> r.code() & 1 == 1;
    assert_eq!(allowed.is_ok(), table, "{t} {r}: {allowed:?}");
    let len = rest.len();
    let args = check_args(len, t, r);
    assert_eq!(
        args.is_ok(),
        table && len.is_multiple_of(t.width()),
        "{t} {r} {len}: {args:?}"
    );
    for e in [allowed.err(), args.err()].into_iter().flatten() {
        refused(e);
    }
});
