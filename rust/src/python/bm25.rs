//! Bindings of the BM25 index: the Rust handle `octobrain.bm25.BM25Index` wraps (its stored
//! base, read from memory-mapped arrays, is in `bm25_base`).

use numpy::{PyArray1, PyReadonlyArray1};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use super::bm25_base::{
    base_of, parts_tuple, stored, BaseArrays, BaseGuards, PartsTuple, StoredSpec,
};
use super::text::analyzer_options;
use super::{contiguous, detached};
use crate::bm25::{Base, Bm25Index, Bm25Params};
use crate::error::CoreError;

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

/// Rust handle of a BM25 index; wrapped by `octobrain.bm25.BM25Index`.
#[pyclass(module = "octobrain._core", name = "Bm25Index")]
pub(super) struct PyBm25Index {
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
        self.base.as_ref().map(|b| b.readonly(py))
    }
    /// `work` on the index and its stored base, run without holding the interpreter.
    fn with_base<T, F>(&self, py: Python<'_>, work: F) -> PyResult<T>
    where
        T: Send,
        F: FnOnce(&Bm25Index, &Base<'_>) -> Result<T, CoreError> + Send,
    {
        let guards = self.guards(py);
        let base = base_of(guards.as_ref())?;
        let inner = &self.inner;
        detached(py, move || work(inner, &base))
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

    #[allow(clippy::needless_pass_by_value)] // pyo3 hands arguments over by value
    #[pyo3(signature = (query, k, allowed = None, seen = None, ties = None))]
    fn search<'py>(
        &self,
        py: Python<'py>,
        query: String,
        k: i64,
        allowed: Option<PyReadonlyArray1<'py, i64>>,
        seen: Option<PyReadonlyArray1<'py, bool>>,
        ties: Option<PyReadonlyArray1<'py, i64>>,
    ) -> PyResult<Hits<'py>> {
        let allowed = owned_positions(allowed);
        let seen = owned_mask(seen);
        // (read where they lie, as the base's postings are: a million keys are 8 MB a query)
        let ties = ties.as_ref().map(|t| contiguous(t, "ties")).transpose()?;
        let hits = self.with_base(py, move |inner, base| {
            inner.search_keyed(
                base,
                &query,
                k_arg(k)?,
                allowed.as_deref(),
                seen.as_deref(),
                ties,
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
        let all = self.with_base(py, move |inner, base| {
            inner.search_batch(
                base,
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
    #[pyo3(signature = (query, k, mask, seen = None, ties = None))]
    fn search_masked<'py>(
        &self,
        py: Python<'py>,
        query: String,
        k: i64,
        mask: PyReadonlyArray1<'py, bool>,
        seen: Option<PyReadonlyArray1<'py, bool>>,
        ties: Option<PyReadonlyArray1<'py, i64>>,
    ) -> PyResult<Hits<'py>> {
        let mask = mask.as_array().to_vec();
        let seen = owned_mask(seen);
        let ties = ties.as_ref().map(|t| contiguous(t, "ties")).transpose()?;
        let hits = self.with_base(py, move |inner, base| {
            inner.search_masked(base, &query, k_arg(k)?, &mask, seen.as_deref(), ties)
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
        let out = self.with_base(py, move |inner, base| {
            inner.scores_at(base, &query, &positions, seen.as_deref())
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
        let out = self.with_base(py, move |inner, base| {
            inner.coverage(base, &query, &positions, seen.as_deref())
        })?;
        Ok(PyArray1::from_vec(py, out))
    }

    /// The ids of the query's terms the index holds (whose postings a query reads).
    fn term_ids<'py>(&self, py: Python<'py>, query: &str) -> Bound<'py, PyArray1<u32>> {
        PyArray1::from_vec(py, self.inner.term_ids(query))
    }

    fn to_bytes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let bytes = self.with_base(py, move |inner, base| inner.to_bytes(base))?;
        Ok(PyBytes::new(py, &bytes))
    }

    #[staticmethod]
    fn from_bytes(py: Python<'_>, data: &[u8]) -> PyResult<Self> {
        let inner = detached(py, || Bm25Index::from_bytes(data))?;
        Ok(Self::owned(inner))
    }

    /// The index as flat arrays: (terms, term_ends, offsets, docs, tfs, doc_len, live).
    fn to_parts<'py>(&self, py: Python<'py>) -> PyResult<PartsTuple<'py>> {
        let parts = self.with_base(py, move |inner, base| Ok(inner.to_parts(base)))?;
        Ok(parts_tuple(py, parts))
    }

    /// `to_parts`, the stored base's postings read from their files, `docs` and `tfs` (each
    /// the path read, the file's name in messages, where its values start, and the CRC-32 of
    /// each `block` bytes of the file),
    /// never through their mapping, each block verified before it is used: a file cut or
    /// changed in place is a `ValueError` naming it and the block ("bm25.docs.npy fails its
    /// checksum at block 3"). Without a stored base, as `to_parts`.
    #[allow(clippy::needless_pass_by_value)] // pyo3 hands arguments over by value
    fn to_parts_read<'py>(
        &self,
        py: Python<'py>,
        docs: StoredSpec,
        tfs: StoredSpec,
        block: usize,
    ) -> PyResult<PartsTuple<'py>> {
        if self.base.is_none() {
            return self.to_parts(py);
        }
        let (docs, tfs) = (stored(&docs, block), stored(&tfs, block));
        let parts = self.with_base(py, move |inner, base| {
            inner.to_parts_read(base.offsets, docs, tfs)
        })?;
        Ok(parts_tuple(py, parts))
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
        let held = arrays.readonly(py);
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
