//! The random streams of `kanon generate`: one keyed ChaCha8 stream per
//! column group and chunk, so a chunk's rows depend on neither the thread
//! that makes them nor the other columns, and probabilities as thresholds
//! on a uniform `u32`.

use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Domain separation for the random streams: changing the generator's
/// algorithm should change this, so old and new files are never confused.
const STREAM_TAG: &[u8; 16] = b"kanon-generate-1";

/// A probability as a threshold on a uniform `u32`.
pub(super) fn threshold(p: f64) -> u64 {
    (p * (1u64 << 32) as f64).round() as u64
}

/// Whether a draw falls under a threshold made by [`threshold`].
#[inline]
pub(super) fn hit(rng: &mut ChaCha8Rng, t: u64) -> bool {
    (rng.next_u32() as u64) < t
}

/// The random stream of one column group of one chunk.
pub(super) fn stream(seed: u64, column: u64, chunk: u64) -> ChaCha8Rng {
    let mut key = [0u8; 32];
    key[..8].copy_from_slice(&seed.to_le_bytes());
    key[8..16].copy_from_slice(&column.to_le_bytes());
    key[16..].copy_from_slice(STREAM_TAG);
    let mut rng = ChaCha8Rng::from_seed(key);
    rng.set_stream(chunk);
    rng
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds() {
        assert_eq!(threshold(0.0), 0);
        assert_eq!(threshold(1.0), 1 << 32);
        let mut rng = stream(1, 0, 0);
        assert!((0..1000).all(|_| hit(&mut rng, threshold(1.0))));
        assert!((0..1000).all(|_| !hit(&mut rng, threshold(0.0))));
    }
}
