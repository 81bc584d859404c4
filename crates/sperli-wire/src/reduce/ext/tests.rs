//! Unit tests of the bit-4 folds (protocol §17.3): exact cases, and every
//! type and reduction against an independent serial fold at 3 and 5
//! ranks, with proptest.

use super::*;
use crate::element::Reduction as V;
use crate::reduce::{combine, fold};
use proptest::prelude::*;
use ElementType as T;
use Reduction as R;

fn c(l: &[u8], r: &[u8], t: T, op: R) -> Vec<u8> {
    combine(l, r, t, op).unwrap()
}
fn cx32(xs: &[(f32, f32)]) -> Vec<u8> {
    xs.iter()
        .flat_map(|(a, b)| [a.to_le_bytes(), b.to_le_bytes()].concat())
        .collect()
}
fn cx64(xs: &[(f64, f64)]) -> Vec<u8> {
    xs.iter()
        .flat_map(|(a, b)| [a.to_le_bytes(), b.to_le_bytes()].concat())
        .collect()
}
fn pairs<const N: usize>(xs: &[([u8; N], i32)]) -> Vec<u8> {
    xs.iter()
        .flat_map(|(v, i)| [&v[..], &i.to_le_bytes()].concat())
        .collect()
}

#[test]
fn bool_bytes_other_than_0_and_1_are_true() {
    let l = [0, 2, 0xff, 1, 0];
    let r = [0, 1, 0, 0x80, 7];
    assert_eq!(c(&l, &r, T::Bool, V::Land), [0, 1, 0, 1, 0]);
    assert_eq!(c(&l, &r, T::Bool, V::Lor), [0, 1, 1, 1, 1]);
    assert_eq!(c(&l, &r, T::Bool, V::Lxor), [0, 0, 1, 0, 1]);
    for r in [V::Sum, V::Min, V::Band] {
        assert!(combine(&l, &l, T::Bool, r).is_err());
    }
}

#[test]
fn small_integers_wrap_and_order() {
    assert_eq!(c(&[0x7f], &[1], T::I8, V::Sum), [0x80]);
    assert_eq!(c(&[0xff], &[1], T::I8, V::Min), [0xff]); // -1 < 1
    let i16s = |x: &[i16]| -> Vec<u8> { x.iter().flat_map(|v| v.to_le_bytes()).collect() };
    let u16s = |x: &[u16]| -> Vec<u8> { x.iter().flat_map(|v| v.to_le_bytes()).collect() };
    assert_eq!(
        c(&i16s(&[-1, 300]), &i16s(&[1, 300]), T::I16, V::Prod),
        i16s(&[-1, 24464])
    );
    assert_eq!(
        c(&u16s(&[0xffff, 3]), &u16s(&[1, 5]), T::U16, V::Max),
        u16s(&[0xffff, 5])
    );
    assert_eq!(
        c(&u16s(&[0, 9]), &u16s(&[4, 0]), T::U16, V::Land),
        u16s(&[0, 0])
    );
    assert_eq!(
        c(&u16s(&[0xf0f0]), &u16s(&[0x0ff0]), T::U16, V::Bxor),
        u16s(&[0xff00])
    );
}

#[test]
fn complex_product_is_the_textbook_formula_in_the_component_format() {
    // (1+2i)(3+4i) = -5+10i; (0.1+0.2i)(0.3+0.4i) rounded per operation.
    let out = c(
        &cx64(&[(1.0, 2.0), (0.1, 0.2)]),
        &cx64(&[(3.0, 4.0), (0.3, 0.4)]),
        T::Complex128,
        V::Prod,
    );
    let re = 0.1f64 * 0.3 - 0.2 * 0.4;
    let im = 0.1f64 * 0.4 + 0.2 * 0.3;
    assert_eq!(out, cx64(&[(-5.0, 10.0), (re, im)]));
    // f32: the products rounded to f32, not computed in f64.
    let (a, b) = ((16_777_217.0f32, 1.0f32), (3.0f32, 0.0f32));
    let out = c(&cx32(&[a]), &cx32(&[b]), T::Complex64, V::Prod);
    assert_eq!(out, cx32(&[(a.0 * b.0 - a.1 * b.1, a.0 * b.1 + a.1 * b.0)]));
    let out = c(
        &cx32(&[(1.5, -0.0)]),
        &cx32(&[(0.25, 0.0)]),
        T::Complex64,
        V::Sum,
    );
    assert_eq!(out, cx32(&[(1.75, 0.0)]));
}

#[test]
fn complex_fold_order_changes_the_bits() {
    // The ascending fold differs from folding the last two first.
    let parts = [
        cx64(&[(1e16, 1.0)]),
        cx64(&[(1.0, 1e-16)]),
        cx64(&[(1.0, 3.0)]),
    ];
    let asc = fold(parts.iter().map(|p| &p[..]), T::Complex128, V::Sum)
        .unwrap()
        .unwrap();
    let right_first = c(
        &parts[0],
        &c(&parts[1], &parts[2], T::Complex128, V::Sum),
        T::Complex128,
        V::Sum,
    );
    assert_ne!(asc, right_first);
    assert_eq!(asc, cx64(&[((1e16 + 1.0) + 1.0, (1.0 + 1e-16) + 3.0)]));
    assert_eq!(asc[..8], 1e16f64.to_le_bytes()); // each 1.0 is lost at 1e16
}

#[test]
fn minloc_and_maxloc_ties_nan_and_zeros() {
    let i32p = |v: i32, i: i32| pairs(&[(v.to_le_bytes(), i)]);
    assert_eq!(
        c(&i32p(3, 5), &i32p(3, 2), T::I32I32, R::Minloc),
        i32p(3, 2)
    );
    assert_eq!(
        c(&i32p(3, 5), &i32p(3, 2), T::I32I32, R::Maxloc),
        i32p(3, 2)
    );
    assert_eq!(
        c(&i32p(3, -5), &i32p(3, 2), T::I32I32, R::Maxloc),
        i32p(3, -5)
    );
    assert_eq!(
        c(&i32p(-1, 9), &i32p(4, 0), T::I32I32, R::Minloc),
        i32p(-1, 9)
    );
    assert_eq!(
        c(&i32p(-1, 9), &i32p(4, 0), T::I32I32, R::Maxloc),
        i32p(4, 0)
    );
    let f = |v: f64, i: i32| pairs(&[(v.to_le_bytes(), i)]);
    let nan = f64::from_bits(0x7ff8_0000_0000_0077);
    let nan2 = f64::from_bits(0xfff8_0000_0000_0088);
    assert_eq!(c(&f(nan, 4), &f(1.0, 1), T::F64I32, R::Minloc), f(nan, 4));
    assert_eq!(c(&f(1.0, 4), &f(nan, 1), T::F64I32, R::Minloc), f(nan, 1));
    assert_eq!(c(&f(nan, 4), &f(nan2, 1), T::F64I32, R::Maxloc), f(nan, 4));
    assert_eq!(c(&f(0.0, 4), &f(-0.0, 7), T::F64I32, R::Minloc), f(-0.0, 7));
    assert_eq!(c(&f(0.0, 4), &f(-0.0, 7), T::F64I32, R::Maxloc), f(0.0, 4));
    assert_eq!(
        c(&f(-0.0, 4), &f(-0.0, 1), T::F64I32, R::Maxloc),
        f(-0.0, 1)
    );
    let s = |v: i16, i: i32| pairs(&[(v.to_le_bytes(), i)]);
    assert_eq!(c(&s(-7, 1), &s(2, 0), T::I16I32, R::Minloc), s(-7, 1));
    let l = |v: i64, i: i32| pairs(&[(v.to_le_bytes(), i)]);
    assert_eq!(
        c(&l(i64::MIN, 3), &l(i64::MIN, -1), T::I64I32, R::Minloc),
        l(i64::MIN, -1)
    );
    let g = |v: f32, i: i32| pairs(&[(v.to_le_bytes(), i)]);
    assert_eq!(
        c(&g(2.5, 0), &g(f32::INFINITY, 3), T::F32I32, R::Maxloc),
        g(f32::INFINITY, 3)
    );
}

#[test]
fn user_reductions_fold_ascending_and_have_no_builtin_combine() {
    assert!(combine(&[1], &[1], T::U8, R::User).is_err());
    assert!(fold([&[1u8][..]], T::U8, R::User).is_err());
    // Non-commutative: acc = 2·acc + right; ascending order is 2(2·1+2)+3.
    let parts: [&[u8]; 3] = [&[1], &[2], &[3]];
    let out = fold_user(parts, T::U8, |a, b| a[0] = 2 * a[0] + b[0]).unwrap();
    assert_eq!(out, Some(vec![11]));
    assert!(fold_user([&[1u8, 2][..], &[1]], T::U8, |_, _| ()).is_err());
    assert!(fold_user([&[1u8, 2, 3][..]], T::I16, |_, _| ()).is_err());
}

#[test]
fn refusals_and_lengths_are_h1618() {
    assert!(combine(&[0; 12], &[0; 12], T::F64I32, V::Min).is_err());
    assert!(combine(&[0; 8], &[0; 8], T::Complex64, V::Max).is_err());
    assert!(combine(&[0; 8], &[0; 8], T::F64, R::Minloc).is_err());
    assert!(combine(&[0; 6], &[0; 12], T::I16I32, R::Minloc).is_err());
    assert!(combine(&[0; 7], &[0; 7], T::I16I32, R::Minloc).is_err());
}

// ---- an independent serial fold -------------------------------------------

/// One combine, written out per element on typed values.
fn reference_combine(t: T, r: R, a: &[u8], b: &[u8]) -> Vec<u8> {
    let f32at = |x: &[u8], o: usize| f32::from_le_bytes(x[o..o + 4].try_into().unwrap());
    let f64at = |x: &[u8], o: usize| f64::from_le_bytes(x[o..o + 8].try_into().unwrap());
    let idx = |x: &[u8]| i32::from_le_bytes(x[x.len() - 4..].try_into().unwrap());
    macro_rules! int {
        ($ty:ty) => {{
            let x = <$ty>::from_le_bytes(a.try_into().unwrap());
            let y = <$ty>::from_le_bytes(b.try_into().unwrap());
            let out: $ty = match r {
                V::Sum => x.wrapping_add(y),
                V::Prod => x.wrapping_mul(y),
                V::Min => x.min(y),
                V::Max => x.max(y),
                V::Land => ((x != 0) && (y != 0)) as $ty,
                V::Lor => ((x != 0) || (y != 0)) as $ty,
                V::Lxor => ((x != 0) != (y != 0)) as $ty,
                V::Band => x & y,
                V::Bor => x | y,
                V::Bxor => x ^ y,
                _ => unreachable!(),
            };
            out.to_le_bytes().to_vec()
        }};
    }
    macro_rules! complex_ref {
        ($ty:ty, $w:expr) => {{
            let at = |x: &[u8], o: usize| <$ty>::from_le_bytes(x[o..o + $w].try_into().unwrap());
            let (ar, ai, br, bi) = (at(a, 0), at(a, $w), at(b, 0), at(b, $w));
            let (re, im) = if r == V::Sum {
                (ar + br, ai + bi)
            } else {
                let (p1, p2, p3, p4) = (ar * br, ai * bi, ar * bi, ai * br);
                (p1 - p2, p3 + p4)
            };
            [re.to_le_bytes(), im.to_le_bytes()].concat()
        }};
    }
    // Pairs: compare values as f64 keys with -0 below +0 (no NaN here).
    let loc = |key: &dyn Fn(&[u8]) -> (f64, bool)| {
        let ((u, un), (v, _)) = (key(a), key(b));
        let lt = |p: f64, pn: bool, q: f64, qn: bool| p < q || (p == q && pn && !qn);
        let vn = key(b).1;
        let right_wins = match r {
            R::Minloc => lt(v, vn, u, un),
            _ => lt(u, un, v, vn),
        };
        if right_wins {
            b.to_vec()
        } else if !lt(u, un, v, vn) && !lt(v, vn, u, un) && idx(b) < idx(a) {
            [&a[..a.len() - 4], &b[b.len() - 4..]].concat()
        } else {
            a.to_vec()
        }
    };
    match t {
        T::Bool => {
            let (x, y) = (a[0] != 0, b[0] != 0);
            vec![match r {
                V::Land => (x && y) as u8,
                V::Lor => (x || y) as u8,
                _ => (x != y) as u8,
            }]
        }
        T::I8 => int!(i8),
        T::I16 => int!(i16),
        T::U16 => int!(u16),
        T::Complex64 => complex_ref!(f32, 4),
        T::Complex128 => complex_ref!(f64, 8),
        T::F32I32 => loc(&|x| (f64::from(f32at(x, 0)), f32at(x, 0).is_sign_negative())),
        T::F64I32 => loc(&|x| (f64at(x, 0), f64at(x, 0).is_sign_negative())),
        T::I64I32 => loc(&|x| {
            // i64 as a key: compare through i128 order mapped monotonically.
            let v = i64::from_le_bytes(x[..8].try_into().unwrap());
            (v as f64, false)
        }),
        T::I32I32 => loc(&|x| {
            (
                f64::from(i32::from_le_bytes(x[..4].try_into().unwrap())),
                false,
            )
        }),
        T::I16I32 => loc(&|x| {
            (
                f64::from(i16::from_le_bytes(x[..2].try_into().unwrap())),
                false,
            )
        }),
        _ => unreachable!("v1 types are tested in reduce::tests"),
    }
}

fn reference_fold(t: T, r: R, parts: &[Vec<u8>]) -> Vec<u8> {
    let w = t.width();
    let mut acc = parts[0].clone();
    for p in &parts[1..] {
        acc = acc
            .chunks(w)
            .zip(p.chunks(w))
            .flat_map(|(a, b)| reference_combine(t, r, a, b))
            .collect();
    }
    acc
}

/// Element bytes that make every type's values finite and varied: small
/// integers for the integer parts, small dyadic or decimal fractions for
/// floats (i64 values stay within ±2^40 so the f64 key is exact).
fn element(t: T, seed: &[u8]) -> Vec<u8> {
    let s = |k: usize| seed[k % seed.len()];
    let small = |k: usize| (s(k) % 7) as i8 - 3;
    let fl = |k: usize| f64::from(small(k)) * [1.0, 0.1, 1e16, -0.0][s(k + 1) as usize % 4];
    match t {
        T::Bool => vec![[0, 1, 2, 0xff][s(0) as usize % 4]],
        T::I8 | T::I16 | T::U16 => seed[..t.width()].to_vec(),
        T::Complex64 => [(fl(0) as f32).to_le_bytes(), (fl(2) as f32).to_le_bytes()].concat(),
        T::Complex128 => [fl(0).to_le_bytes(), fl(2).to_le_bytes()].concat(),
        T::F32I32 => [
            (fl(0) as f32).to_le_bytes(),
            i32::from(small(3)).to_le_bytes(),
        ]
        .concat(),
        T::F64I32 => [&fl(0).to_le_bytes()[..], &i32::from(small(3)).to_le_bytes()].concat(),
        T::I64I32 => [
            &(i64::from(small(0)) << 40).to_le_bytes()[..],
            &i32::from(small(3)).to_le_bytes(),
        ]
        .concat(),
        T::I32I32 => [
            i32::from(small(0)).to_le_bytes(),
            i32::from(small(3)).to_le_bytes(),
        ]
        .concat(),
        T::I16I32 => [
            i16::from(small(0)).to_le_bytes().to_vec(),
            i32::from(small(3)).to_le_bytes().to_vec(),
        ]
        .concat(),
        _ => unreachable!(),
    }
}

fn new_pairs() -> Vec<(T, R)> {
    T::ALL
        .into_iter()
        .filter(|t| t.needs_bit4())
        .flat_map(|t| Reduction::ALL.into_iter().map(move |r| (t, r)))
        .filter(|(t, r)| *r != R::User && r.check(*t).is_ok())
        .collect()
}

fn same_bits_or_both_nan(t: T, x: &[u8], y: &[u8]) -> bool {
    if x == y {
        return true;
    }
    // Complex components: any NaN equals any NaN (protocol §17.3).
    let w = match t {
        T::Complex64 => 4,
        T::Complex128 => 8,
        _ => return false,
    };
    x.chunks(w).zip(y.chunks(w)).all(|(a, b)| {
        a == b
            || match w {
                4 => {
                    f32::from_le_bytes(a.try_into().unwrap()).is_nan()
                        && f32::from_le_bytes(b.try_into().unwrap()).is_nan()
                }
                _ => {
                    f64::from_le_bytes(a.try_into().unwrap()).is_nan()
                        && f64::from_le_bytes(b.try_into().unwrap()).is_nan()
                }
            }
    })
}

proptest! {
    /// Every new (type, reduction) pair: the ascending fold of 3 and of 5
    /// ranks' contributions equals the independent serial fold, and so
    /// does folding the arrays in element-aligned ranges (a pipelined
    /// chain's chunks, protocol §14.6).
    #[test]
    fn matches_a_serial_fold_at_3_and_5_ranks(
        seeds in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 8), 5 * 6),
        cut in 1usize..6,
    ) {
        for (t, r) in new_pairs() {
            for n in [3usize, 5] {
                let parts: Vec<Vec<u8>> = (0..n)
                    .map(|rank| (0..6).flat_map(|k| element(t, &seeds[rank * 6 + k])).collect())
                    .collect();
                let got = fold(parts.iter().map(|p| &p[..]), t, r).unwrap().unwrap();
                let want = reference_fold(t, r, &parts);
                prop_assert!(same_bits_or_both_nan(t, &got, &want), "{} {} at {} ranks", t, r, n);
                let at = cut * t.width();
                let mut chunked = fold(parts.iter().map(|p| &p[..at]), t, r).unwrap().unwrap();
                chunked.extend(fold(parts.iter().map(|p| &p[at..]), t, r).unwrap().unwrap());
                prop_assert_eq!(&chunked, &got);
            }
        }
    }

    #[test]
    fn v1_pairs_give_the_v1_bits(a in proptest::collection::vec(any::<u8>(), 16), b in proptest::collection::vec(any::<u8>(), 16)) {
        // The merged enums keep every v1 pair (protocol §8.3) and its
        // bits: the v1 loops fold them.
        for t in crate::element::ElementType::V1 {
            for r in crate::element::Reduction::V1 {
                prop_assert!(!t.needs_bit4() && !r.needs_bit4());
                let got = combine(&a, &b, t, r).ok();
                let mut acc = a.clone();
                let want = check_args(a.len(), t, r).ok().map(|()| {
                    crate::reduce::dispatch(&mut acc, &b, t, r);
                    acc
                });
                prop_assert_eq!(got, want);
            }
        }
    }

    #[test]
    fn any_bytes_get_an_answer(a in proptest::collection::vec(any::<u8>(), 0..40), tc in 0u8..20, rc in 0u8..15) {
        if let (Ok(t), Ok(r)) = (T::from_code(tc), Reduction::from_code(rc)) {
            let _ = combine(&a, &a, t, r);
        }
    }
}
