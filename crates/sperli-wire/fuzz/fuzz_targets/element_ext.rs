//! element_ext (HELLO feature bit 4, protocol §17.2): byte 0 is an element
//! type code, byte 1 a reduction code (any byte: both are read from a
//! COLLECTIVE header), the length of the rest the length of a call's
//! data. `from_code` must take exactly 0..=17 and 1..=13 and give back the
//! code; names, widths, the v1 types and the chunk alignment must agree;
//! `check` must follow the table of §17.2 (with §8.3 for the v1 types);
//! `check_args_ext` must pass exactly when the pair is allowed and the
//! length is whole elements. Every refusal is H1618.
#![no_main]

mod common;

use libfuzzer_sys::fuzz_target;
use sperli_wire::element_ext::{ExtElementType, ExtReduction};
use sperli_wire::reduce::ext::check_args_ext;
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

fn element_type(code: u8) -> Option<ExtElementType> {
    let t = match ExtElementType::from_code(code) {
        Ok(t) => t,
        Err(e) => {
            assert!(code > 17, "element type {code} refused");
            refused(e);
            return None;
        }
    };
    assert!(code <= 17, "element type {code} taken");
    assert_eq!(t.code(), code);
    assert_eq!(ExtElementType::ALL[usize::from(code)], t);
    assert_eq!(ExtElementType::from_name(t.name()), Some(t));
    assert_eq!(t.to_string(), t.name());
    let w = t.width();
    assert!(matches!(w, 1 | 2 | 4 | 6 | 8 | 12 | 16), "{t} width {w}");
    match t.v1() {
        Some(v1) => {
            assert!(code <= 6);
            assert_eq!(v1.code(), code);
            assert_eq!(v1.width(), w);
            assert_eq!(v1.name(), t.name());
            assert_eq!(ExtElementType::from(v1), t);
        }
        None => assert!(code > 6 && ElementType::from_code(code).is_err()),
    }
    assert_eq!(t.is_pair(), code >= 13);
    assert_eq!(t.is_complex(), code == 11 || code == 12);
    assert_eq!(t.chunk_align(), 8 * w / gcd(8, w), "{t}: lcm(8, width)");
    Some(t)
}

fn reduction(code: u8) -> Option<ExtReduction> {
    let r = match ExtReduction::from_code(code) {
        Ok(r) => r,
        Err(e) => {
            assert!(code == 0 || code > 13, "reduction {code} refused");
            refused(e);
            return None;
        }
    };
    assert!((1..=13).contains(&code), "reduction {code} taken");
    assert_eq!(r.code(), code);
    assert_eq!(ExtReduction::from_name(r.name()), Some(r));
    assert_eq!(r.to_string(), r.name());
    assert_eq!(ExtReduction::all().nth(usize::from(code) - 1), Some(r));
    match r {
        ExtReduction::V1(v1) => assert_eq!((v1.code(), v1.name()), (code, r.name())),
        _ => assert!(code > 10 && Reduction::from_code(code).is_err()),
    }
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
        _ => match (t.v1(), r) {
            (Some(v1), ExtReduction::V1(v)) if v.check(v1).is_ok() => 1 << r.code() | USER,
            _ => USER,
        },
    };
    let table = mask >> r.code() & 1 == 1;
    assert_eq!(allowed.is_ok(), table, "{t} {r}: {allowed:?}");
    let len = rest.len();
    let args = check_args_ext(len, t, r);
    assert_eq!(
        args.is_ok(),
        table && len.is_multiple_of(t.width()),
        "{t} {r} {len}: {args:?}"
    );
    for e in [allowed.err(), args.err()].into_iter().flatten() {
        refused(e);
    }
});
