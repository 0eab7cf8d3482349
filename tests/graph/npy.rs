//! `.npy` reading on hostile input: headers whose keys repeat or hide inside string values
//! are read as NumPy reads them (the last duplicate wins; only the three keys exist), and
//! arbitrary mutations of the header never panic.

use crate::common::Rng;
use wgflow::npy::{from_bytes, to_bytes};
use wgflow::{DType, Error, HostKind, HostTensor};

/// A version 1.0 file with `header` (newline added) and `data`.
fn npy(header: &str, data: &[u8]) -> Vec<u8> {
    let header = format!("{header}\n");
    let mut b = b"\x93NUMPY\x01\x00".to_vec();
    b.extend_from_slice(&(header.len() as u16).to_le_bytes());
    b.extend_from_slice(header.as_bytes());
    b.extend_from_slice(data);
    b
}

fn words(xs: &[u32]) -> Vec<u8> {
    xs.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn msg(b: &[u8]) -> String {
    match from_bytes(b) {
        Ok(t) => panic!("accepted as {} {}", t.dtype(), t.shape()),
        Err(e) => e.to_string(),
    }
}

#[test]
fn a_duplicate_key_takes_the_last_value_as_numpy_does() {
    let data = words(&[1, 2, 3]);
    let h = "{'descr': '<i4', 'fortran_order': False, 'shape': (2,), 'shape': (3,), }";
    let t = from_bytes(&npy(h, &data)).unwrap();
    assert_eq!(t.dims(), &[3]);
    assert_eq!(t.to_vec::<i32>().unwrap(), vec![1, 2, 3]);
    let h = "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), 'descr': '<i4'}";
    assert_eq!(from_bytes(&npy(h, &data)).unwrap().dtype(), DType::I32);
    let h = "{'descr': '<i4', 'fortran_order': True, 'shape': (3,), 'fortran_order': False}";
    assert_eq!(from_bytes(&npy(h, &data)).unwrap().dims(), &[3]);
}

#[test]
fn a_key_inside_a_string_value_is_not_believed() {
    let data = words(&[1, 2]);
    // Old code found the first `'descr'` anywhere and read this `<i4` file as f32.
    let h = r#"{'note': "'descr': '<f4', 'shape': (1,)", 'descr': '<i4', 'fortran_order': False, 'shape': (2,)}"#;
    let e = msg(&npy(h, &data));
    assert!(e.contains("unknown key \"note\""), "{e}");
    // The same text inside the descr string itself is just an unsupported dtype.
    let h = r#"{'descr': "<i4', 'descr': '<f4", 'fortran_order': False, 'shape': (2,)}"#;
    let e = msg(&npy(h, &data));
    assert!(e.contains("is not supported"), "{e}");
    // Escaped quotes do not end a string.
    let h = r"{'descr': '<i4\', \'descr\': \'<f4', 'fortran_order': False, 'shape': (2,)}";
    let e = msg(&npy(h, &data));
    assert!(e.contains("is not supported"), "{e}");
    // Double-quoted keys, no trailing comma, odd spacing: all Python, all read.
    let h = "{ \"shape\" :(2 ,) ,\"fortran_order\":False,'descr' : \"<i4\" }";
    let t = from_bytes(&npy(h, &data)).unwrap();
    assert_eq!(t.to_vec::<i32>().unwrap(), vec![1, 2]);
}

#[test]
fn malformed_headers_are_errors_that_say_where() {
    let data = words(&[1, 2]);
    for (h, want) in [
        (
            "{'descr': '<i4', 'fortran_order': False, 'shape': (2,), 'extra': 1}",
            "unknown key",
        ),
        ("{'descr': '<i4', 'shape': (2,)}", "no 'fortran_order'"),
        (
            "{'descr': '<i4', 'fortran_order': False, 'shape': (2,)",
            "at byte",
        ),
        (
            "{'descr': '<i4' 'fortran_order': False, 'shape': (2,)}",
            "at byte",
        ),
        (
            "{'descr': '<i4', 'fortran_order': False, 'shape': (2,)}}",
            "after the closing",
        ),
        (
            "{'descr': '<i4', 'fortran_order': False, 'shape': (2)}",
            "not a tuple",
        ),
        (
            "{'descr': '<i4', 'fortran_order': 'False', 'shape': (2,)}",
            "not True or False",
        ),
    ] {
        let e = msg(&npy(h, &data));
        assert!(e.contains(want), "{h}: {e} (wanted {want})");
    }
}

/// Entries spliced into a header: duplicates of the real keys, smuggled keys, and hostile
/// values.
const SNIPPETS: [&str; 12] = [
    "'shape': (3,), ",
    "'shape': (), ",
    "'descr': '<i4', ",
    "'descr': '<f4', ",
    "'fortran_order': True, ",
    "'x': \"'descr': '<f4'\", ",
    "\"descr\": \"|b1\", ",
    "'shape': (18446744073709551616,), ",
    "'shape': ((((1,),),),), ",
    "'descr': '\\x3cu4', ",
    "'shape': (1, -1), ",
    "'shape': [3], ",
];

fn mutate(rng: &mut Rng, header: &str) -> String {
    let mut b = header.as_bytes().to_vec();
    for _ in 0..1 + rng.below(3) {
        let len = b.len();
        match rng.below(6) {
            0 => b.truncate(rng.below(len)),
            1 => {
                let i = rng.below(len);
                if let Some(x) = b.get_mut(i) {
                    *x ^= 1 << rng.below(7);
                }
            }
            2 | 3 => {
                // After an opening brace or a comma, so many are well-formed entries.
                let spots: Vec<usize> = (0..len)
                    .filter(|&i| b[i] == b'{' || b[i] == b',')
                    .map(|i| i + 1)
                    .collect();
                let at = spots
                    .get(rng.below(spots.len()))
                    .copied()
                    .unwrap_or(0)
                    .min(len);
                let s = SNIPPETS[rng.below(SNIPPETS.len())];
                b.splice(at..at, format!(" {s}").bytes());
            }
            4 => {
                let (i, j) = (rng.below(len), rng.below(len));
                let (i, j) = (i.min(j), i.max(j));
                b.drain(i..j.min(i + 16));
            }
            _ => {
                let i = rng.below(len);
                let c = *b"'\"()[]{},:\\0-_ ".get(rng.below(15)).unwrap_or(&b'0');
                b.insert(i.min(b.len()), c);
            }
        }
    }
    String::from_utf8_lossy(&b).into_owned()
}

#[test]
fn arbitrary_header_mutations_never_panic() {
    let seeds = [
        HostTensor::from(vec![1.0f32, 2.0, 3.0]),
        HostTensor::from(vec![1i32, -2, 3]),
        HostTensor::from(vec![true, false, true]),
        HostTensor::scalar(7u32),
    ];
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let (mut ok, mut rejected) = (0, 0);
    for i in 0..4000 {
        let seed = to_bytes(&seeds[i % seeds.len()]);
        let hlen = usize::from(u16::from_le_bytes([seed[8], seed[9]]));
        let header = std::str::from_utf8(&seed[10..10 + hlen])
            .unwrap()
            .trim_end();
        let text = mutate(&mut rng, header);
        let file = npy(&text, &seed[10 + hlen..]);
        match std::panic::catch_unwind(|| from_bytes(&file)) {
            Ok(Ok(t)) => {
                // Whatever was accepted describes exactly the data that follows the header.
                let item = match t.dtype() {
                    DType::Bool => 1,
                    DType::F16 => 2,
                    _ => 4,
                };
                assert_eq!(t.len() * item, seed.len() - 10 - hlen, "{text}");
                ok += 1;
            }
            Ok(Err(Error::Host { message: m, .. })) => {
                assert!(!m.is_empty(), "iteration {i}");
                rejected += 1;
            }
            Ok(Err(e)) => panic!("iteration {i}: not a host error: {e}\n{text}"),
            Err(_) => panic!("iteration {i}: the reader panicked on:\n{text}"),
        }
    }
    assert!(
        ok > 50 && rejected > 2000,
        "{ok} accepted, {rejected} rejected"
    );
}

/// The kind of a host error, or a panic naming what was accepted.
fn host_kind<T: std::fmt::Debug>(r: wgflow::Result<T>) -> HostKind {
    match r {
        Err(Error::Host { kind, message }) => {
            assert!(!message.is_empty());
            kind
        }
        other => panic!("not a host error: {other:?}"),
    }
}

#[test]
fn host_errors_carry_their_kind() {
    let f = HostTensor::from(vec![1.0f32, 2.0]);
    assert_eq!(host_kind(f.to_vec::<i32>()), HostKind::DType);
    assert_eq!(host_kind(f.item::<f32>()), HostKind::Shape);
    assert_eq!(host_kind(f.clone().reshaped([3])), HostKind::Shape);
    assert_eq!(
        host_kind(HostTensor::new([3], vec![1.0f32])),
        HostKind::Shape
    );
    let big = [1i64, 1 << 40];
    assert_eq!(host_kind(HostTensor::from_i64([2], &big)), HostKind::Value);
    assert_eq!(host_kind(from_bytes(b"not a npy file")), HostKind::File);
    let f8 = npy(
        "{'descr': '<f8', 'fortran_order': False, 'shape': (1,), }",
        &[0; 8],
    );
    assert_eq!(host_kind(from_bytes(&f8)), HostKind::DType);
    let short = npy(
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }",
        &[0; 4],
    );
    assert_eq!(host_kind(from_bytes(&short)), HostKind::File);
    let wide = HostTensor::from(vec![300i32]);
    let r = wgflow::npy::to_bytes_int(&wide, "|u1");
    assert_eq!(host_kind(r), HostKind::Value);
}
