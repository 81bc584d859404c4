//! Unit tests of the reductions (protocol §8.3), with proptest.

use super::*;
use proptest::prelude::*;
use ElementType as T;
use Reduction as R;

fn le<const N: usize, X: Copy>(xs: &[X], f: impl Fn(X) -> [u8; N]) -> Vec<u8> {
    xs.iter().flat_map(|x| f(*x)).collect()
}
fn i32s(xs: &[i32]) -> Vec<u8> {
    le(xs, i32::to_le_bytes)
}
fn u32s(xs: &[u32]) -> Vec<u8> {
    le(xs, u32::to_le_bytes)
}
fn i64s(xs: &[i64]) -> Vec<u8> {
    le(xs, i64::to_le_bytes)
}
fn u64s(xs: &[u64]) -> Vec<u8> {
    le(xs, u64::to_le_bytes)
}
fn f32s(xs: &[f32]) -> Vec<u8> {
    le(xs, f32::to_le_bytes)
}
fn f64s(xs: &[f64]) -> Vec<u8> {
    le(xs, f64::to_le_bytes)
}
fn c(l: &[u8], r: &[u8], t: T, op: R) -> Vec<u8> {
    combine(l, r, t, op).unwrap()
}

#[test]
fn wrapping_sum_and_prod() {
    assert_eq!(
        c(
            &i32s(&[i32::MAX, -1]),
            &i32s(&[1, i32::MIN]),
            T::I32,
            R::Sum
        ),
        i32s(&[i32::MIN, i32::MAX])
    );
    assert_eq!(
        c(&u32s(&[u32::MAX]), &u32s(&[2]), T::U32, R::Sum),
        u32s(&[1])
    );
    assert_eq!(
        c(&i64s(&[i64::MAX]), &i64s(&[1]), T::I64, R::Sum),
        i64s(&[i64::MIN])
    );
    assert_eq!(
        c(&u64s(&[u64::MAX, 5]), &u64s(&[1, 7]), T::U64, R::Sum),
        u64s(&[0, 12])
    );
    assert_eq!(
        c(&i32s(&[0x10000, -3]), &i32s(&[0x10000, 7]), T::I32, R::Prod),
        i32s(&[0, -21])
    );
    assert_eq!(
        c(&u32s(&[0x8000_0001]), &u32s(&[2]), T::U32, R::Prod),
        u32s(&[2])
    );
    assert_eq!(
        c(&i64s(&[i64::MIN]), &i64s(&[-1]), T::I64, R::Prod),
        i64s(&[i64::MIN])
    );
    assert_eq!(
        c(&u64s(&[u64::MAX]), &u64s(&[u64::MAX]), T::U64, R::Prod),
        u64s(&[1])
    );
}

#[test]
fn signed_and_unsigned_order() {
    // -1 is below 1 signed, above it unsigned (0xffff...).
    assert_eq!(
        c(&i32s(&[-1, 5]), &i32s(&[1, -5]), T::I32, R::Min),
        i32s(&[-1, -5])
    );
    assert_eq!(
        c(&i32s(&[-1, 5]), &i32s(&[1, -5]), T::I32, R::Max),
        i32s(&[1, 5])
    );
    assert_eq!(c(&i32s(&[-1]), &i32s(&[1]), T::U32, R::Min), i32s(&[1]));
    assert_eq!(c(&i32s(&[-1]), &i32s(&[1]), T::U32, R::Max), i32s(&[-1]));
    assert_eq!(
        c(
            &i64s(&[-1, i64::MIN]),
            &i64s(&[1, i64::MAX]),
            T::I64,
            R::Min
        ),
        i64s(&[-1, i64::MIN])
    );
    assert_eq!(
        c(
            &i64s(&[-1, i64::MIN]),
            &i64s(&[1, i64::MAX]),
            T::I64,
            R::Max
        ),
        i64s(&[1, i64::MAX])
    );
    assert_eq!(
        c(
            &i64s(&[-1, i64::MIN]),
            &i64s(&[1, i64::MAX]),
            T::U64,
            R::Min
        ),
        i64s(&[1, i64::MAX])
    );
    assert_eq!(
        c(
            &i64s(&[-1, i64::MIN]),
            &i64s(&[1, i64::MAX]),
            T::U64,
            R::Max
        ),
        i64s(&[-1, i64::MIN])
    );
}

#[test]
fn float_signed_zeros() {
    let (n, p) = (-0.0f64, 0.0f64);
    for (l, r) in [(n, p), (p, n)] {
        assert_eq!(
            c(&f64s(&[l]), &f64s(&[r]), T::F64, R::Min),
            f64s(&[n]),
            "min({l},{r})"
        );
        assert_eq!(
            c(&f64s(&[l]), &f64s(&[r]), T::F64, R::Max),
            f64s(&[p]),
            "max({l},{r})"
        );
    }
    let (n, p) = (-0.0f32, 0.0f32);
    for (l, r) in [(n, p), (p, n)] {
        assert_eq!(c(&f32s(&[l]), &f32s(&[r]), T::F32, R::Min), f32s(&[n]));
        assert_eq!(c(&f32s(&[l]), &f32s(&[r]), T::F32, R::Max), f32s(&[p]));
    }
    // Same-sign zeros and ordinary values.
    assert_eq!(
        c(
            &f64s(&[n as f64, 1.0, -3.0]),
            &f64s(&[n as f64, 2.0, -2.0]),
            T::F64,
            R::Min
        ),
        f64s(&[-0.0, 1.0, -3.0])
    );
    assert_eq!(
        c(
            &f64s(&[f64::INFINITY, 1.0]),
            &f64s(&[f64::NEG_INFINITY, 2.0]),
            T::F64,
            R::Max
        ),
        f64s(&[f64::INFINITY, 2.0])
    );
}

#[test]
fn float_nan_bits_kept() {
    let nl = f64::from_bits(0x7ff8_0000_0000_0123);
    let nr = f64::from_bits(0xfff0_0000_0000_0456); // negative signalling NaN
    for op in [R::Min, R::Max] {
        assert_eq!(
            c(&f64s(&[nl]), &f64s(&[1.0]), T::F64, op),
            f64s(&[nl]),
            "{op} NaN left"
        );
        assert_eq!(
            c(&f64s(&[-1.0]), &f64s(&[nr]), T::F64, op),
            f64s(&[nr]),
            "{op} NaN right"
        );
        assert_eq!(
            c(&f64s(&[nl]), &f64s(&[nr]), T::F64, op),
            f64s(&[nl]),
            "{op} NaN both"
        );
        assert_eq!(
            c(&f64s(&[nr]), &f64s(&[nl]), T::F64, op),
            f64s(&[nr]),
            "{op} NaN both"
        );
        assert_eq!(
            c(&f64s(&[f64::INFINITY]), &f64s(&[nr]), T::F64, op),
            f64s(&[nr])
        );
    }
    let ml = f32::from_bits(0x7fc0_0123);
    let mr = f32::from_bits(0xff80_0456);
    for op in [R::Min, R::Max] {
        assert_eq!(c(&f32s(&[ml]), &f32s(&[-0.0]), T::F32, op), f32s(&[ml]));
        assert_eq!(c(&f32s(&[0.0]), &f32s(&[mr]), T::F32, op), f32s(&[mr]));
        assert_eq!(c(&f32s(&[ml]), &f32s(&[mr]), T::F32, op), f32s(&[ml]));
    }
    // sum and prod: a NaN, bits not fixed (protocol §8.3).
    let s = c(
        &f64s(&[nl, f64::INFINITY]),
        &f64s(&[1.0, f64::NEG_INFINITY]),
        T::F64,
        R::Sum,
    );
    assert!(s
        .chunks(8)
        .all(|b| f64::from_le_bytes(b.try_into().unwrap()).is_nan()));
    let p = c(&f64s(&[0.0]), &f64s(&[f64::INFINITY]), T::F64, R::Prod);
    assert!(f64::from_le_bytes(p[..].try_into().unwrap()).is_nan());
}

#[test]
fn float_rounding_is_plain() {
    // No fused multiply-add, no reassociation: exactly Rust's + and *.
    let (a, b) = (0.1f64, 0.2f64);
    assert_eq!(
        c(&f64s(&[a, 1e16]), &f64s(&[b, 1.0]), T::F64, R::Sum),
        f64s(&[a + b, 1e16])
    );
    assert_eq!(
        c(&f32s(&[16_777_216.0]), &f32s(&[1.0]), T::F32, R::Sum),
        f32s(&[16_777_216.0])
    );
    assert_eq!(
        c(&f64s(&[a]), &f64s(&[3.0]), T::F64, R::Prod),
        f64s(&[a * 3.0])
    );
    assert_eq!(
        c(&f64s(&[f64::MAX]), &f64s(&[2.0]), T::F64, R::Prod),
        f64s(&[f64::INFINITY])
    );
}

#[test]
fn logical_ops_give_one_or_zero() {
    let l = i32s(&[0, 0, 7, -2]);
    let r = i32s(&[0, 9, 0, 1 << 30]);
    assert_eq!(c(&l, &r, T::I32, R::Land), i32s(&[0, 0, 0, 1]));
    assert_eq!(c(&l, &r, T::I32, R::Lor), i32s(&[0, 1, 1, 1]));
    assert_eq!(c(&l, &r, T::I32, R::Lxor), i32s(&[0, 1, 1, 0]));
    assert_eq!(c(&l, &r, T::U32, R::Lxor), i32s(&[0, 1, 1, 0]));
    let l = u64s(&[0, 0, 1 << 63, u64::MAX]);
    let r = u64s(&[0, 1 << 40, 0, 256]);
    for t in [T::I64, T::U64] {
        assert_eq!(c(&l, &r, t, R::Land), u64s(&[0, 0, 0, 1]));
        assert_eq!(c(&l, &r, t, R::Lor), u64s(&[0, 1, 1, 1]));
        assert_eq!(c(&l, &r, t, R::Lxor), u64s(&[0, 1, 1, 0]));
    }
}

#[test]
fn bitwise_ops() {
    assert_eq!(
        c(&[0b1100, 0xff], &[0b1010, 0x0f], T::U8, R::Band),
        vec![0b1000, 0x0f]
    );
    assert_eq!(
        c(&[0b1100, 0xf0], &[0b1010, 0x0f], T::U8, R::Bor),
        vec![0b1110, 0xff]
    );
    assert_eq!(
        c(&[0b1100, 0xff], &[0b1010, 0x0f], T::U8, R::Bxor),
        vec![0b0110, 0xf0]
    );
    assert_eq!(
        c(&i32s(&[-1]), &i32s(&[0x1234]), T::I32, R::Band),
        i32s(&[0x1234])
    );
    assert_eq!(
        c(&u64s(&[1 << 63]), &u64s(&[1]), T::U64, R::Bor),
        u64s(&[(1 << 63) | 1])
    );
    assert_eq!(
        c(&u64s(&[u64::MAX]), &u64s(&[1]), T::I64, R::Bxor),
        u64s(&[u64::MAX - 1])
    );
}

/// The table of protocol §8.3, written out independently of `Reduction::check`.
fn allowed(t: T, r: R) -> bool {
    let int = matches!(t, T::I32 | T::U32 | T::I64 | T::U64);
    match r {
        R::Sum | R::Prod | R::Min | R::Max => int || t.is_float(),
        R::Land | R::Lor | R::Lxor => int,
        R::Band | R::Bor | R::Bxor => int || t == T::U8,
        R::Minloc | R::Maxloc | R::User => unreachable!("not a v1 reduction"),
    }
}

#[test]
fn every_pair_against_the_table() {
    let mut refused = 0;
    for t in T::V1 {
        for r in R::V1 {
            let w = t.width();
            let (l, rt) = (vec![1u8; 2 * w], vec![2u8; 2 * w]);
            let got = combine(&l, &rt, t, r);
            assert_eq!(check_args(2 * w, t, r).is_ok(), allowed(t, r), "{t} {r}");
            if allowed(t, r) {
                assert_eq!(got.unwrap().len(), 2 * w);
            } else {
                refused += 1;
                assert!(
                    matches!(got, Err(ArgumentError::Refused { .. })),
                    "{t} {r}: {got:?}"
                );
                let e = crate::Error::from(got.unwrap_err());
                assert_eq!(e.h_code(), Some(crate::HCode::H1618));
                let mut acc = l.clone();
                assert!(combine_into(&mut acc, &rt, t, r).is_err());
                assert_eq!(acc, l, "untouched on error");
                assert!(fold([&l[..]], t, r).is_err());
                assert!(fold([], t, r).is_err());
            }
        }
    }
    assert_eq!(refused, 70 - (3 + 4 * 10 + 2 * 4));
}

#[test]
fn length_errors() {
    for t in T::V1 {
        let r = if t == T::U8 { R::Bxor } else { R::Max };
        let w = t.width();
        if w > 1 {
            let got = combine(&vec![0; w + 1], &vec![0; w + 1], t, r);
            assert_eq!(
                got,
                Err(ArgumentError::NotWholeElements {
                    len: w + 1,
                    width: w
                })
            );
            assert!(check_args(w - 1, t, r).is_err());
        }
        let got = combine(&vec![0; w], &vec![0; 2 * w], t, r);
        assert_eq!(
            got,
            Err(ArgumentError::LengthMismatch {
                left: w,
                right: 2 * w
            })
        );
        let mut acc = vec![3u8; 2 * w];
        assert!(combine_into(&mut acc, &vec![0; w], t, r).is_err());
        assert_eq!(acc, vec![3u8; 2 * w], "untouched on error");
        assert!(fold([&[0u8; 8][..w], &[0u8; 16][..]], t, r).is_err());
        // Empty operands are zero whole elements.
        assert_eq!(combine(&[], &[], t, r), Ok(vec![]));
    }
}

#[test]
fn unaligned_operands_and_fold_order() {
    // Operands at odd offsets, and a fold in the order given.
    let a = [&[0u8][..], &f64s(&[1.0, 2.0])].concat();
    let b = [&[0u8, 0][..], &f64s(&[10.0, 20.0])].concat();
    assert_eq!(c(&a[1..], &b[2..], T::F64, R::Sum), f64s(&[11.0, 22.0]));
    let parts = [i32s(&[100]), i32s(&[7]), i32s(&[-3])];
    let out = fold(parts.iter().map(|p| &p[..]), T::I32, R::Sum).unwrap();
    assert_eq!(out, Some(i32s(&[104])));
    // min of NaN-carrying contributions keeps the lowest rank's NaN.
    let n1 = f64::from_bits(0x7ff8_0000_0000_0001);
    let n2 = f64::from_bits(0x7ff8_0000_0000_0002);
    let parts = [f64s(&[1.0]), f64s(&[n1]), f64s(&[n2])];
    let out = fold(parts.iter().map(|p| &p[..]), T::F64, R::Min).unwrap();
    assert_eq!(out, Some(f64s(&[n1])));
}

// ---- proptest against a scalar reference -------------------------------

/// Element-by-element reference, written without the module's helpers:
/// integers widened to 128 bits and truncated, float order by cases.
fn reference(l: &[u8], r: &[u8], t: T, op: R) -> Vec<u8> {
    let w = t.width();
    let mut out = Vec::new();
    for i in 0..l.len() / w {
        let (x, y) = (&l[i * w..(i + 1) * w], &r[i * w..(i + 1) * w]);
        let mut xb = [0u8; 16];
        let mut yb = [0u8; 16];
        xb[..w].copy_from_slice(x);
        yb[..w].copy_from_slice(y);
        let (xu, yu) = (u128::from_le_bytes(xb), u128::from_le_bytes(yb));
        let bytes: Vec<u8> = match t {
            T::F32 => {
                let (a, b) = (
                    f32::from_le_bytes(x.try_into().unwrap()),
                    f32::from_le_bytes(y.try_into().unwrap()),
                );
                ref_float(
                    a as f64,
                    b as f64,
                    a.is_sign_negative(),
                    b.is_sign_negative(),
                    op,
                )
                .map_or_else(
                    |v| (v as f32).to_le_bytes().to_vec(),
                    |left| if left { x.to_vec() } else { y.to_vec() },
                )
            }
            T::F64 => {
                let (a, b) = (
                    f64::from_le_bytes(x.try_into().unwrap()),
                    f64::from_le_bytes(y.try_into().unwrap()),
                );
                ref_float(a, b, a.is_sign_negative(), b.is_sign_negative(), op).map_or_else(
                    |v| v.to_le_bytes().to_vec(),
                    |left| if left { x.to_vec() } else { y.to_vec() },
                )
            }
            _ => {
                // Sign-extend signed types into i128 for order and arithmetic.
                let signed = matches!(t, T::I32 | T::I64);
                let bits = 8 * w as u32;
                let sx = |v: u128| -> i128 {
                    if signed {
                        ((v << (128 - bits)) as i128) >> (128 - bits)
                    } else {
                        v as i128
                    }
                };
                let (a, b) = (sx(xu), sx(yu));
                let v: i128 = match op {
                    R::Sum => a + b,
                    R::Prod => a.wrapping_mul(b), // |a|,|b| < 2^64: exact in i128 unless u64*u64
                    R::Min => a.min(b),
                    R::Max => a.max(b),
                    R::Land => i128::from(a != 0 && b != 0),
                    R::Lor => i128::from(a != 0 || b != 0),
                    R::Lxor => i128::from((a != 0) != (b != 0)),
                    R::Band => a & b,
                    R::Bor => a | b,
                    R::Bxor => a ^ b,
                    R::Minloc | R::Maxloc | R::User => unreachable!("not a v1 reduction"),
                };
                let v = if op == R::Prod && !signed && w == 8 {
                    xu.wrapping_mul(yu) // u64 * u64 < 2^128: exact in u128
                } else {
                    v as u128
                };
                v.to_le_bytes()[..w].to_vec()
            }
        };
        out.extend(bytes);
    }
    out
}

/// A float result: `Err(value)` for sum/prod, `Ok(take_left)` for min/max.
fn ref_float(a: f64, b: f64, a_neg: bool, b_neg: bool, op: R) -> Result<bool, f64> {
    match op {
        R::Sum => Err(a + b),
        R::Prod => Err(a * b),
        R::Min | R::Max => Ok(if a.is_nan() {
            true
        } else if b.is_nan() {
            false
        } else if a == 0.0 && b == 0.0 {
            // -0 < +0
            (op == R::Min) == a_neg || a_neg == b_neg
        } else if op == R::Min {
            a <= b
        } else {
            a >= b
        }),
        _ => unreachable!(),
    }
}

/// Sum and prod of floats: the NaN bits are not fixed, so NaN = NaN.
fn same(got: &[u8], want: &[u8], t: T, op: R) -> bool {
    if !t.is_float() || matches!(op, R::Min | R::Max) {
        return got == want;
    }
    got.chunks(t.width())
        .zip(want.chunks(t.width()))
        .all(|(g, w)| {
            if t == T::F32 {
                let (g, w) = (
                    f32::from_le_bytes(g.try_into().unwrap()),
                    f32::from_le_bytes(w.try_into().unwrap()),
                );
                g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan())
            } else {
                let (g, w) = (
                    f64::from_le_bytes(g.try_into().unwrap()),
                    f64::from_le_bytes(w.try_into().unwrap()),
                );
                g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan())
            }
        })
}

fn allowed_pairs() -> Vec<(T, R)> {
    T::V1
        .into_iter()
        .flat_map(|t| R::V1.into_iter().map(move |r| (t, r)))
        .filter(|(t, r)| allowed(*t, *r))
        .collect()
}

/// Raw element bits: random, or one of the values where the rules differ.
fn element() -> impl Strategy<Value = u64> {
    prop_oneof![
        3 => any::<u64>(),
        1 => 0u64..4,
        1 => prop::sample::select(vec![
            u64::MAX, 1 << 63, 1 << 31, (1 << 31) - 1, u32::MAX as u64, i64::MAX as u64,
            // f64: -0, +inf, -inf, NaN with payload, 1.0
            0x8000_0000_0000_0000, 0x7ff0_0000_0000_0000, 0xfff0_0000_0000_0000,
            0x7ff8_0000_0000_0123, 0xfff0_0000_0000_0001, 0x3ff0_0000_0000_0000,
            // f32 in the low half: -0, +inf, NaN with payload, 1.0, -1.0
            0x8000_0000, 0x7f80_0000, 0x7fc0_0123, 0xff80_0001, 0x3f80_0000, 0xbf80_0000,
        ]),
    ]
}

fn to_bytes(elems: &[u64], w: usize) -> Vec<u8> {
    elems
        .iter()
        .flat_map(|e| e.to_le_bytes()[..w].to_vec())
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn combine_matches_reference(
        pair in prop::sample::select(allowed_pairs()),
        elems in prop::collection::vec((element(), element()), 0..70),
        offset in 0usize..8,
    ) {
        let (t, op) = pair;
        let w = t.width();
        let l: Vec<u64> = elems.iter().map(|e| e.0).collect();
        let r: Vec<u64> = elems.iter().map(|e| e.1).collect();
        let (l, r) = (to_bytes(&l, w), to_bytes(&r, w));
        let want = reference(&l, &r, t, op);
        let got = combine(&l, &r, t, op).unwrap();
        prop_assert!(same(&got, &want, t, op), "{t} {op}: {got:02x?} vs {want:02x?}");
        // The same through combine_into on an operand at an odd offset.
        let mut buf = vec![0u8; offset];
        buf.extend_from_slice(&l);
        combine_into(&mut buf[offset..], &r, t, op).unwrap();
        prop_assert!(buf[..offset].iter().all(|b| *b == 0));
        prop_assert!(same(&buf[offset..], &want, t, op));
    }

    #[test]
    fn fold_is_left_to_right(
        pair in prop::sample::select(allowed_pairs()),
        parts in prop::collection::vec(prop::collection::vec(element(), 5), 1..6),
    ) {
        let (t, op) = pair;
        let parts: Vec<Vec<u8>> = parts.iter().map(|p| to_bytes(p, t.width())).collect();
        let mut want = parts[0].clone();
        for p in &parts[1..] {
            want = reference(&want, p, t, op);
        }
        let got = fold(parts.iter().map(|p| &p[..]), t, op).unwrap().unwrap();
        prop_assert!(same(&got, &want, t, op));
    }
}
