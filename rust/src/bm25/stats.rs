//! The statistics a query scores with (N, average length, df over the documents it counts) and
//! the tf part of each posting's score.

use super::{Base, Bm25Index, Bm25Params};
use crate::error::{CoreError, CoreResult};

impl Bm25Index {
    /// The statistics to score with over the documents `seen` marks (each live one counted),
    /// or over every live document (`None`, or a mask holding every live document: then the
    /// index's own, so the scores are bit for bit those of a search without a mask).
    pub(super) fn stats<'m>(&self, seen: Option<&'m [bool]>) -> CoreResult<Stats<'m>> {
        let whole = Stats {
            seen: None,
            n: f64::from(self.live_count),
            avgdl: 0.0,
        };
        let Some(mask) = seen else {
            return Ok(whole);
        };
        if mask.len() != self.doc_len.len() {
            return Err(CoreError::invalid(
                "seen",
                "a bool mask must have one entry per position",
            ));
        }
        let (mut n, mut total) = (0_u32, 0_u64);
        for ((&m, &live), &dl) in mask.iter().zip(&self.live).zip(&self.doc_len) {
            if m && live {
                n += 1;
                total += u64::from(dl);
            }
        }
        if n == self.live_count {
            return Ok(whole);
        }
        let avgdl = if total == 0 {
            1.0
        } else {
            total as f64 / f64::from(n)
        };
        Ok(Stats {
            seen: Some(mask),
            n: f64::from(n),
            avgdl,
        })
    }

    /// Documents holding term `t` among those `stats` counts.
    pub(super) fn df_in(&self, base: &Base<'_>, t: usize, stats: &Stats<'_>) -> usize {
        let Some(mask) = stats.seen else {
            return self.df(base, t);
        };
        let counted = |d: u32| mask.get(d as usize).copied().unwrap_or(false);
        let (docs, _) = base.term(t);
        let in_base = docs
            .iter()
            .filter(|&&d| counted(d) && self.is_live(d as usize))
            .count();
        in_base
            + self
                .postings
                .get(t)
                .map_or(0, |p| p.docs.iter().filter(|&&d| counted(d)).count())
    }

    /// Lucene idf of term `t` under `stats`.
    pub(super) fn idf_in(&self, base: &Base<'_>, t: usize, stats: &Stats<'_>) -> f64 {
        let df = self.df_in(base, t, stats) as f64;
        (1.0 + (stats.n - df + 0.5) / (df + 0.5)).ln()
    }

    /// The tf part of a posting's score under `stats` (its average length, when not the
    /// index's own).
    #[inline]
    pub(super) fn weight_in(&self, doc: u32, tf: u32, stats: &Stats<'_>) -> f32 {
        if stats.seen.is_none() {
            return self.weight(doc, tf);
        }
        let Bm25Params { k1, b } = self.params;
        let dl = self.doc_len.get(doc as usize).copied().unwrap_or(0);
        let norm = k1 * (1.0 - b + b * f64::from(dl) / stats.avgdl);
        let tf = f64::from(tf);
        (tf * (k1 + 1.0) / (tf + norm)) as f32
    }

    /// The tf part of a posting's score: `tf·(k1+1) / (tf + norm)`, as f32.
    #[inline]
    pub(super) fn weight(&self, doc: u32, tf: u32) -> f32 {
        let tf = f64::from(tf);
        let norm = self
            .norm
            .get(doc as usize)
            .copied()
            .unwrap_or(f64::INFINITY);
        (tf * (self.params.k1 + 1.0) / (tf + norm)) as f32
    }
}

/// What a query's scores are computed with: N (documents counted), their average length and,
/// per term, how many of them hold it. By default every live document; with a mask (`seen`),
/// the live documents it marks, so that what one asker sees scores the same whatever else the
/// index holds (no other project's words move its idf).
pub(super) struct Stats<'m> {
    pub(super) seen: Option<&'m [bool]>,
    pub(super) n: f64,
    pub(super) avgdl: f64, // (of the documents `seen` marks; unused without it)
}
