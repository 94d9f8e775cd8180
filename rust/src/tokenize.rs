//! Text analysis shared by documents and queries.
//!
//! Pipeline, per text: Unicode words (UAX #29 word bounds, keeping the segments that hold a
//! letter or digit) → lowercase → ASCII folding → English stopwords → Snowball English stem.
//!
//! Greek letters as symbols: in a word that also holds a Latin letter or a digit, or of at most
//! two letters, each Greek letter is spelled out (`TNF-α` → `tnf`, `alpha`; `NF-κB` → `nf`,
//! `kappab`), since technical writing uses `α` and `alpha` interchangeably. Longer all-Greek
//! words are Greek text and stay as they are.
//!
//! Hyphenated compounds: UAX #29 splits `IL-6` into `IL` and `6`. Each part stays a term, and
//! the compound joined without its hyphens (`il6`) is one more term after its last part, so
//! `IL-6`, `IL6` and `il-6` all meet, and a query's `TNF-alpha` prefers the documents holding
//! that compound over those with `TNF` and `alpha` apart (Lucene's word-delimiter filter with
//! `catenateWords`/`catenateNumbers` does the same).
//!
//! Identifiers: UAX #29 keeps `max_connections`, `pgbouncer.ini` and `os.path.join` whole. Such
//! a word stays a term, and its parts follow it as terms of their own (`max`, `connections`;
//! `pgbouncer`, `ini`; `path`, `join`), so the words a person says about code meet the
//! identifier that holds them, and an identifier asked for whole still prefers the text that
//! holds it whole. Parts are cut at underscores, and at a `.` or `:` unless digits stand on both
//! sides (`3.14`, `v2.3.1` stay whole; a version's number follows it without its `v`, `2.3.1`,
//! as people write it either way). A part shorter than [`MIN_PART_CHARS`] is left out: in
//! prose those are abbreviations (`e.g.`, `U.S.`) whose letters alone would match unrelated
//! text. Mixed case (`getConnectionPool`, `HeLa`, `mRNA`) is not cut: in scientific text it
//! marks symbols, not words, and cutting it cost SciFact's nDCG@10 0.0017. Lucene's
//! word-delimiter filter with `preserveOriginal` does the same kind of thing.
//!
//! Language names: UAX #29 leaves the marks of `C++`, `C#` and `F#` out of the word, so all
//! three were the term `c`, which every "Plan C" matched too. A word followed by `++` or `#`,
//! with no letter or digit after the mark, keeps the mark (`c++`, `c#`, `f#`, `g++`).
//!
//! ASCII folding works per character: a non-ASCII character whose compatibility decomposition
//! (NFKD) minus combining marks is all ASCII becomes that ASCII text (`é`→`e`, `ﬁ`→`fi`,
//! fullwidth `ａ`→`a`); curly single quotes become `'`; a combining mark that follows ASCII
//! output (or starts the word) is dropped; everything else (Greek, Cyrillic, CJK, `ß`) is kept
//! as it is. Invisible format characters are dropped first (`is_invisible`: the soft hyphen of
//! HTML's `&shy;` and hyphenated PDF text, zero-width spaces and joiners, direction marks, the
//! byte order mark): UAX #29 keeps them inside a word, so `infor\u{ad}mation` was a term of its
//! own that a search for "information" never met.

use std::borrow::Cow;

use rayon::prelude::*;
use rust_stemmers::{Algorithm, Stemmer};
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};
use unicode_segmentation::UnicodeSegmentation;

mod chars;
use chars::is_hyphen;
pub use chars::{fold, is_stopword, spell_greek, ENGLISH_STOPWORDS};

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

/// Marks a word the analyser dropped (stopword, or nothing left after folding).
const DROPPED: u32 = u32::MAX;

/// A per-worker memo for analysing many texts: raw word → id in a local token table.
/// Words repeat a lot, so most words cost one hash lookup and no allocation.
#[derive(Debug, Default)]
pub struct Interner<'t> {
    words: FxHashMap<&'t str, u32>,
    ids: FxHashMap<String, u32>,
    tokens: Vec<String>,
}

impl Interner<'_> {
    /// The distinct tokens seen so far, indexed by local id.
    pub fn tokens(&self) -> &[String] {
        &self.tokens
    }

    /// Consume the interner, returning its token table.
    pub fn into_tokens(self) -> Vec<String> {
        self.tokens
    }
}

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
        let folded = spell_greek(fold(&word.to_lowercase()));
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

    /// Analyse a word as [`Analyzer::analyze_word`] does, or a compound (a word holding
    /// hyphens, from [`words`]) as its parts joined.
    fn analyze_term(&self, word: &str) -> Option<String> {
        if word.contains(is_hyphen) {
            self.analyze_word(&word.replace(is_hyphen, ""))
        } else {
            self.analyze_word(word)
        }
    }

    /// Analyse one text (no memo: the right choice for a short query).
    pub fn analyze(&self, text: &str) -> Vec<String> {
        let mut out = Vec::new();
        words(text, |w| out.extend(self.analyze_term(w)));
        out
    }

    /// Analyse `text`, appending local token ids of `interner` to `out`.
    pub fn analyze_ids<'t>(&self, text: &'t str, interner: &mut Interner<'t>, out: &mut Vec<u32>) {
        words(text, |word| {
            let id = match interner.words.get(word) {
                Some(&id) => id,
                None => {
                    let id = match self.analyze_term(word) {
                        None => DROPPED,
                        Some(token) => match interner.ids.get(&token) {
                            Some(&id) => id,
                            None => {
                                let id = interner.tokens.len() as u32;
                                interner.ids.insert(token.clone(), id);
                                interner.tokens.push(token);
                                id
                            }
                        },
                    };
                    interner.words.insert(word, id);
                    id
                }
            };
            if id != DROPPED {
                out.push(id);
            }
        });
    }

    /// Analyse many texts in parallel chunks: per text, local token ids, plus each chunk's
    /// token table. Chunks come back in input order.
    pub fn analyze_chunks<S: AsRef<str> + Sync>(
        &self,
        texts: &[S],
    ) -> Vec<(Vec<Vec<u32>>, Vec<String>)> {
        let workers = rayon::current_num_threads().max(1);
        let chunk = texts.len().div_ceil(workers * 4).max(256);
        texts
            .par_chunks(chunk)
            .map(|part| {
                let mut interner = Interner::default();
                let docs = part
                    .iter()
                    .map(|text| {
                        let mut ids = Vec::new();
                        self.analyze_ids(text.as_ref(), &mut interner, &mut ids);
                        ids
                    })
                    .collect();
                (docs, interner.into_tokens())
            })
            .collect()
    }

    /// Analyse many texts in parallel, preserving order.
    pub fn analyze_batch<S: AsRef<str> + Sync>(&self, texts: &[S]) -> Vec<Vec<String>> {
        let mut out = Vec::with_capacity(texts.len());
        for (docs, tokens) in self.analyze_chunks(texts) {
            out.extend(
                docs.into_iter()
                    .map(|ids| ids.iter().map(|&i| tokens[i as usize].clone()).collect()),
            );
        }
        out
    }
}

/// Call `f` with each UAX #29 word of `text` that holds a letter or digit, in order, each
/// followed by its identifier parts (module docs); after the last part of a compound (words
/// joined by single hyphens, nothing else between them), call it once more with the
/// compound's whole span, hyphens included (`IL-6`, `TNF-alpha`).
fn words<'t>(text: &'t str, mut f: impl FnMut(&'t str)) {
    // The open run of parts: (start, end of its last part, parts so far).
    let mut run: Option<(usize, usize, usize)> = None;
    let mut hyphen = false; // one hyphen follows the run's last part
    for (at, seg) in text.split_word_bound_indices() {
        if seg.chars().any(char::is_alphanumeric) {
            run = match run {
                Some((start, _, parts)) if hyphen => Some((start, at + seg.len(), parts + 1)),
                open => {
                    close_compound(text, open, &mut f);
                    Some((at, at + seg.len(), 1))
                }
            };
            hyphen = false;
            f(with_language_mark(text, at, seg));
            identifier_parts(seg, &mut f);
        } else if !hyphen && run.is_some() && seg.chars().count() == 1 && seg.contains(is_hyphen) {
            hyphen = true;
        } else {
            close_compound(text, run.take(), &mut f);
            hyphen = false;
        }
    }
    close_compound(text, run, &mut f);
}

/// `word` (at `at` in `text`) with the `++` or `#` that follows it (`C++`, `C#`, `F#`, `g++`)
/// when a letter or digit ends it and none follows the mark (module docs); else `word`.
fn with_language_mark<'t>(text: &'t str, at: usize, word: &'t str) -> &'t str {
    let end = at + word.len();
    if !word.chars().next_back().is_some_and(char::is_alphanumeric) {
        return word;
    }
    for mark in ["++", "#"] {
        if text[end..].starts_with(mark) {
            let after = text[end + mark.len()..].chars().next();
            if !after.is_some_and(char::is_alphanumeric) {
                return &text[at..end + mark.len()];
            }
        }
    }
    word
}

/// The fewest characters an identifier's part needs to be a term of its own (module docs).
pub const MIN_PART_CHARS: usize = 3;

/// Call `f` with each part of an identifier word (module docs), unless it has none.
fn identifier_parts<'t>(word: &'t str, f: &mut impl FnMut(&'t str)) {
    if !word.contains(['_', '.', ':']) {
        return; // most words: nothing to cut, and nothing allocated
    }
    let mut parts: Vec<&'t str> = Vec::new();
    let mut start = 0;
    let mut before: Option<char> = None;
    let mut chars = word.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        let digits = before.is_some_and(char::is_numeric)
            && chars.peek().is_some_and(|&(_, after)| after.is_numeric());
        if c == '_' || (matches!(c, '.' | ':') && !digits) {
            parts.push(&word[start..at]);
            start = at + c.len_utf8();
        }
        before = Some(c);
    }
    parts.push(&word[start..]);
    parts.retain(|part| {
        part.chars().count() >= MIN_PART_CHARS && part.chars().any(char::is_alphanumeric)
    });
    let cut = parts.len() > 1 || parts.first().is_some_and(|&part| part.len() < word.len());
    for part in parts {
        if cut {
            f(part);
        }
        if let Some(number) = version_number(part) {
            f(number);
        }
    }
}

/// The number of a version written with its `v` (`v1.2.3` → `1.2.3`), which people write with
/// or without it; None for any other word.
fn version_number(part: &str) -> Option<&str> {
    let number = part.strip_prefix(['v', 'V'])?;
    let dotted = number.contains('.') && number.starts_with(|c: char| c.is_ascii_digit());
    (dotted && number.chars().all(|c| c.is_ascii_digit() || c == '.')).then_some(number)
}

/// Emit a finished run of parts as a compound when it has more than one part.
fn close_compound<'t>(
    text: &'t str,
    run: Option<(usize, usize, usize)>,
    f: &mut impl FnMut(&'t str),
) {
    if let Some((start, end, parts)) = run {
        if parts > 1 {
            f(&text[start..end]);
        }
    }
}

#[cfg(test)]
mod tests;
