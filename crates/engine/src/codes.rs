//! [`Codes`]: one column's dense codes, one per row, stored in the narrowest
//! unsigned width that holds the column's number of codes (issue 10).
//!
//! Most quasi-identifiers have a few dozen values (Adult's largest has 74),
//! so one byte per row holds them where a `u32` spent four: the working set
//! of a table is about a quarter of what it was, and hot loops read a
//! quarter of the memory. The width is chosen from the column's number of
//! codes when encoding finishes; a sub-table
//! ([`crate::encode::QiTable::restrict`]) keeps its table's width, since it
//! keeps its codes' meaning.
//!
//! While batches stream in, a `CodesBuilder` holds a column's provisional
//! codes in the narrowest width that fits the codes seen so far, so the
//! encoder's peak is the narrow columns too, not `u32` ones.
//!
//! Reading one code ([`Codes::get`]) matches on the width; loops over many
//! rows match once, outside the loop, with `with_codes!`, which compiles
//! the loop for each width.

/// An unsigned integer that can hold a code: `u8`, `u16` or `u32`.
pub(crate) trait Code:
    Copy + Ord + Into<u32> + TryFrom<u32> + Send + Sync + 'static
{
}

impl Code for u8 {}
impl Code for u16 {}
impl Code for u32 {}

/// The codes of one column, one per row, as `u8`, `u16` or `u32` (the
/// narrowest that holds the column's number of codes).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Codes(pub(crate) Repr);

/// The storage of [`Codes`], by width.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) enum Repr {
    U8(Vec<u8>),
    U16(Vec<u16>),
    U32(Vec<u32>),
}

/// Binds `$c` to the codes of `$codes` (a [`Codes`]) as a slice of their
/// stored width (`&[u8]`, `&[u16]` or `&[u32]`) and evaluates `$body`, which
/// is compiled once per width: hot loops match on the width once, outside
/// the loop. Read a code as `u32::from($c[i])`; the body's value must have
/// the same type for every width.
///
/// ```text
/// let (lo, hi) = with_codes!(col.codes(), |c| min_max(rows, c)); // min_max<T: Code>
/// ```
macro_rules! with_codes {
    ($codes:expr, |$c:ident| $body:expr) => {
        match &($codes).0 {
            $crate::codes::Repr::U8($c) => {
                let $c: &[u8] = $c;
                $body
            }
            $crate::codes::Repr::U16($c) => {
                let $c: &[u16] = $c;
                $body
            }
            // `u32::from` is the identity here, as the body is shared.
            #[allow(clippy::useless_conversion)]
            $crate::codes::Repr::U32($c) => {
                let $c: &[u32] = $c;
                $body
            }
        }
    };
}
pub(crate) use with_codes;

impl Codes {
    /// The code of row `row`.
    ///
    /// # Panics
    /// When `row` is out of range.
    #[inline]
    pub fn get(&self, row: usize) -> u32 {
        match &self.0 {
            Repr::U8(c) => c[row].into(),
            Repr::U16(c) => c[row].into(),
            Repr::U32(c) => c[row],
        }
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        with_codes!(self, |c| c.len())
    }

    /// Whether there are no rows.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The codes of all rows, in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = u32> + '_ {
        (0..self.len()).map(|r| self.get(r))
    }

    /// The codes as a vector of `u32` (tests, small tables).
    pub fn to_vec(&self) -> Vec<u32> {
        with_codes!(self, |c| c.iter().map(|&x| u32::from(x)).collect())
    }

    /// Bytes per code: 1, 2 or 4.
    pub fn width(&self) -> usize {
        match &self.0 {
            Repr::U8(_) => 1,
            Repr::U16(_) => 2,
            Repr::U32(_) => 4,
        }
    }

    /// Bytes held on the heap (the allocated capacity).
    pub fn heap_bytes(&self) -> usize {
        let capacity = match &self.0 {
            Repr::U8(c) => c.capacity(),
            Repr::U16(c) => c.capacity(),
            Repr::U32(c) => c.capacity(),
        };
        capacity * self.width()
    }

    /// Replaces every code `c` by `map[c]`, each at most `c`'s column's
    /// number of codes (so the width still holds it).
    ///
    /// # Panics
    /// When a code is out of `map`'s range or maps beyond the width.
    pub(crate) fn remap(&mut self, map: &[u32]) {
        fn go<T: Code>(codes: &mut [T], map: &[u32]) {
            for c in codes {
                let from: u32 = (*c).into();
                *c = T::try_from(map[from as usize])
                    .ok()
                    .expect("a remapped code fits its width");
            }
        }
        match &mut self.0 {
            Repr::U8(c) => go(c, map),
            Repr::U16(c) => go(c, map),
            Repr::U32(c) => go(c, map),
        }
    }

    /// The codes of `rows`, in the given order, in the same width.
    ///
    /// # Panics
    /// When a row is out of range.
    pub(crate) fn gather(&self, rows: &[u32]) -> Codes {
        fn pick<T: Code>(c: &[T], rows: &[u32]) -> Vec<T> {
            rows.iter().map(|&r| c[r as usize]).collect()
        }
        Codes(match &self.0 {
            Repr::U8(c) => Repr::U8(pick(c, rows)),
            Repr::U16(c) => Repr::U16(pick(c, rows)),
            Repr::U32(c) => Repr::U32(pick(c, rows)),
        })
    }
}

/// The provisional code of a null value in [`CodesBuilder::extend`].
pub(crate) const NULL: u32 = u32::MAX;

/// A column's provisional codes while batches stream in (see the module
/// docs): each width's largest value marks a null, so a width holds codes
/// up to its largest value minus one, and the builder widens (a copy, at
/// most twice per column) when a larger code arrives.
#[derive(Debug)]
pub(crate) struct CodesBuilder {
    repr: Repr,
    nulls: usize,
}

impl Default for CodesBuilder {
    fn default() -> Self {
        CodesBuilder {
            repr: Repr::U8(Vec::new()),
            nulls: 0,
        }
    }
}

/// `codes` in the width `T`, each code through `f` (nulls as `None`, when
/// `null` is given: the source width's null marker).
fn convert<S: Code, T: Code>(
    codes: &[S],
    null: Option<S>,
    mut f: impl FnMut(Option<u32>) -> u32,
) -> Vec<T> {
    codes
        .iter()
        .map(|&c| {
            let code = f((Some(c) != null).then(|| c.into()));
            T::try_from(code)
                .ok()
                .expect("a code is below its column's number of codes")
        })
        .collect()
}

impl CodesBuilder {
    /// Number of codes so far.
    pub(crate) fn len(&self) -> usize {
        match &self.repr {
            Repr::U8(c) => c.len(),
            Repr::U16(c) => c.len(),
            Repr::U32(c) => c.len(),
        }
    }

    /// Whether a null was appended.
    pub(crate) fn has_nulls(&self) -> bool {
        self.nulls > 0
    }

    /// Appends provisional codes, [`NULL`] for a null.
    pub(crate) fn extend(&mut self, codes: &[u32]) {
        let largest = codes.iter().copied().filter(|&c| c != NULL).max();
        if let Some(largest) = largest {
            self.widen_for(largest);
        }
        let nulls = &mut self.nulls;
        match &mut self.repr {
            Repr::U8(v) => v.extend(codes.iter().map(|&c| {
                *nulls += (c == NULL) as usize;
                if c == NULL {
                    u8::MAX
                } else {
                    c as u8
                }
            })),
            Repr::U16(v) => v.extend(codes.iter().map(|&c| {
                *nulls += (c == NULL) as usize;
                if c == NULL {
                    u16::MAX
                } else {
                    c as u16
                }
            })),
            Repr::U32(v) => {
                *nulls += codes.iter().filter(|&&c| c == NULL).count();
                v.extend_from_slice(codes);
            }
        }
    }

    /// Widens the storage, nulls included, until it holds `code`.
    fn widen_for(&mut self, code: u32) {
        let null_as = |n: u32| move |c: Option<u32>| c.unwrap_or(n);
        loop {
            self.repr = match &self.repr {
                Repr::U8(v) if code >= u32::from(u8::MAX) => {
                    Repr::U16(convert(v, Some(u8::MAX), null_as(u16::MAX.into())))
                }
                Repr::U16(v) if code >= u32::from(u16::MAX) => {
                    Repr::U32(convert(v, Some(u16::MAX), null_as(NULL)))
                }
                _ => return,
            };
        }
    }

    /// The final codes: each provisional code through `f` (`None` for a
    /// null), stored in the narrowest width that holds `n_codes` codes
    /// (`u8` up to 256, `u16` up to 65,536, `u32` beyond). The provisional
    /// codes are freed.
    ///
    /// # Panics
    /// When `f` gives a code that is not below `n_codes` in the chosen
    /// width (a bug of the caller: truncating it would publish the wrong
    /// value).
    pub(crate) fn finish(self, n_codes: usize, f: impl FnMut(Option<u32>) -> u32) -> Codes {
        fn to<T: Code>(repr: &Repr, f: impl FnMut(Option<u32>) -> u32) -> Vec<T> {
            match repr {
                Repr::U8(v) => convert(v, Some(u8::MAX), f),
                Repr::U16(v) => convert(v, Some(u16::MAX), f),
                Repr::U32(v) => convert(v, Some(NULL), f),
            }
        }
        Codes(if n_codes <= 1 << 8 {
            Repr::U8(to(&self.repr, f))
        } else if n_codes <= 1 << 16 {
            Repr::U16(to(&self.repr, f))
        } else {
            Repr::U32(to(&self.repr, f))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ramp(n: u32) -> Vec<u32> {
        (0..n).rev().collect()
    }

    /// `codes` (each below `n_codes`, no nulls) as final codes.
    fn narrow(codes: Vec<u32>, n_codes: usize) -> Codes {
        let mut b = CodesBuilder::default();
        b.extend(&codes);
        b.finish(n_codes, |c| c.expect("no nulls"))
    }

    #[test]
    fn width_follows_the_number_of_codes_at_each_boundary() {
        for (n_codes, width) in [
            (1usize, 1usize),
            (256, 1),
            (257, 2),
            (65_536, 2),
            (65_537, 4),
        ] {
            let codes = narrow(ramp(n_codes as u32), n_codes);
            assert_eq!(codes.width(), width, "{n_codes} codes");
            assert_eq!(codes.len(), n_codes);
            assert_eq!(codes.heap_bytes(), n_codes * width);
            // Every code survives, the largest included.
            assert_eq!(codes.get(0), n_codes as u32 - 1);
            assert_eq!(codes.get(n_codes - 1), 0);
            assert_eq!(codes.to_vec(), ramp(n_codes as u32));
            assert!(codes.iter().eq(ramp(n_codes as u32)));
        }
        // The width depends on the number of codes, not on the largest one
        // present: a sub-table keeps its table's width.
        assert_eq!(narrow(vec![0, 1], 300).width(), 2);
        assert!(narrow(Vec::new(), 0).is_empty());
    }

    #[test]
    #[should_panic(expected = "below its column's number of codes")]
    fn a_code_beyond_the_width_is_refused() {
        narrow(vec![256], 256);
    }

    #[test]
    fn the_builder_widens_as_codes_grow_and_keeps_nulls() {
        let mut b = CodesBuilder::default();
        b.extend(&[3, NULL, 254]);
        assert_eq!(b.repr, Repr::U8(vec![3, 255, 254]));
        assert!(b.has_nulls());
        b.extend(&[255]);
        assert_eq!(b.repr, Repr::U16(vec![3, u16::MAX, 254, 255]));
        b.extend(&[NULL, 70_000]);
        assert_eq!(b.repr, Repr::U32(vec![3, NULL, 254, 255, NULL, 70_000]));
        assert_eq!(b.len(), 6);
        // Jumping two widths at once.
        let mut b = CodesBuilder::default();
        b.extend(&[NULL, 1]);
        b.extend(&[65_535]);
        assert_eq!(b.repr, Repr::U32(vec![NULL, 1, 65_535]));
        // The final codes narrow again, by the number of codes.
        let codes = b.finish(3, |c| c.map_or(0, |c| c.min(2)));
        assert_eq!(codes.width(), 1);
        assert_eq!(codes.to_vec(), [0, 1, 2]);
        let mut b = CodesBuilder::default();
        b.extend(&[1, 0]);
        assert!(!b.has_nulls());
    }

    #[test]
    fn gather_keeps_the_width_and_follows_the_rows() {
        for n_codes in [200usize, 1_000, 70_000] {
            let all = ramp(n_codes as u32);
            let codes = narrow(all.clone(), n_codes);
            let rows = [5u32, 0, 5, n_codes as u32 - 1];
            let sub = codes.gather(&rows);
            assert_eq!(sub.width(), codes.width());
            assert_eq!(
                sub.to_vec(),
                rows.iter().map(|&r| all[r as usize]).collect::<Vec<_>>()
            );
            assert_eq!(sub.get(3), 0);
            assert!(codes.gather(&[]).is_empty());
        }
    }

    #[test]
    fn with_codes_sees_the_stored_width() {
        let sum = |codes: &Codes| {
            with_codes!(codes, |c| c
                .iter()
                .map(|&x| u64::from(u32::from(x)))
                .sum::<u64>())
        };
        let size = |codes: &Codes| with_codes!(codes, |c| std::mem::size_of_val(c));
        for n_codes in [10usize, 300, 70_000] {
            let codes = narrow(ramp(n_codes as u32), n_codes);
            assert_eq!(sum(&codes), (n_codes as u64 * (n_codes as u64 - 1)) / 2);
            assert_eq!(size(&codes), n_codes * codes.width());
        }
    }
}
