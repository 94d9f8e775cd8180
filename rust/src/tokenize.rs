//! Text analysis shared by documents and queries.
//!
//! Pipeline, per text: Unicode words (UAX #29 word bounds, keeping the segments that hold a
//! letter or digit) → lowercase → ASCII folding → English stopwords → Snowball English stem.
//!
//! ASCII folding works per character: a non-ASCII character whose compatibility decomposition
//! (NFKD) minus combining marks is all ASCII becomes that ASCII text (`é`→`e`, `ﬁ`→`fi`,
//! fullwidth `ａ`→`a`); curly single quotes become `'`; a combining mark that follows ASCII
//! output (or starts the word) is dropped; everything else (Greek, Cyrillic, CJK, `ß`) is kept
//! as it is.

use std::borrow::Cow;

use rayon::prelude::*;
use rust_stemmers::{Algorithm, Stemmer};
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};
use unicode_normalization::char::{decompose_compatible, is_combining_mark};
use unicode_segmentation::UnicodeSegmentation;

/// English stopwords: the 33-word list Lucene's `EnglishAnalyzer` uses, which is also what
/// bm25s uses for `stopwords="en"`, so quality comparisons with bm25s are like for like.
pub const ENGLISH_STOPWORDS: [&str; 33] = [
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it",
    "no", "not", "of", "on", "or", "such", "that", "the", "their", "then", "there", "these",
    "they", "this", "to", "was", "will", "with",
];

/// Bound on the per-thread word cache so a huge, diverse corpus cannot grow it without limit.
const CACHE_LIMIT: usize = 1 << 20;

/// Which optional steps the analyser runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct AnalyzerOptions {
    /// Apply the Snowball English stemmer.
    pub stem: bool,
    /// Drop [`ENGLISH_STOPWORDS`].
    pub stopwords: bool,
}

impl Default for AnalyzerOptions {
    fn default() -> Self {
        Self {
            stem: true,
            stopwords: true,
        }
    }
}

/// A configured analyser. Cheap to create; `Send + Sync`.
pub struct Analyzer {
    options: AnalyzerOptions,
    stemmer: Stemmer,
}

impl std::fmt::Debug for Analyzer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Analyzer")
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

/// Memo of raw word → analysed token (`None` = dropped). Words repeat a lot, so this skips
/// most lowercasing, folding and stemming work.
pub type WordCache = FxHashMap<String, Option<String>>;

impl Analyzer {
    /// Create an analyser with the given options.
    pub fn new(options: AnalyzerOptions) -> Self {
        Self {
            options,
            stemmer: Stemmer::create(Algorithm::English),
        }
    }

    /// The options this analyser runs with.
    pub fn options(&self) -> AnalyzerOptions {
        self.options
    }

    /// Analyse one word (a UAX #29 segment); `None` when it is a stopword or folds to nothing.
    pub fn analyze_word(&self, word: &str) -> Option<String> {
        let folded = fold(&word.to_lowercase());
        if folded.is_empty() || (self.options.stopwords && is_stopword(&folded)) {
            return None;
        }
        if !self.options.stem {
            return Some(folded);
        }
        Some(match self.stemmer.stem(&folded) {
            Cow::Borrowed(s) if s.len() == folded.len() => folded,
            stemmed => stemmed.into_owned(),
        })
    }

    /// Analyse `text`, appending tokens to `out`, memoising words in `cache`.
    pub fn analyze_into(&self, text: &str, cache: &mut WordCache, out: &mut Vec<String>) {
        for word in text.unicode_words() {
            if let Some(hit) = cache.get(word) {
                if let Some(token) = hit {
                    out.push(token.clone());
                }
                continue;
            }
            let token = self.analyze_word(word);
            if cache.len() >= CACHE_LIMIT {
                cache.clear();
            }
            cache.insert(word.to_owned(), token.clone());
            if let Some(token) = token {
                out.push(token);
            }
        }
    }

    /// Analyse one text.
    pub fn analyze(&self, text: &str) -> Vec<String> {
        let mut out = Vec::new();
        self.analyze_into(text, &mut WordCache::default(), &mut out);
        out
    }

    /// Analyse many texts in parallel, preserving order.
    pub fn analyze_batch<S: AsRef<str> + Sync>(&self, texts: &[S]) -> Vec<Vec<String>> {
        texts
            .par_iter()
            .map_init(WordCache::default, |cache, text| {
                let mut out = Vec::new();
                self.analyze_into(text.as_ref(), cache, &mut out);
                out
            })
            .collect()
    }
}

/// Whether `word` (lowercased, folded) is an English stopword.
pub fn is_stopword(word: &str) -> bool {
    ENGLISH_STOPWORDS.binary_search(&word).is_ok()
}

/// ASCII-fold a lowercased word (see the module docs for the exact rule).
pub fn fold(word: &str) -> String {
    if word.is_ascii() {
        return word.to_owned();
    }
    let mut out = String::with_capacity(word.len());
    let mut parts = String::new();
    for c in word.chars() {
        if c.is_ascii() {
            out.push(c);
            continue;
        }
        if c == '\u{2018}' || c == '\u{2019}' {
            out.push('\'');
            continue;
        }
        parts.clear();
        decompose_compatible(c, |d| {
            if !is_combining_mark(d) {
                parts.push(d);
            }
        });
        if parts.is_empty() {
            // A bare mark: drop it where it decorates ASCII (NFD input), keep it on other scripts.
            if !out.chars().next_back().is_none_or(|p| p.is_ascii()) {
                out.push(c);
            }
        } else if parts.is_ascii() {
            out.push_str(&parts);
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(text: &str, stem: bool, stopwords: bool) -> Vec<String> {
        Analyzer::new(AnalyzerOptions { stem, stopwords }).analyze(text)
    }

    #[test]
    fn stopword_list_is_sorted_for_binary_search() {
        assert!(ENGLISH_STOPWORDS.windows(2).all(|w| w[0] < w[1]));
        assert!(is_stopword("the") && !is_stopword("cell"));
    }

    #[test]
    fn full_pipeline_lowercases_folds_stops_and_stems() {
        assert_eq!(
            run("The Cafés are RUNNING into cells!", true, true),
            ["cafe", "run", "cell"]
        );
        assert_eq!(
            run("The Cafés are RUNNING", false, false),
            ["the", "cafes", "are", "running"]
        );
    }

    #[test]
    fn word_bounds_follow_uax29() {
        // Apostrophes, decimal points and underscores join; hyphens and slashes split.
        assert_eq!(
            run("don't 3.14 snake_case IL-6 a/b", false, false),
            ["don't", "3.14", "snake_case", "il", "6", "a", "b"]
        );
        assert_eq!(run("漢字 ελληνικά", false, false), ["漢", "字", "ελληνικά"]);
    }

    #[test]
    fn folding_keeps_non_latin_and_drops_marks_on_ascii() {
        assert_eq!(fold("naïve"), "naive");
        assert_eq!(fold("ﬁne"), "fine");
        assert_eq!(fold("e\u{301}te\u{301}"), "ete");
        assert_eq!(fold("ά"), "ά");
        assert_eq!(fold("α\u{301}"), "α\u{301}");
        assert_eq!(fold("straße"), "straße");
        assert_eq!(fold("it\u{2019}s"), "it's");
    }

    #[test]
    fn possessive_is_stemmed_away_and_cache_is_consistent() {
        let analyzer = Analyzer::new(AnalyzerOptions::default());
        let mut cache = WordCache::default();
        let mut out = Vec::new();
        analyzer.analyze_into("Cell's cells CELLS", &mut cache, &mut out);
        analyzer.analyze_into("cells", &mut cache, &mut out);
        assert_eq!(out, ["cell", "cell", "cell", "cell"]);
    }

    #[test]
    fn batch_preserves_order() {
        let analyzer = Analyzer::new(AnalyzerOptions::default());
        let texts = ["alpha beta", "", "the", "gamma"];
        assert_eq!(
            analyzer.analyze_batch(&texts),
            vec![vec!["alpha", "beta"], vec![], vec![], vec!["gamma"]]
        );
    }
}
