//! Bindings of the row checksums: `octobrain.store.row_sums` hands over a table's checked
//! columns as numpy views of their Arrow buffers.

use numpy::{IntoPyArray, PyArray1, PyReadonlyArray1};
use pyo3::prelude::*;

use super::{contiguous, detached};
use crate::idindex::Strings;
use crate::rowcrc::{self, Column, Values};

/// One column: (value offsets or None for fixed-width values, data, width, validity, list
/// offsets, list validity).
type ColumnArrays<'py> = (
    Option<PyReadonlyArray1<'py, i64>>,
    PyReadonlyArray1<'py, u8>,
    usize,
    Option<PyReadonlyArray1<'py, bool>>,
    Option<PyReadonlyArray1<'py, i64>>,
    Option<PyReadonlyArray1<'py, bool>>,
);

fn optional<'a, T: numpy::Element>(
    array: Option<&'a PyReadonlyArray1<'_, T>>,
) -> PyResult<Option<&'a [T]>> {
    array.map(|a| contiguous(a, "columns")).transpose()
}

fn column_of<'a>(arrays: &'a ColumnArrays<'_>) -> PyResult<Column<'a>> {
    let (offsets, data, width, valid, lists, lists_valid) = arrays;
    let data = contiguous(data, "columns")?;
    let values = match optional(offsets.as_ref())? {
        Some(offsets) => Values::Bytes(Strings::checked(offsets, data, "columns")?),
        None => Values::Fixed {
            data,
            width: *width,
        },
    };
    let lists = match optional(lists.as_ref())? {
        Some(offsets) => Some((offsets, optional(lists_valid.as_ref())?)),
        None => None,
    };
    Ok(Column {
        values,
        valid: optional(valid.as_ref())?,
        lists,
    })
}

/// The CRC-32 of each of `rows` rows over `columns` (in order), as `schema._crc` sums one.
#[pyfunction]
#[allow(clippy::needless_pass_by_value)] // pyo3 hands arguments over by value
pub(super) fn row_crcs<'py>(
    py: Python<'py>,
    rows: usize,
    columns: Vec<ColumnArrays<'py>>,
) -> PyResult<Bound<'py, PyArray1<u32>>> {
    let columns = columns
        .iter()
        .map(column_of)
        .collect::<PyResult<Vec<_>>>()?;
    let sums = detached(py, || rowcrc::row_crcs(rows, &columns))?;
    Ok(sums.into_pyarray(py))
}

/// The CRC-32 of each `block` bytes of `data` (the last block may be shorter).
#[pyfunction]
#[allow(clippy::needless_pass_by_value)] // pyo3 hands arguments over by value
pub(super) fn block_crcs<'py>(
    py: Python<'py>,
    data: PyReadonlyArray1<'py, u8>,
    block: usize,
) -> PyResult<Bound<'py, PyArray1<u32>>> {
    let data = contiguous(&data, "data")?;
    let sums = detached(py, || rowcrc::block_crcs(data, block))?;
    Ok(sums.into_pyarray(py))
}

/// The CRC-32 of `data` continued from `value`, as `zlib.crc32(data, value)`.
#[pyfunction]
#[allow(clippy::needless_pass_by_value)] // pyo3 hands arguments over by value
#[pyo3(signature = (data, value = 0))]
pub(super) fn crc32(py: Python<'_>, data: PyReadonlyArray1<'_, u8>, value: u32) -> PyResult<u32> {
    let data = contiguous(&data, "data")?;
    detached(py, || Ok(rowcrc::crc32(data, value)))
}
