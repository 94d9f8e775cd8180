//! Cosine clustering for sleep consolidation: agglomerative clustering with complete or average
//! linkage, cut at a threshold on true cosine similarity.
//!
//! The definition (the Python reference in `tests/core/reference.py` is the same algorithm):
//! 1. Rows are L2-normalised (the kernel owns its copy). A zero row or a NaN/inf value is an
//!    error naming the row: cosine is undefined there and silently dropping it would hide a bug.
//! 2. `cutoff = threshold - TIE_EPS`, so a pair whose exact cosine equals the threshold still
//!    counts after float rounding.
//! 3. Start from singletons. `linkage(A, B)` is the minimum (complete) or the mean (average) of
//!    the cosines of all cross pairs. Repeatedly merge the pair with the largest linkage that is
//!    `>= cutoff`; ties go to the pair whose (smaller, larger) first members is lexicographically
//!    smallest. Cluster ids are their smallest row.
//! 4. Keep clusters with at least `min_cluster_size` rows; rows sorted ascending, clusters by
//!    size descending, then by first row.
//!
//! A min or mean of cosines that are all below the cutoff is below it, so only pairs above the
//! cutoff can ever drive a merge. The Gram matrix is therefore computed in row blocks and only
//! those pairs are kept. Two merge loops make the same merges, ties included:
//! - sparse (`cluster/sparse.rs`): each cluster's links in a hash map of its neighbours, each
//!   cluster's best merge, and a lazy heap of those bests; memory is O(n·d + candidate pairs)
//!   and the 10k × 384 case with ~8k pairs is dominated by the GEMM;
//! - dense (`cluster/dense.rs`), once one pair in `DENSE_SHARE` is a candidate (2k near-copies
//!   of one row: every pair): the links in one condensed n×n matrix, as the hash maps would
//!   take more memory and time there.
//!
//! Average linkage of larger clusters is exact from cluster sum vectors:
//! `sum_{a∈A, b∈B} a·b = (Σa)·(Σb)`.

use std::cmp::Ordering;

use ndarray::linalg::general_mat_mul;
use ndarray::{ArrayView2, ArrayViewMut2};
use rayon::prelude::*;

use crate::error::{CoreError, CoreResult};

mod dense;
mod sparse;

/// Tolerance below the threshold that still counts as meeting it (f32 rounding of unit vectors).
pub const TIE_EPS: f64 = 1e-5;
/// Rows per parallel Gram block, and columns per GEMM tile (bounds the scratch to 4 MiB).
const ROW_BLOCK: usize = 256;
const COL_TILE: usize = 4096;
/// See [`is_dense`].
const DENSE_SHARE: usize = 8;

/// How the similarity of two clusters is derived from their rows' cosines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Linkage {
    /// Every cross pair must be similar: no chaining through a middle row.
    Complete,
    /// The mean cross-pair cosine must be similar.
    Average,
}

impl Linkage {
    /// Parse `"complete"` or `"average"`.
    pub fn parse(name: &str) -> CoreResult<Self> {
        match name {
            "complete" => Ok(Self::Complete),
            "average" => Ok(Self::Average),
            other => Err(CoreError::invalid(
                "linkage",
                format!("must be \"complete\" or \"average\", got {other:?}"),
            )),
        }
    }
}

/// Cluster the `n × d` row-major matrix `vectors` (see the module docs for the exact rules).
pub fn cosine_clusters(
    mut vectors: Vec<f32>,
    n: usize,
    d: usize,
    threshold: f64,
    min_cluster_size: usize,
    linkage: Linkage,
) -> CoreResult<Vec<Vec<u32>>> {
    if !threshold.is_finite() || !(-1.0..=1.0).contains(&threshold) {
        return Err(CoreError::invalid(
            "threshold",
            format!("must be in [-1, 1], got {threshold}"),
        ));
    }
    if min_cluster_size < 2 {
        return Err(CoreError::invalid("min_cluster_size", "must be >= 2"));
    }
    if n.checked_mul(d) != Some(vectors.len()) {
        return Err(CoreError::invalid("vectors", "length does not match n × d"));
    }
    if u32::try_from(n).is_err() {
        return Err(CoreError::invalid(
            "vectors",
            "too many rows (max 2^32 - 1)",
        ));
    }
    if n > 0 && d == 0 {
        return Err(CoreError::invalid(
            "vectors",
            "must have at least one column",
        ));
    }
    normalise_rows(&mut vectors, d)?; // validates every row, even when n is too small
    if n < min_cluster_size {
        return Ok(Vec::new());
    }
    let cutoff = threshold - TIE_EPS;
    let pairs = candidate_pairs(&vectors, n, d, cutoff);
    let members = if is_dense(n, pairs.len()) {
        let mut agg = dense::Agglomerator::new(&vectors, n, d, linkage, cutoff, &pairs);
        agg.run();
        agg.into_members()
    } else {
        let mut agg = sparse::Agglomerator::new(&vectors, n, d, linkage, cutoff, &pairs);
        agg.run();
        agg.into_members()
    };
    Ok(into_clusters(members, min_cluster_size))
}

/// Whether the merge loop keeps every pair's link in one matrix (8 bytes a pair of rows) rather
/// than in hash maps (~40 bytes an entry, two a candidate pair): from one candidate in
/// `DENSE_SHARE` pairs on, the matrix is the smaller, and (2,048 rows, at 1 in 8) the faster.
fn is_dense(n: usize, candidates: usize) -> bool {
    candidates.saturating_mul(DENSE_SHARE) >= n * n.saturating_sub(1) / 2
}

fn normalise_rows(x: &mut [f32], d: usize) -> CoreResult<()> {
    for (i, row) in x.chunks_exact_mut(d.max(1)).enumerate() {
        let mut sq = 0.0f64;
        for &v in row.iter() {
            if !v.is_finite() {
                return Err(CoreError::invalid(
                    "vectors",
                    format!("row {i} contains NaN or inf"),
                ));
            }
            sq += f64::from(v) * f64::from(v);
        }
        if sq == 0.0 {
            return Err(CoreError::invalid(
                "vectors",
                format!("row {i} is all zeros (cosine similarity is undefined)"),
            ));
        }
        let inv = 1.0 / sq.sqrt();
        for v in row.iter_mut() {
            *v = (f64::from(*v) * inv) as f32;
        }
    }
    Ok(())
}

/// All pairs `i < j` with `cos >= cutoff`, from a blocked Gram matrix (row blocks in parallel).
fn candidate_pairs(x: &[f32], n: usize, d: usize, cutoff: f64) -> Vec<(u32, u32, f32)> {
    // Row-major `rows × d` views straight over the slice.
    let view = |r0: usize, r1: usize| {
        ArrayView2::from_shape((r1 - r0, d), &x[r0 * d..r1 * d]).expect("shape checked")
    };
    let starts: Vec<usize> = (0..n).step_by(ROW_BLOCK).collect();
    let blocks: Vec<Vec<(u32, u32, f32)>> = starts
        .par_iter()
        .map(|&r0| {
            let r1 = (r0 + ROW_BLOCK).min(n);
            let rows = view(r0, r1);
            let mut scratch = vec![0.0f32; (r1 - r0) * COL_TILE.min(n - r0)];
            let mut out = Vec::new();
            // Columns from r0 on: the upper triangle, plus a small wasted diagonal block.
            for c0 in (r0..n).step_by(COL_TILE) {
                let c1 = (c0 + COL_TILE).min(n);
                let width = c1 - c0;
                let mut tile =
                    ArrayViewMut2::from_shape((r1 - r0, width), &mut scratch[..(r1 - r0) * width])
                        .expect("scratch is large enough");
                general_mat_mul(1.0, &rows, &view(c0, c1).t(), 0.0, &mut tile);
                for (bi, sims) in tile.outer_iter().enumerate() {
                    let i = r0 + bi;
                    let first = (i + 1).saturating_sub(c0);
                    for (k, &sim) in sims.iter().enumerate().skip(first) {
                        if f64::from(sim) >= cutoff {
                            out.push((i as u32, (c0 + k) as u32, sim));
                        }
                    }
                }
            }
            out
        })
        .collect();
    blocks.concat()
}

/// The score of a link whose clusters may not merge.
const NO_MERGE: f64 = f64::NEG_INFINITY;

/// A cluster's best merge: its partner among the clusters with a larger id.
#[derive(Debug, Clone, Copy)]
struct Best {
    score: f64,
    partner: u32,
}

impl Best {
    /// Higher score first; among equal scores the smaller partner.
    fn beats(self, other: Option<Best>) -> bool {
        other.is_none_or(|o| match self.score.total_cmp(&o.score) {
            Ordering::Equal => self.partner < o.partner,
            order => order == Ordering::Greater,
        })
    }
}

/// The clusters with at least `min_cluster_size` rows, in the order the module docs define.
fn into_clusters(members: Vec<Vec<u32>>, min_cluster_size: usize) -> Vec<Vec<u32>> {
    let mut clusters: Vec<Vec<u32>> = members
        .into_iter()
        .filter(|m| m.len() >= min_cluster_size)
        .map(|mut m| {
            m.sort_unstable();
            m
        })
        .collect();
    clusters.sort_by(|p, q| q.len().cmp(&p.len()).then(p[0].cmp(&q[0])));
    clusters
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Unit vectors in the plane at the given angles (degrees), padded to 3 dims.
    fn angles(degrees: &[f64]) -> Vec<f32> {
        degrees
            .iter()
            .flat_map(|deg| {
                let r = deg.to_radians();
                [r.cos() as f32, r.sin() as f32, 0.0]
            })
            .collect()
    }

    fn run(x: &[f32], d: usize, t: f64, min: usize, linkage: Linkage) -> Vec<Vec<u32>> {
        cosine_clusters(x.to_vec(), x.len() / d, d, t, min, linkage).unwrap()
    }

    #[test]
    fn complete_linkage_does_not_chain() {
        // A~B (cos 25°), B~C (cos 30°), A≁C (cos 55°) at threshold 0.8.
        let x = angles(&[0.0, 25.0, 55.0]);
        assert_eq!(run(&x, 3, 0.8, 2, Linkage::Complete), vec![vec![0, 1]]);
        assert_eq!(run(&x, 3, 0.8, 2, Linkage::Average), vec![vec![0, 1]]);
        assert!(run(&x, 3, 0.8, 3, Linkage::Complete).is_empty());
    }

    #[test]
    fn average_linkage_merges_what_complete_refuses() {
        // Pairs: 0-1 and 0-2 very close, 1-2 just under the threshold: mean over pairs is above it.
        let x = angles(&[0.0, 16.0, -16.0]);
        let t = 31f64.to_radians().cos();
        assert_eq!(run(&x, 3, t, 3, Linkage::Average), vec![vec![0, 1, 2]]);
        assert!(run(&x, 3, t, 3, Linkage::Complete).is_empty());
    }

    #[test]
    fn exact_threshold_counts_and_scale_is_ignored() {
        // cos = 0.5 exactly; rows need not be unit length.
        let x = vec![2.0, 0.0, 0.0, 0.0, 0.5, 0.5, 0.5, 0.5];
        assert_eq!(run(&x, 4, 0.5, 2, Linkage::Complete), vec![vec![0, 1]]);
        assert!(run(&x, 4, 0.5 + 1e-4, 2, Linkage::Complete).is_empty());
    }

    #[test]
    fn ordering_is_by_size_then_first_row() {
        let x = angles(&[90.0, 0.0, 90.5, 1.0, 0.5, 180.0, 180.5]);
        let got = run(&x, 3, 0.99, 2, Linkage::Complete);
        assert_eq!(got, vec![vec![1, 3, 4], vec![0, 2], vec![5, 6]]);
    }

    #[test]
    fn many_rows_cross_block_boundaries() {
        // 600 rows: pairs (2k, 2k+1) nearly equal, in distinct directions of a 600-dim space.
        let n = 600;
        let mut x = vec![0.0f32; n * n];
        for k in 0..n / 2 {
            x[2 * k * n + k] = 1.0;
            x[(2 * k + 1) * n + k] = 1.0;
            x[(2 * k + 1) * n + n / 2 + k] = 0.05;
        }
        let got = run(&x, n, 0.95, 2, Linkage::Complete);
        let want: Vec<Vec<u32>> = (0..n as u32 / 2).map(|k| vec![2 * k, 2 * k + 1]).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn dense_and_sparse_loops_merge_alike() {
        // Rows of small integers: many exactly tied merges, and thresholds at which most pairs
        // are candidates. Both loops must merge the same clusters in the same order.
        let mut state = 7u64;
        let mut next = |bound: u64| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (state >> 33) % bound
        };
        for case in 0..400 {
            let n = 2 + next(60) as usize;
            let d = 2 + next(5) as usize;
            let mut x: Vec<f32> = (0..n * d).map(|_| next(3) as f32).collect();
            for row in x.chunks_exact_mut(d) {
                row[0] += 1.0; // no zero rows
            }
            normalise_rows(&mut x, d).unwrap();
            let cutoff = [0.0, 0.5, 0.7, 0.9][case % 4] - TIE_EPS;
            let linkage = [Linkage::Complete, Linkage::Average][case / 4 % 2];
            let pairs = candidate_pairs(&x, n, d, cutoff);
            let mut sparse = sparse::Agglomerator::new(&x, n, d, linkage, cutoff, &pairs);
            sparse.run();
            let mut dense = dense::Agglomerator::new(&x, n, d, linkage, cutoff, &pairs);
            dense.run();
            assert_eq!(sparse.into_members(), dense.into_members(), "case {case}");
        }
    }

    #[test]
    fn errors_name_the_argument() {
        let err = |x: Vec<f32>, n, d, t, m, l: &str| {
            let linkage = Linkage::parse(l)?;
            cosine_clusters(x, n, d, t, m, linkage)
        };
        let msg = |r: CoreResult<Vec<Vec<u32>>>| r.unwrap_err().to_string();
        assert!(msg(err(vec![1.0, 0.0, 0.0, 0.0], 2, 2, 0.5, 2, "complete")).contains("row 1"));
        assert!(msg(err(vec![f32::NAN, 1.0], 1, 2, 0.5, 2, "complete")).starts_with("vectors:"));
        assert!(msg(err(vec![1.0], 1, 1, 1.5, 2, "complete")).starts_with("threshold:"));
        assert!(msg(err(vec![1.0], 1, 1, 0.5, 1, "complete")).starts_with("min_cluster_size:"));
        assert!(msg(err(vec![1.0], 1, 1, 0.5, 2, "single")).starts_with("linkage:"));
        assert!(msg(err(vec![1.0], 2, 1, 0.5, 2, "average")).starts_with("vectors:"));
        assert!(run(&[], 1, 0.5, 2, Linkage::Complete).is_empty());
    }
}
