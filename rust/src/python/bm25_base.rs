//! The BM25 index's stored base as Python hands it over: the (memory-mapped) arrays its
//! postings are read from, borrowed for a call, and the flat parts and stored files it is
//! written to and read back from.

use std::path::PathBuf;

use numpy::{IntoPyArray, PyArray1, PyArrayMethods, PyReadonlyArray1};
use pyo3::prelude::*;

use super::contiguous;
use crate::bm25::{Base, Parts, StoredFile};

pub(super) type PartsTuple<'py> = (
    Bound<'py, PyArray1<u8>>,
    Bound<'py, PyArray1<u64>>,
    Bound<'py, PyArray1<u64>>,
    Bound<'py, PyArray1<u32>>,
    Bound<'py, PyArray1<u32>>,
    Bound<'py, PyArray1<u32>>,
    Bound<'py, PyArray1<bool>>,
);

pub(super) fn parts_tuple(py: Python<'_>, parts: Parts) -> PartsTuple<'_> {
    (
        parts.terms.into_pyarray(py),
        parts.term_ends.into_pyarray(py),
        parts.offsets.into_pyarray(py),
        parts.docs.into_pyarray(py),
        parts.tfs.into_pyarray(py),
        parts.doc_len.into_pyarray(py),
        parts.live.into_pyarray(py),
    )
}

/// A stored file as Python names it: the path read (it may be an open descriptor's,
/// `/dev/fd/N`), the name its damage is told by, where its values start, its blocks' CRC-32.
pub(super) type StoredSpec = (PathBuf, String, u64, Vec<u32>);

pub(super) fn stored((path, name, start, crcs): &StoredSpec, block: usize) -> StoredFile<'_> {
    StoredFile {
        path: path.as_path(),
        name: name.as_str(),
        start: *start,
        crcs: crcs.as_slice(),
        block,
    }
}

/// The arrays a stored base's postings are read from (held, typically memory-mapped).
pub(super) struct BaseArrays {
    pub(super) offsets: Py<PyArray1<u64>>,
    pub(super) docs: Py<PyArray1<u32>>,
    pub(super) tfs: Py<PyArray1<u32>>,
}

pub(super) type BaseGuards<'py> = (
    PyReadonlyArray1<'py, u64>,
    PyReadonlyArray1<'py, u32>,
    PyReadonlyArray1<'py, u32>,
);

impl BaseArrays {
    /// The arrays borrowed read-only for one call.
    pub(super) fn readonly<'py>(&self, py: Python<'py>) -> BaseGuards<'py> {
        (
            self.offsets.bind(py).readonly(),
            self.docs.bind(py).readonly(),
            self.tfs.bind(py).readonly(),
        )
    }
}

/// Borrow the base's arrays for one call (none: an empty base).
pub(super) fn base_of<'a>(guards: Option<&'a BaseGuards<'_>>) -> PyResult<Base<'a>> {
    Ok(match guards {
        None => Base::EMPTY,
        Some((offsets, docs, tfs)) => Base {
            offsets: contiguous(offsets, "base")?,
            docs: contiguous(docs, "base")?,
            tfs: contiguous(tfs, "base")?,
        },
    })
}
