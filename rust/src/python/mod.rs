//! PyO3 bindings: the only files that know about Python, one per family of kernels
//! (`text`: analysis and regex matching; `bm25`, its stored base in `bm25_base`; `ranking`:
//! fusion, decay, clustering; `idindex`; `rowcrc`: row checksums), registered as
//! `octobrain._core` here.
//!
//! Every binding converts its arguments to owned Rust data, runs the kernel through
//! [`detached`] (GIL released, errors converted in one place) and returns Python objects.

mod bm25;
mod bm25_base;
mod idindex;
mod ranking;
mod rowcrc;
mod text;

use numpy::PyReadonlyArray1;
use pyo3::conversion::FromPyObjectOwned;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::error::CoreError;

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

/// A 1-D array's elements as a slice, or `ValueError("<arg>: arrays must be contiguous")`.
fn contiguous<'a, T: numpy::Element>(
    array: &'a PyReadonlyArray1<'_, T>,
    arg: &'static str,
) -> PyResult<&'a [T]> {
    array
        .as_slice()
        .map_err(|_| CoreError::invalid(arg, "arrays must be contiguous").into())
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("TimeLimitExceeded", m.py().get_type::<TimeLimitExceeded>())?;
    // ---- register: text analysis
    m.add_function(wrap_pyfunction!(text::analyze, m)?)?;
    // ---- register: BM25
    m.add_class::<bm25::PyBm25Index>()?;
    // ---- register: fusion
    m.add_function(wrap_pyfunction!(ranking::rrf, m)?)?;
    m.add_function(wrap_pyfunction!(ranking::rrf_batch, m)?)?;
    m.add_function(wrap_pyfunction!(ranking::score_fusion, m)?)?;
    // ---- register: decay
    m.add_function(wrap_pyfunction!(ranking::decayed_importance, m)?)?;
    // ---- register: clustering
    m.add_function(wrap_pyfunction!(ranking::cosine_clusters, m)?)?;
    // ---- register: id index
    m.add_class::<idindex::PyIdIndex>()?;
    // ---- register: row checksums
    m.add_function(wrap_pyfunction!(rowcrc::row_crcs, m)?)?;
    m.add_function(wrap_pyfunction!(rowcrc::block_crcs, m)?)?;
    m.add_function(wrap_pyfunction!(rowcrc::crc32, m)?)?;
    // ---- register: regex matching
    m.add_function(wrap_pyfunction!(text::match_lines, m)?)?;
    Ok(())
}
