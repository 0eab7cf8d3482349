use crate::common::grad::{check, rand};

#[test]
fn add_mul_sum_with_broadcasting() {
    check(
        "x*y + x",
        &|g, x| {
            let p = g.mul(x[0], x[1])?;
            g.add(p, x[0])
        },
        &[rand(&[3, 4], -1.0, 1.0, 1), rand(&[4], -1.0, 1.0, 2)],
        &[0, 1],
        1e-2,
        1e-2,
        1e-3,
    );
}
