use super::*;

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-12 * a.abs().max(b.abs())
}

#[test]
fn rrf_sums_reciprocal_ranks() {
    let lists = vec![vec![10, 20, 30], vec![20, 40]];
    let f = rrf(&lists, None, 60.0, 10).unwrap();
    assert_eq!(f.ids, vec![20, 10, 40, 30]);
    assert!(close(f.scores[0], 1.0 / 62.0 + 1.0 / 61.0));
    assert!(close(f.scores[1], 1.0 / 61.0));
    assert!(close(f.scores[2], 1.0 / 62.0));
    assert!(close(f.scores[3], 1.0 / 63.0));
}

#[test]
fn rrf_ties_break_by_best_rank_then_key() {
    // equal scores and equal best rank: key ascending (3 and 9, then 1 and 2).
    let f = rrf(&[vec![9, 1], vec![3, 2]], None, 1.0, 10).unwrap();
    assert_eq!(f.ids, vec![3, 9, 1, 2]);
    // equal scores (1/2 = 2/4 exactly), different best rank: rank 1 beats rank 3.
    let f = rrf(&[vec![9, 3], vec![1, 2, 4]], Some(&[1.0, 2.0]), 1.0, 10).unwrap();
    assert_eq!(f.ids, vec![1, 2, 9, 4, 3]);
}

#[test]
fn rrf_repeat_counts_once_at_best_rank() {
    let f = rrf(&[vec![1, 1, 2]], None, 60.0, 10).unwrap();
    assert_eq!(f.ids, vec![1, 2]);
    assert!(close(f.scores[0], 1.0 / 61.0));
    assert!(close(f.scores[1], 1.0 / 63.0));
}

#[test]
fn rrf_weights_and_limit() {
    let lists = vec![vec![1, 2], vec![2, 1]];
    assert_eq!(
        rrf(&lists, Some(&[3.0, 1.0]), 60.0, 1).unwrap().ids,
        vec![1]
    );
    assert_eq!(
        rrf(&lists, Some(&[1.0, 3.0]), 60.0, 1).unwrap().ids,
        vec![2]
    );
    assert_eq!(rrf(&[], None, 60.0, 5).unwrap(), Fused::default());
    assert_eq!(
        rrf(&[vec![], vec![]], None, 60.0, 5).unwrap(),
        Fused::default()
    );
}

#[test]
fn rrf_errors_name_the_argument() {
    let lists = vec![vec![1]];
    let arg = |e: CoreError| match e {
        CoreError::InvalidArgument { arg, .. } | CoreError::TimeLimitExceeded { arg, .. } => arg,
        CoreError::Corrupt(_) | CoreError::Damaged(_) => "corrupt",
    };
    assert_eq!(arg(rrf(&lists, None, 0.0, 1).unwrap_err()), "k");
    assert_eq!(arg(rrf(&lists, None, f64::NAN, 1).unwrap_err()), "k");
    assert_eq!(arg(rrf(&lists, None, 60.0, 0).unwrap_err()), "limit");
    assert_eq!(
        arg(rrf(&lists, Some(&[1.0, 1.0]), 60.0, 1).unwrap_err()),
        "weights"
    );
    assert_eq!(
        arg(rrf(&lists, Some(&[-1.0]), 60.0, 1).unwrap_err()),
        "weights"
    );
    assert_eq!(
        arg(rrf(&lists, Some(&[0.0]), 60.0, 1).unwrap_err()),
        "weights"
    );
    let bad = score_fusion(&lists, &[vec![f64::NAN]], None, Normalization::MinMax, 1);
    assert_eq!(arg(bad.unwrap_err()), "scores");
    let bad = score_fusion(&lists, &[vec![]], None, Normalization::MinMax, 1);
    assert_eq!(arg(bad.unwrap_err()), "scores");
    assert_eq!(arg(Normalization::from_name("max").unwrap_err()), "method");
}

#[test]
fn batch_matches_single_calls() {
    let queries = vec![vec![vec![1, 2], vec![2, 3]], vec![vec![5]]];
    let out = rrf_batch(&queries, None, 60.0, 10).unwrap();
    assert_eq!(out[0], rrf(&queries[0], None, 60.0, 10).unwrap());
    assert_eq!(out[1].ids, vec![5]);
}

#[test]
fn minmax_fusion_with_missing_and_constant_lists() {
    let lists = vec![vec![1, 2, 3], vec![3, 4]];
    let scores = vec![vec![10.0, 5.0, 0.0], vec![7.0, 7.0]];
    let f = score_fusion(&lists, &scores, None, Normalization::MinMax, 10).unwrap();
    // 1: 0.5*1 ; 2: 0.5*0.5 ; 3: 0.5*0 + 0.5*1 ; 4: 0.5*1 (constant list -> 1.0)
    assert_eq!(f.ids, vec![1, 3, 4, 2]);
    assert_eq!(f.scores, vec![0.5, 0.5, 0.5, 0.25]);
}

#[test]
fn zscore_missing_gets_list_minimum() {
    let lists = vec![vec![1, 2], vec![2]];
    let scores = vec![vec![1.0, -1.0], vec![3.0]];
    let f = score_fusion(
        &lists,
        &scores,
        Some(&[1.0, 1.0]),
        Normalization::ZScore,
        10,
    )
    .unwrap();
    // list 0: z = +1, -1 ; list 1: constant -> 0, so 1 is missing there and gets min = 0.
    assert_eq!(f.ids, vec![1, 2]);
    assert_eq!(f.scores, vec![0.5, -0.5]);
}
