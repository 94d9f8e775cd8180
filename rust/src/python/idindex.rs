//! Bindings of the id index: the Rust handle `octobrain.kernels.idindex.IdIndex` wraps.

use numpy::{IntoPyArray, PyArray1, PyReadonlyArray1};
use pyo3::prelude::*;

use super::{contiguous, detached};
use crate::idindex::{IdIndex, Strings};

type StringArrays<'py> = (PyReadonlyArray1<'py, i64>, PyReadonlyArray1<'py, u8>);

fn strings_of<'a>(arrays: &'a StringArrays<'_>, arg: &'static str) -> PyResult<Strings<'a>> {
    let (offsets, data) = (contiguous(&arrays.0, arg)?, contiguous(&arrays.1, arg)?);
    Ok(Strings::checked(offsets, data, arg)?)
}

/// Rust handle of an id index; wrapped by `octobrain.kernels.idindex.IdIndex`.
#[pyclass(module = "octobrain._core", name = "IdIndex")]
pub(super) struct PyIdIndex {
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
