//! How values' bytes look on a GPU: host words (one per element) packed as the device
//! stores them (f16 two to a word, padded to 4 bytes) and back. Shared by plan execution and
//! the variable store.

use crate::{DType, Error, Result};
use std::borrow::Cow;

/// Bytes that `numel` elements of `dtype` take on a GPU: f16 packs two to a word, padded.
pub fn gpu_len(dtype: DType, numel: usize) -> usize {
    (numel * dtype.gpu_size()).next_multiple_of(4)
}

/// Host words → the bytes a GPU stores: f16 packs to 2 bytes per element, padded to 4.
pub fn device_bytes(dtype: DType, words: &[u32]) -> Cow<'_, [u8]> {
    if dtype != DType::F16 {
        return Cow::Borrowed(bytemuck::cast_slice(words));
    }
    let mut out = Vec::with_capacity(gpu_len(dtype, words.len()));
    out.extend(words.iter().flat_map(|&w| (w as u16).to_ne_bytes()));
    out.resize(gpu_len(dtype, words.len()), 0);
    Cow::Owned(out)
}

/// Write `words` as a GPU stores them (see [`device_bytes`]) straight into `dst`, mapped or
/// staging memory that holds exactly their device bytes: f16 is packed while copying.
pub fn write_device_bytes(
    dtype: DType,
    words: &[u32],
    dst: wgpu::WriteOnly<'_, [u8]>,
) -> Result<()> {
    let len = gpu_len(dtype, words.len());
    if dst.len() != len {
        return Err(Error::Internal(format!(
            "{} {dtype} elements take {len} bytes on a GPU, not {}",
            words.len(),
            dst.len()
        )));
    }
    let mut dst = dst;
    if dtype != DType::F16 {
        dst.copy_from_slice(bytemuck::cast_slice(words));
        return Ok(());
    }
    let (packed, mut pad) = dst.split_at(2 * words.len());
    let (pairs, _) = packed.into_chunks::<2>();
    pairs.write_iter(words.iter().map(|&w| (w as u16).to_ne_bytes()));
    pad.fill(0);
    Ok(())
}

/// Append the host words of `numel` elements that a GPU stores as `bytes` to `out` (the
/// inverse of [`device_bytes`]): one copy, f16 widened while copying.
pub fn extend_host_words(
    dtype: DType,
    bytes: &[u8],
    numel: usize,
    out: &mut Vec<u32>,
) -> Result<()> {
    let used = numel * dtype.gpu_size();
    let bytes = bytes.get(..used).ok_or_else(|| {
        Error::Internal(format!(
            "{numel} {dtype} elements read back from {} bytes",
            bytes.len()
        ))
    })?;
    // Mapped memory is aligned, so the casts succeed; the byte-wise paths are the fallback.
    if dtype == DType::F16 {
        match bytemuck::try_cast_slice::<u8, u16>(bytes) {
            Ok(h) => out.extend(h.iter().map(|&h| u32::from(h))),
            Err(_) => out.extend(
                bytes
                    .chunks_exact(2)
                    .map(|c| u32::from(u16::from_ne_bytes([c[0], c[1]]))),
            ),
        }
    } else {
        match bytemuck::try_cast_slice::<u8, u32>(bytes) {
            Ok(w) => out.extend_from_slice(w),
            Err(_) => out.extend(
                bytes
                    .chunks_exact(4)
                    .map(|c| u32::from_ne_bytes([c[0], c[1], c[2], c[3]])),
            ),
        }
    }
    Ok(())
}
