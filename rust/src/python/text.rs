//! Bindings of the text kernels: analysis (the tokens BM25 indexes) and regex line matching.

use pyo3::prelude::*;

use super::detached;
use crate::error::CoreError;
use crate::regex_match;
use crate::tokenize::{Analyzer, AnalyzerOptions};

pub(super) fn analyzer_options(stem: bool, stopwords: bool) -> AnalyzerOptions {
    AnalyzerOptions { stem, stopwords }
}

/// Analyse texts into tokens (the same analyser BM25 uses for documents and queries).
#[pyfunction]
#[allow(clippy::needless_pass_by_value)] // pyo3 hands arguments over by value
#[pyo3(signature = (texts, stem = true, stopwords = true))]
pub(super) fn analyze(
    py: Python<'_>,
    texts: Vec<String>,
    stem: bool,
    stopwords: bool,
) -> PyResult<Vec<Vec<String>>> {
    detached(py, || {
        Ok(Analyzer::new(analyzer_options(stem, stopwords)).analyze_batch(&texts))
    })
}

/// One matching line as a tuple: (text_index, line_number, line, start, end, before, after).
type LineMatchTuple = (usize, usize, String, usize, usize, Vec<String>, Vec<String>);

/// Regex line matching over many texts; returns (matches, truncated) (see `regex_match.rs`).
#[pyfunction]
#[allow(clippy::needless_pass_by_value)] // pyo3 extracts arguments as owned values
#[allow(clippy::too_many_arguments)]
#[pyo3(signature = (texts, pattern, case_insensitive, max_matches, context, seconds = None, context_chars = None))]
pub(super) fn match_lines(
    py: Python<'_>,
    texts: Vec<String>,
    pattern: &str,
    case_insensitive: bool,
    max_matches: i64,
    context: i64,
    seconds: Option<f64>,
    context_chars: Option<i64>,
) -> PyResult<(Vec<LineMatchTuple>, bool)> {
    let cap = usize::try_from(max_matches)
        .map_err(|_| CoreError::invalid("max_matches", "must be >= 1"))?;
    let context =
        usize::try_from(context).map_err(|_| CoreError::invalid("context", "must be >= 0"))?;
    let context_chars = context_chars
        .map(usize::try_from)
        .transpose()
        .map_err(|_| CoreError::invalid("context_chars", "must be >= 0"))?;
    let limit = match seconds {
        // A limit too long for a `Duration` (over 584 billion years) is never reached.
        Some(s) if s.is_finite() && s >= 0.0 => std::time::Duration::try_from_secs_f64(s).ok(),
        Some(_) => return Err(CoreError::invalid("seconds", "must be a number >= 0").into()),
        None => None,
    };
    let result = detached(py, || {
        regex_match::match_lines_within(
            &texts,
            pattern,
            case_insensitive,
            cap,
            context,
            context_chars,
            limit,
        )
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
