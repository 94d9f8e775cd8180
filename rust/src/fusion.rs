//! Rank fusion: weighted reciprocal-rank fusion (RRF) and normalised score fusion.
//!
//! Documents are identified by `i64` keys. The store passes row positions, but any integer id
//! works; keys are only hashed and compared, never used as indices.
//!
//! Conventions shared by both fusions:
//! - A list is ranked best first; the rank of an entry is its 1-based position in the list as
//!   given. A key repeated within one list counts once, at its first (best) position; later
//!   repeats are ignored but still occupy their positions.
//! - Output is deterministic: fused score descending, then the best (lowest) rank the document
//!   reached in any list, then key ascending. Scores are summed in list order, so a reference
//!   implementation that adds in the same order gets bit-identical scores.

use std::cmp::Ordering;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use crate::error::{CoreError, CoreResult};

/// Largest accepted |raw score| in score fusion, so min-max ranges and z-score variances
/// cannot overflow to infinity.
pub const MAX_ABS_SCORE: f64 = 1e100;

/// The fused ranking: keys best first, with their fused scores.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Fused {
    pub ids: Vec<i64>,
    pub scores: Vec<f64>,
}

/// How [`score_fusion`] puts each list's raw scores on a common scale.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Normalization {
    /// `(s - min) / (max - min)`; a list whose scores are all equal maps to 1.0; a document
    /// missing from a list gets 0 from it.
    MinMax,
    /// `(s - mean) / std` (population std); a constant list maps to 0.0; a document missing from
    /// a list gets that list's minimum z-score (0 for an empty list).
    ZScore,
}

impl Normalization {
    /// Parse `"minmax"` or `"zscore"`.
    pub fn from_name(name: &str) -> CoreResult<Self> {
        match name {
            "minmax" => Ok(Self::MinMax),
            "zscore" => Ok(Self::ZScore),
            _ => Err(CoreError::invalid(
                "method",
                format!("must be 'minmax' or 'zscore', got {name:?}"),
            )),
        }
    }
}

/// Multiply-rotate hasher for `i64` keys: std's SipHash costs more than the fusion itself.
#[derive(Debug, Default, Clone, Copy)]
struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    fn write_i64(&mut self, n: i64) {
        self.write_u64(n as u64);
    }
}

type KeyMap<V> = HashMap<i64, V, BuildHasherDefault<KeyHasher>>;

/// One document while fusing: accumulated score, best 1-based rank, last list that counted it.
#[derive(Debug, Clone, Copy)]
struct Acc {
    score: f64,
    best_rank: usize,
    last_list: usize,
}

/// Weighted reciprocal-rank fusion: `score(d) = Σ_l w_l / (k + rank_l(d))`, ranks from 1.
///
/// `weights = None` means 1.0 for every list. Returns at most `limit` documents, ordered by
/// score desc, best rank asc, key asc. Errors name the argument: `k` (> 0, finite), `weights`
/// (one per list, finite, >= 0, not all 0), `limit` (>= 1).
pub fn rrf(lists: &[Vec<i64>], weights: Option<&[f64]>, k: f64, limit: usize) -> CoreResult<Fused> {
    if !(k.is_finite() && k > 0.0) {
        return Err(CoreError::invalid(
            "k",
            format!("must be finite and > 0, got {k}"),
        ));
    }
    check_limit(limit)?;
    let weights = resolve_weights(weights, lists.len())?;
    let capacity = lists.iter().map(Vec::len).max().unwrap_or(0);
    let mut acc: KeyMap<Acc> = KeyMap::with_capacity_and_hasher(capacity * 2, Default::default());
    for (l, (list, &w)) in lists.iter().zip(&weights).enumerate() {
        for (pos, &id) in list.iter().enumerate() {
            let rank = pos + 1;
            let gain = w / (k + rank as f64);
            let entry = acc.entry(id).or_insert(Acc {
                score: 0.0,
                best_rank: rank,
                last_list: usize::MAX,
            });
            if entry.last_list == l {
                continue; // a repeat within this list: only its first position counts
            }
            entry.last_list = l;
            entry.score += gain;
            entry.best_rank = entry.best_rank.min(rank);
        }
    }
    Ok(top(
        acc.into_iter()
            .map(|(id, a)| (id, a.score, a.best_rank))
            .collect(),
        limit,
    ))
}

/// [`rrf`] over many queries at once; every query shares `weights`, `k` and `limit`.
pub fn rrf_batch(
    queries: &[Vec<Vec<i64>>],
    weights: Option<&[f64]>,
    k: f64,
    limit: usize,
) -> CoreResult<Vec<Fused>> {
    queries
        .iter()
        .map(|lists| rrf(lists, weights, k, limit))
        .collect()
}

/// Score fusion: normalise each list's raw scores (see [`Normalization`]), then combine them
/// convexly with the weights rescaled to sum to 1: `score(d) = Σ_l (w_l / Σw) · norm_l(d)`.
///
/// `scores[l][i]` is the raw score of `lists[l][i]`; for a key repeated within a list only its
/// first entry counts (before normalisation). Ordering and errors as in [`rrf`], plus `scores`
/// (one per id, finite, |s| <= [`MAX_ABS_SCORE`]).
pub fn score_fusion(
    lists: &[Vec<i64>],
    scores: &[Vec<f64>],
    weights: Option<&[f64]>,
    method: Normalization,
    limit: usize,
) -> CoreResult<Fused> {
    check_limit(limit)?;
    if scores.len() != lists.len() {
        return Err(CoreError::invalid(
            "scores",
            format!("has {} lists but lists has {}", scores.len(), lists.len()),
        ));
    }
    for (l, (ids, raw)) in lists.iter().zip(scores).enumerate() {
        if ids.len() != raw.len() {
            return Err(CoreError::invalid(
                "scores",
                format!("list {l} has {} scores for {} ids", raw.len(), ids.len()),
            ));
        }
        if let Some(bad) = raw
            .iter()
            .find(|s| !(s.is_finite() && s.abs() <= MAX_ABS_SCORE))
        {
            return Err(CoreError::invalid(
                "scores",
                format!("must be finite with |score| <= 1e100, got {bad} in list {l}"),
            ));
        }
    }
    let mut weights = resolve_weights(weights, lists.len())?;
    let mut total: f64 = weights.iter().sum();
    if total.is_infinite() {
        // Finite weights whose sum overflows (two of 1e308) gave every `w / total` 0: the
        // same proportions, read at the scale of the largest.
        let largest = weights.iter().copied().fold(0.0_f64, f64::max);
        weights.iter_mut().for_each(|w| *w /= largest);
        total = weights.iter().sum();
    }

    // Each document gets a slot; `seen_in[slot]` is the last list it appeared in.
    let mut slots: KeyMap<usize> = KeyMap::default();
    let (mut ids, mut best_rank, mut seen_in) = (Vec::new(), Vec::new(), Vec::new());
    let mut per_list: Vec<(Vec<(usize, f64)>, f64)> = Vec::with_capacity(lists.len());
    for (l, (list, raw)) in lists.iter().zip(scores).enumerate() {
        let mut entries: Vec<(usize, f64)> = Vec::with_capacity(list.len());
        for (pos, (&id, &s)) in list.iter().zip(raw).enumerate() {
            let slot = *slots.entry(id).or_insert_with(|| {
                ids.push(id);
                best_rank.push(pos + 1);
                seen_in.push(usize::MAX);
                ids.len() - 1
            });
            if seen_in[slot] == l {
                continue; // a repeat within this list: only its first entry counts
            }
            seen_in[slot] = l;
            best_rank[slot] = best_rank[slot].min(pos + 1);
            entries.push((slot, s));
        }
        let missing = normalise(&mut entries, method);
        per_list.push((entries, missing));
    }

    // Add list by list, in order, so every document's sum has the same operation order as the
    // readable reference (missing documents add `w · missing`). `seen_in[slot] == l` now means
    // "present in list l": a document absent from l cannot have l as its last list.
    let mut fused = vec![0.0_f64; ids.len()];
    for (l, ((entries, missing), &w)) in per_list.iter().zip(&weights).enumerate() {
        let wn = w / total;
        for &(slot, norm) in entries {
            fused[slot] += wn * norm;
            seen_in[slot] = l;
        }
        if method == Normalization::ZScore {
            for (score, &last) in fused.iter_mut().zip(&seen_in) {
                if last != l {
                    *score += wn * missing;
                }
            }
        }
    }
    let rows = ids
        .into_iter()
        .zip(fused)
        .zip(best_rank)
        .map(|((id, s), r)| (id, s, r));
    Ok(top(rows.collect(), limit))
}

/// Normalise `(slot, raw)` entries in place; returns the value a missing document gets.
fn normalise(entries: &mut [(usize, f64)], method: Normalization) -> f64 {
    if entries.is_empty() {
        return 0.0;
    }
    match method {
        Normalization::MinMax => {
            let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
            for &(_, s) in entries.iter() {
                lo = lo.min(s);
                hi = hi.max(s);
            }
            let range = hi - lo;
            for e in entries.iter_mut() {
                e.1 = if range > 0.0 { (e.1 - lo) / range } else { 1.0 };
            }
            0.0
        }
        Normalization::ZScore => {
            let n = entries.len() as f64;
            let mut sum = 0.0;
            for &(_, s) in entries.iter() {
                sum += s;
            }
            let mean = sum / n;
            let mut sq = 0.0;
            for &(_, s) in entries.iter() {
                sq += (s - mean) * (s - mean);
            }
            let std = (sq / n).sqrt();
            let mut lowest = f64::INFINITY;
            for e in entries.iter_mut() {
                e.1 = if std > 0.0 { (e.1 - mean) / std } else { 0.0 };
                lowest = lowest.min(e.1);
            }
            lowest
        }
    }
}

fn check_limit(limit: usize) -> CoreResult<()> {
    if limit == 0 {
        return Err(CoreError::invalid("limit", "must be >= 1"));
    }
    Ok(())
}

/// Validate the weights (or default them to 1.0) for `n_lists` lists.
fn resolve_weights(weights: Option<&[f64]>, n_lists: usize) -> CoreResult<Vec<f64>> {
    let Some(w) = weights else {
        return Ok(vec![1.0; n_lists]);
    };
    if w.len() != n_lists {
        return Err(CoreError::invalid(
            "weights",
            format!("has {} entries but there are {n_lists} lists", w.len()),
        ));
    }
    if let Some(bad) = w.iter().find(|x| !(x.is_finite() && **x >= 0.0)) {
        return Err(CoreError::invalid(
            "weights",
            format!("must be finite and >= 0, got {bad}"),
        ));
    }
    if n_lists > 0 && w.iter().all(|&x| x == 0.0) {
        return Err(CoreError::invalid("weights", "must not all be 0"));
    }
    Ok(w.to_vec())
}

/// Deterministic order: score desc, best rank asc, key asc. Scores are never NaN here.
fn order(a: &(i64, f64, usize), b: &(i64, f64, usize)) -> Ordering {
    b.1.partial_cmp(&a.1)
        .unwrap_or(Ordering::Equal)
        .then(a.2.cmp(&b.2))
        .then(a.0.cmp(&b.0))
}

/// Keep the best `limit` rows in [`order`]; partial selection first when only a few are wanted.
fn top(mut rows: Vec<(i64, f64, usize)>, limit: usize) -> Fused {
    if limit < rows.len() {
        rows.select_nth_unstable_by(limit - 1, order);
        rows.truncate(limit);
    }
    rows.sort_unstable_by(order);
    Fused {
        ids: rows.iter().map(|r| r.0).collect(),
        scores: rows.iter().map(|r| r.1).collect(),
    }
}

#[cfg(test)]
mod tests;
