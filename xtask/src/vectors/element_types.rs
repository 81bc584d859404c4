//! The vectors of HELLO feature bit 4 (protocol §17): `reduce` entries of
//! the new element types and reductions (one `combine`), `fold` entries
//! (the contributions of 3 and 5 ranks and their ascending fold, §17.3),
//! and COLLECTIVE frames with the new codes for receivers with and without
//! the bit, derived with `sperli_wire::reduce`.

use sperli_wire::collective::{CollectiveHeader, Operation, Phase};
use sperli_wire::element::Reduction;
use sperli_wire::element::{ElementType as T, Reduction as R};
use sperli_wire::error::ArgumentError;
use sperli_wire::hex;
use sperli_wire::limits::{FEATURE_ELEMENT_TYPES, FEATURE_PIPELINED, FEATURE_V1_CORE};
use sperli_wire::pipeline::{encode_chunk, ChunkHeader};
use sperli_wire::reduce::fold as fold_all;

use super::pipelined::frame_tagged;
use super::verify::{derive, parse_elements};
use super::Entry;

/// Bits 0 and 4.
const TYPES: u64 = FEATURE_V1_CORE | FEATURE_ELEMENT_TYPES;

// ---- deriving ---------------------------------------------------------------

/// The `type:` and `reduction:` of a `reduce` or `fold` entry. A
/// user-defined reduction has no vectors: its function is the program's.
pub fn type_and_reduction(e: &Entry) -> Result<(T, R), String> {
    let t = T::from_name(e.get("type").unwrap_or("")).ok_or("unknown type")?;
    let r = R::from_name(e.get("reduction").unwrap_or("")).ok_or("unknown reduction")?;
    if r == R::User {
        return Err("a user-defined reduction has no vectors".into());
    }
    Ok((t, r))
}

/// Whether element `c` of type `t` holds a NaN that the rules leave
/// unfixed: a float sum or product, or a component of a complex one
/// (protocol §8.3, §17.3).
fn unfixed_nan(c: &[u8], t: T, r: R) -> bool {
    if !matches!(r, Reduction::Sum | Reduction::Prod) {
        return false;
    }
    let f32_nan = |b: &[u8]| f32::from_le_bytes(b.try_into().unwrap_or([0; 4])).is_nan();
    let f64_nan = |b: &[u8]| f64::from_le_bytes(b.try_into().unwrap_or([0; 8])).is_nan();
    match t {
        T::F32 => f32_nan(c),
        T::F64 => f64_nan(c),
        T::Complex64 => c.chunks(4).any(f32_nan),
        T::Complex128 => c.chunks(8).any(f64_nan),
        _ => false,
    }
}

/// The `result:` line: the elements in hex, `nan` for an unfixed NaN, or
/// `reject H1618`.
pub fn result_line(res: Result<Vec<u8>, ArgumentError>, t: T, r: R) -> String {
    match res {
        Err(err) => format!(
            "reject {}",
            sperli_wire::Error::from(err)
                .h_code()
                .map(|c| c.to_string())
                .unwrap_or_default()
        ),
        Ok(bytes) => bytes
            .chunks(t.width())
            .map(|c| {
                if unfixed_nan(c, t, r) {
                    "nan".to_string()
                } else {
                    hex::encode(c)
                }
            })
            .collect::<Vec<_>>()
            .join(" "),
    }
}

/// Fills in `result` of a `fold` entry: `ranks:` holds each rank's
/// elements, ranks separated by ` | `, in ascending rank order.
pub fn derive_fold(e: Entry) -> Result<Entry, String> {
    let (t, r) = type_and_reduction(&e)?;
    let parts: Vec<Vec<u8>> = e
        .get("ranks")
        .unwrap_or("")
        .split(" | ")
        .map(|p| parse_elements(p, t.width()))
        .collect::<Result<_, _>>()?;
    if parts.len() < 2 {
        return Err("a fold needs at least 2 ranks".into());
    }
    let res = fold_all(parts.iter().map(|p| &p[..]), t, r).map(|o| o.unwrap_or_default());
    Ok(e.with("result", result_line(res, t, r)))
}

// ---- the entries ------------------------------------------------------------

fn els(xs: &[Vec<u8>]) -> String {
    xs.iter()
        .map(|x| hex::encode(x))
        .collect::<Vec<_>>()
        .join(" ")
}

fn reduce(name: &str, t: T, r: R, left: &[Vec<u8>], right: &[Vec<u8>]) -> Entry {
    let e = Entry::new(&format!("reduce-{name}"), "reduce")
        .with("type", t.name())
        .with("reduction", r.name())
        .with("left", els(left))
        .with("right", els(right));
    derive(e).unwrap_or_else(|w| panic!("{name}: {w}"))
}

fn fold(name: &str, t: T, r: R, ranks: &[Vec<Vec<u8>>]) -> Entry {
    let line = ranks.iter().map(|p| els(p)).collect::<Vec<_>>().join(" | ");
    let e = Entry::new(&format!("fold-{name}"), "fold")
        .with("type", t.name())
        .with("reduction", r.name())
        .with("ranks", line);
    derive(e).unwrap_or_else(|w| panic!("{name}: {w}"))
}

fn b(x: u8) -> Vec<u8> {
    vec![x]
}
fn i16e(x: i16) -> Vec<u8> {
    x.to_le_bytes().to_vec()
}
fn u16e(x: u16) -> Vec<u8> {
    x.to_le_bytes().to_vec()
}
fn c64(re: f32, im: f32) -> Vec<u8> {
    [re.to_le_bytes(), im.to_le_bytes()].concat()
}
fn c128(re: f64, im: f64) -> Vec<u8> {
    [re.to_le_bytes(), im.to_le_bytes()].concat()
}
fn pair(value: &[u8], index: i32) -> Vec<u8> {
    [value, &index.to_le_bytes()].concat()
}

fn reduces() -> Vec<Entry> {
    use Reduction as V;
    let mut v = Vec::new();
    let bl: Vec<Vec<u8>> = [0, 2, 0xff, 1, 0, 1].map(b).to_vec();
    let br: Vec<Vec<u8>> = [0, 1, 0, 0x80, 7, 1].map(b).to_vec();
    for r in [V::Land, V::Lor, V::Lxor] {
        v.push(reduce(
            &format!("bool-{}-any-nonzero-byte-is-true", r.name()),
            T::Bool,
            r,
            &bl,
            &br,
        ));
    }
    let i8l: Vec<Vec<u8>> = [0x7f, 0xff, 0x80, 0].map(b).to_vec();
    let i8r: Vec<Vec<u8>> = [1, 1, 0xff, 5].map(b).to_vec();
    for r in Reduction::V1 {
        v.push(reduce(&format!("i8-{}", r.name()), T::I8, r, &i8l, &i8r));
    }
    let i16l = [i16::MAX, -1, 300, 0].map(i16e).to_vec();
    let i16r = [1, 1, 300, -7].map(i16e).to_vec();
    for r in Reduction::V1 {
        v.push(reduce(
            &format!("i16-{}", r.name()),
            T::I16,
            r,
            &i16l,
            &i16r,
        ));
    }
    let u16l = [u16::MAX, 0x8000, 3, 0].map(u16e).to_vec();
    let u16r = [1, 0x7fff, 5, 9].map(u16e).to_vec();
    for r in Reduction::V1 {
        v.push(reduce(
            &format!("u16-{}", r.name()),
            T::U16,
            r,
            &u16l,
            &u16r,
        ));
    }
    // Complex: the textbook product, each operation rounded to the
    // component format (f32 products are not computed in f64).
    let c64l = vec![
        c64(1.0, 2.0),
        c64(16_777_217.0, 1.0),
        c64(0.1, 0.2),
        c64(f32::INFINITY, 0.0),
        c64(-0.0, 0.0),
    ];
    let c64r = vec![
        c64(3.0, 4.0),
        c64(3.0, 0.0),
        c64(0.3, 0.4),
        c64(1.0, 1.0),
        c64(0.0, -0.0),
    ];
    v.push(reduce("complex64-sum", T::Complex64, V::Sum, &c64l, &c64r));
    v.push(reduce(
        "complex64-prod-rounding-and-infinity",
        T::Complex64,
        V::Prod,
        &c64l,
        &c64r,
    ));
    let c128l = vec![
        c128(1.0, 2.0),
        c128(0.1, 0.2),
        c128(1e308, 1e308),
        c128(f64::NAN, 1.0),
    ];
    let c128r = vec![
        c128(3.0, 4.0),
        c128(0.3, 0.4),
        c128(10.0, 0.0),
        c128(1.0, 0.0),
    ];
    v.push(reduce(
        "complex128-sum",
        T::Complex128,
        V::Sum,
        &c128l,
        &c128r,
    ));
    v.push(reduce(
        "complex128-prod-rounding-overflow-nan",
        T::Complex128,
        V::Prod,
        &c128l,
        &c128r,
    ));
    // Value-index pairs: ties take the smaller index, the left NaN wins,
    // -0 below +0.
    let nan = f64::from_bits(0x7ff8_0000_0000_0077);
    let nan2 = f64::from_bits(0xfff8_0000_0000_0088);
    let f64l = vec![
        pair(&2.0f64.to_le_bytes(), 5),
        pair(&2.0f64.to_le_bytes(), 1),
        pair(&nan.to_le_bytes(), 4),
        pair(&1.0f64.to_le_bytes(), 4),
        pair(&nan.to_le_bytes(), 4),
        pair(&0.0f64.to_le_bytes(), 4),
        pair(&(-3.5f64).to_le_bytes(), 0),
    ];
    let f64r = vec![
        pair(&2.0f64.to_le_bytes(), 3),
        pair(&2.0f64.to_le_bytes(), 3),
        pair(&1.0f64.to_le_bytes(), 1),
        pair(&nan2.to_le_bytes(), 1),
        pair(&nan2.to_le_bytes(), 1),
        pair(&(-0.0f64).to_le_bytes(), 7),
        pair(&8.0f64.to_le_bytes(), 9),
    ];
    for r in [R::Minloc, R::Maxloc] {
        v.push(reduce(
            &format!("f64_i32-{}-ties-nan-zeros", r.name()),
            T::F64I32,
            r,
            &f64l,
            &f64r,
        ));
    }
    let f32l = vec![
        pair(&1.5f32.to_le_bytes(), -2),
        pair(&(-0.0f32).to_le_bytes(), 6),
        pair(&f32::NEG_INFINITY.to_le_bytes(), 1),
    ];
    let f32r = vec![
        pair(&1.5f32.to_le_bytes(), -3),
        pair(&0.0f32.to_le_bytes(), 2),
        pair(&f32::from_bits(0x7fc0_0042).to_le_bytes(), 0),
    ];
    for r in [R::Minloc, R::Maxloc] {
        v.push(reduce(
            &format!("f32_i32-{}", r.name()),
            T::F32I32,
            r,
            &f32l,
            &f32r,
        ));
    }
    let i64l = vec![
        pair(&i64::MIN.to_le_bytes(), 3),
        pair(&(-1i64).to_le_bytes(), 0),
        pair(&7i64.to_le_bytes(), 1),
    ];
    let i64r = vec![
        pair(&i64::MIN.to_le_bytes(), -1),
        pair(&1i64.to_le_bytes(), 9),
        pair(&7i64.to_le_bytes(), 8),
    ];
    let i32l = vec![
        pair(&(-1i32).to_le_bytes(), 9),
        pair(&3i32.to_le_bytes(), 5),
        pair(&i32::MAX.to_le_bytes(), 2),
    ];
    let i32r = vec![
        pair(&4i32.to_le_bytes(), 0),
        pair(&3i32.to_le_bytes(), 2),
        pair(&i32::MIN.to_le_bytes(), 1),
    ];
    let i16pl = vec![
        pair(&(-7i16).to_le_bytes(), 1),
        pair(&5i16.to_le_bytes(), 4),
    ];
    let i16pr = vec![pair(&2i16.to_le_bytes(), 0), pair(&5i16.to_le_bytes(), 4)];
    for r in [R::Minloc, R::Maxloc] {
        v.push(reduce(
            &format!("i64_i32-{}", r.name()),
            T::I64I32,
            r,
            &i64l,
            &i64r,
        ));
        v.push(reduce(
            &format!("i32_i32-{}", r.name()),
            T::I32I32,
            r,
            &i32l,
            &i32r,
        ));
        v.push(reduce(
            &format!("i16_i32-{}", r.name()),
            T::I16I32,
            r,
            &i16pl,
            &i16pr,
        ));
    }
    // Every refused combination with a new type or a new reduction.
    for t in T::ALL {
        for r in R::ALL.into_iter().filter(|r| *r != R::User) {
            let new = t.needs_bit4() || r.needs_bit4();
            if !new || r.check(t).is_ok() {
                continue;
            }
            let one = vec![vec![1u8; t.width()]];
            v.push(reduce(
                &format!("refused-{}-{}", t.name(), r.name()),
                t,
                r,
                &one,
                &one,
            ));
        }
    }
    v
}

fn folds() -> Vec<Entry> {
    use Reduction as V;
    let mut v = Vec::new();
    // Complex sums at 3 ranks where the order changes the bits: each 1.0
    // is lost at 1e16 in the ascending fold.
    v.push(fold(
        "complex128-sum-3-ranks-order-matters",
        T::Complex128,
        V::Sum,
        &[
            vec![c128(1e16, 1.0)],
            vec![c128(1.0, 1e-16)],
            vec![c128(1.0, 3.0)],
        ],
    ));
    v.push(fold(
        "complex64-prod-5-ranks",
        T::Complex64,
        V::Prod,
        &[
            vec![c64(0.1, 0.7), c64(1.0, 0.0)],
            vec![c64(1.3, -0.2), c64(0.0, 1.0)],
            vec![c64(-0.9, 0.4), c64(0.0, 1.0)],
            vec![c64(3.0, 3.0), c64(0.0, 1.0)],
            vec![c64(0.01, -5.0), c64(0.0, 1.0)],
        ],
    ));
    v.push(fold(
        "complex128-prod-3-ranks",
        T::Complex128,
        V::Prod,
        &[
            vec![c128(0.1, 0.2)],
            vec![c128(0.3, 0.4)],
            vec![c128(0.5, 0.6)],
        ],
    ));
    let p = |x: i32, i: i32| pair(&x.to_le_bytes(), i);
    v.push(fold(
        "i32_i32-minloc-5-ranks-ties-take-the-smaller-index",
        T::I32I32,
        R::Minloc,
        &[
            vec![p(4, 0)],
            vec![p(2, 1)],
            vec![p(9, 2)],
            vec![p(2, 3)],
            vec![p(2, -1)],
        ],
    ));
    v.push(fold(
        "i32_i32-maxloc-5-ranks",
        T::I32I32,
        R::Maxloc,
        &[
            vec![p(4, 0)],
            vec![p(9, 1)],
            vec![p(9, 2)],
            vec![p(2, 3)],
            vec![p(9, 4)],
        ],
    ));
    let f = |x: f64, i: i32| pair(&x.to_le_bytes(), i);
    v.push(fold(
        "f64_i32-minloc-3-ranks-nan-wins",
        T::F64I32,
        R::Minloc,
        &[
            vec![f(1.0, 0), f(0.0, 0)],
            vec![f(f64::from_bits(0x7ff8_0000_0000_0001), 1), f(-0.0, 1)],
            vec![f(-1.0, 2), f(-0.0, 2)],
        ],
    ));
    v.push(fold(
        "bool-lxor-5-ranks",
        T::Bool,
        V::Lxor,
        &[
            vec![b(1), b(0)],
            vec![b(2), b(0)],
            vec![b(0xff), b(0)],
            vec![b(0), b(0)],
            vec![b(1), b(3)],
        ],
    ));
    v.push(fold(
        "i16-sum-3-ranks-wraps",
        T::I16,
        V::Sum,
        &[vec![i16e(i16::MAX)], vec![i16e(1)], vec![i16e(-2)]],
    ));
    v.push(fold(
        "u16-max-5-ranks",
        T::U16,
        V::Max,
        &[
            vec![u16e(1)],
            vec![u16e(0xffff)],
            vec![u16e(3)],
            vec![u16e(0x8000)],
            vec![u16e(2)],
        ],
    ));
    v
}

fn frames() -> Vec<Entry> {
    let star = |et: u8, red: u8| {
        let h = CollectiveHeader {
            operation: Operation::Allreduce,
            element_type: et,
            reduction: red,
            phase: Phase::ToRoot,
            root: 0,
            sequence: 2,
        };
        let mut p = h.to_bytes().to_vec();
        p.extend_from_slice(&[0x11; 12]);
        p
    };
    let chunk = |len: usize, total: u64| {
        let h = CollectiveHeader {
            operation: Operation::Allreduce,
            element_type: T::F64I32.code(),
            reduction: R::Minloc.code(),
            phase: Phase::Partial,
            root: 0,
            sequence: 2,
        };
        let mut p = Vec::new();
        encode_chunk(
            &h,
            ChunkHeader { offset: 0, total },
            &vec![0x22; len],
            &mut p,
        );
        p
    };
    let pipelined = TYPES | FEATURE_PIPELINED;
    let cases: Vec<(&str, u64, Vec<u8>, &str)> = vec![
        (
            "frame-collective-f64_i32-minloc",
            TYPES,
            star(14, 11),
            "accept",
        ),
        (
            "frame-collective-i16_i32-maxloc",
            TYPES,
            star(17, 12),
            "accept",
        ),
        (
            "frame-collective-user-reduction",
            TYPES,
            star(11, 13),
            "accept",
        ),
        ("frame-collective-bool-land", TYPES, star(7, 5), "accept"),
        (
            "reject-collective-element-type-18",
            TYPES,
            star(18, 1),
            "reject H1610 payload",
        ),
        (
            "reject-collective-reduction-14",
            TYPES,
            star(6, 14),
            "reject H1610 payload",
        ),
        (
            "reject-collective-new-element-type-without-bit-4",
            FEATURE_V1_CORE,
            star(7, 5),
            "reject H1610 payload",
        ),
        (
            "reject-collective-minloc-without-bit-4",
            FEATURE_V1_CORE | FEATURE_PIPELINED,
            star(6, 11),
            "reject H1610 payload",
        ),
        (
            "frame-collective-chunk-of-24-bytes-of-f64_i32",
            pipelined,
            chunk(24, 48),
            "accept",
        ),
        (
            "frame-collective-chunk-of-f64_i32-ending-its-stream",
            pipelined,
            chunk(36, 36),
            "accept",
        ),
        (
            "reject-collective-chunk-splitting-an-f64_i32",
            pipelined,
            chunk(16, 48),
            "reject H1610 payload",
        ),
    ];
    cases
        .into_iter()
        .map(|(name, f, p, verdict)| {
            let e = frame_tagged(name, 1, 2, Some(f), 0, &p);
            assert_eq!(e.get("verdict"), Some(verdict), "{name}");
            e
        })
        .collect()
}

/// Every bit-4 entry.
pub fn entries() -> Vec<Entry> {
    let mut v = reduces();
    v.extend(folds());
    v.extend(frames());
    v
}
