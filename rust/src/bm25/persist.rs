//! The formats of a BM25 index.
//!
//! Bytes: magic, format version, payload length, FNV-1a checksum, then a postcard payload.
//! Derived data (vocabulary map, norms) is rebuilt on load, after the payload is checked for
//! consistency, so corrupt bytes give an error, never a panic.
//!
//! [`Parts`]: flat arrays (postings as one `docs` / `tfs` pair with per-term offsets, the terms
//! as one UTF-8 blob with end offsets) that a caller stores as files and later hands back as a
//! [`Base`] to [`Bm25Index::open_base`], which reads only the small arrays: the postings stay
//! where the caller keeps them (memory-mapped) and are read as queries touch them.

use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

use super::stored::{BaseTerms, Mapped, ReadTerms, StoredFile};
use super::{Base, Bm25Index, Bm25Params, Postings};
use crate::error::{CoreError, CoreResult};
use crate::tokenize::{Analyzer, AnalyzerOptions};

const MAGIC: &[u8; 8] = b"OCTOBM25";
// 6: invisible format characters (a soft hyphen) dropped inside words; 5: `C++`, `C#` keep their marks (`c++`, `c#`; all were `c`); 4: the analyser adds a
// version's number without its `v`; 3: identifiers' parts; 2: joined hyphenated compounds (an
// index of an older version holds none of those terms).
const FORMAT_VERSION: u32 = 6;
const HEADER_LEN: usize = 8 + 4 + 8 + 8;

/// What `to_bytes` stores; everything else is derived on load.
#[derive(Serialize, Deserialize)]
struct Persisted {
    params: Bm25Params,
    options: AnalyzerOptions,
    terms: Vec<String>,
    postings: Vec<Postings>,
    doc_len: Vec<u32>,
    live: Vec<bool>,
}

/// An index as flat arrays (see the module doc); every posting points at a live document.
#[derive(Debug, Clone)]
pub struct Parts {
    /// BM25 parameters.
    pub params: Bm25Params,
    /// Analyser options.
    pub options: AnalyzerOptions,
    /// The terms' UTF-8 bytes, one after the other.
    pub terms: Vec<u8>,
    /// Where each term ends in `terms`.
    pub term_ends: Vec<u64>,
    /// `terms + 1` offsets into `docs` / `tfs`.
    pub offsets: Vec<u64>,
    /// Postings' positions, per term ascending.
    pub docs: Vec<u32>,
    /// Postings' term frequencies.
    pub tfs: Vec<u32>,
    /// Per position, the document's length (0 when removed).
    pub doc_len: Vec<u32>,
    /// Per position, whether the document is live.
    pub live: Vec<bool>,
}

impl Bm25Index {
    /// Every term's live postings, base and in-memory merged (base positions come first).
    fn merged(&self, base: &Base<'_>) -> Vec<Postings> {
        (0..self.terms.len())
            .map(|t| {
                let mut out = Postings::default();
                self.append_live(t, base.term(t), &mut out.docs, &mut out.tfs);
                out
            })
            .collect()
    }

    /// Term `t`'s live postings, the base's still-live ones (`base_docs`, `base_tfs`) then
    /// those added since, appended to `docs` and `tfs`.
    fn append_live(
        &self,
        t: usize,
        (base_docs, base_tfs): (&[u32], &[u32]),
        docs: &mut Vec<u32>,
        tfs: &mut Vec<u32>,
    ) {
        for (&d, &tf) in base_docs.iter().zip(base_tfs) {
            if self.is_live(d as usize) {
                docs.push(d);
                tfs.push(tf);
            }
        }
        docs.extend_from_slice(&self.postings[t].docs);
        tfs.extend_from_slice(&self.postings[t].tfs);
    }

    /// The index as flat arrays, for a caller to store and reopen with [`Self::open_base`].
    /// Each term's live postings are copied straight into them: a merged copy of every term's
    /// postings beside the flat arrays held as much again (500 MB at a million documents).
    pub fn to_parts(&self, base: &Base<'_>) -> Parts {
        self.parts_from(base.docs.len(), &mut Mapped(base))
            .expect("a mapped base cannot fail")
    }

    /// [`Self::to_parts`] of an index over a stored base (`offsets` as [`Self::open_base`]
    /// took them), its postings read from their files (`docs`, `tfs`) in order, never
    /// through a mapping, each block verified against its recorded CRC-32 before it is used:
    /// a file cut or changed in place is [`CoreError::Damaged`] naming it and the block.
    pub fn to_parts_read(
        &self,
        offsets: &[u64],
        docs: StoredFile<'_>,
        tfs: StoredFile<'_>,
    ) -> CoreResult<Parts> {
        let total = offsets.last().map_or(0, |&n| n as usize);
        self.parts_from(total, &mut ReadTerms::open(offsets, docs, tfs)?)
    }

    /// The flat arrays, each term's base postings taken from `base_term` (`most`: how many
    /// the base holds, removed ones too).
    fn parts_from(&self, most: usize, base: &mut impl BaseTerms) -> CoreResult<Parts> {
        let held: usize = self.postings.iter().map(|p| p.docs.len()).sum();
        let most = most + held; // (removed base postings are skipped)
        let mut parts = Parts {
            params: self.params,
            options: self.options(),
            terms: Vec::new(),
            term_ends: Vec::with_capacity(self.terms.len()),
            offsets: Vec::with_capacity(self.terms.len() + 1),
            docs: Vec::with_capacity(most),
            tfs: Vec::with_capacity(most),
            doc_len: self.doc_len.clone(),
            live: self.live.clone(),
        };
        parts.offsets.push(0);
        for (t, term) in self.terms.iter().enumerate() {
            parts.terms.extend_from_slice(term.as_bytes());
            parts.term_ends.push(parts.terms.len() as u64);
            self.append_live(t, base.term(t)?, &mut parts.docs, &mut parts.tfs);
            parts.offsets.push(parts.docs.len() as u64);
        }
        parts.docs.shrink_to_fit();
        parts.tfs.shrink_to_fit();
        Ok(parts)
    }

    /// An index over a stored base (what [`Self::to_parts`] wrote). Reads the terms, lengths and
    /// offsets (checked for consistency), never the postings; new documents go to memory.
    pub fn open_base(
        params: Bm25Params,
        options: AnalyzerOptions,
        terms: &[u8],
        term_ends: &[u64],
        doc_len: &[u32],
        live: &[bool],
        base: &Base<'_>,
    ) -> CoreResult<Self> {
        let corrupt = |what: &str| Err(CoreError::Corrupt(what.to_owned()));
        let params = Bm25Params::new(params.k1, params.b)
            .map_err(|_| CoreError::Corrupt("invalid k1 or b".to_owned()))?;
        let n = doc_len.len();
        let ordered = |v: &[u64]| v.windows(2).all(|w| w[0] <= w[1]);
        if live.len() != n || n > u32::MAX as usize || base.docs.len() != base.tfs.len() {
            return corrupt("inconsistent lengths");
        }
        if base.offsets.len() != term_ends.len() + 1
            || base.offsets.first() != Some(&0)
            || base.offsets.last() != Some(&(base.docs.len() as u64))
            || !ordered(base.offsets)
            || !ordered(term_ends)
            || term_ends.last().is_some_and(|&e| e != terms.len() as u64)
        {
            return corrupt("inconsistent offsets");
        }
        let mut index = Self::new(params, options);
        let mut start = 0usize;
        for &end in term_ends {
            let end = end as usize;
            let Ok(term) = std::str::from_utf8(&terms[start..end]) else {
                return corrupt("a term is not UTF-8");
            };
            if index.vocab.contains_key(term) {
                return corrupt("duplicate term");
            }
            index.term_id(term.to_owned());
            start = end;
        }
        index.doc_len = doc_len.to_vec();
        index.live = live.to_vec();
        index.live_count = live.iter().filter(|&&l| l).count() as u32;
        index.refresh_norms();
        Ok(index)
    }

    /// Serialise: magic, format version, payload length, FNV-1a checksum, postcard payload.
    pub fn to_bytes(&self, base: &Base<'_>) -> CoreResult<Vec<u8>> {
        let persisted = Persisted {
            params: self.params,
            options: self.options(),
            terms: self.terms.clone(),
            postings: self.merged(base),
            doc_len: self.doc_len.clone(),
            live: self.live.clone(),
        };
        let payload = postcard::to_stdvec(&persisted)
            .map_err(|e| CoreError::Corrupt(format!("cannot encode: {e}")))?;
        let mut out = Vec::with_capacity(HEADER_LEN + payload.len());
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
        out.extend_from_slice(&fnv1a(&payload).to_le_bytes());
        out.extend_from_slice(&payload);
        Ok(out)
    }

    /// Load what [`Bm25Index::to_bytes`] wrote; corrupt or foreign bytes are a clear error.
    pub fn from_bytes(bytes: &[u8]) -> CoreResult<Self> {
        let corrupt = |what: &str| CoreError::Corrupt(what.to_owned());
        if bytes.len() < HEADER_LEN || &bytes[..8] != MAGIC {
            return Err(corrupt("not an octobrain BM25 index: bad magic"));
        }
        let version = u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes"));
        if version != FORMAT_VERSION {
            return Err(CoreError::Corrupt(format!(
                "format version {version}, this build reads {FORMAT_VERSION}"
            )));
        }
        let len = u64::from_le_bytes(bytes[12..20].try_into().expect("8 bytes"));
        let checksum = u64::from_le_bytes(bytes[20..28].try_into().expect("8 bytes"));
        let payload = &bytes[HEADER_LEN..];
        if payload.len() as u64 != len {
            return Err(corrupt("truncated or padded payload"));
        }
        if fnv1a(payload) != checksum {
            return Err(corrupt("checksum mismatch"));
        }
        let p: Persisted = postcard::from_bytes(payload)
            .map_err(|e| CoreError::Corrupt(format!("cannot decode: {e}")))?;
        Self::from_persisted(p)
    }

    fn from_persisted(p: Persisted) -> CoreResult<Self> {
        let corrupt = |what: &str| Err(CoreError::Corrupt(what.to_owned()));
        let params = Bm25Params::new(p.params.k1, p.params.b)
            .map_err(|_| CoreError::Corrupt("invalid k1 or b".to_owned()))?;
        let n = p.doc_len.len();
        if p.live.len() != n || p.terms.len() != p.postings.len() || n > u32::MAX as usize {
            return corrupt("inconsistent lengths");
        }
        let mut vocab = FxHashMap::default();
        for (id, term) in p.terms.iter().enumerate() {
            if vocab.insert(term.clone(), id as u32).is_some() {
                return corrupt("duplicate term");
            }
        }
        let mut len_check = vec![0u64; n];
        for postings in &p.postings {
            let sorted = postings.docs.windows(2).all(|w| w[0] < w[1]);
            if postings.docs.len() != postings.tfs.len() || !sorted {
                return corrupt("malformed postings");
            }
            for (&d, &tf) in postings.docs.iter().zip(&postings.tfs) {
                if d as usize >= n || !p.live[d as usize] || tf == 0 {
                    return corrupt("posting points at a missing document");
                }
                len_check[d as usize] += u64::from(tf);
            }
        }
        if len_check
            .iter()
            .zip(&p.doc_len)
            .any(|(&a, &b)| a != u64::from(b))
        {
            return corrupt("document lengths disagree with postings");
        }
        let mut index = Self {
            params,
            analyzer: Analyzer::new(p.options),
            terms: p.terms,
            vocab,
            postings: p.postings,
            base_tombstones: false,
            norm: Vec::new(),
            live_count: p.live.iter().filter(|&&l| l).count() as u32,
            doc_len: p.doc_len,
            live: p.live,
        };
        index.refresh_norms();
        Ok(index)
    }
}

/// 64-bit FNV-1a: enough to catch corruption, not meant against tampering.
fn fnv1a(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::super::tests::{docs, plain};
    use super::*;

    #[test]
    fn bytes_round_trip_and_corruption_is_detected() {
        let mut index = Bm25Index::build(&docs(), Bm25Params::default(), plain()).unwrap();
        index.remove(&[0], 0).unwrap();
        let bytes = index.to_bytes(&Base::EMPTY).unwrap();
        let back = Bm25Index::from_bytes(&bytes).unwrap();
        let none = &Base::EMPTY;
        assert_eq!(
            back.search(none, "apple cherry", 10, None, None).unwrap(),
            index.search(none, "apple cherry", 10, None, None).unwrap()
        );
        assert_eq!(back.doc_count(), 3);
        let mut bad = bytes.clone();
        let last = bad.len() - 1;
        bad[last] ^= 0xff;
        assert!(matches!(
            Bm25Index::from_bytes(&bad),
            Err(CoreError::Corrupt(_))
        ));
        assert!(matches!(
            Bm25Index::from_bytes(b"junk"),
            Err(CoreError::Corrupt(_))
        ));
        assert!(matches!(
            Bm25Index::from_bytes(&bytes[..40]),
            Err(CoreError::Corrupt(_))
        ));
    }

    #[test]
    fn an_index_over_a_stored_base_answers_like_one_in_memory() {
        let params = Bm25Params::default();
        let mut owned = Bm25Index::build(&docs(), params, plain()).unwrap();
        owned.remove(&[2], 0).unwrap();
        let parts = owned.to_parts(&Base::EMPTY);
        let base = Base {
            offsets: &parts.offsets,
            docs: &parts.docs,
            tfs: &parts.tfs,
        };
        let (terms, ends) = (&parts.terms, &parts.term_ends);
        let mut opened = Bm25Index::open_base(
            params,
            plain(),
            terms,
            ends,
            &parts.doc_len,
            &parts.live,
            &base,
        )
        .unwrap();
        // The same updates on both: a new document, then one from the base and one new removed.
        for index in [&mut owned, &mut opened] {
            assert_eq!(index.add(&["apple date", "cherry banana"]).unwrap(), 4);
            index.remove(&[1, 5], 4).unwrap();
        }
        let none = &Base::EMPTY;
        for query in ["apple", "cherry date banana", "date", "nothing"] {
            let want = owned.search(none, query, 10, None, None).unwrap();
            assert_eq!(
                opened.search(&base, query, 10, None, None).unwrap(),
                want,
                "{query}"
            );
            let at = opened
                .scores_at(&base, query, &[0, 1, 2, 3, 4, 5], None)
                .unwrap();
            let found = |p: u32| want.iter().find(|h| h.0 == p).map_or(0.0, |h| h.1);
            assert_eq!(at, (0..6).map(found).collect::<Vec<_>>(), "{query}");
            assert_eq!(
                opened
                    .coverage(&base, query, &[0, 1, 3, 4, 5], None)
                    .unwrap(),
                owned.coverage(none, query, &[0, 1, 3, 4, 5], None).unwrap()
            );
        }
        assert_eq!(opened.vocab_size(&base), owned.vocab_size(none));
        let again = opened.to_parts(&base);
        assert_eq!(again.docs, owned.to_parts(none).docs);
        let bad = Base {
            offsets: &parts.offsets[1..],
            ..base
        };
        let (len, live) = (&parts.doc_len, &parts.live);
        assert!(Bm25Index::open_base(params, plain(), terms, ends, len, live, &bad).is_err());
    }
}
