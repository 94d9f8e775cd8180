//! Decayed importance: a bounded ranking signal computed at query time, never stored.
//!
//! For each memory:
//!
//! ```text
//! days    = max(0, now - last_accessed) / 86400          (fractional; a future time is 0 days)
//! decayed = importance · 0.5^(days / half_life_days) · (1 + boost · ln(1 + access_count))
//! result  = clamp(decayed, min_importance, 1.0)
//! ```
//!
//! Unlike upstream (whole days, no upper clamp, so five accesses could triple an importance of
//! 0.5 to 1.5), days are continuous and the result is capped at 1.0: decay is a multiplier on
//! relevance and must stay on the same [0, 1] scale as the stored importance. The floor keeps an
//! unused memory findable: it fades in the ranking but never reaches zero.

use crate::error::{CoreError, CoreResult};

const SECONDS_PER_DAY: f64 = 86_400.0;

/// Access counts below this use a precomputed `ln(1 + n)`; almost every memory falls here.
const LN_TABLE: usize = 256;

/// The scalar knobs of [`decayed_importance`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DecayParams {
    /// Current time, unix seconds.
    pub now: f64,
    /// Days after which an unaccessed memory's importance has halved (> 0).
    pub half_life_days: f64,
    /// Weight of the `ln(1 + access_count)` reinforcement (>= 0).
    pub access_boost_factor: f64,
    /// Floor of the result, in [0, 1].
    pub min_importance: f64,
}

impl DecayParams {
    /// Check every knob; errors name the argument.
    pub fn validate(&self) -> CoreResult<()> {
        if !self.now.is_finite() {
            return Err(CoreError::invalid("now", "must be finite"));
        }
        if !(self.half_life_days.is_finite() && self.half_life_days > 0.0) {
            return Err(CoreError::invalid(
                "half_life_days",
                "must be finite and > 0",
            ));
        }
        if !(self.access_boost_factor.is_finite() && self.access_boost_factor >= 0.0) {
            return Err(CoreError::invalid(
                "access_boost_factor",
                "must be finite and >= 0",
            ));
        }
        if !(0.0..=1.0).contains(&self.min_importance) {
            return Err(CoreError::invalid("min_importance", "must be in [0, 1]"));
        }
        Ok(())
    }
}

/// Decayed importance for every row (see the module docs for the formula), as `f64`.
///
/// Errors name the argument: lengths must match `importance`; `importance` must lie in [0, 1],
/// `last_accessed` must be finite, `access_count` must be >= 0; the scalars as in
/// [`DecayParams`].
pub fn decayed_importance(
    importance: &[f64],
    last_accessed: &[f64],
    access_count: &[i64],
    params: &DecayParams,
) -> CoreResult<Vec<f64>> {
    check_lengths(importance.len(), last_accessed.len(), access_count.len())?;
    let mut out = vec![0.0; importance.len()];
    decay_into(importance, last_accessed, access_count, params, &mut out)?;
    Ok(out)
}

/// Check that the row arrays have the length of `importance`; errors name the argument.
pub fn check_lengths(
    importance: usize,
    last_accessed: usize,
    access_count: usize,
) -> CoreResult<()> {
    for (arg, len) in [
        ("last_accessed", last_accessed),
        ("access_count", access_count),
    ] {
        if len != importance {
            return Err(CoreError::invalid(
                arg,
                format!("has length {len} but importance has length {importance}"),
            ));
        }
    }
    Ok(())
}

/// [`decayed_importance`] writing into `out` (the inputs' length), so a caller can work chunk
/// by chunk into one preallocated buffer. On error `out` holds garbage.
pub fn decay_into(
    importance: &[f64],
    last_accessed: &[f64],
    access_count: &[i64],
    params: &DecayParams,
    out: &mut [f64],
) -> CoreResult<()> {
    params.validate()?;
    check_lengths(importance.len(), last_accessed.len(), access_count.len())?;
    if out.len() != importance.len() {
        return Err(CoreError::invalid(
            "out",
            "must have the length of importance",
        ));
    }
    let boost = params.access_boost_factor;
    let ln_table: Vec<f64> = (0..LN_TABLE)
        .map(|c| 1.0 + boost * (c as f64).ln_1p())
        .collect();
    let half_life_seconds = SECONDS_PER_DAY * params.half_life_days;

    // One branch-free pass computes and records whether every row was valid; the slow search
    // for the offending value only runs when one was not.
    let mut valid = true;
    let rows = importance.iter().zip(last_accessed).zip(access_count);
    for (slot, ((&imp, &seen), &count)) in out.iter_mut().zip(rows) {
        valid &= (0.0..=1.0).contains(&imp) & seen.is_finite() & (count >= 0);
        let reinforcement = match usize::try_from(count) {
            Ok(c) if c < LN_TABLE => ln_table[c],
            _ => 1.0 + boost * (count as f64).ln_1p(),
        };
        let age = (params.now - seen).max(0.0);
        let fade = (-(age / half_life_seconds)).exp2();
        // 0 × an infinite boost is NaN, which `clamp` passes through: a memory of no
        // importance stays at the floor.
        let decayed = imp * fade * reinforcement;
        *slot = if decayed.is_nan() {
            params.min_importance
        } else {
            decayed.clamp(params.min_importance, 1.0)
        };
    }
    if valid {
        return Ok(());
    }
    if let Some(bad) = importance.iter().find(|i| !(0.0..=1.0).contains(*i)) {
        return Err(CoreError::invalid(
            "importance",
            format!("must be in [0, 1], got {bad}"),
        ));
    }
    if let Some(bad) = access_count.iter().find(|c| **c < 0) {
        return Err(CoreError::invalid(
            "access_count",
            format!("must be >= 0, got {bad}"),
        ));
    }
    Err(CoreError::invalid("last_accessed", "must be finite"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: f64 = 1_700_000_000.0;

    fn params(half_life_days: f64, boost: f64, floor: f64) -> DecayParams {
        DecayParams {
            now: NOW,
            half_life_days,
            access_boost_factor: boost,
            min_importance: floor,
        }
    }

    fn one(imp: f64, days_ago: f64, count: i64, p: &DecayParams) -> f64 {
        decayed_importance(&[imp], &[NOW - days_ago * SECONDS_PER_DAY], &[count], p).unwrap()[0]
    }

    #[test]
    fn half_life_halves_exactly() {
        let p = params(90.0, 0.0, 0.0);
        assert_eq!(one(0.8, 90.0, 0, &p), 0.4);
        assert_eq!(one(0.8, 180.0, 0, &p), 0.2);
        assert_eq!(one(0.8, 0.0, 0, &p), 0.8);
    }

    #[test]
    fn future_access_does_not_grow() {
        let p = params(90.0, 0.0, 0.0);
        assert_eq!(one(0.6, -30.0, 0, &p), 0.6);
    }

    #[test]
    fn boost_floor_and_cap() {
        let p = params(90.0, 1.2, 0.05);
        let boosted = one(0.3, 0.0, 1, &p);
        assert!((boosted - 0.3 * (1.0 + 1.2 * 2f64.ln())).abs() < 1e-15);
        assert_eq!(one(0.9, 0.0, 5, &p), 1.0);
        assert_eq!(one(0.5, 10_000.0, 0, &p), 0.05);
        assert_eq!(one(0.0, 0.0, 0, &p), 0.05);
        // counts past the lookup table follow the same curve
        let big = one(0.01, 0.0, 1000, &p);
        assert!((big - 0.01 * (1.0 + 1.2 * 1001f64.ln())).abs() < 1e-15);
    }

    #[test]
    fn errors_name_the_argument() {
        let p = params(90.0, 1.2, 0.05);
        let arg = |r: CoreResult<Vec<f64>>| match r.unwrap_err() {
            CoreError::InvalidArgument { arg, .. } | CoreError::TimeLimitExceeded { arg, .. } => {
                arg
            }
            CoreError::Corrupt(_) | CoreError::Damaged(_) => "corrupt",
        };
        assert_eq!(
            arg(decayed_importance(&[0.5], &[], &[0], &p)),
            "last_accessed"
        );
        assert_eq!(
            arg(decayed_importance(&[0.5], &[NOW], &[], &p)),
            "access_count"
        );
        assert_eq!(
            arg(decayed_importance(&[1.5], &[NOW], &[0], &p)),
            "importance"
        );
        assert_eq!(
            arg(decayed_importance(&[f64::NAN], &[NOW], &[0], &p)),
            "importance"
        );
        assert_eq!(
            arg(decayed_importance(&[0.5], &[f64::INFINITY], &[0], &p)),
            "last_accessed"
        );
        assert_eq!(
            arg(decayed_importance(&[0.5], &[NOW], &[-1], &p)),
            "access_count"
        );
        assert_eq!(
            arg(decayed_importance(&[], &[], &[], &params(0.0, 1.0, 0.0))),
            "half_life_days"
        );
        assert_eq!(
            arg(decayed_importance(&[], &[], &[], &params(1.0, -1.0, 0.0))),
            "access_boost_factor"
        );
        assert_eq!(
            arg(decayed_importance(&[], &[], &[], &params(1.0, 1.0, 1.5))),
            "min_importance"
        );
        let mut bad_now = p;
        bad_now.now = f64::NAN;
        assert_eq!(arg(decayed_importance(&[], &[], &[], &bad_now)), "now");
    }
}
