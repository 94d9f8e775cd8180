//! PyO3 bindings: the only file that knows about Python.
//!
//! Every binding converts its arguments to owned Rust data, runs the kernel through
//! [`detached`] (GIL released, errors converted in one place) and returns Python objects.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::error::CoreError;
use crate::{cluster, regex_match};

impl From<CoreError> for PyErr {
    fn from(err: CoreError) -> Self {
        PyValueError::new_err(err.to_string())
    }
}

/// Run `work` with the GIL released and map its error to `ValueError`.
fn detached<T, F>(py: Python<'_>, work: F) -> PyResult<T>
where
    T: Send,
    F: FnOnce() -> Result<T, CoreError> + Send,
{
    py.detach(work).map_err(PyErr::from)
}

// ---- kernels: text analysis -------------------------------------------------------------

// ---- kernels: BM25 ------------------------------------------------------------------------

// ---- kernels: fusion ----------------------------------------------------------------------

// ---- kernels: decay -----------------------------------------------------------------------

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

// ---- kernels: regex matching --------------------------------------------------------------

/// One matching line as a tuple: (text_index, line_number, line, start, end, before, after).
type LineMatchTuple = (usize, usize, String, usize, usize, Vec<String>, Vec<String>);

/// Regex line matching over many texts; returns (matches, truncated) (see `regex_match.rs`).
#[pyfunction]
#[allow(clippy::needless_pass_by_value)] // pyo3 extracts arguments as owned values
#[pyo3(signature = (texts, pattern, case_insensitive, max_matches, context))]
fn match_lines(
    py: Python<'_>,
    texts: Vec<String>,
    pattern: &str,
    case_insensitive: bool,
    max_matches: i64,
    context: i64,
) -> PyResult<(Vec<LineMatchTuple>, bool)> {
    let cap = usize::try_from(max_matches)
        .map_err(|_| CoreError::invalid("max_matches", "must be >= 1"))?;
    let context =
        usize::try_from(context).map_err(|_| CoreError::invalid("context", "must be >= 0"))?;
    let result = detached(py, || {
        regex_match::match_lines(&texts, pattern, case_insensitive, cap, context)
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
    // ---- register: text analysis
    // ---- register: BM25
    // ---- register: fusion
    // ---- register: decay
    // ---- register: clustering
    m.add_function(wrap_pyfunction!(cosine_clusters, m)?)?;
    // ---- register: regex matching
    m.add_function(wrap_pyfunction!(match_lines, m)?)?;
    Ok(())
}
