//! `reduce` entries: two arrays, an element type, a reduction and the
//! result (protocol §8.3).

use super::*;

pub(super) fn el<T: Copy>(xs: &[T], f: fn(T) -> Vec<u8>) -> String {
    xs.iter()
        .map(|x| hex::encode(&f(*x)))
        .collect::<Vec<_>>()
        .join(" ")
}

pub(super) fn reduces() -> Vec<Entry> {
    let mut v = Vec::new();
    let mut add = |name: &str, t: ElementType, r: Reduction, left: String, right: String| {
        v.push(
            derive(
                Entry::new(&format!("reduce-{name}"), "reduce")
                    .with("type", t.name())
                    .with("reduction", r.name())
                    .with("left", left)
                    .with("right", right),
            )
            .unwrap_or_else(|w| panic!("{name}: {w}")),
        );
    };
    use ElementType as T;
    use Reduction as R;
    let i32s = |x: &[i32]| el(x, |v| v.to_le_bytes().to_vec());
    let u32s = |x: &[u32]| el(x, |v| v.to_le_bytes().to_vec());
    let i64s = |x: &[i64]| el(x, |v| v.to_le_bytes().to_vec());
    let u64s = |x: &[u64]| el(x, |v| v.to_le_bytes().to_vec());
    let f32s = |x: &[f32]| el(x, |v| v.to_le_bytes().to_vec());
    let f64s = |x: &[f64]| el(x, |v| v.to_le_bytes().to_vec());
    let u8s = |x: &[u8]| el(x, |v| vec![v]);

    add(
        "i32-sum-wraps",
        T::I32,
        R::Sum,
        i32s(&[i32::MAX, -1, i32::MIN]),
        i32s(&[1, 1, -1]),
    );
    add(
        "u32-sum-wraps",
        T::U32,
        R::Sum,
        u32s(&[u32::MAX, 5]),
        u32s(&[2, 7]),
    );
    add(
        "i64-prod-wraps",
        T::I64,
        R::Prod,
        i64s(&[i64::MAX, i64::MIN, -3]),
        i64s(&[2, -1, 7]),
    );
    add(
        "u64-sum-wraps",
        T::U64,
        R::Sum,
        u64s(&[u64::MAX, 1 << 63]),
        u64s(&[1, 1 << 63]),
    );
    add(
        "u32-prod-wraps",
        T::U32,
        R::Prod,
        u32s(&[0x10000, 3]),
        u32s(&[0x10000, 5]),
    );
    add(
        "i32-min-signed",
        T::I32,
        R::Min,
        i32s(&[-1, 5, i32::MIN]),
        i32s(&[1, -7, i32::MAX]),
    );
    add(
        "i32-max-signed",
        T::I32,
        R::Max,
        i32s(&[-1, 5, i32::MIN]),
        i32s(&[1, -7, i32::MAX]),
    );
    add(
        "u32-min-unsigned",
        T::U32,
        R::Min,
        u32s(&[u32::MAX, 5]),
        u32s(&[1, 0x8000_0000]),
    );
    add(
        "u32-max-unsigned",
        T::U32,
        R::Max,
        u32s(&[u32::MAX, 5]),
        u32s(&[1, 0x8000_0000]),
    );
    add(
        "i64-min-signed",
        T::I64,
        R::Min,
        i64s(&[-1, i64::MIN]),
        i64s(&[0, i64::MAX]),
    );
    add(
        "u64-max-unsigned",
        T::U64,
        R::Max,
        u64s(&[u64::MAX, 0]),
        u64s(&[1, 1 << 63]),
    );
    let qnan = f64::from_bits(0x7ff8_0000_0000_0123);
    let qnan2 = f64::from_bits(0xfff8_0000_0000_0456);
    add(
        "f64-min-zeros-and-nan",
        T::F64,
        R::Min,
        f64s(&[-0.0, 0.0, qnan, 1.0, qnan, -1.5]),
        f64s(&[0.0, -0.0, 1.0, qnan2, qnan2, 2.5]),
    );
    add(
        "f64-max-zeros-and-nan",
        T::F64,
        R::Max,
        f64s(&[-0.0, 0.0, qnan, 1.0, qnan, -1.5]),
        f64s(&[0.0, -0.0, 1.0, qnan2, qnan2, 2.5]),
    );
    let fnan = f32::from_bits(0x7fc0_0042);
    add(
        "f32-min-zeros-and-nan",
        T::F32,
        R::Min,
        f32s(&[-0.0, 0.0, fnan, 3.0, f32::NEG_INFINITY]),
        f32s(&[0.0, -0.0, 2.0, fnan, 1.0]),
    );
    add(
        "f32-max-zeros-and-nan",
        T::F32,
        R::Max,
        f32s(&[-0.0, 0.0, fnan, 3.0, f32::INFINITY]),
        f32s(&[0.0, -0.0, 2.0, fnan, 1.0]),
    );
    add(
        "f64-sum-rounding-and-nan",
        T::F64,
        R::Sum,
        f64s(&[0.1, 1e16, f64::INFINITY, -0.0, qnan, f64::MAX]),
        f64s(&[0.2, 1.0, f64::NEG_INFINITY, -0.0, 1.0, f64::MAX]),
    );
    add(
        "f32-sum-rounding",
        T::F32,
        R::Sum,
        f32s(&[16_777_216.0, 0.1, -0.0]),
        f32s(&[1.0, 0.2, 0.0]),
    );
    add(
        "f64-prod",
        T::F64,
        R::Prod,
        f64s(&[0.1, -0.0, f64::INFINITY]),
        f64s(&[3.0, 5.0, 0.0]),
    );
    add(
        "f32-prod",
        T::F32,
        R::Prod,
        f32s(&[1e30, 0.1, -2.0]),
        f32s(&[1e30, 3.0, 0.5]),
    );
    for r in [R::Land, R::Lor, R::Lxor] {
        add(
            &format!("i32-{}", r.name()),
            T::I32,
            r,
            i32s(&[0, 0, 5, -1]),
            i32s(&[0, 3, 0, 7]),
        );
        add(
            &format!("u64-{}", r.name()),
            T::U64,
            r,
            u64s(&[0, 0, 1 << 40, u64::MAX]),
            u64s(&[0, 9, 0, 2]),
        );
    }
    for r in [R::Band, R::Bor, R::Bxor] {
        add(
            &format!("u8-{}", r.name()),
            T::U8,
            r,
            u8s(&[0xf0, 0xaa, 0xff]),
            u8s(&[0x3c, 0x55, 0x0f]),
        );
        add(
            &format!("i32-{}", r.name()),
            T::I32,
            r,
            i32s(&[-1, 0x0f0f_0f0f]),
            i32s(&[0x1234_5678, 0x00ff_00ff]),
        );
        add(
            &format!("u64-{}", r.name()),
            T::U64,
            r,
            u64s(&[u64::MAX, 0xf0f0]),
            u64s(&[0x0123_4567_89ab_cdef, 0xff00]),
        );
    }
    // Every refused combination.
    for t in ElementType::V1 {
        for r in Reduction::V1 {
            if r.check(t).is_ok() {
                continue;
            }
            let one = hex::encode(&vec![1u8; t.width()]);
            add(
                &format!("refused-{}-{}", t.name(), r.name()),
                t,
                r,
                one.clone(),
                one,
            );
        }
    }
    v
}
