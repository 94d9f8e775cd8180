//! The byte format of a BM25 index: magic, format version, payload length, FNV-1a checksum,
//! then a postcard payload. Derived data (vocabulary map, weights) is rebuilt on load, after
//! the payload is checked for consistency, so corrupt bytes give an error, never a panic.

use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

use super::{Bm25Index, Bm25Params, Postings};
use crate::error::{CoreError, CoreResult};
use crate::tokenize::{Analyzer, AnalyzerOptions};

const MAGIC: &[u8; 8] = b"OCTOBM25";
// 2: the analyser adds joined hyphenated compounds; an index of 1 holds none of those terms.
const FORMAT_VERSION: u32 = 2;
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

impl Bm25Index {
    /// Serialise: magic, format version, payload length, FNV-1a checksum, postcard payload.
    pub fn to_bytes(&self) -> CoreResult<Vec<u8>> {
        let persisted = Persisted {
            params: self.params,
            options: self.options(),
            terms: self.terms.clone(),
            postings: self.postings.clone(),
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
            weights: Vec::new(),
            live_count: p.live.iter().filter(|&&l| l).count() as u32,
            doc_len: p.doc_len,
            live: p.live,
        };
        index.refresh_weights();
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
        index.remove(&[0]).unwrap();
        let bytes = index.to_bytes().unwrap();
        let back = Bm25Index::from_bytes(&bytes).unwrap();
        assert_eq!(
            back.search("apple cherry", 10, None).unwrap(),
            index.search("apple cherry", 10, None).unwrap()
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
}
