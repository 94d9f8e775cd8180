use super::super::tests::{docs, plain};
use super::*;
use crate::bm25::{Base, Bm25Params};

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
                    let norm = params.k1 * (1.0 - params.b + params.b * doc.len() as f64 / avgdl);
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
        let hits = index.search(&Base::EMPTY, query, 10, None, None).unwrap();
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
    let hits = index.search(&Base::EMPTY, "x", 2, None, None).unwrap();
    assert_eq!(hits.iter().map(|h| h.0).collect::<Vec<_>>(), [0, 1]);
    assert!(index
        .search(&Base::EMPTY, "nothing", 5, None, None)
        .unwrap()
        .is_empty());
}

#[test]
fn ties_break_by_the_keys_given_in_dense_and_sparse_scans() {
    // Equal scores at 5, 17 and 30 among 4 documents (a dense scan) and among 40 (sparse).
    for n in [4_usize, 40] {
        let at = if n == 4 { [0, 1, 2] } else { [5, 17, 30] };
        let texts: Vec<&str> = (0..n)
            .map(|i| if at.contains(&i) { "x y" } else { "z w" })
            .collect();
        let index = Bm25Index::build(&texts, Bm25Params::default(), plain()).unwrap();
        let ties: Vec<i64> = (0..n as i64).rev().collect(); // the last position first
        let keyed = index
            .search_keyed(&Base::EMPTY, "x", 2, None, None, Some(&ties))
            .unwrap();
        let want = [at[2] as u32, at[1] as u32];
        assert_eq!(keyed.iter().map(|h| h.0).collect::<Vec<_>>(), want);
        let masked = index
            .search_masked(&Base::EMPTY, "x", 2, &vec![true; n], None, Some(&ties))
            .unwrap();
        assert_eq!(masked, keyed);
    }
    let index = Bm25Index::build(&docs(), Bm25Params::default(), plain()).unwrap();
    let short = index.search_keyed(&Base::EMPTY, "apple", 2, None, None, Some(&[0, 1]));
    assert!(short.is_err());
}

#[test]
fn scores_at_equals_the_scores_search_returns() {
    // Generated documents over a small vocabulary: common terms make dense queries,
    // rare ones sparse; some documents are removed.
    let words = ["a", "b", "c", "d", "e", "f", "g", "h", "rare", "once"];
    let mut state = 7_u64;
    let mut next = |m: u64| {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 33) % m
    };
    let texts: Vec<String> = (0..400)
        .map(|_| {
            let len = 1 + next(12);
            let pick = |r: u64| {
                words[if r < 90 {
                    (r % 8) as usize
                } else {
                    8 + (r % 2) as usize
                }]
            };
            (0..len)
                .map(|_| pick(next(100)))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    let mut index = Bm25Index::build(&texts, Bm25Params::default(), plain()).unwrap();
    index.remove(&[3, 50, 399], 0).unwrap();
    let all: Vec<i64> = (0..400).collect();
    for query in [
        "a",
        "a b c",
        "rare",
        "once a a",
        "h rare once",
        "missing",
        "b d f h",
    ] {
        let hits = index.search(&Base::EMPTY, query, 400, None, None).unwrap();
        let mut want = vec![0.0_f32; 400];
        for (d, s) in hits {
            want[d as usize] = s;
        }
        assert_eq!(
            index.scores_at(&Base::EMPTY, query, &all, None).unwrap(),
            want,
            "{query}"
        );
    }
    let err = index
        .scores_at(&Base::EMPTY, "a", &[400], None)
        .unwrap_err();
    assert!(err.to_string().starts_with("positions:"));
}

#[test]
fn seen_scores_as_an_index_of_only_those_documents() {
    let texts = [
        "apple banana",
        "apple cherry cherry",
        "banana date",
        "apple apple date fig",
        "cherry",
    ];
    let mut index = Bm25Index::build(&texts, Bm25Params::default(), plain()).unwrap();
    index.remove(&[4], 0).unwrap();
    let seen = [true, false, true, true, true]; // (4 is removed: not counted)
    let alone = Bm25Index::build(
        &[texts[0], texts[2], texts[3]],
        Bm25Params::default(),
        plain(),
    )
    .unwrap();
    let at = [0_u32, 2, 3];
    let none = &Base::EMPTY;
    for query in ["apple", "apple date", "banana cherry", "fig fig", "cherry"] {
        let want: Vec<(u32, f32)> = alone
            .search(none, query, 10, None, None)
            .unwrap()
            .into_iter()
            .map(|(p, s)| (at[p as usize], s))
            .collect();
        let got = index.search(none, query, 10, Some(&[0, 2, 3]), Some(&seen));
        assert_eq!(got.unwrap(), want, "{query}");
        let scores = index.scores_at(none, query, &[0, 2, 3], Some(&seen));
        let alone_scores = alone.scores_at(none, query, &[0, 1, 2], None);
        assert_eq!(scores.unwrap(), alone_scores.unwrap(), "{query}");
        let covered = index.coverage(none, query, &[0, 2, 3], Some(&seen));
        let alone_covered = alone.coverage(none, query, &[0, 1, 2], None);
        assert_eq!(covered.unwrap(), alone_covered.unwrap(), "{query}");
    }
    // Every live document marked: the index's own statistics, bit for bit.
    let all = [true, true, true, true, false];
    assert_eq!(
        index
            .search(none, "apple date", 10, None, Some(&all))
            .unwrap(),
        index.search(none, "apple date", 10, None, None).unwrap()
    );
    let err = index
        .search(none, "apple", 1, None, Some(&[true]))
        .unwrap_err();
    assert!(err.to_string().starts_with("seen:"));
}

#[test]
fn allowed_restricts_and_batch_matches_single() {
    let index = Bm25Index::build(&docs(), Bm25Params::default(), plain()).unwrap();
    let hits = index
        .search(&Base::EMPTY, "apple banana", 10, Some(&[2, 3]), None)
        .unwrap();
    assert_eq!(hits.iter().map(|h| h.0).collect::<Vec<_>>(), [2]);
    let batch = index
        .search_batch(
            &Base::EMPTY,
            &["apple", "cherry"],
            3,
            Some(&[0, 1, 3]),
            None,
        )
        .unwrap();
    assert_eq!(
        batch[1],
        index
            .search(&Base::EMPTY, "cherry", 3, Some(&[0, 1, 3]), None)
            .unwrap()
    );
    let err = index
        .search(&Base::EMPTY, "apple", 1, Some(&[4]), None)
        .unwrap_err();
    assert!(err.to_string().starts_with("allowed:"));
}
