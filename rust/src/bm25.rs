//! BM25 over an inverted index of document positions (Lucene's BM25 formula).
//!
//! `idf = ln(1 + (N - df + 0.5) / (df + 0.5))`,
//! `score = Σ_query terms idf · tf·(k1+1) / (tf + k1·(1 - b + b·dl/avgdl))`.
//! A query term that appears twice counts twice (as in Lucene's BooleanQuery and bm25s).
//!
//! Positions are stable: removing a document tombstones its position, so N, df and avgdl are
//! those of the remaining documents — scores equal a fresh build over them. A query may count
//! them over a subset instead (`seen`, a mask: one asker's documents), and then scores as a
//! fresh build over that subset would (`Stats`). The per-document
//! length norm is kept (refreshed after every add/remove, O(documents)); each posting's tf part
//! is computed from it as the query reads the posting.
//!
//! The postings live in two parts. A [`Base`] is read-only: per-term ranges over flat `docs` /
//! `tfs` arrays that the caller owns (typically memory-mapped files of a snapshot, so only the
//! pages a query reads become resident); its removed documents are only tombstoned. The
//! in-memory part holds every posting added since (and, for an index built in memory, all of
//! them). Every query and update takes the base it was opened over ([`Base::EMPTY`] if none).
//!
//! Layout: this file holds the index and its updates; `bm25/search.rs` the queries,
//! `bm25/stats.rs` the statistics and term weights they score with, `bm25/persist.rs` the byte
//! and array formats.

use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

use crate::error::{CoreError, CoreResult};
use crate::tokenize::{Analyzer, AnalyzerOptions};

mod coverage;
mod persist;
mod search;
mod stats;
mod stored;

pub use stored::StoredFile;

pub use persist::Parts;

/// BM25 parameters, validated on construction.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Bm25Params {
    /// Term-frequency saturation (≥ 0, finite).
    pub k1: f64,
    /// Length normalisation, in [0, 1].
    pub b: f64,
}

impl Bm25Params {
    /// Validate `k1` and `b`.
    pub fn new(k1: f64, b: f64) -> CoreResult<Self> {
        // (bounded: `tf · (k1 + 1)` overflowed to an infinite score at k1 = 1e308)
        if !k1.is_finite() || !(0.0..=1000.0).contains(&k1) {
            return Err(CoreError::invalid(
                "k1",
                "must be a finite number in [0, 1000]",
            ));
        }
        if !b.is_finite() || !(0.0..=1.0).contains(&b) {
            return Err(CoreError::invalid("b", "must be a finite number in [0, 1]"));
        }
        Ok(Self { k1, b })
    }
}

impl Default for Bm25Params {
    fn default() -> Self {
        Self { k1: 1.2, b: 0.75 }
    }
}

/// Postings of one term: ascending positions and their term frequencies.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Postings {
    docs: Vec<u32>,
    tfs: Vec<u32>,
}

/// The read-only part of an index's postings: term `t` holds `docs[offsets[t]..offsets[t+1]]`
/// (ascending) with the same range of `tfs`. Ranges outside the arrays read as empty, so a
/// damaged base gives wrong results at worst, never a panic.
#[derive(Debug, Clone, Copy)]
pub struct Base<'a> {
    /// `terms + 1` ascending offsets into `docs` / `tfs`.
    pub offsets: &'a [u64],
    /// Document positions, per term ascending.
    pub docs: &'a [u32],
    /// Term frequencies, parallel to `docs`.
    pub tfs: &'a [u32],
}

impl<'a> Base<'a> {
    /// No base: every posting is in memory.
    pub const EMPTY: Base<'static> = Base {
        offsets: &[],
        docs: &[],
        tfs: &[],
    };

    /// Term `t`'s (docs, tfs) in the base (empty past its terms or on a bad range).
    fn term(&self, t: usize) -> (&'a [u32], &'a [u32]) {
        let (Some(&lo), Some(&hi)) = (self.offsets.get(t), self.offsets.get(t + 1)) else {
            return (&[], &[]);
        };
        let (Ok(lo), Ok(hi)) = (usize::try_from(lo), usize::try_from(hi)) else {
            return (&[], &[]);
        };
        match (self.docs.get(lo..hi), self.tfs.get(lo..hi)) {
            (Some(docs), Some(tfs)) => (docs, tfs),
            _ => (&[], &[]),
        }
    }
}

/// A mutable BM25 index. Searching takes `&self` and may run from many threads.
#[derive(Debug)]
pub struct Bm25Index {
    params: Bm25Params,
    analyzer: Analyzer,
    terms: Vec<String>,
    vocab: FxHashMap<String, u32>,
    /// In-memory postings of every term (those added after the base was written).
    postings: Vec<Postings>,
    /// Whether any document with base postings was removed (then base postings are checked
    /// against `live` as they are read).
    base_tombstones: bool,
    /// Per document, `k1·(1 - b + b·dl/avgdl)`.
    norm: Vec<f64>,
    doc_len: Vec<u32>,
    live: Vec<bool>,
    live_count: u32,
}

impl Bm25Index {
    /// An empty index.
    pub fn new(params: Bm25Params, options: AnalyzerOptions) -> Self {
        Self {
            params,
            analyzer: Analyzer::new(options),
            terms: Vec::new(),
            vocab: FxHashMap::default(),
            postings: Vec::new(),
            base_tombstones: false,
            norm: Vec::new(),
            doc_len: Vec::new(),
            live: Vec::new(),
            live_count: 0,
        }
    }

    /// Build an index over `texts` (positions 0..len).
    pub fn build<S: AsRef<str> + Sync>(
        texts: &[S],
        params: Bm25Params,
        options: AnalyzerOptions,
    ) -> CoreResult<Self> {
        let mut index = Self::new(params, options);
        index.add(texts)?;
        Ok(index)
    }

    /// BM25 parameters.
    pub fn params(&self) -> Bm25Params {
        self.params
    }

    /// Analyser options used for documents and queries.
    pub fn options(&self) -> AnalyzerOptions {
        self.analyzer.options()
    }

    /// Number of positions ever assigned (live and removed).
    pub fn position_count(&self) -> usize {
        self.doc_len.len()
    }

    /// Number of live (not removed) documents.
    pub fn doc_count(&self) -> usize {
        self.live_count as usize
    }

    /// Number of distinct terms with at least one live posting.
    pub fn vocab_size(&self, base: &Base<'_>) -> usize {
        (0..self.terms.len())
            .filter(|&t| self.df(base, t) > 0)
            .count()
    }

    /// Whether `position` holds a live document.
    pub fn is_live(&self, position: usize) -> bool {
        self.live.get(position).copied().unwrap_or(false)
    }

    /// `positions` (the `positions` argument of a per-document query) as `u32`, each in
    /// `[0, positions held)`, removed ones included.
    fn checked_positions(&self, positions: &[i64]) -> CoreResult<Vec<u32>> {
        let n = self.doc_len.len();
        positions
            .iter()
            .map(|&p| checked_position("positions", p, n).map(|i| i as u32))
            .collect()
    }

    /// Live documents holding term `t`: its in-memory postings plus its live base postings.
    fn df(&self, base: &Base<'_>, t: usize) -> usize {
        let (docs, _) = base.term(t);
        let in_base = if self.base_tombstones {
            docs.iter().filter(|&&d| self.is_live(d as usize)).count()
        } else {
            docs.len()
        };
        in_base + self.postings.get(t).map_or(0, |p| p.docs.len())
    }

    /// Analyse and append documents; returns the first new position (they are consecutive).
    pub fn add<S: AsRef<str> + Sync>(&mut self, texts: &[S]) -> CoreResult<usize> {
        let start = self.doc_len.len();
        if start + texts.len() > u32::MAX as usize {
            return Err(CoreError::invalid(
                "texts",
                "index is limited to 2^32 - 1 positions",
            ));
        }
        let mut position = start as u32;
        let mut global: Vec<u32> = Vec::new();
        for (docs, tokens) in self.analyzer.analyze_chunks(texts) {
            // One vocabulary lookup per distinct token of the chunk, not per occurrence.
            global.clear();
            global.extend(tokens.into_iter().map(|token| self.term_id(token)));
            for mut ids in docs {
                for id in &mut ids {
                    *id = global[*id as usize];
                }
                ids.sort_unstable();
                for run in ids.chunk_by(|a, b| a == b) {
                    let postings = &mut self.postings[run[0] as usize];
                    postings.docs.push(position);
                    postings.tfs.push(run.len() as u32);
                }
                self.doc_len.push(ids.len() as u32);
                self.live.push(true);
                self.live_count += 1;
                position += 1;
            }
        }
        self.refresh_norms();
        Ok(start)
    }

    /// The id of `token`, adding it to the vocabulary if new.
    fn term_id(&mut self, token: String) -> u32 {
        if let Some(&id) = self.vocab.get(&token) {
            return id;
        }
        let id = self.terms.len() as u32;
        self.vocab.insert(token.clone(), id);
        self.terms.push(token);
        self.postings.push(Postings::default());
        id
    }

    /// Remove documents by position. Other positions stay valid; removing twice is a no-op.
    /// In-memory postings drop them; base postings keep them, tombstoned by `live`.
    pub fn remove(&mut self, positions: &[i64], base_positions: usize) -> CoreResult<()> {
        let n = self.doc_len.len();
        let mut doomed = vec![false; n];
        for &p in positions {
            let i = checked_position("positions", p, n)?;
            doomed[i] = self.live[i];
        }
        if !doomed.iter().any(|&d| d) {
            return Ok(());
        }
        for postings in &mut self.postings {
            if !postings.docs.iter().any(|&d| doomed[d as usize]) {
                continue;
            }
            let mut keep = 0;
            for j in 0..postings.docs.len() {
                if !doomed[postings.docs[j] as usize] {
                    postings.docs[keep] = postings.docs[j];
                    postings.tfs[keep] = postings.tfs[j];
                    keep += 1;
                }
            }
            postings.docs.truncate(keep);
            postings.tfs.truncate(keep);
        }
        for (i, gone) in doomed.into_iter().enumerate() {
            if gone {
                self.live[i] = false;
                self.doc_len[i] = 0;
                self.live_count -= 1;
                self.base_tombstones |= i < base_positions;
            }
        }
        self.refresh_norms();
        Ok(())
    }

    /// Recompute per-document norms; N and avgdl changed.
    fn refresh_norms(&mut self) {
        let Bm25Params { k1, b } = self.params;
        let total: u64 = self.doc_len.iter().map(|&d| u64::from(d)).sum();
        let avgdl = if total == 0 {
            1.0
        } else {
            total as f64 / f64::from(self.live_count)
        };
        self.norm.clear();
        self.norm.extend(
            self.doc_len
                .iter()
                .map(|&dl| k1 * (1.0 - b + b * f64::from(dl) / avgdl)),
        );
    }
}

fn checked_position(arg: &'static str, p: i64, n: usize) -> CoreResult<usize> {
    usize::try_from(p)
        .ok()
        .filter(|&i| i < n)
        .ok_or_else(|| CoreError::invalid(arg, format!("position {p} is out of range [0, {n})")))
}

#[cfg(test)]
mod tests;
