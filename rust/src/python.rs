//! PyO3 bindings: the only file that knows about Python.
//!
//! Every binding converts its arguments to owned Rust data, runs the kernel through
//! [`detached`] (GIL released, errors converted in one place) and returns Python objects.

use numpy::{IntoPyArray, PyArray1, PyArrayMethods, PyReadonlyArray1};
use pyo3::conversion::FromPyObjectOwned;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::bm25::{Base, Bm25Index, Bm25Params};
use crate::error::CoreError;
use crate::idindex::{IdIndex, Strings};
use crate::tokenize::{Analyzer, AnalyzerOptions};
use crate::{cluster, decay, fusion, regex_match};

pyo3::create_exception!(
    _core,
    TimeLimitExceeded,
    PyValueError,
    "A search ran past its time limit (a `ValueError` naming the slow argument)."
);

impl From<CoreError> for PyErr {
    fn from(err: CoreError) -> Self {
        match err {
            CoreError::TimeLimitExceeded { .. } => TimeLimitExceeded::new_err(err.to_string()),
            _ => PyValueError::new_err(err.to_string()),
        }
    }
}

/// Run `work` with the GIL released and map its error to `ValueError` (or its subclass).
fn detached<T, F>(py: Python<'_>, work: F) -> PyResult<T>
where
    T: Send,
    F: FnOnce() -> Result<T, CoreError> + Send,
{
    py.detach(work).map_err(PyErr::from)
}

/// Extract an argument, turning a type mismatch into `ValueError("<arg>: <rule>")`.
fn extract_arg<'py, T: FromPyObjectOwned<'py>>(
    obj: &Bound<'py, PyAny>,
    arg: &'static str,
    rule: &str,
) -> PyResult<T> {
    obj.extract::<T>()
        .map_err(|_| CoreError::invalid(arg, rule).into())
}

// ---- kernels: text analysis -------------------------------------------------------------

fn analyzer_options(stem: bool, stopwords: bool) -> AnalyzerOptions {
    AnalyzerOptions { stem, stopwords }
}

/// Analyse texts into tokens (the same analyser BM25 uses for documents and queries).
#[pyfunction]
#[allow(clippy::needless_pass_by_value)] // pyo3 hands arguments over by value
#[pyo3(signature = (texts, stem = true, stopwords = true))]
fn analyze(
    py: Python<'_>,
    texts: Vec<String>,
    stem: bool,
    stopwords: bool,
) -> PyResult<Vec<Vec<String>>> {
    detached(py, || {
        Ok(Analyzer::new(analyzer_options(stem, stopwords)).analyze_batch(&texts))
    })
}

// ---- kernels: BM25 ------------------------------------------------------------------------

type Hits<'py> = (Bound<'py, PyArray1<i64>>, Bound<'py, PyArray1<f32>>);

fn hits_to_numpy(py: Python<'_>, hits: Vec<(u32, f32)>) -> Hits<'_> {
    let (positions, scores): (Vec<i64>, Vec<f32>) =
        hits.into_iter().map(|(p, s)| (i64::from(p), s)).unzip();
    (
        PyArray1::from_vec(py, positions),
        PyArray1::from_vec(py, scores),
    )
}

fn owned_positions(array: Option<PyReadonlyArray1<'_, i64>>) -> Option<Vec<i64>> {
    array.map(|a| a.as_array().to_vec())
}

#[allow(clippy::needless_pass_by_value)] // pyo3 hands arguments over by value
fn owned_mask(array: Option<PyReadonlyArray1<'_, bool>>) -> Option<Vec<bool>> {
    array.map(|a| a.as_array().to_vec())
}

fn k_arg(k: i64) -> Result<usize, CoreError> {
    usize::try_from(k)
        .ok()
        .filter(|&k| k >= 1)
        .ok_or_else(|| CoreError::invalid("k", "must be >= 1"))
}

/// The arrays a stored base's postings are read from (held, typically memory-mapped).
struct BaseArrays {
    offsets: Py<PyArray1<u64>>,
    docs: Py<PyArray1<u32>>,
    tfs: Py<PyArray1<u32>>,
}

type BaseGuards<'py> = (
    PyReadonlyArray1<'py, u64>,
    PyReadonlyArray1<'py, u32>,
    PyReadonlyArray1<'py, u32>,
);

fn contiguous<'a, T: numpy::Element>(
    array: &'a PyReadonlyArray1<'_, T>,
    arg: &'static str,
) -> PyResult<&'a [T]> {
    array
        .as_slice()
        .map_err(|_| CoreError::invalid(arg, "arrays must be contiguous").into())
}

/// Borrow the base's arrays for one call (none: an empty base).
fn base_of<'a>(guards: Option<&'a BaseGuards<'_>>) -> PyResult<Base<'a>> {
    Ok(match guards {
        None => Base::EMPTY,
        Some((offsets, docs, tfs)) => Base {
            offsets: contiguous(offsets, "base")?,
            docs: contiguous(docs, "base")?,
            tfs: contiguous(tfs, "base")?,
        },
    })
}

/// Rust handle of a BM25 index; wrapped by `octobrain.bm25.BM25Index`.
#[pyclass(module = "octobrain._core", name = "Bm25Index")]
struct PyBm25Index {
    inner: Bm25Index,
    base: Option<BaseArrays>,
    /// Positions the base holds postings for (removing one of them tombstones it).
    base_positions: usize,
}

impl PyBm25Index {
    fn owned(inner: Bm25Index) -> Self {
        Self {
            inner,
            base: None,
            base_positions: 0,
        }
    }

    fn guards<'py>(&self, py: Python<'py>) -> Option<BaseGuards<'py>> {
        self.base.as_ref().map(|b| {
            (
                b.offsets.bind(py).readonly(),
                b.docs.bind(py).readonly(),
                b.tfs.bind(py).readonly(),
            )
        })
    }
}

#[pymethods]
impl PyBm25Index {
    #[new]
    #[pyo3(signature = (k1 = 1.2, b = 0.75, stem = true, stopwords = true))]
    fn new(k1: f64, b: f64, stem: bool, stopwords: bool) -> PyResult<Self> {
        let params = Bm25Params::new(k1, b)?;
        Ok(Self::owned(Bm25Index::new(
            params,
            analyzer_options(stem, stopwords),
        )))
    }

    #[staticmethod]
    #[pyo3(signature = (texts, k1 = 1.2, b = 0.75, stem = true, stopwords = true))]
    fn build(
        py: Python<'_>,
        texts: Vec<String>,
        k1: f64,
        b: f64,
        stem: bool,
        stopwords: bool,
    ) -> PyResult<Self> {
        let inner = detached(py, move || {
            Bm25Index::build(
                &texts,
                Bm25Params::new(k1, b)?,
                analyzer_options(stem, stopwords),
            )
        })?;
        Ok(Self::owned(inner))
    }

    /// Append documents; returns the first new position.
    fn add(&mut self, py: Python<'_>, texts: Vec<String>) -> PyResult<usize> {
        let inner = &mut self.inner;
        detached(py, move || inner.add(&texts))
    }

    #[allow(clippy::needless_pass_by_value)] // pyo3 hands arguments over by value
    fn remove(&mut self, py: Python<'_>, positions: PyReadonlyArray1<'_, i64>) -> PyResult<()> {
        let positions = positions.as_array().to_vec();
        let base_positions = self.base_positions;
        let inner = &mut self.inner;
        detached(py, || inner.remove(&positions, base_positions))
    }

    #[pyo3(signature = (query, k, allowed = None, seen = None))]
    fn search<'py>(
        &self,
        py: Python<'py>,
        query: String,
        k: i64,
        allowed: Option<PyReadonlyArray1<'py, i64>>,
        seen: Option<PyReadonlyArray1<'py, bool>>,
    ) -> PyResult<Hits<'py>> {
        let allowed = owned_positions(allowed);
        let seen = owned_mask(seen);
        let guards = self.guards(py);
        let base = base_of(guards.as_ref())?;
        let inner = &self.inner;
        let hits = detached(py, move || {
            inner.search(
                &base,
                &query,
                k_arg(k)?,
                allowed.as_deref(),
                seen.as_deref(),
            )
        })?;
        Ok(hits_to_numpy(py, hits))
    }

    #[allow(clippy::needless_pass_by_value)] // pyo3 hands arguments over by value
    #[pyo3(signature = (queries, k, allowed = None, seen = None))]
    fn search_batch<'py>(
        &self,
        py: Python<'py>,
        queries: Vec<String>,
        k: i64,
        allowed: Option<PyReadonlyArray1<'py, i64>>,
        seen: Option<PyReadonlyArray1<'py, bool>>,
    ) -> PyResult<Vec<Hits<'py>>> {
        let allowed = owned_positions(allowed);
        let seen = owned_mask(seen);
        let guards = self.guards(py);
        let base = base_of(guards.as_ref())?;
        let inner = &self.inner;
        let all = detached(py, || {
            inner.search_batch(
                &base,
                &queries,
                k_arg(k)?,
                allowed.as_deref(),
                seen.as_deref(),
            )
        })?;
        Ok(all
            .into_iter()
            .map(|hits| hits_to_numpy(py, hits))
            .collect())
    }

    #[allow(clippy::needless_pass_by_value)] // pyo3 hands arguments over by value
    #[pyo3(signature = (query, k, mask, seen = None))]
    fn search_masked<'py>(
        &self,
        py: Python<'py>,
        query: String,
        k: i64,
        mask: PyReadonlyArray1<'py, bool>,
        seen: Option<PyReadonlyArray1<'py, bool>>,
    ) -> PyResult<Hits<'py>> {
        let mask = mask.as_array().to_vec();
        let seen = owned_mask(seen);
        let guards = self.guards(py);
        let base = base_of(guards.as_ref())?;
        let inner = &self.inner;
        let hits = detached(py, move || {
            inner.search_masked(&base, &query, k_arg(k)?, &mask, seen.as_deref())
        })?;
        Ok(hits_to_numpy(py, hits))
    }

    #[allow(clippy::needless_pass_by_value)] // pyo3 hands arguments over by value
    #[pyo3(signature = (query, positions, seen = None))]
    fn scores_at<'py>(
        &self,
        py: Python<'py>,
        query: String,
        positions: PyReadonlyArray1<'py, i64>,
        seen: Option<PyReadonlyArray1<'py, bool>>,
    ) -> PyResult<Bound<'py, PyArray1<f32>>> {
        let positions = positions.as_array().to_vec();
        let seen = owned_mask(seen);
        let guards = self.guards(py);
        let base = base_of(guards.as_ref())?;
        let inner = &self.inner;
        let out = detached(py, move || {
            inner.scores_at(&base, &query, &positions, seen.as_deref())
        })?;
        Ok(PyArray1::from_vec(py, out))
    }

    #[allow(clippy::needless_pass_by_value)] // pyo3 hands arguments over by value
    #[pyo3(signature = (query, positions, seen = None))]
    fn coverage<'py>(
        &self,
        py: Python<'py>,
        query: String,
        positions: PyReadonlyArray1<'py, i64>,
        seen: Option<PyReadonlyArray1<'py, bool>>,
    ) -> PyResult<Bound<'py, PyArray1<f64>>> {
        let positions = positions.as_array().to_vec();
        let seen = owned_mask(seen);
        let guards = self.guards(py);
        let base = base_of(guards.as_ref())?;
        let inner = &self.inner;
        let out = detached(py, move || {
            inner.coverage(&base, &query, &positions, seen.as_deref())
        })?;
        Ok(PyArray1::from_vec(py, out))
    }

    /// The ids of the query's terms the index holds (whose postings a query reads).
    fn term_ids<'py>(&self, py: Python<'py>, query: &str) -> Bound<'py, PyArray1<u32>> {
        PyArray1::from_vec(py, self.inner.term_ids(query))
    }

    fn to_bytes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let guards = self.guards(py);
        let base = base_of(guards.as_ref())?;
        let inner = &self.inner;
        let bytes = detached(py, || inner.to_bytes(&base))?;
        Ok(PyBytes::new(py, &bytes))
    }

    #[staticmethod]
    fn from_bytes(py: Python<'_>, data: &[u8]) -> PyResult<Self> {
        let inner = detached(py, || Bm25Index::from_bytes(data))?;
        Ok(Self::owned(inner))
    }

    /// The index as flat arrays: (terms, term_ends, offsets, docs, tfs, doc_len, live).
    #[allow(clippy::type_complexity)]
    fn to_parts<'py>(
        &self,
        py: Python<'py>,
    ) -> PyResult<(
        Bound<'py, PyArray1<u8>>,
        Bound<'py, PyArray1<u64>>,
        Bound<'py, PyArray1<u64>>,
        Bound<'py, PyArray1<u32>>,
        Bound<'py, PyArray1<u32>>,
        Bound<'py, PyArray1<u32>>,
        Bound<'py, PyArray1<bool>>,
    )> {
        let guards = self.guards(py);
        let base = base_of(guards.as_ref())?;
        let inner = &self.inner;
        let parts = detached(py, || Ok(inner.to_parts(&base)))?;
        Ok((
            parts.terms.into_pyarray(py),
            parts.term_ends.into_pyarray(py),
            parts.offsets.into_pyarray(py),
            parts.docs.into_pyarray(py),
            parts.tfs.into_pyarray(py),
            parts.doc_len.into_pyarray(py),
            parts.live.into_pyarray(py),
        ))
    }

    /// An index over stored parts; `offsets` / `docs` / `tfs` are kept and read per query.
    #[staticmethod]
    #[allow(clippy::too_many_arguments, clippy::needless_pass_by_value)]
    #[pyo3(signature = (k1, b, stem, stopwords, terms, term_ends, doc_len, live, offsets, docs, tfs))]
    fn open_base(
        py: Python<'_>,
        k1: f64,
        b: f64,
        stem: bool,
        stopwords: bool,
        terms: PyReadonlyArray1<'_, u8>,
        term_ends: PyReadonlyArray1<'_, u64>,
        doc_len: PyReadonlyArray1<'_, u32>,
        live: PyReadonlyArray1<'_, bool>,
        offsets: Bound<'_, PyArray1<u64>>,
        docs: Bound<'_, PyArray1<u32>>,
        tfs: Bound<'_, PyArray1<u32>>,
    ) -> PyResult<Self> {
        let arrays = BaseArrays {
            offsets: offsets.unbind(),
            docs: docs.unbind(),
            tfs: tfs.unbind(),
        };
        let held = (
            arrays.offsets.bind(py).readonly(),
            arrays.docs.bind(py).readonly(),
            arrays.tfs.bind(py).readonly(),
        );
        let base = base_of(Some(&held))?;
        let (terms, ends) = (contiguous(&terms, "base")?, contiguous(&term_ends, "base")?);
        let (doc_len, live) = (contiguous(&doc_len, "base")?, contiguous(&live, "base")?);
        let options = analyzer_options(stem, stopwords);
        let inner = detached(py, || {
            let params = Bm25Params::new(k1, b)?;
            Bm25Index::open_base(params, options, terms, ends, doc_len, live, &base)
        })?;
        let base_positions = inner.position_count();
        drop(held);
        Ok(Self {
            inner,
            base: Some(arrays),
            base_positions,
        })
    }

    #[getter]
    fn k1(&self) -> f64 {
        self.inner.params().k1
    }

    #[getter]
    fn b(&self) -> f64 {
        self.inner.params().b
    }

    #[getter]
    fn stem(&self) -> bool {
        self.inner.options().stem
    }

    #[getter]
    fn stopwords(&self) -> bool {
        self.inner.options().stopwords
    }

    #[getter]
    fn doc_count(&self) -> usize {
        self.inner.doc_count()
    }

    #[getter]
    fn position_count(&self) -> usize {
        self.inner.position_count()
    }

    #[getter]
    fn vocab_size(&self, py: Python<'_>) -> PyResult<usize> {
        let guards = self.guards(py);
        let base = base_of(guards.as_ref())?;
        Ok(self.inner.vocab_size(&base))
    }

    fn live_mask<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<bool>> {
        let mask: Vec<bool> = (0..self.inner.position_count())
            .map(|p| self.inner.is_live(p))
            .collect();
        PyArray1::from_vec(py, mask)
    }
}

// ---- kernels: fusion ----------------------------------------------------------------------

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
fn rrf(
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
fn rrf_batch(
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
fn score_fusion(
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

// ---- kernels: decay -----------------------------------------------------------------------

/// Rows per GIL-free step of [`decayed_importance`]: the inputs are copied a chunk at a time
/// into small reused buffers (owned data, cache-resident) instead of three full-size copies.
const DECAY_CHUNK: usize = 16_384;

/// Decayed importance over contiguous arrays (float64, float64, int64) -> float64 array.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn decayed_importance<'py>(
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

// ---- kernels: clustering ------------------------------------------------------------------

/// Agglomerative cosine clustering; returns clusters of row positions (see `cluster.rs`).
#[pyfunction]
#[allow(clippy::needless_pass_by_value)] // pyo3 extracts arguments as owned values
#[pyo3(signature = (vectors, threshold, min_cluster_size, linkage))]
fn cosine_clusters(
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

// ---- kernels: id index -----------------------------------------------------------------

type StringArrays<'py> = (PyReadonlyArray1<'py, i64>, PyReadonlyArray1<'py, u8>);

fn strings_of<'a>(arrays: &'a StringArrays<'_>, arg: &'static str) -> PyResult<Strings<'a>> {
    let (offsets, data) = (contiguous(&arrays.0, arg)?, contiguous(&arrays.1, arg)?);
    Ok(Strings::checked(offsets, data, arg)?)
}

/// Rust handle of an id index; wrapped by `octobrain.kernels.idindex.IdIndex`.
#[pyclass(module = "octobrain._core", name = "IdIndex")]
struct PyIdIndex {
    inner: IdIndex,
}

#[pymethods]
impl PyIdIndex {
    /// Index a table's rows by the ids of `columns`: (offsets, data) pairs in Arrow's layout.
    #[staticmethod]
    #[allow(clippy::needless_pass_by_value)] // pyo3 hands arguments over by value
    fn build(py: Python<'_>, columns: Vec<StringArrays<'_>>) -> PyResult<Self> {
        let columns = columns
            .iter()
            .map(|c| strings_of(c, "columns"))
            .collect::<PyResult<Vec<_>>>()?;
        let inner = detached(py, || IdIndex::build(&columns))?;
        Ok(Self { inner })
    }

    /// The rows holding an id hashed like one of `wanted` (ascending): a superset of the rows
    /// holding one of them; the caller compares the ids.
    #[allow(clippy::needless_pass_by_value)] // pyo3 hands arguments over by value
    fn rows_of<'py>(
        &self,
        py: Python<'py>,
        offsets: PyReadonlyArray1<'py, i64>,
        data: PyReadonlyArray1<'py, u8>,
    ) -> PyResult<Bound<'py, PyArray1<u32>>> {
        let arrays = (offsets, data);
        let wanted = strings_of(&arrays, "wanted")?;
        let inner = &self.inner;
        let rows = detached(py, || Ok(inner.rows_of(&wanted)))?;
        Ok(rows.into_pyarray(py))
    }

    #[getter]
    fn row_count(&self) -> usize {
        self.inner.row_count()
    }
}

// ---- kernels: regex matching --------------------------------------------------------------

/// One matching line as a tuple: (text_index, line_number, line, start, end, before, after).
type LineMatchTuple = (usize, usize, String, usize, usize, Vec<String>, Vec<String>);

/// Regex line matching over many texts; returns (matches, truncated) (see `regex_match.rs`).
#[pyfunction]
#[allow(clippy::needless_pass_by_value)] // pyo3 extracts arguments as owned values
#[pyo3(signature = (texts, pattern, case_insensitive, max_matches, context, seconds = None))]
fn match_lines(
    py: Python<'_>,
    texts: Vec<String>,
    pattern: &str,
    case_insensitive: bool,
    max_matches: i64,
    context: i64,
    seconds: Option<f64>,
) -> PyResult<(Vec<LineMatchTuple>, bool)> {
    let cap = usize::try_from(max_matches)
        .map_err(|_| CoreError::invalid("max_matches", "must be >= 1"))?;
    let context =
        usize::try_from(context).map_err(|_| CoreError::invalid("context", "must be >= 0"))?;
    let limit = match seconds {
        Some(s) if s.is_finite() && s >= 0.0 => Some(std::time::Duration::from_secs_f64(s)),
        Some(_) => return Err(CoreError::invalid("seconds", "must be a number >= 0").into()),
        None => None,
    };
    let result = detached(py, || {
        regex_match::match_lines_within(&texts, pattern, case_insensitive, cap, context, limit)
    })?;
    let matches = result
        .matches
        .into_iter()
        .map(|m| {
            (
                m.text_index,
                m.line_number,
                m.line,
                m.start,
                m.end,
                m.before,
                m.after,
            )
        })
        .collect();
    Ok((matches, result.truncated))
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("TimeLimitExceeded", m.py().get_type::<TimeLimitExceeded>())?;
    // ---- register: text analysis
    m.add_function(wrap_pyfunction!(analyze, m)?)?;
    // ---- register: BM25
    m.add_class::<PyBm25Index>()?;
    // ---- register: fusion
    m.add_function(wrap_pyfunction!(rrf, m)?)?;
    m.add_function(wrap_pyfunction!(rrf_batch, m)?)?;
    m.add_function(wrap_pyfunction!(score_fusion, m)?)?;
    // ---- register: decay
    m.add_function(wrap_pyfunction!(decayed_importance, m)?)?;
    // ---- register: clustering
    m.add_function(wrap_pyfunction!(cosine_clusters, m)?)?;
    // ---- register: id index
    m.add_class::<PyIdIndex>()?;
    // ---- register: regex matching
    m.add_function(wrap_pyfunction!(match_lines, m)?)?;
    Ok(())
}
