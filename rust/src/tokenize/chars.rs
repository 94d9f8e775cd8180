//! Character-level analysis (the module docs of `tokenize` give the rules): ASCII folding with
//! invisible format characters dropped, Greek letters spelled out as symbols, hyphens, and the
//! English stopword list.

use unicode_normalization::char::{decompose_compatible, is_combining_mark};

/// English stopwords: the 33-word list Lucene's `EnglishAnalyzer` uses, which is also what
/// bm25s uses for `stopwords="en"`, so quality comparisons with bm25s are like for like.
pub const ENGLISH_STOPWORDS: [&str; 33] = [
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it",
    "no", "not", "of", "on", "or", "such", "that", "the", "their", "then", "there", "these",
    "they", "this", "to", "was", "will", "with",
];

/// The English name of a lowercase Greek letter (and of the micro sign, which is a mu).
fn greek_name(c: char) -> Option<&'static str> {
    Some(match c {
        'α' => "alpha",
        'β' | 'ϐ' => "beta",
        'γ' => "gamma",
        'δ' => "delta",
        'ε' | 'ϵ' => "epsilon",
        'ζ' => "zeta",
        'η' => "eta",
        'θ' | 'ϑ' => "theta",
        'ι' => "iota",
        'κ' | 'ϰ' => "kappa",
        'λ' => "lambda",
        'μ' | 'µ' => "mu",
        'ν' => "nu",
        'ξ' => "xi",
        'ο' => "omicron",
        'π' | 'ϖ' => "pi",
        'ρ' | 'ϱ' => "rho",
        'σ' | 'ς' => "sigma",
        'τ' => "tau",
        'υ' => "upsilon",
        'φ' | 'ϕ' => "phi",
        'χ' => "chi",
        'ψ' => "psi",
        'ω' => "omega",
        _ => return None,
    })
}

/// Spell out the Greek letters of a lowercased, folded word used as symbols (module docs).
pub fn spell_greek(word: String) -> String {
    let greek = word.chars().filter(|&c| greek_name(c).is_some()).count();
    if greek == 0 {
        return word;
    }
    let symbols = word.chars().any(|c| c.is_ascii_alphanumeric()) || word.chars().count() <= 2;
    if !symbols {
        return word;
    }
    let mut out = String::with_capacity(word.len() + 4 * greek);
    for c in word.chars() {
        match greek_name(c) {
            Some(name) => out.push_str(name),
            None => out.push(c),
        }
    }
    out
}

/// Hyphen-minus, hyphen and non-breaking hyphen: what joins the parts of a compound.
pub(super) fn is_hyphen(c: char) -> bool {
    matches!(c, '-' | '\u{2010}' | '\u{2011}')
}

/// Whether `word` (lowercased, folded) is an English stopword.
pub fn is_stopword(word: &str) -> bool {
    ENGLISH_STOPWORDS.binary_search(&word).is_ok()
}

/// Whether `c` is an invisible format character that the analyser drops (module docs): the
/// soft hyphen, the Arabic letter mark, the Mongolian vowel separator, zero-width spaces and
/// (non-)joiners, direction marks, embeddings and isolates, the word joiner and invisible
/// operators, the byte order mark, shorthand format controls and tag characters.
fn is_invisible(c: char) -> bool {
    matches!(
        c,
        '\u{ad}'
            | '\u{61c}'
            | '\u{180e}'
            | '\u{200b}'..='\u{200f}'
            | '\u{202a}'..='\u{202e}'
            | '\u{2060}'..='\u{206f}'
            | '\u{feff}'
            | '\u{1bca0}'..='\u{1bca3}'
            | '\u{e0000}'..='\u{e0fff}'
    )
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
        if is_invisible(c) {
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
