//! Lexical coverage: how much of a query's information a document holds, read off the postings.
//!
//! The idf-weighted share of the query's distinct analysed terms present in a document, in
//! [0, 1]. Unlike a BM25 score it is absolute (not relative to the other candidates), so an exact
//! identifier can pass a relevance threshold on its own. Document frequencies are the postings'
//! live postings, so no per-document term set is kept anywhere else.

use super::{Base, Bm25Index};
use crate::error::CoreResult;

impl Bm25Index {
    /// Coverage of `query` for each of `positions` (removed positions cover nothing), its
    /// idf counted over the documents `seen` marks (every live one without it).
    ///
    /// A term absent from the index still counts in the total, with the idf of a term no
    /// document holds: a query about something never stored is covered by nothing.
    pub fn coverage(
        &self,
        base: &Base<'_>,
        query: &str,
        positions: &[i64],
        seen: Option<&[bool]>,
    ) -> CoreResult<Vec<f64>> {
        let stats = self.stats(seen)?;
        let positions = self.checked_positions(positions)?;
        let docs = stats.n.max(1.0);
        let mut seen: Vec<String> = Vec::new();
        let mut terms: Vec<(Option<u32>, f64)> = Vec::new();
        for token in self.analyzer.analyze(query) {
            if seen.contains(&token) {
                continue;
            }
            let id = self.vocab.get(&token).copied();
            let df = id.map_or(0, |id| self.df_in(base, id as usize, &stats)) as f64;
            terms.push((id, (1.0 + (docs - df + 0.5) / (df + 0.5)).ln()));
            seen.push(token);
        }
        let total: f64 = terms.iter().map(|&(_, idf)| idf).sum();
        let mut out = vec![0.0; positions.len()];
        if total <= 0.0 {
            return Ok(out);
        }
        for &(id, idf) in &terms {
            let Some(id) = id else { continue };
            // Postings are in position order: one binary search per candidate, in the base
            // (whose removed documents are tombstoned) or in memory.
            let in_base = base.term(id as usize).0;
            let held = &self.postings[id as usize].docs;
            for (slot, p) in out.iter_mut().zip(&positions) {
                let live = self.is_live(*p as usize);
                if live && (in_base.binary_search(p).is_ok() || held.binary_search(p).is_ok()) {
                    *slot += idf;
                }
            }
        }
        for slot in &mut out {
            *slot /= total;
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use crate::bm25::{Base, Bm25Index, Bm25Params};
    use crate::tokenize::AnalyzerOptions;

    fn index(texts: &[&str]) -> Bm25Index {
        Bm25Index::build(texts, Bm25Params::default(), AnalyzerOptions::default()).unwrap()
    }

    #[test]
    fn weights_rare_terms_and_counts_each_term_once() {
        let ix = index(&["alpha beta", "beta gamma", "beta delta", "alpha alpha"]);
        // n = 4; df(alpha) = 2, df(beta) = 3.
        let idf = |df: f64| (1.0 + (4.0 - df + 0.5) / (df + 0.5)).ln();
        let got = ix
            .coverage(&Base::EMPTY, "alpha beta beta", &[0, 1, 3], None)
            .unwrap();
        let total = idf(2.0) + idf(3.0);
        let want = [1.0, idf(3.0) / total, idf(2.0) / total];
        for (g, w) in got.iter().zip(want) {
            assert!((g - w).abs() < 1e-12, "{got:?}");
        }
    }

    #[test]
    fn unknown_terms_dilute_and_removed_rows_cover_nothing() {
        let mut ix = index(&["alpha beta", "beta gamma"]);
        assert!(
            ix.coverage(&Base::EMPTY, "alpha zzzunknown", &[0], None)
                .unwrap()[0]
                < 0.5
        );
        assert_eq!(
            ix.coverage(&Base::EMPTY, "the of", &[0], None).unwrap(),
            vec![0.0]
        );
        ix.remove(&[0], 0).unwrap();
        assert_eq!(
            ix.coverage(&Base::EMPTY, "alpha", &[0, 1], None).unwrap(),
            vec![0.0, 0.0]
        );
        assert!(ix.coverage(&Base::EMPTY, "alpha", &[2], None).is_err());
        assert!(ix.coverage(&Base::EMPTY, "alpha", &[-1], None).is_err());
    }
}
