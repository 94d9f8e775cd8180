//! PyO3 bindings: the only file that knows about Python.
//!
//! Every binding converts its arguments to owned Rust data, runs the kernel through
//! [`detached`] (GIL released, errors converted in one place) and returns Python objects.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::error::CoreError;

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

// ---- kernels: regex matching --------------------------------------------------------------

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    // ---- register: text analysis
    // ---- register: BM25
    // ---- register: fusion
    // ---- register: decay
    // ---- register: clustering
    // ---- register: regex matching
    Ok(())
}
