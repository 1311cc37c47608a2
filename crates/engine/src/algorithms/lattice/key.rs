//! Generalised tuples packed into one integer ([`Key`]), the hash keys of
//! frequency sets.
//!
//! A lattice node publishes, per QI, one node of a hierarchy level; its
//! position among that level's nodes (its *dense code*) needs only a few
//! bits, so a whole tuple fits a `u64` or `u128` for most tables, which
//! makes rollups (one masked field per changed QI) and hashing cheap.
//! [`Wide`] is the fallback for tuples that do not fit.

/// A generalised tuple packed into one value: per QI of a node, the
/// position of its hierarchy node among the nodes of its level ("dense
/// code"), at the bit offsets of a [`Layout`]. Packed keys make rollups
/// cheap (one changed QI is one masked field) and hash fast; [`Wide`]
/// holds any number of QIs.
pub(crate) trait Key: Clone + Eq + Send + Sync {
    /// The tuple of all zeros for `width` QIs.
    fn zeros(width: usize) -> Self;
    /// The dense code at position `j`.
    fn get(&self, layout: &Layout, j: usize) -> u32;
    /// Sets the dense code at position `j`.
    fn set(&mut self, layout: &Layout, j: usize, code: u32);
    /// Whether keys of this type hold `bits` bits.
    fn holds(bits: u32) -> bool;
    /// A well-mixed 64-bit hash (the high bits are used).
    fn hash64(&self) -> u64;
}

/// Fibonacci hashing multiplier (Knuth, TAOCP vol. 3, 6.4): 2^64 / phi.
const PHI64: u64 = 0x9E37_79B9_7F4A_7C15;

/// Bit offsets of the positions of a packed [`Key`].
#[derive(Debug, Clone)]
pub(crate) struct Layout {
    pub(super) shifts: Vec<u32>,
    pub(super) masks: Vec<u32>,
}

macro_rules! packed_key {
    ($t:ty) => {
        impl Key for $t {
            fn zeros(_: usize) -> Self {
                0
            }
            fn get(&self, layout: &Layout, j: usize) -> u32 {
                ((*self >> layout.shifts[j]) as u32) & layout.masks[j]
            }
            fn set(&mut self, layout: &Layout, j: usize, code: u32) {
                let shift = layout.shifts[j];
                *self = (*self & !((layout.masks[j] as $t) << shift)) | ((code as $t) << shift);
            }
            fn holds(bits: u32) -> bool {
                bits <= <$t>::BITS
            }
            fn hash64(&self) -> u64 {
                let x = *self as u128;
                ((x as u64) ^ ((x >> 64) as u64).rotate_left(29)).wrapping_mul(PHI64)
            }
        }
    };
}
packed_key!(u64);
packed_key!(u128);

/// A generalised tuple of any width, one `u32` per QI.
pub(crate) type Wide = Box<[u32]>;

impl Key for Wide {
    fn zeros(width: usize) -> Self {
        vec![0; width].into()
    }
    fn get(&self, _: &Layout, j: usize) -> u32 {
        self[j]
    }
    fn set(&mut self, _: &Layout, j: usize, code: u32) {
        self[j] = code;
    }
    fn holds(_: u32) -> bool {
        true
    }
    fn hash64(&self) -> u64 {
        self.iter().fold(0u64, |h, &c| {
            (h.rotate_left(23) ^ c as u64).wrapping_mul(PHI64)
        })
    }
}
