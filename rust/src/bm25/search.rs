//! BM25 queries: accumulate postings into a dense score buffer, then select the top k.

use rayon::prelude::*;

use super::stats::Stats;
use super::{checked_position, Base, Bm25Index};
use crate::error::{CoreError, CoreResult};
use crate::topk::TopK;

/// Block size of the dense top-k scan.
const BLOCK: usize = 32;

/// Reusable per-thread query state: the dense score buffer and the positions it touched.
#[derive(Debug, Default)]
struct Scratch {
    scores: Vec<f32>,
    touched: Vec<u32>,
}

thread_local! {
    /// The score buffer of single searches on this thread, kept between them: at a million
    /// positions a fresh one is 4 MB to allocate and fault in per query.
    static SCRATCH: std::cell::RefCell<Scratch> = std::cell::RefCell::new(Scratch::default());
}

impl Bm25Index {
    /// The ids of `query`'s analysed terms that the index holds (each once, in query order):
    /// whose postings a search or coverage of it reads.
    pub fn term_ids(&self, query: &str) -> Vec<u32> {
        self.query_terms(query)
            .into_iter()
            .map(|(id, _)| id)
            .collect()
    }

    /// Query term ids with their multiplicity, in order of first appearance (so scores do
    /// not depend on vocabulary ids: a rebuilt index sums in the same order, bit for bit).
    fn query_terms(&self, query: &str) -> Vec<(u32, u32)> {
        let mut terms: Vec<(u32, u32)> = Vec::new();
        for token in self.analyzer.analyze(query) {
            let Some(&id) = self.vocab.get(&token) else {
                continue;
            };
            match terms.iter_mut().find(|(t, _)| *t == id) {
                Some((_, count)) => *count += 1,
                None => terms.push((id, 1)),
            }
        }
        terms
    }

    /// Add `factor ·` each posting's tf part to its document's score (`check_live`: skip
    /// tombstoned documents; `dense`: no list of touched positions is kept).
    #[allow(clippy::too_many_arguments)]
    #[inline]
    fn accumulate(
        &self,
        docs: &[u32],
        tfs: &[u32],
        stats: &Stats<'_>,
        factor: f32,
        check_live: bool,
        dense: bool,
        scores: &mut [f32],
        touched: &mut Vec<u32>,
    ) {
        for (&d, &tf) in docs.iter().zip(tfs) {
            if check_live && !self.is_live(d as usize) {
                continue;
            }
            let Some(slot) = scores.get_mut(d as usize) else {
                continue; // (a damaged base only)
            };
            if !dense && *slot == 0.0 {
                touched.push(d);
            }
            *slot += factor * self.weight_in(d, tf, stats);
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn search_with(
        &self,
        base: &Base<'_>,
        query: &str,
        k: usize,
        allowed: Option<&[bool]>,
        ties: Option<&[i64]>,
        stats: &Stats<'_>,
        scratch: &mut Scratch,
    ) -> Vec<(u32, f32)> {
        let Scratch { scores, touched } = scratch;
        scores.resize(self.doc_len.len(), 0.0);
        let terms = self.query_terms(query);
        let work: usize = terms
            .iter()
            .map(|&(id, _)| base.term(id as usize).0.len() + self.postings[id as usize].docs.len())
            .sum();
        // Postings covering a good share of the index: accumulate branch-free and scan the
        // whole buffer once. Sparse queries: remember touched positions, never scan.
        let dense = work * 4 >= scores.len();
        let scores = scores.as_mut_slice(); // a plain slice: its pointer stays in a register
        for (id, count) in terms {
            let (base_docs, base_tfs) = base.term(id as usize);
            let postings = &self.postings[id as usize];
            let factor = (self.idf_in(base, id as usize, stats) * f64::from(count)) as f32;
            let check = self.base_tombstones;
            self.accumulate(
                base_docs, base_tfs, stats, factor, check, dense, scores, touched,
            );
            self.accumulate(
                &postings.docs,
                &postings.tfs,
                stats,
                factor,
                false,
                dense,
                scores,
                touched,
            );
        }
        let keep = |d: usize| allowed.is_none_or(|mask| mask[d]);
        let key = |d: usize| ties.map_or(d as i64, |keys| keys[d]);
        let mut best = TopK::new(k);
        if dense {
            // Skip whole blocks where no score is positive and >= the current floor; the
            // test is a branch-free OR of comparisons, which the compiler vectorises.
            for (block, chunk) in scores.chunks(BLOCK).enumerate() {
                let floor = best.floor.max(f32::from_bits(1)); // smallest positive f32
                if !chunk.iter().fold(false, |any, &s| any | (s >= floor)) {
                    continue;
                }
                for (i, &score) in chunk.iter().enumerate() {
                    let d = block * BLOCK + i;
                    if score > 0.0 && score >= best.floor && keep(d) {
                        best.offer_keyed(d as u32, key(d), score);
                    }
                }
            }
            scores.fill(0.0);
        } else {
            for &d in touched.iter() {
                let score = std::mem::take(&mut scores[d as usize]);
                if score >= best.floor && keep(d as usize) {
                    best.offer_keyed(d, key(d as usize), score);
                }
            }
            touched.clear();
        }
        best.into_sorted()
    }

    /// Top-`k` (position, score) for one query, best first; ties by position ascending.
    /// Only documents sharing a term with the query are returned. `allowed` restricts the
    /// result to those positions; `seen`, the documents N, df and avgdl count (every live one
    /// without it: see `Stats`).
    pub fn search(
        &self,
        base: &Base<'_>,
        query: &str,
        k: usize,
        allowed: Option<&[i64]>,
        seen: Option<&[bool]>,
    ) -> CoreResult<Vec<(u32, f32)>> {
        self.search_keyed(base, query, k, allowed, seen, None)
    }

    /// [`Bm25Index::search`], equal scores ordered by `ties` (one key per position,
    /// ascending: e.g. the rank of the row's id, so that indexes holding the same rows at
    /// other positions rank them alike) rather than by position, also across the cut.
    pub fn search_keyed(
        &self,
        base: &Base<'_>,
        query: &str,
        k: usize,
        allowed: Option<&[i64]>,
        seen: Option<&[bool]>,
        ties: Option<&[i64]>,
    ) -> CoreResult<Vec<(u32, f32)>> {
        check_k(k)?;
        self.check_ties(ties)?;
        let mask = self.allowed_mask(allowed)?;
        let stats = self.stats(seen)?;
        Ok(SCRATCH.with_borrow_mut(|scratch| {
            self.search_with(base, query, k, mask.as_deref(), ties, &stats, scratch)
        }))
    }

    /// The BM25 score of `query` for each of `positions` (0 where the document shares no
    /// term with it or was removed): for each, the number `search` gives it, bit for bit (the
    /// same terms summed in the same order), read by one binary search per term and position
    /// instead of a pass over every posting of the query's terms.
    pub fn scores_at(
        &self,
        base: &Base<'_>,
        query: &str,
        positions: &[i64],
        seen: Option<&[bool]>,
    ) -> CoreResult<Vec<f32>> {
        let stats = self.stats(seen)?;
        let positions = self.checked_positions(positions)?;
        let mut out = vec![0.0_f32; positions.len()];
        for (id, count) in self.query_terms(query) {
            let (base_docs, base_tfs) = base.term(id as usize);
            let held = &self.postings[id as usize];
            let factor = (self.idf_in(base, id as usize, &stats) * f64::from(count)) as f32;
            for (slot, &p) in out.iter_mut().zip(&positions) {
                if !self.is_live(p as usize) {
                    continue;
                }
                let tf = match base_docs.binary_search(&p) {
                    Ok(i) => base_tfs.get(i),
                    Err(_) => held
                        .docs
                        .binary_search(&p)
                        .ok()
                        .and_then(|i| held.tfs.get(i)),
                };
                if let Some(&tf) = tf {
                    *slot += factor * self.weight_in(p, tf, &stats);
                }
            }
        }
        Ok(out)
    }

    /// [`Bm25Index::search`] restricted by a mask over every position (`mask[p]`: whether
    /// position `p` may be returned), so a caller holding one need not list its positions.
    pub fn search_masked(
        &self,
        base: &Base<'_>,
        query: &str,
        k: usize,
        mask: &[bool],
        seen: Option<&[bool]>,
        ties: Option<&[i64]>,
    ) -> CoreResult<Vec<(u32, f32)>> {
        check_k(k)?;
        self.check_ties(ties)?;
        if mask.len() != self.doc_len.len() {
            return Err(CoreError::invalid(
                "allowed",
                "a bool mask must have one entry per position",
            ));
        }
        let stats = self.stats(seen)?;
        Ok(SCRATCH.with_borrow_mut(|scratch| {
            self.search_with(base, query, k, Some(mask), ties, &stats, scratch)
        }))
    }

    /// [`Bm25Index::search`] for many queries at once (parallel), results in query order.
    pub fn search_batch<S: AsRef<str> + Sync>(
        &self,
        base: &Base<'_>,
        queries: &[S],
        k: usize,
        allowed: Option<&[i64]>,
        seen: Option<&[bool]>,
    ) -> CoreResult<Vec<Vec<(u32, f32)>>> {
        check_k(k)?;
        let mask = self.allowed_mask(allowed)?;
        let stats = self.stats(seen)?;
        // A few chunks per worker: one score buffer per chunk, and still some load balancing.
        let chunk = queries
            .len()
            .div_ceil(4 * rayon::current_num_threads())
            .max(8);
        let per_chunk: Vec<Vec<Vec<(u32, f32)>>> = queries
            .par_chunks(chunk)
            .map(|part| {
                let mut scratch = Scratch::default();
                part.iter()
                    .map(|q| {
                        let mask = mask.as_deref();
                        self.search_with(base, q.as_ref(), k, mask, None, &stats, &mut scratch)
                    })
                    .collect()
            })
            .collect();
        Ok(per_chunk.into_iter().flatten().collect())
    }

    fn check_ties(&self, ties: Option<&[i64]>) -> CoreResult<()> {
        if ties.is_some_and(|keys| keys.len() != self.doc_len.len()) {
            return Err(CoreError::invalid("ties", "must hold one key per position"));
        }
        Ok(())
    }

    fn allowed_mask(&self, allowed: Option<&[i64]>) -> CoreResult<Option<Vec<bool>>> {
        let Some(positions) = allowed else {
            return Ok(None);
        };
        let n = self.doc_len.len();
        let mut mask = vec![false; n];
        for &p in positions {
            mask[checked_position("allowed", p, n)?] = true;
        }
        Ok(Some(mask))
    }
}

fn check_k(k: usize) -> CoreResult<()> {
    if k == 0 {
        return Err(CoreError::invalid("k", "must be >= 1"));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
