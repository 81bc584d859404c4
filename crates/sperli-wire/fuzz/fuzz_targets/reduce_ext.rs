//! reduce (HELLO feature bit 4, protocol §17.3): the folds of every
//! element type and reduction over arbitrary byte buffers.
//!
//! Input: byte 0 the element type (code mod 18), byte 1 the reduction
//! (code mod 13, plus 1: 1..=13), byte 2 bits 0..=2 the number of
//! contributions (mod 5, plus 1), bit 3 whether the last contribution is
//! one byte short, bits 4..=7 a cut (in elements); the rest is cut into
//! the contributions, of equal length.
//!
//! `fold_ext` must never panic and must succeed exactly when the pair is
//! allowed, the reduction is not user-defined, and the contributions are
//! whole elements of one length; its result must keep the length, equal
//! the left fold of `combine_ext`, and equal the folds of the same contributions cut at an element
//! boundary, joined (the folds are element by element; the NaN bits of a
//! float sum or product are not fixed, protocol §8.3, so two NaNs there
//! are equal). Integer reductions of two contributions must commute; bool
//! results are 0 or 1; a minloc or maxloc element is a value and an index
//! of the contributions. `fold_user` folds with a program's function in
//! rank order: bytewise xor, and "keep the left".
#![no_main]

mod common;

use libfuzzer_sys::fuzz_target;
use sperli_wire::reduce::ext::fold_user;
use sperli_wire::reduce::{check_args, combine as combine_ext, fold as fold_ext};
use sperli_wire::{ElementType, Error, HCode, Reduction};

fn refused(e: sperli_wire::error::ArgumentError) {
    let e = Error::from(e);
    assert_eq!(e.h_code(), Some(HCode::H1618));
    common::touch_error(&e);
}

/// The bytes of a float component whose NaN bits are not fixed (a sum or
/// product of f32, f64 or their complex), or `None` when every bit is.
fn loose_component(t: ElementType, r: Reduction) -> Option<usize> {
    use ElementType as T;
    if !matches!(r, Reduction::Sum | Reduction::Prod) {
        return None;
    }
    match t {
        T::F32 | T::Complex64 => Some(4),
        T::F64 | T::Complex128 => Some(8),
        _ => None,
    }
}

fn is_nan(b: &[u8]) -> bool {
    match b.len() {
        4 => f32::from_le_bytes(b.try_into().unwrap()).is_nan(),
        _ => f64::from_le_bytes(b.try_into().unwrap()).is_nan(),
    }
}

/// `a == b`, two NaNs equal where their bits are not fixed.
fn same_result(t: ElementType, r: Reduction, a: &[u8], b: &[u8]) -> bool {
    match loose_component(t, r) {
        None => a == b,
        Some(w) => {
            a.len() == b.len()
                && a.chunks(w)
                    .zip(b.chunks(w))
                    .all(|(x, y)| x == y || (is_nan(x) && is_nan(y)))
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let [t, r, shape, rest @ ..] = data else {
        return;
    };
    let t = ElementType::from_code(t % 18).expect("codes 0..=17");
    let r = Reduction::from_code(r % 13 + 1).expect("codes 1..=13");
    let n = usize::from(shape & 7) % 5 + 1;
    let each = rest.len() / n;
    let mut parts: Vec<&[u8]> = (0..n).map(|i| &rest[i * each..(i + 1) * each]).collect();
    if shape & 8 != 0 && each > 0 {
        let last = parts[n - 1];
        parts[n - 1] = &last[..each - 1];
    }
    let len = parts[0].len();
    let one_length = parts.iter().all(|p| p.len() == len);
    let w = t.width();

    user_folds(&parts, t, one_length && len.is_multiple_of(w));

    let should =
        r != Reduction::User && check_args(len, t, r).is_ok() && (one_length || n == 1);
    let out = match fold_ext(parts.iter().copied(), t, r) {
        Ok(out) => out.expect("contributions were given"),
        Err(e) => {
            assert!(!should, "fold_ext {t} {r} of {n} x {len} refused: {e:?}");
            return refused(e);
        }
    };
    assert!(should, "fold_ext {t} {r} took what it must refuse");
    assert_eq!(out.len(), len, "the fold changed the length");

    let mut acc = parts[0].to_vec();
    for p in &parts[1..] {
        acc = combine_ext(&acc, p, t, r).expect("combine_ext refused what fold_ext took");
    }
    assert_eq!(acc, out, "fold_ext is not the left fold of combine_ext");

    // Element by element: the fold of the parts cut in two, joined.
    let at = (usize::from(shape >> 4) * w).min(len);
    let head = fold_ext(parts.iter().map(|p| &p[..at]), t, r).expect("head");
    let tail = fold_ext(parts.iter().map(|p| &p[at..]), t, r).expect("tail");
    let joined = [head.unwrap(), tail.unwrap()].concat();
    assert!(
        same_result(t, r, &joined, &out),
        "{t} {r}: the fold cut at byte {at} differs\n whole:  {}\n joined: {}",
        common::hex(&out),
        common::hex(&joined)
    );

    if n == 1 {
        assert_eq!(out, parts[0], "a fold of one contribution changed it");
        return;
    }
    use ElementType as T;
    let float = matches!(
        t,
        T::F32 | T::F64 | T::Complex64 | T::Complex128 | T::F32I32 | T::F64I32
    );
    if n == 2 && !float {
        let swapped = combine_ext(parts[1], parts[0], t, r).expect("swapped");
        assert_eq!(swapped, out, "{t} {r} does not commute");
    }
    if t == T::Bool {
        assert!(
            out.iter().all(|b| *b <= 1),
            "bool {r} gave {}",
            common::hex(&out)
        );
    }
    if t.is_pair() {
        let v = w - 4;
        for (i, e) in out.chunks(w).enumerate() {
            let elems = || parts.iter().map(move |p| &p[i * w..(i + 1) * w]);
            assert!(
                elems().any(|c| c[..v] == e[..v]),
                "{r} value of element {i}"
            );
            assert!(
                elems().any(|c| c[v..] == e[v..]),
                "{r} index of element {i}"
            );
        }
    }
});

/// `fold_user` with bytewise xor (any order gives it, so it checks that
/// every contribution is folded once) and with "keep the left" (the first
/// contribution stays: the accumulator is always the left operand).
fn user_folds(parts: &[&[u8]], t: ElementType, ok: bool) {
    let xor = fold_user(parts.iter().copied(), t, |acc, right| {
        assert_eq!(acc.len(), right.len());
        acc.iter_mut().zip(right).for_each(|(a, b)| *a ^= b);
    });
    match xor {
        Ok(out) => {
            assert!(ok, "fold_user took contributions it must refuse");
            let mut want = vec![0u8; parts[0].len()];
            for p in parts {
                want.iter_mut().zip(p.iter()).for_each(|(a, b)| *a ^= b);
            }
            assert_eq!(out, Some(want));
        }
        Err(e) => {
            assert!(!ok, "fold_user refused: {e:?}");
            refused(e);
        }
    }
    if ok {
        let keep = fold_user(parts.iter().copied(), t, |_, _| {}).expect("keep the left");
        assert_eq!(keep.as_deref(), Some(parts[0]));
    }
}
