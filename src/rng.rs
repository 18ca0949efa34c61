//! Seeded random streams. Every random choice derives from the run's one seed through a
//! ChaCha stream named by its purpose and an index, so adding a consumer never shifts the
//! numbers another consumer sees.

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// What a stream is for. The tag is hashed into the stream's key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// Data keys: chunk boundaries.
    DataBoundaries,
    /// Data keys and values inside chunk `index`.
    DataChunk,
    /// Queries of batch `index` (batch 0 is the reference batch).
    Batch,
    /// The seed of repetition `index` of a sweep point.
    Repetition,
    /// The choices of a soak case (the seed is the case's).
    Soak,
}

impl Purpose {
    fn tag(self) -> u64 {
        match self {
            Purpose::DataBoundaries => 1,
            Purpose::DataChunk => 2,
            Purpose::Batch => 3,
            Purpose::Repetition => 4,
            Purpose::Soak => 5,
        }
    }
}

fn splitmix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = x;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The stream for `purpose` number `index` under `seed`.
pub fn stream(seed: u64, purpose: Purpose, index: u64) -> ChaCha8Rng {
    let mut key = [0u8; 32];
    let mut state = splitmix64(seed ^ splitmix64(purpose.tag()));
    for word in key.chunks_exact_mut(8) {
        state = splitmix64(state);
        word.copy_from_slice(&state.to_le_bytes());
    }
    let mut rng = ChaCha8Rng::from_seed(key);
    rng.set_stream(index);
    rng
}

/// A uniform f64 in [0, 1) with 53 random bits.
pub fn unit_f64(rng: &mut impl rand::Rng) -> f64 {
    (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::Rng;

    #[test]
    fn streams_are_independent_and_reproducible() {
        let a = stream(7, Purpose::Batch, 0).next_u64();
        assert_eq!(a, stream(7, Purpose::Batch, 0).next_u64());
        assert_ne!(a, stream(7, Purpose::Batch, 1).next_u64());
        assert_ne!(a, stream(7, Purpose::DataChunk, 0).next_u64());
        assert_ne!(a, stream(8, Purpose::Batch, 0).next_u64());
    }
}
