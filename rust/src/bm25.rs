//! BM25 over an inverted index of document positions (Lucene's BM25 formula).
//!
//! `idf = ln(1 + (N - df + 0.5) / (df + 0.5))`,
//! `score = Σ_query terms idf · tf·(k1+1) / (tf + k1·(1 - b + b·dl/avgdl))`.
//! A query term that appears twice counts twice (as in Lucene's BooleanQuery and bm25s).
//!
//! Positions are stable: removing a document tombstones its position and drops its postings,
//! so N, df and avgdl are those of the remaining documents — scores equal a fresh build over
//! them. The per-posting tf part of the score is precomputed (in f64, stored as f32) and
//! refreshed after every add/remove, so a query is one pass over its postings into a dense
//! score buffer, then a partial top-k selection (a k-heap).

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use rayon::prelude::*;
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

use crate::error::{CoreError, CoreResult};
use crate::tokenize::{Analyzer, AnalyzerOptions};

const MAGIC: &[u8; 8] = b"OCTOBM25";
const FORMAT_VERSION: u32 = 1;
const HEADER_LEN: usize = 8 + 4 + 8 + 8;
/// Block size of the dense top-k scan.
const BLOCK: usize = 32;

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
        if !k1.is_finite() || k1 < 0.0 {
            return Err(CoreError::invalid("k1", "must be a finite number >= 0"));
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

/// What `to_bytes` stores; everything else is derived on load.
#[derive(Serialize, Deserialize)]
struct Persisted {
    params: Bm25Params,
    options: AnalyzerOptions,
    terms: Vec<String>,
    postings: Vec<Postings>,
    doc_len: Vec<u32>,
    live: Vec<bool>,
}

/// Reusable per-thread query state: the dense score buffer and the positions it touched.
#[derive(Debug, Default)]
struct Scratch {
    scores: Vec<f32>,
    touched: Vec<u32>,
}

/// A mutable BM25 index. Searching takes `&self` and may run from many threads.
#[derive(Debug)]
pub struct Bm25Index {
    params: Bm25Params,
    analyzer: Analyzer,
    terms: Vec<String>,
    vocab: FxHashMap<String, u32>,
    postings: Vec<Postings>,
    /// Per posting, `tf·(k1+1) / (tf + k1·(1 - b + b·dl/avgdl))` (parallel to `postings`).
    weights: Vec<Vec<f32>>,
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
            weights: Vec::new(),
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
    pub fn vocab_size(&self) -> usize {
        self.postings.iter().filter(|p| !p.docs.is_empty()).count()
    }

    /// Whether `position` holds a live document.
    pub fn is_live(&self, position: usize) -> bool {
        self.live.get(position).copied().unwrap_or(false)
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
        self.refresh_weights();
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
    pub fn remove(&mut self, positions: &[i64]) -> CoreResult<()> {
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
            }
        }
        self.refresh_weights();
        Ok(())
    }

    /// Recompute per-posting weights; N and avgdl changed.
    fn refresh_weights(&mut self) {
        let Bm25Params { k1, b } = self.params;
        let total: u64 = self.doc_len.iter().map(|&d| u64::from(d)).sum();
        let avgdl = if total == 0 {
            1.0
        } else {
            total as f64 / f64::from(self.live_count)
        };
        let norm: Vec<f64> = self
            .doc_len
            .iter()
            .map(|&dl| k1 * (1.0 - b + b * f64::from(dl) / avgdl))
            .collect();
        self.weights = self
            .postings
            .par_iter()
            .map(|p| {
                p.docs
                    .iter()
                    .zip(&p.tfs)
                    .map(|(&d, &tf)| {
                        let tf = f64::from(tf);
                        (tf * (k1 + 1.0) / (tf + norm[d as usize])) as f32
                    })
                    .collect()
            })
            .collect();
    }

    /// Lucene idf of a term with document frequency `df` among the live documents.
    fn idf(&self, df: usize) -> f64 {
        let n = f64::from(self.live_count);
        let df = df as f64;
        (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
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

    fn search_with(
        &self,
        query: &str,
        k: usize,
        allowed: Option<&[bool]>,
        scratch: &mut Scratch,
    ) -> Vec<(u32, f32)> {
        let Scratch { scores, touched } = scratch;
        scores.resize(self.doc_len.len(), 0.0);
        let terms = self.query_terms(query);
        let work: usize = terms
            .iter()
            .map(|&(id, _)| self.postings[id as usize].docs.len())
            .sum();
        // Postings covering a good share of the index: accumulate branch-free and scan the
        // whole buffer once. Sparse queries: remember touched positions, never scan.
        let dense = work * 4 >= scores.len();
        let scores = scores.as_mut_slice(); // a plain slice: its pointer stays in a register
        for (id, count) in terms {
            let postings = &self.postings[id as usize];
            let factor = (self.idf(postings.docs.len()) * f64::from(count)) as f32;
            let pairs = postings.docs.iter().zip(&self.weights[id as usize]);
            if dense {
                for (&d, &w) in pairs {
                    scores[d as usize] += factor * w;
                }
            } else {
                for (&d, &w) in pairs {
                    let slot = &mut scores[d as usize];
                    if *slot == 0.0 {
                        touched.push(d);
                    }
                    *slot += factor * w;
                }
            }
        }
        let keep = |d: usize| allowed.is_none_or(|mask| mask[d]);
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
                        best.offer(d as u32, score);
                    }
                }
            }
            scores.fill(0.0);
        } else {
            for &d in touched.iter() {
                let score = std::mem::take(&mut scores[d as usize]);
                if score >= best.floor && keep(d as usize) {
                    best.offer(d, score);
                }
            }
            touched.clear();
        }
        best.into_sorted()
    }

    /// Top-`k` (position, score) for one query, best first; ties by position ascending.
    /// Only documents sharing a term with the query are returned. `allowed` restricts the
    /// result to those positions.
    pub fn search(
        &self,
        query: &str,
        k: usize,
        allowed: Option<&[i64]>,
    ) -> CoreResult<Vec<(u32, f32)>> {
        check_k(k)?;
        let mask = self.allowed_mask(allowed)?;
        Ok(self.search_with(query, k, mask.as_deref(), &mut Scratch::default()))
    }

    /// [`Bm25Index::search`] for many queries at once (parallel), results in query order.
    pub fn search_batch<S: AsRef<str> + Sync>(
        &self,
        queries: &[S],
        k: usize,
        allowed: Option<&[i64]>,
    ) -> CoreResult<Vec<Vec<(u32, f32)>>> {
        check_k(k)?;
        let mask = self.allowed_mask(allowed)?;
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
                    .map(|q| self.search_with(q.as_ref(), k, mask.as_deref(), &mut scratch))
                    .collect()
            })
            .collect();
        Ok(per_chunk.into_iter().flatten().collect())
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

    /// Serialise: magic, format version, payload length, FNV-1a checksum, postcard payload.
    pub fn to_bytes(&self) -> CoreResult<Vec<u8>> {
        let persisted = Persisted {
            params: self.params,
            options: self.options(),
            terms: self.terms.clone(),
            postings: self.postings.clone(),
            doc_len: self.doc_len.clone(),
            live: self.live.clone(),
        };
        let payload = postcard::to_stdvec(&persisted)
            .map_err(|e| CoreError::Corrupt(format!("cannot encode: {e}")))?;
        let mut out = Vec::with_capacity(HEADER_LEN + payload.len());
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
        out.extend_from_slice(&fnv1a(&payload).to_le_bytes());
        out.extend_from_slice(&payload);
        Ok(out)
    }

    /// Load what [`Bm25Index::to_bytes`] wrote; corrupt or foreign bytes are a clear error.
    pub fn from_bytes(bytes: &[u8]) -> CoreResult<Self> {
        let corrupt = |what: &str| CoreError::Corrupt(what.to_owned());
        if bytes.len() < HEADER_LEN || &bytes[..8] != MAGIC {
            return Err(corrupt("not an octobrain BM25 index: bad magic"));
        }
        let version = u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes"));
        if version != FORMAT_VERSION {
            return Err(CoreError::Corrupt(format!(
                "format version {version}, this build reads {FORMAT_VERSION}"
            )));
        }
        let len = u64::from_le_bytes(bytes[12..20].try_into().expect("8 bytes"));
        let checksum = u64::from_le_bytes(bytes[20..28].try_into().expect("8 bytes"));
        let payload = &bytes[HEADER_LEN..];
        if payload.len() as u64 != len {
            return Err(corrupt("truncated or padded payload"));
        }
        if fnv1a(payload) != checksum {
            return Err(corrupt("checksum mismatch"));
        }
        let p: Persisted = postcard::from_bytes(payload)
            .map_err(|e| CoreError::Corrupt(format!("cannot decode: {e}")))?;
        Self::from_persisted(p)
    }

    fn from_persisted(p: Persisted) -> CoreResult<Self> {
        let corrupt = |what: &str| Err(CoreError::Corrupt(what.to_owned()));
        let params = Bm25Params::new(p.params.k1, p.params.b)
            .map_err(|_| CoreError::Corrupt("invalid k1 or b".to_owned()))?;
        let n = p.doc_len.len();
        if p.live.len() != n || p.terms.len() != p.postings.len() || n > u32::MAX as usize {
            return corrupt("inconsistent lengths");
        }
        let mut vocab = FxHashMap::default();
        for (id, term) in p.terms.iter().enumerate() {
            if vocab.insert(term.clone(), id as u32).is_some() {
                return corrupt("duplicate term");
            }
        }
        let mut len_check = vec![0u64; n];
        for postings in &p.postings {
            let sorted = postings.docs.windows(2).all(|w| w[0] < w[1]);
            if postings.docs.len() != postings.tfs.len() || !sorted {
                return corrupt("malformed postings");
            }
            for (&d, &tf) in postings.docs.iter().zip(&postings.tfs) {
                if d as usize >= n || !p.live[d as usize] || tf == 0 {
                    return corrupt("posting points at a missing document");
                }
                len_check[d as usize] += u64::from(tf);
            }
        }
        if len_check
            .iter()
            .zip(&p.doc_len)
            .any(|(&a, &b)| a != u64::from(b))
        {
            return corrupt("document lengths disagree with postings");
        }
        let mut index = Self {
            params,
            analyzer: Analyzer::new(p.options),
            terms: p.terms,
            vocab,
            postings: p.postings,
            weights: Vec::new(),
            live_count: p.live.iter().filter(|&&l| l).count() as u32,
            doc_len: p.doc_len,
            live: p.live,
        };
        index.refresh_weights();
        Ok(index)
    }
}

fn check_k(k: usize) -> CoreResult<()> {
    if k == 0 {
        return Err(CoreError::invalid("k", "must be >= 1"));
    }
    Ok(())
}

fn checked_position(arg: &'static str, p: i64, n: usize) -> CoreResult<usize> {
    usize::try_from(p)
        .ok()
        .filter(|&i| i < n)
        .ok_or_else(|| CoreError::invalid(arg, format!("position {p} is out of range [0, {n})")))
}

/// A hit ordered so that "greater" means "worse": lower score, then higher position.
#[derive(Debug, PartialEq)]
struct Hit {
    score: f32,
    position: u32,
}

impl Eq for Hit {}

impl Ord for Hit {
    fn cmp(&self, other: &Self) -> Ordering {
        other
            .score
            .total_cmp(&self.score)
            .then_with(|| self.position.cmp(&other.position))
    }
}

impl PartialOrd for Hit {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// Partial top-k selection: a heap of the best `k` so far whose root is the worst kept hit,
/// so most candidates cost one comparison. Output: score descending, position ascending.
struct TopK {
    k: usize,
    heap: BinaryHeap<Hit>,
    /// Score of the worst kept hit once `k` are kept (else 0): anything below cannot enter.
    floor: f32,
}

impl TopK {
    fn new(k: usize) -> Self {
        Self {
            k,
            heap: BinaryHeap::with_capacity(k.min(1024)),
            floor: 0.0,
        }
    }

    fn offer(&mut self, position: u32, score: f32) {
        let hit = Hit { score, position };
        if self.heap.len() < self.k {
            self.heap.push(hit);
        } else if let Some(mut worst) = self.heap.peek_mut() {
            if hit < *worst {
                *worst = hit;
            }
        }
        if self.heap.len() == self.k {
            self.floor = self.heap.peek().map_or(0.0, |h| h.score);
        }
    }

    fn into_sorted(self) -> Vec<(u32, f32)> {
        let hits = self.heap.into_sorted_vec();
        hits.into_iter().map(|h| (h.position, h.score)).collect()
    }
}

/// 64-bit FNV-1a: enough to catch corruption, not meant against tampering.
fn fnv1a(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain() -> AnalyzerOptions {
        AnalyzerOptions {
            stem: false,
            stopwords: false,
        }
    }

    fn docs() -> Vec<&'static str> {
        vec![
            "apple banana",
            "apple apple cherry",
            "banana",
            "cherry cherry cherry date",
        ]
    }

    fn brute(texts: &[&str], query: &str, params: Bm25Params) -> Vec<f64> {
        let toks: Vec<Vec<&str>> = texts.iter().map(|t| t.split(' ').collect()).collect();
        let avgdl = toks.iter().map(Vec::len).sum::<usize>() as f64 / toks.len() as f64;
        let n = toks.len() as f64;
        toks.iter()
            .map(|doc| {
                query
                    .split(' ')
                    .map(|q| {
                        let df = toks.iter().filter(|d| d.contains(&q)).count() as f64;
                        let tf = doc.iter().filter(|&&t| t == q).count() as f64;
                        let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
                        let norm =
                            params.k1 * (1.0 - params.b + params.b * doc.len() as f64 / avgdl);
                        idf * tf * (params.k1 + 1.0) / (tf + norm)
                    })
                    .sum()
            })
            .collect()
    }

    #[test]
    fn scores_match_the_formula_and_duplicates_count_twice() {
        let params = Bm25Params::default();
        let index = Bm25Index::build(&docs(), params, plain()).unwrap();
        for query in [
            "apple",
            "apple cherry",
            "cherry cherry",
            "banana date apple",
        ] {
            let expected = brute(&docs(), query, params);
            let hits = index.search(query, 10, None).unwrap();
            for (pos, score) in &hits {
                let want = expected[*pos as usize];
                assert!((f64::from(*score) - want).abs() <= 1e-5 * want, "{query}");
            }
            assert_eq!(hits.len(), expected.iter().filter(|&&s| s > 0.0).count());
        }
    }

    #[test]
    fn ties_break_by_position_and_k_truncates() {
        let index =
            Bm25Index::build(&["x y", "y x", "x y", "z"], Bm25Params::default(), plain()).unwrap();
        let hits = index.search("x", 2, None).unwrap();
        assert_eq!(hits.iter().map(|h| h.0).collect::<Vec<_>>(), [0, 1]);
        assert!(index.search("nothing", 5, None).unwrap().is_empty());
    }

    #[test]
    fn remove_equals_fresh_build_over_the_rest() {
        let params = Bm25Params::new(1.5, 0.5).unwrap();
        let mut index = Bm25Index::build(&docs(), params, plain()).unwrap();
        index.remove(&[1, 1]).unwrap();
        let fresh = Bm25Index::build(
            &["apple banana", "banana", "cherry cherry cherry date"],
            params,
            plain(),
        )
        .unwrap();
        let map = [0u32, 2, 3];
        let got = index.search("apple cherry banana", 10, None).unwrap();
        let want: Vec<(u32, f32)> = fresh
            .search("apple cherry banana", 10, None)
            .unwrap()
            .into_iter()
            .map(|(p, s)| (map[p as usize], s))
            .collect();
        assert_eq!(got, want);
        assert_eq!(index.doc_count(), 3);
        assert_eq!(index.position_count(), 4);
    }

    #[test]
    fn allowed_restricts_and_batch_matches_single() {
        let index = Bm25Index::build(&docs(), Bm25Params::default(), plain()).unwrap();
        let hits = index.search("apple banana", 10, Some(&[2, 3])).unwrap();
        assert_eq!(hits.iter().map(|h| h.0).collect::<Vec<_>>(), [2]);
        let batch = index
            .search_batch(&["apple", "cherry"], 3, Some(&[0, 1, 3]))
            .unwrap();
        assert_eq!(
            batch[1],
            index.search("cherry", 3, Some(&[0, 1, 3])).unwrap()
        );
        let err = index.search("apple", 1, Some(&[4])).unwrap_err();
        assert!(err.to_string().starts_with("allowed:"));
    }

    #[test]
    fn bad_arguments_name_themselves() {
        assert!(Bm25Params::new(-1.0, 0.5)
            .unwrap_err()
            .to_string()
            .starts_with("k1:"));
        assert!(Bm25Params::new(1.0, f64::NAN)
            .unwrap_err()
            .to_string()
            .starts_with("b:"));
        let index = Bm25Index::build(&docs(), Bm25Params::default(), plain()).unwrap();
        assert!(index
            .search("apple", 0, None)
            .unwrap_err()
            .to_string()
            .starts_with("k:"));
        let mut index = index;
        assert!(index
            .remove(&[-1])
            .unwrap_err()
            .to_string()
            .starts_with("positions:"));
    }

    #[test]
    fn bytes_round_trip_and_corruption_is_detected() {
        let mut index = Bm25Index::build(&docs(), Bm25Params::default(), plain()).unwrap();
        index.remove(&[0]).unwrap();
        let bytes = index.to_bytes().unwrap();
        let back = Bm25Index::from_bytes(&bytes).unwrap();
        assert_eq!(
            back.search("apple cherry", 10, None).unwrap(),
            index.search("apple cherry", 10, None).unwrap()
        );
        assert_eq!(back.doc_count(), 3);
        let mut bad = bytes.clone();
        let last = bad.len() - 1;
        bad[last] ^= 0xff;
        assert!(matches!(
            Bm25Index::from_bytes(&bad),
            Err(CoreError::Corrupt(_))
        ));
        assert!(matches!(
            Bm25Index::from_bytes(b"junk"),
            Err(CoreError::Corrupt(_))
        ));
        assert!(matches!(
            Bm25Index::from_bytes(&bytes[..40]),
            Err(CoreError::Corrupt(_))
        ));
    }
}
