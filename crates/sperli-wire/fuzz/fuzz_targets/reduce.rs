//! reduce::combine: byte 0 is the element type code, byte 1 the reduction
//! code, byte 2 the split (high bit clear: halves of the rest; set: the low
//! 7 bits are the left length), the rest the two operands. combine must not
//! panic, must succeed exactly when check_args passes and the lengths are
//! equal, and must preserve the length; it must agree with combine_into and
//! fold, and integer reductions must be commutative.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sperli_wire::reduce::{check_args, combine, combine_into, fold};
use sperli_wire::{ElementType, Reduction};

fuzz_target!(|data: &[u8]| {
    let [t, r, split, rest @ ..] = data else {
        return;
    };
    let (Ok(t), Ok(r)) = (ElementType::from_code(*t % 8), Reduction::from_code(*r % 11)) else {
        return;
    };
    let at = if split & 0x80 == 0 {
        rest.len() / 2
    } else {
        usize::from(split & 0x7f).min(rest.len())
    };
    let (left, right) = rest.split_at(at);
    let right = if split & 0x80 == 0 { &right[..left.len()] } else { right };

    let res = combine(left, right, t, r);
    let should = check_args(left.len(), t, r).is_ok() && left.len() == right.len();
    assert_eq!(res.is_ok(), should, "combine {t} {r}: {res:?}");
    let out = match res {
        Ok(out) => out,
        Err(e) => return drop(format!("{e} {e:?}")),
    };
    assert_eq!(out.len(), left.len(), "combine changed the length");

    let mut acc = left.to_vec();
    combine_into(&mut acc, right, t, r).expect("combine_into refused what combine took");
    assert_eq!(acc, out);
    let folded = fold([left, right], t, r).expect("fold refused").expect("fold empty");
    assert_eq!(folded, out);

    if !t.is_float() {
        let swapped = combine(right, left, t, r).expect("swapped combine refused");
        assert_eq!(swapped, out, "{t} {r} is not commutative");
    }
});
