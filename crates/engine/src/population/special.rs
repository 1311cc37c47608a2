//! The special functions the population-uniqueness models need: log-gamma,
//! digamma and trigamma for positive arguments.
//!
//! `ln_gamma` is Lanczos' approximation (g = 7, 9 coefficients, as in
//! Numerical Recipes, 3rd ed., section 6.1; relative error below 1e-15);
//! digamma and trigamma shift the argument above 15 with their recurrences,
//! then use the asymptotic (Stirling) series (Abramowitz & Stegun 6.3.18,
//! 6.4.12), as ARX's `Gamma` does after Minka's Lightspeed toolbox.

/// `ln Γ(x)` for `x > 0`; NaN otherwise.
pub(crate) fn ln_gamma(x: f64) -> f64 {
    const G: f64 = 7.0;
    const C: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x.is_nan() || x <= 0.0 {
        return f64::NAN;
    }
    if x < 0.5 {
        // Reflection: Γ(x) Γ(1-x) = π / sin(πx).
        return (std::f64::consts::PI / (std::f64::consts::PI * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let mut a = C[0];
    let t = x + G + 0.5;
    for (i, &c) in C.iter().enumerate().skip(1) {
        a += c / (x + i as f64);
    }
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + a.ln()
}

/// Digamma `ψ(x) = d/dx ln Γ(x)` for `x > 0`; NaN otherwise.
pub(crate) fn digamma(mut x: f64) -> f64 {
    if x.is_nan() || x <= 0.0 || x.is_infinite() {
        return f64::NAN;
    }
    let mut result = 0.0;
    // ψ(x) = ψ(x+1) - 1/x
    while x < 15.0 {
        result -= 1.0 / x;
        x += 1.0;
    }
    let r = 1.0 / (x * x);
    result + x.ln()
        - 0.5 / x
        - r * (1.0 / 12.0
            - r * (1.0 / 120.0 - r * (1.0 / 252.0 - r * (1.0 / 240.0 - r * (1.0 / 132.0)))))
}

/// Trigamma `ψ₁(x) = d²/dx² ln Γ(x)` for `x > 0`; NaN otherwise.
pub(crate) fn trigamma(mut x: f64) -> f64 {
    if x.is_nan() || x <= 0.0 || x.is_infinite() {
        return f64::NAN;
    }
    let mut result = 0.0;
    // ψ₁(x) = ψ₁(x+1) + 1/x²
    while x < 15.0 {
        result += 1.0 / (x * x);
        x += 1.0;
    }
    let r = 1.0 / (x * x);
    // 1/x + 1/(2x²) + Σ B_2k / x^(2k+1)
    result
        + 1.0 / x
        + 0.5 * r
        + (r / x)
            * (1.0 / 6.0
                - r * (1.0 / 30.0 - r * (1.0 / 42.0 - r * (1.0 / 30.0 - r * (5.0 / 66.0)))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gamma_family_matches_known_values() {
        // ln Γ(n) = ln (n-1)!
        let mut fact = 1.0f64;
        for n in 1..30 {
            assert!(
                (ln_gamma(n as f64) - fact.ln()).abs() < 1e-12 * (1.0 + fact.ln()),
                "{n}"
            );
            fact *= n as f64;
        }
        // Γ(1/2) = √π
        assert!((ln_gamma(0.5) - std::f64::consts::PI.sqrt().ln()).abs() < 1e-14);
        // ψ(1) = -γ, ψ(n+1) = ψ(n) + 1/n, ψ(1/2) = -γ - 2 ln 2
        let euler = 0.577_215_664_901_532_9;
        assert!((digamma(1.0) + euler).abs() < 1e-13);
        assert!((digamma(0.5) + euler + 2.0 * 2f64.ln()).abs() < 1e-13);
        assert!((digamma(11.0) - digamma(10.0) - 0.1).abs() < 1e-14);
        // ψ₁(1) = π²/6, ψ₁(1/2) = π²/2
        let pi2 = std::f64::consts::PI * std::f64::consts::PI;
        assert!((trigamma(1.0) - pi2 / 6.0).abs() < 1e-13);
        assert!((trigamma(0.5) - pi2 / 2.0).abs() < 1e-12);
        // Derivatives by central differences.
        for x in [0.3, 1.7, 12.5, 1e4] {
            let h = 1e-5 * x;
            let d = (ln_gamma(x + h) - ln_gamma(x - h)) / (2.0 * h);
            assert!(
                (d - digamma(x)).abs() < 1e-6 * (1.0 + digamma(x).abs()),
                "{x}"
            );
            let d2 = (digamma(x + h) - digamma(x - h)) / (2.0 * h);
            assert!((d2 - trigamma(x)).abs() < 1e-6 * trigamma(x), "{x}");
        }
        assert!(ln_gamma(0.0).is_nan() && digamma(-1.0).is_nan() && trigamma(f64::NAN).is_nan());
    }
}
