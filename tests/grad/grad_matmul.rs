//! Gradients of matmul against finite differences: plain, batched with broadcast batch
//! dims, 1-D operands on either side, and the `linear` composite.

use crate::common::grad::{check, rand};

const EPS: f32 = 1e-2;
const RTOL: f32 = 2e-2;
const ATOL: f32 = 2e-3;

fn matmul_case(a: &[usize], b: &[usize], seed: u64) {
    check(
        &format!("{a:?} @ {b:?}"),
        &|g, x| g.matmul(x[0], x[1]),
        &[rand(a, -1.0, 1.0, seed), rand(b, -1.0, 1.0, seed + 1)],
        &[0, 1],
        EPS,
        RTOL,
        ATOL,
    );
}

#[test]
fn matrices_of_odd_sizes() {
    matmul_case(&[3, 4], &[4, 5], 1);
    matmul_case(&[5, 7], &[7, 3], 3);
    matmul_case(&[1, 6], &[6, 1], 5);
}

#[test]
fn batches_that_broadcast() {
    matmul_case(&[2, 3, 4], &[2, 4, 5], 7);
    matmul_case(&[2, 1, 3, 4], &[5, 4, 2], 9);
    matmul_case(&[3, 4], &[2, 4, 3], 11);
    matmul_case(&[3, 1, 2, 3], &[1, 2, 3, 2], 13);
}

#[test]
fn vectors_on_either_side() {
    matmul_case(&[4], &[4, 5], 15);
    matmul_case(&[3, 4], &[4], 17);
    matmul_case(&[4], &[4], 19);
    matmul_case(&[4], &[2, 4, 3], 21);
    matmul_case(&[2, 3, 4], &[4], 23);
}

#[test]
fn only_one_operand_wanted() {
    for wrt in [0, 1] {
        check(
            &format!("[2, 3, 4] @ [4, 2], input {wrt} only"),
            &|g, x| g.matmul(x[0], x[1]),
            &[
                rand(&[2, 3, 4], -1.0, 1.0, 25),
                rand(&[4, 2], -1.0, 1.0, 26),
            ],
            &[wrt],
            EPS,
            RTOL,
            ATOL,
        );
    }
}

#[test]
fn linear_with_and_without_bias() {
    check(
        "linear with bias",
        &|g, x| g.linear(x[0], x[1], Some(x[2])),
        &[
            rand(&[2, 3, 4], -1.0, 1.0, 27),
            rand(&[4, 5], -1.0, 1.0, 28),
            rand(&[5], -1.0, 1.0, 29),
        ],
        &[0, 1, 2],
        EPS,
        RTOL,
        ATOL,
    );
    check(
        "linear without bias",
        &|g, x| g.linear(x[0], x[1], None),
        &[rand(&[3, 4], -1.0, 1.0, 30), rand(&[4, 2], -1.0, 1.0, 31)],
        &[0, 1],
        EPS,
        RTOL,
        ATOL,
    );
}
