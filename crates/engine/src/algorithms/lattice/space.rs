//! The nodes of the lattice of a set of QIs ([`Space`]) and their index
//! arithmetic.
//!
//! Incognito searches the lattices of growing subsets of the QIs, so nodes
//! are numbered: an index enumerates level vectors in lexicographic order,
//! which lets the search keep flags in plain vectors, find a node's direct
//! specialisations by subtracting strides and project a node onto a subset
//! of its QIs.

/// A set of QIs (ascending indices) with the index arithmetic of its
/// lattice: node indices enumerate level vectors in lexicographic order
/// (last QI fastest), so comparing indices compares level vectors.
#[derive(Debug, Clone)]
pub(crate) struct Space {
    attrs: Vec<usize>,
    radix: Vec<u8>,
    strides: Vec<usize>,
    size: usize,
}

impl Space {
    /// The lattice of `attrs` (ascending QI indices) with QI heights
    /// `heights`; `None` when its size overflows.
    pub(crate) fn new(attrs: Vec<usize>, heights: &[u8]) -> Option<Self> {
        let radix: Vec<u8> = attrs.iter().map(|&q| heights[q] + 1).collect();
        let mut strides = vec![0usize; attrs.len()];
        let mut size = 1usize;
        for j in (0..attrs.len()).rev() {
            strides[j] = size;
            size = size.checked_mul(radix[j] as usize)?;
        }
        Some(Space {
            attrs,
            radix,
            strides,
            size,
        })
    }

    /// The QIs of the space.
    pub(crate) fn attrs(&self) -> &[usize] {
        &self.attrs
    }

    /// Number of nodes.
    pub(crate) fn size(&self) -> usize {
        self.size
    }

    /// Index distance between a node and its child one level lower on
    /// position `j`.
    pub(crate) fn stride(&self, j: usize) -> usize {
        self.strides[j]
    }

    /// The level vector of a node.
    pub(crate) fn decode(&self, mut index: usize) -> Vec<u8> {
        self.strides
            .iter()
            .map(|&s| {
                let l = (index / s) as u8;
                index %= s;
                l
            })
            .collect()
    }

    /// The index, in this space, of the projection of `levels` (a node of a
    /// space with one more QI, `skip` being the position dropped).
    pub(crate) fn project(&self, levels: &[u8], skip: usize) -> usize {
        levels
            .iter()
            .enumerate()
            .filter(|&(j, _)| j != skip)
            .zip(&self.strides)
            .map(|((_, &l), &s)| l as usize * s)
            .sum()
    }

    /// The nodes grouped by height (sum of levels), each group ascending.
    pub(crate) fn by_height(&self) -> Vec<Vec<u32>> {
        let max: usize = self.radix.iter().map(|&r| r as usize - 1).sum();
        let mut out = vec![Vec::new(); max + 1];
        let mut levels = vec![0u8; self.attrs.len()];
        for index in 0..self.size {
            let h: usize = levels.iter().map(|&l| l as usize).sum();
            out[h].push(index as u32);
            // Increment the level vector, last position fastest.
            for j in (0..levels.len()).rev() {
                levels[j] += 1;
                if levels[j] < self.radix[j] {
                    break;
                }
                levels[j] = 0;
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn space_indices_follow_level_vectors() {
        let space = Space::new(vec![0, 2, 3], &[1, 9, 2, 3]).unwrap();
        assert_eq!(space.size(), 2 * 3 * 4);
        let layers = space.by_height();
        assert_eq!(layers.len(), 1 + 2 + 3 + 1);
        let mut seen = 0;
        for (h, layer) in layers.iter().enumerate() {
            for &i in layer {
                let levels = space.decode(i as usize);
                assert_eq!(levels.iter().map(|&l| l as usize).sum::<usize>(), h);
                seen += 1;
            }
        }
        assert_eq!(seen, space.size());
        // Lexicographic: the last QI varies fastest.
        assert_eq!(space.decode(1), vec![0, 0, 1]);
        assert_eq!(space.decode(4), vec![0, 1, 0]);
        assert_eq!(space.stride(0), 12);
        // Projection dropping the middle QI lands on (l0, l2) of that space.
        let smaller = Space::new(vec![0, 3], &[1, 9, 2, 3]).unwrap();
        assert_eq!(smaller.decode(smaller.project(&[1, 2, 3], 1)), vec![1, 3]);
    }
}
