//! The fused primitives' gradients against central finite differences of their forward
//! pass (on cpu:0, then every GPU against cpu:0): `segment_sum`, attention (causal and not,
//! odd sizes, fewer queries than keys), layer normalisation and softmax cross-entropy.

use crate::common::grad::{check, rand};
use wgflow::{Graph, HostTensor, Result, Tensor};

const EPS: f32 = 3e-3;
const RTOL: f32 = 2e-2;
const ATOL: f32 = 2e-3;

#[test]
fn segment_sum_of_repeated_and_dropped_ids() {
    let ids = HostTensor::new([7], vec![2i32, 0, 2, -1, 4, 0, 2]).unwrap();
    for axis in [0isize, 1] {
        let shape: &[usize] = if axis == 0 { &[7, 3] } else { &[2, 7] };
        check(
            &format!("segment_sum axis {axis}"),
            &|g, t| g.segment_sum(t[0], t[1], 4, axis),
            &[rand(shape, -2.0, 2.0, 11 + axis as u64), ids.clone()],
            &[0],
            EPS,
            RTOL,
            ATOL,
        );
    }
}

#[test]
fn attention_causal_and_not_with_odd_sizes() {
    // (heads, Tq, Tk, D, causal): odd T and D, Tq < Tk (a decoding block).
    for (h, tq, tk, d, causal) in [(2, 5, 5, 3, true), (1, 4, 7, 5, false), (2, 3, 6, 2, true)] {
        let scale = 0.7;
        let f = move |g: &mut Graph, t: &[Tensor]| -> Result<Tensor> {
            g.attention(t[0], t[1], t[2], causal, Some(scale))
        };
        check(
            &format!("attention h {h} tq {tq} tk {tk} d {d} causal {causal}"),
            &f,
            &[
                rand(&[h, tq, d], -1.5, 1.5, 21),
                rand(&[h, tk, d], -1.5, 1.5, 22),
                rand(&[h, tk, d], -1.0, 1.0, 23),
            ],
            &[0, 1, 2],
            EPS,
            RTOL,
            ATOL,
        );
    }
}

#[test]
fn fused_layer_norm_of_rank_one_and_three() {
    for shape in [&[9][..], &[2, 3, 5]] {
        let d = *shape.last().unwrap();
        check(
            &format!("layer_norm {shape:?}"),
            &|g, t| g.layer_norm(t[0], Some(t[1]), Some(t[2]), -1, 1e-3),
            &[
                rand(shape, -2.0, 2.0, 31),
                rand(&[d], 0.5, 1.5, 32),
                rand(&[d], -1.0, 1.0, 33),
            ],
            &[0, 1, 2],
            EPS,
            RTOL,
            ATOL,
        );
    }
}

#[test]
fn sparse_softmax_cross_entropy_of_rows() {
    let labels = HostTensor::new([2, 3], vec![0i32, 4, 2, 1, 3, 4]).unwrap();
    check(
        "sparse_softmax_cross_entropy",
        &|g, t| g.sparse_softmax_cross_entropy(t[0], t[1]),
        &[rand(&[2, 3, 5], -3.0, 3.0, 41), labels],
        &[0],
        EPS,
        RTOL,
        ATOL,
    );
}
