//! Re-identification risk from class sizes alone: the prosecutor, journalist
//! and marketer attacker models of El Emam & Dankar, "Protecting privacy
//! using k-anonymity", JAMIA 15(5), 2008, as ARX's `RiskModelSampleSummary`
//! computes them, plus sample uniques and the histograms a report plots.
//!
//! The input is the size `f_j` of every sample class (rows sharing QI
//! values) and, for the journalist and marketer models, the size `F_j` of the
//! population class with the same QI values. A record of class `j` is
//! re-identified with probability `1/f_j` by a prosecutor (who knows the
//! record is in the sample) and `1/F_j` by a journalist (who only knows it is
//! in the population); a marketer re-identifies `(1/n) Σ_j f_j/F_j` of the
//! records on average.

use serde::Serialize;

use crate::error::{Error, Result};

/// The re-identification risk of the records under one attacker model.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AttackerRisk {
    /// Highest risk of a record: `1 / smallest class` (0 without records).
    pub highest: f64,
    /// Mean risk over records: `(1/n) Σ_j f_j / F_j` (for the prosecutor,
    /// `F_j = f_j` and the mean is `classes / records`).
    pub average: f64,
    /// The risk threshold the next two fields count against.
    pub threshold: f64,
    /// Records whose risk is strictly above `threshold`.
    pub records_above_threshold: usize,
    /// `records_above_threshold / records` (0 without records).
    pub share_above_threshold: f64,
}

/// Sample uniques: records alone in their class.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SampleUniques {
    /// Records in classes of size 1 (= the number of such classes).
    pub records: usize,
    /// `records / all records` (0 without records).
    pub share: f64,
}

/// One bar of the class-size histogram.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ClassSizeCount {
    /// Class size.
    pub size: usize,
    /// Classes of that size.
    pub classes: usize,
    /// Records in those classes (`size * classes`).
    pub records: usize,
}

/// Records whose prosecutor risk `1/f` falls in one band: the band holds
/// class sizes `min_size..=max_size`, i.e. risks in
/// `[1/max_size, 1/min_size]`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RiskBand {
    /// Highest risk in the band, `1/min_size`.
    pub highest_risk: f64,
    /// Lowest risk in the band, `1/max_size` (0 for the last, open band).
    pub lowest_risk: f64,
    /// Smallest class size in the band.
    pub min_size: usize,
    /// Largest class size in the band (`None`: unbounded).
    pub max_size: Option<usize>,
    /// Classes in the band.
    pub classes: usize,
    /// Records in the band.
    pub records: usize,
    /// `records / all records` (0 without records).
    pub share: f64,
}

/// The largest class size of each risk band: `[1, 0.5]`, `[0.2, 0.5)`,
/// `[0.1, 0.2)`, `[0.05, 0.1)`, ... down to `[0.001, 0.002)`, then
/// everything below. Class sizes rather than risks bound the bands, so a
/// record's band never depends on rounding `1/f`.
const BAND_MAX_SIZES: [usize; 9] = [2, 5, 10, 20, 50, 100, 200, 500, 1000];

/// Prosecutor risk of a sample with class sizes `sizes` (El Emam & Dankar
/// 2008, section "prosecutor re-identification"): record risk `1/f_j`.
/// Classes of size 0 are ignored.
pub fn prosecutor_risk(sizes: &[usize], threshold: f64) -> AttackerRisk {
    let pairs: Vec<(usize, u64)> = sizes
        .iter()
        .filter(|&&f| f > 0)
        .map(|&f| (f, f as u64))
        .collect();
    attacker_risk(&pairs, threshold)
}

/// Journalist risk (El Emam & Dankar 2008, "journalist re-identification"):
/// record risk `1/F_j`, where `population[j]` is the size of the population
/// class that sample class `j` (of size `sample[j]`) belongs to.
///
/// The `average` is the mean over sample records, `(1/n) Σ_j f_j / F_j`;
/// ARX's summary reports the larger of that and `J / Σ_j F_j`.
///
/// # Errors
/// [`Error::Data`] (column `quasi-identifiers`) when the two slices differ
/// in length, or a population class is smaller than its sample class (the
/// sample must be a subset of the population), by count.
pub fn journalist_risk(
    sample: &[usize],
    population: &[u64],
    threshold: f64,
) -> Result<AttackerRisk> {
    Ok(attacker_risk(&paired(sample, population)?, threshold))
}

/// Marketer risk (El Emam & Dankar 2008, "marketer re-identification"): the
/// expected share of records re-identified when every record is matched,
/// `(1/n) Σ_j f_j / F_j`; without a population, `J / n` (the number of
/// classes over records). 0 without records.
///
/// # Errors
/// As [`journalist_risk`].
pub fn marketer_risk(sample: &[usize], population: Option<&[u64]>) -> Result<f64> {
    let pairs = match population {
        Some(p) => paired(sample, p)?,
        None => sample
            .iter()
            .filter(|&&f| f > 0)
            .map(|&f| (f, f as u64))
            .collect(),
    };
    Ok(attacker_risk(&pairs, 0.0).average)
}

/// Records in classes of size 1.
pub fn sample_uniques(sizes: &[usize]) -> SampleUniques {
    let n: usize = sizes.iter().sum();
    let records = sizes.iter().filter(|&&f| f == 1).count();
    SampleUniques {
        records,
        share: ratio(records, n),
    }
}

/// The class-size histogram: for every size that occurs, how many classes
/// have it, ascending by size (the "frequencies of frequencies" the
/// population models read).
pub fn class_size_histogram(sizes: &[usize]) -> Vec<ClassSizeCount> {
    let mut sorted: Vec<usize> = sizes.iter().copied().filter(|&f| f > 0).collect();
    sorted.sort_unstable();
    let mut out: Vec<ClassSizeCount> = Vec::new();
    for f in sorted {
        match out.last_mut() {
            Some(last) if last.size == f => {
                last.classes += 1;
                last.records += f;
            }
            _ => out.push(ClassSizeCount {
                size: f,
                classes: 1,
                records: f,
            }),
        }
    }
    out
}

/// Records and classes per prosecutor risk band (see [`RiskBand`]); every
/// band is listed, empty ones too, highest risk first.
pub fn risk_bands(sizes: &[usize]) -> Vec<RiskBand> {
    let n: usize = sizes.iter().sum();
    let mut bands: Vec<RiskBand> = Vec::with_capacity(BAND_MAX_SIZES.len() + 1);
    let mut min_size = 1;
    for max in BAND_MAX_SIZES.iter().map(|&m| Some(m)).chain([None]) {
        bands.push(RiskBand {
            highest_risk: 1.0 / min_size as f64,
            lowest_risk: max.map_or(0.0, |m| 1.0 / m as f64),
            min_size,
            max_size: max,
            classes: 0,
            records: 0,
            share: 0.0,
        });
        min_size = max.map_or(0, |m| m + 1);
    }
    for &f in sizes.iter().filter(|&&f| f > 0) {
        let i = BAND_MAX_SIZES
            .iter()
            .position(|&m| f <= m)
            .unwrap_or(BAND_MAX_SIZES.len());
        bands[i].classes += 1;
        bands[i].records += f;
    }
    for b in &mut bands {
        b.share = ratio(b.records, n);
    }
    bands
}

/// `(f_j, F_j)` pairs, checked: equal lengths, `F_j >= f_j`.
fn paired(sample: &[usize], population: &[u64]) -> Result<Vec<(usize, u64)>> {
    if sample.len() != population.len() {
        return Err(Error::data(
            QI_COLUMNS,
            format!(
                "{} sample classes but {} population class sizes; give one population size per sample class",
                sample.len(),
                population.len()
            ),
        ));
    }
    let smaller = sample
        .iter()
        .zip(population)
        .filter(|(&f, &pop)| (f as u64) > pop)
        .count();
    if smaller > 0 {
        return Err(Error::data(
            QI_COLUMNS,
            format!(
                "{smaller} sample classes are larger than their population class; the sample must be a subset of the population"
            ),
        ));
    }
    Ok(sample
        .iter()
        .zip(population)
        .filter(|(&f, _)| f > 0)
        .map(|(&f, &pop)| (f, pop))
        .collect())
}

/// What [`Error::Data`] names when the fault lies in the QI combination as a
/// whole rather than in one column.
pub(crate) const QI_COLUMNS: &str = "quasi-identifiers";

/// The risk summary of `(f_j, F_j)` pairs, `F_j >= f_j > 0`.
fn attacker_risk(pairs: &[(usize, u64)], threshold: f64) -> AttackerRisk {
    let n: usize = pairs.iter().map(|&(f, _)| f).sum();
    let smallest = pairs.iter().map(|&(_, pop)| pop).min();
    let sum: f64 = pairs.iter().map(|&(f, pop)| f as f64 / pop as f64).sum();
    let above: usize = pairs
        .iter()
        .filter(|&&(_, pop)| 1.0 / pop as f64 > threshold)
        .map(|&(f, _)| f)
        .sum();
    AttackerRisk {
        highest: smallest.map_or(0.0, |s| 1.0 / s as f64),
        average: if n == 0 { 0.0 } else { sum / n as f64 },
        threshold,
        records_above_threshold: above,
        share_above_threshold: ratio(above, n),
    }
}

fn ratio(part: usize, whole: usize) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prosecutor_risk_by_hand() {
        // Classes 1, 1, 2, 4: n = 8, J = 4.
        let r = prosecutor_risk(&[1, 2, 1, 4], 0.3);
        assert_eq!(r.highest, 1.0);
        assert_eq!(r.average, 4.0 / 8.0);
        // Risks 1, 1, 0.5, 0.5 exceed 0.3; the four at 0.25 do not.
        assert_eq!(r.records_above_threshold, 4);
        assert_eq!(r.share_above_threshold, 0.5);
        // A threshold equal to a risk is not exceeded: 1/k with k = 2.
        assert_eq!(
            prosecutor_risk(&[1, 2, 1, 4], 0.5).records_above_threshold,
            2
        );
        let empty = prosecutor_risk(&[], 0.2);
        assert_eq!(
            (empty.highest, empty.average, empty.share_above_threshold),
            (0.0, 0.0, 0.0)
        );
    }

    #[test]
    fn journalist_and_marketer_by_hand() {
        // f = (1, 2, 3), F = (4, 2, 10): risks 1/4, 1/2, 1/10.
        let r = journalist_risk(&[1, 2, 3], &[4, 2, 10], 0.2).unwrap();
        assert_eq!(r.highest, 0.5);
        // (1/4 + 2/2 + 3/10) / 6 = 1.55 / 6
        assert!((r.average - 1.55 / 6.0).abs() < 1e-15);
        assert_eq!(r.records_above_threshold, 3); // 1 at 1/4, 2 at 1/2
        let m = marketer_risk(&[1, 2, 3], Some(&[4, 2, 10])).unwrap();
        assert!((m - 1.55 / 6.0).abs() < 1e-15);
        // Without a population: J / n = 3 / 6.
        assert_eq!(marketer_risk(&[1, 2, 3], None).unwrap(), 0.5);
    }

    #[test]
    fn population_smaller_than_sample_is_an_error_by_count() {
        let e = journalist_risk(&[1, 5, 3], &[4, 2, 2], 0.2)
            .unwrap_err()
            .to_string();
        assert!(e.contains("2 sample classes are larger"), "{e}");
        assert!(journalist_risk(&[1], &[1, 2], 0.2).is_err());
        assert!(marketer_risk(&[3], Some(&[2])).is_err());
    }

    #[test]
    fn uniques_histogram_and_bands_by_hand() {
        let sizes = [1, 3, 1, 2, 3, 7, 1200];
        let u = sample_uniques(&sizes);
        // n = 1217, two classes of size 1.
        assert_eq!(u.records, 2);
        assert!((u.share - 2.0 / 1217.0).abs() < 1e-15);
        let h = class_size_histogram(&sizes);
        let bars: Vec<(usize, usize, usize)> =
            h.iter().map(|b| (b.size, b.classes, b.records)).collect();
        assert_eq!(
            bars,
            [(1, 2, 2), (2, 1, 2), (3, 2, 6), (7, 1, 7), (1200, 1, 1200)]
        );
        let b = risk_bands(&sizes);
        assert_eq!(b.len(), 10);
        // [0.5, 1]: sizes 1, 1, 2 -> 4 records; [0.2, 0.5): 3, 3 -> 6;
        // [0.1, 0.2): 7; the last band (risk < 0.001): 1200.
        assert_eq!((b[0].classes, b[0].records), (3, 4));
        assert_eq!((b[1].classes, b[1].records), (2, 6));
        assert_eq!((b[2].classes, b[2].records), (1, 7));
        assert_eq!((b[9].classes, b[9].records, b[9].max_size), (1, 1200, None));
        assert_eq!((b[1].highest_risk, b[1].lowest_risk), (1.0 / 3.0, 0.2));
        assert_eq!(b.iter().map(|b| b.records).sum::<usize>(), 1217);
        assert_eq!(b[9].lowest_risk, 0.0);
    }
}
