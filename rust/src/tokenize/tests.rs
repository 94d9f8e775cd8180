use super::*;

fn run(text: &str, stem: bool, stopwords: bool) -> Vec<String> {
    Analyzer::new(AnalyzerOptions { stem, stopwords }).analyze(text)
}

/// `text`'s terms by the memoised path (documents), checked equal to the plain one
/// (queries), with the default options.
fn memoised_agrees(text: &str) -> Vec<String> {
    let analyzer = Analyzer::new(AnalyzerOptions::default());
    let mut interner = Interner::default();
    let mut ids = Vec::new();
    analyzer.analyze_ids(text, &mut interner, &mut ids);
    let via_ids: Vec<String> = ids
        .iter()
        .map(|&i| interner.tokens()[i as usize].clone())
        .collect();
    assert_eq!(via_ids, analyzer.analyze(text));
    via_ids
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
        run("don't 3.14 snake_case a/b", false, false),
        ["don't", "3.14", "snake_case", "snake", "case", "a", "b"]
    );
    assert_eq!(run("漢字 ελληνικά", false, false), ["漢", "字", "ελληνικά"]);
}

#[test]
fn hyphenated_compounds_keep_their_parts_and_the_joined_word() {
    assert_eq!(
        run("IL-6 and TNF\u{2011}alpha, anti-inflammatory.", true, true),
        [
            "il",
            "6",
            "il6",
            "tnf",
            "alpha",
            "tnfalpha",
            "anti",
            "inflammatori",
            "antiinflammatori"
        ]
    );
    assert_eq!(
        run("PI-3-kinase", false, false),
        ["pi", "3", "kinase", "pi3kinase"]
    );
    // Spaces, doubled or trailing hyphens and other punctuation end a compound.
    assert_eq!(
        run("a - b c--d e- f/g", false, false),
        ["a", "b", "c", "d", "e", "f", "g"]
    );
    assert_eq!(
        memoised_agrees("IL-6 IL6 il-6 x-ray-s"),
        ["il", "6", "il6", "il6", "il", "6", "il6", "x", "ray", "s", "xray"]
    );
}

#[test]
fn identifiers_keep_the_whole_word_and_add_their_parts() {
    assert_eq!(
        run(
            "max_connections pgbouncer.ini os.path.join std:io __init__",
            false,
            false
        ),
        [
            "max_connections",
            "max",
            "connections",
            "pgbouncer.ini",
            "pgbouncer",
            "ini",
            "os.path.join",
            "path",
            "join",
            "std:io",
            "std",
            "__init__",
            "init"
        ]
    );
    // Numbers, abbreviations and mixed case stay one term; a version with its `v` is
    // followed by its number alone.
    assert_eq!(
        run(
            "3.14 v2.3.1 e.g. U.S. a_b getConnectionPool mRNA don't",
            false,
            false
        ),
        [
            "3.14",
            "v2.3.1",
            "2.3.1",
            "e.g",
            "u.s",
            "a_b",
            "getconnectionpool",
            "mrna",
            "don't"
        ]
    );
    assert_eq!(
        memoised_agrees("snake_case file.txt snake_case"),
        [
            "snake_cas",
            "snake",
            "case",
            "file.txt",
            "file",
            "txt",
            "snake_cas",
            "snake",
            "case"
        ]
    );
}

#[test]
fn greek_letters_used_as_symbols_are_spelled_out() {
    assert_eq!(
        run("TNF-α NF-κB αvβ8 β µg Ελλάδα", false, false),
        [
            "tnf",
            "alpha",
            "tnfalpha",
            "nf",
            "kappab",
            "nfkappab",
            "alphavbeta8",
            "beta",
            "mug",
            "ελλάδα"
        ]
    );
    assert_eq!(spell_greek("γδ".into()), "gammadelta");
    assert_eq!(spell_greek("λόγος".into()), "λόγος");
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
fn invisible_format_characters_are_dropped_inside_a_word() {
    // Before: `infor\u{ad}mation` (a soft hyphen) stayed one term of its own.
    assert_eq!(
        run("infor\u{ad}mation", true, true),
        run("information", true, true)
    );
    assert_eq!(
        fold("zero\u{200b}\u{200d}width\u{2060}\u{feff}"),
        "zerowidth"
    );
    assert_eq!(fold("\u{200f}\u{202e}rtl"), "rtl");
    assert!(run("\u{93f}\u{200d}", true, true).is_empty()); // (was the term "\u{200d}")
    assert_eq!(fold("na\u{ad}\u{ef}ve"), "naive");
}

#[test]
fn possessive_is_stemmed_away_and_interner_dedupes_tokens() {
    let analyzer = Analyzer::new(AnalyzerOptions::default());
    let mut interner = Interner::default();
    let mut out = Vec::new();
    analyzer.analyze_ids("Cell's cells CELLS the", &mut interner, &mut out);
    analyzer.analyze_ids("cells dogs", &mut interner, &mut out);
    assert_eq!(out, [0, 0, 0, 0, 1]);
    assert_eq!(interner.tokens(), ["cell", "dog"]);
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
