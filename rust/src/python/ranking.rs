//! Bindings of the ranking kernels: rank and score fusion, decayed importance, cosine clustering.

use numpy::{IntoPyArray, PyArray1, PyReadonlyArray1};
use pyo3::prelude::*;

use super::{detached, extract_arg};
use crate::error::CoreError;
use crate::{cluster, decay, fusion};

// ---- fusion

const LISTS_RULE: &str = "must be a sequence of sequences of integer ids";
const WEIGHTS_RULE: &str = "must be a sequence of numbers";

/// A limit of `None` keeps every fused document; a negative one becomes 0 and is rejected.
fn limit_arg(limit: Option<i64>) -> usize {
    limit.map_or(usize::MAX, |l| usize::try_from(l).unwrap_or(0))
}

fn weights_arg(weights: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Vec<f64>>> {
    weights
        .map(|w| extract_arg(w, "weights", WEIGHTS_RULE))
        .transpose()
}

/// Weighted reciprocal-rank fusion; returns `(ids, scores)` best first.
#[pyfunction]
#[pyo3(signature = (lists, weights = None, k = 60.0, limit = None))]
pub(super) fn rrf(
    py: Python<'_>,
    lists: &Bound<'_, PyAny>,
    weights: Option<&Bound<'_, PyAny>>,
    k: f64,
    limit: Option<i64>,
) -> PyResult<(Vec<i64>, Vec<f64>)> {
    let lists: Vec<Vec<i64>> = extract_arg(lists, "lists", LISTS_RULE)?;
    let weights = weights_arg(weights)?;
    let fused = detached(py, || {
        fusion::rrf(&lists, weights.as_deref(), k, limit_arg(limit))
    })?;
    Ok((fused.ids, fused.scores))
}

/// [`rrf`] for many queries in one call; returns one `(ids, scores)` per query.
#[pyfunction]
#[pyo3(signature = (queries, weights = None, k = 60.0, limit = None))]
pub(super) fn rrf_batch(
    py: Python<'_>,
    queries: &Bound<'_, PyAny>,
    weights: Option<&Bound<'_, PyAny>>,
    k: f64,
    limit: Option<i64>,
) -> PyResult<Vec<(Vec<i64>, Vec<f64>)>> {
    let queries: Vec<Vec<Vec<i64>>> = extract_arg(
        queries,
        "queries",
        "must be a sequence of (sequences of sequences of integer ids)",
    )?;
    let weights = weights_arg(weights)?;
    let fused = detached(py, || {
        fusion::rrf_batch(&queries, weights.as_deref(), k, limit_arg(limit))
    })?;
    Ok(fused.into_iter().map(|f| (f.ids, f.scores)).collect())
}

/// Normalised, weighted score fusion; returns `(ids, scores)` best first.
#[pyfunction]
#[pyo3(signature = (lists, scores, weights = None, method = "minmax", limit = None))]
pub(super) fn score_fusion(
    py: Python<'_>,
    lists: &Bound<'_, PyAny>,
    scores: &Bound<'_, PyAny>,
    weights: Option<&Bound<'_, PyAny>>,
    method: &str,
    limit: Option<i64>,
) -> PyResult<(Vec<i64>, Vec<f64>)> {
    let lists: Vec<Vec<i64>> = extract_arg(lists, "lists", LISTS_RULE)?;
    let scores: Vec<Vec<f64>> = extract_arg(
        scores,
        "scores",
        "must be a sequence of sequences of numbers",
    )?;
    let weights = weights_arg(weights)?;
    let method = fusion::Normalization::from_name(method)?;
    let fused = detached(py, || {
        fusion::score_fusion(
            &lists,
            &scores,
            weights.as_deref(),
            method,
            limit_arg(limit),
        )
    })?;
    Ok((fused.ids, fused.scores))
}

// ---- decay

/// Rows per GIL-free step of [`decayed_importance`]: the inputs are copied a chunk at a time
/// into small reused buffers (owned data, cache-resident) instead of three full-size copies.
const DECAY_CHUNK: usize = 16_384;

/// Decayed importance over contiguous arrays (float64, float64, int64) -> float64 array.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
pub(super) fn decayed_importance<'py>(
    py: Python<'py>,
    importance: &Bound<'py, PyAny>,
    last_accessed: &Bound<'py, PyAny>,
    access_count: &Bound<'py, PyAny>,
    now: f64,
    half_life_days: f64,
    access_boost_factor: f64,
    min_importance: f64,
) -> PyResult<Bound<'py, PyArray1<f64>>> {
    let importance: PyReadonlyArray1<'py, f64> =
        extract_arg(importance, "importance", "must be a 1-D float64 array")?;
    let last_accessed: PyReadonlyArray1<'py, f64> = extract_arg(
        last_accessed,
        "last_accessed",
        "must be a 1-D float64 array",
    )?;
    let access_count: PyReadonlyArray1<'py, i64> =
        extract_arg(access_count, "access_count", "must be a 1-D int64 array")?;
    let contiguous = |arg| CoreError::invalid(arg, "must be C-contiguous");
    let importance = importance
        .as_slice()
        .map_err(|_| contiguous("importance"))?;
    let last_accessed = last_accessed
        .as_slice()
        .map_err(|_| contiguous("last_accessed"))?;
    let access_count = access_count
        .as_slice()
        .map_err(|_| contiguous("access_count"))?;
    let params = decay::DecayParams {
        now,
        half_life_days,
        access_boost_factor,
        min_importance,
    };
    params.validate()?;
    decay::check_lengths(importance.len(), last_accessed.len(), access_count.len())?;

    let n = importance.len();
    let mut out = vec![0.0_f64; n];
    let cap = n.min(DECAY_CHUNK);
    let (mut imp, mut seen, mut count) = (
        Vec::with_capacity(cap),
        Vec::with_capacity(cap),
        Vec::with_capacity(cap),
    );
    for (start, dst) in (0..n).step_by(DECAY_CHUNK).zip(out.chunks_mut(DECAY_CHUNK)) {
        let end = start + dst.len();
        imp.clear();
        imp.extend_from_slice(&importance[start..end]);
        seen.clear();
        seen.extend_from_slice(&last_accessed[start..end]);
        count.clear();
        count.extend_from_slice(&access_count[start..end]);
        detached(py, || decay::decay_into(&imp, &seen, &count, &params, dst))?;
    }
    Ok(out.into_pyarray(py))
}

// ---- clustering

/// Agglomerative cosine clustering; returns clusters of row positions (see `cluster.rs`).
#[pyfunction]
#[allow(clippy::needless_pass_by_value)] // pyo3 extracts arguments as owned values
#[pyo3(signature = (vectors, threshold, min_cluster_size, linkage))]
pub(super) fn cosine_clusters(
    py: Python<'_>,
    vectors: numpy::PyReadonlyArray2<'_, f32>,
    threshold: f64,
    min_cluster_size: i64,
    linkage: &str,
) -> PyResult<Vec<Vec<u32>>> {
    let view = vectors.as_array();
    let (n, d) = view.dim();
    // Owned copy under the GIL: the kernel normalises it in place, and no other thread can
    // change the numbers while the GIL is released.
    let data: Vec<f32> = match view.as_slice() {
        Some(contiguous) => contiguous.to_vec(),
        None => view.iter().copied().collect(),
    };
    let min_size = usize::try_from(min_cluster_size)
        .map_err(|_| CoreError::invalid("min_cluster_size", "must be >= 2"))?;
    let linkage = cluster::Linkage::parse(linkage)?;
    detached(py, || {
        cluster::cosine_clusters(data, n, d, threshold, min_size, linkage)
    })
}
