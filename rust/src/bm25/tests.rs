use super::*;

pub(super) fn plain() -> AnalyzerOptions {
    AnalyzerOptions {
        stem: false,
        stopwords: false,
    }
}

pub(super) fn docs() -> Vec<&'static str> {
    vec![
        "apple banana",
        "apple apple cherry",
        "banana",
        "cherry cherry cherry date",
    ]
}

#[test]
fn remove_equals_fresh_build_over_the_rest() {
    let params = Bm25Params::new(1.5, 0.5).unwrap();
    let mut index = Bm25Index::build(&docs(), params, plain()).unwrap();
    index.remove(&[1, 1], 0).unwrap();
    let fresh = Bm25Index::build(
        &["apple banana", "banana", "cherry cherry cherry date"],
        params,
        plain(),
    )
    .unwrap();
    let map = [0u32, 2, 3];
    let got = index
        .search(&Base::EMPTY, "apple cherry banana", 10, None, None)
        .unwrap();
    let want: Vec<(u32, f32)> = fresh
        .search(&Base::EMPTY, "apple cherry banana", 10, None, None)
        .unwrap()
        .into_iter()
        .map(|(p, s)| (map[p as usize], s))
        .collect();
    assert_eq!(got, want);
    assert_eq!(index.doc_count(), 3);
    assert_eq!(index.position_count(), 4);
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
        .search(&Base::EMPTY, "apple", 0, None, None)
        .unwrap_err()
        .to_string()
        .starts_with("k:"));
    let mut index = index;
    assert!(index
        .remove(&[-1], 0)
        .unwrap_err()
        .to_string()
        .starts_with("positions:"));
}
