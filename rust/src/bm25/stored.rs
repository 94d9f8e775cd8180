//! A stored base's postings read from their files, in order, with `pread` (never mapped: a
//! file cut in place meanwhile is an error, not a SIGBUS), each block verified against the
//! CRC-32 recorded for it before any of its bytes are used.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

use super::Base;
use crate::error::{CoreError, CoreResult};

/// Blocks read at once (into one reused buffer).
const RUN: usize = 64;

/// One stored file: where it is, the name its damage is told by, where its `u32`s start, and
/// the CRC-32 of each `block` bytes of the whole file (the last block possibly shorter).
#[derive(Debug, Clone)]
pub struct StoredFile<'a> {
    /// The file (it may be a path to an open descriptor, `/dev/fd/N`).
    pub path: &'a Path,
    /// The file's name in messages.
    pub name: &'a str,
    /// Where its values start (after the file's header); a multiple of 4.
    pub start: u64,
    /// The CRC-32 of each block of the file, from its first byte.
    pub crcs: &'a [u32],
    /// The block size the CRCs were taken over; a multiple of 4.
    pub block: usize,
}

/// A [`StoredFile`] open for reading its values in order, each block verified first.
pub(super) struct CheckedReader<'a> {
    spec: StoredFile<'a>,
    file: File,
    name: String,
    buf: Vec<u8>,
    /// The file offset of `buf[0]` (a block boundary).
    buf_at: u64,
    /// The file offset of the next value.
    at: u64,
}

impl<'a> CheckedReader<'a> {
    pub(super) fn open(spec: StoredFile<'a>) -> CoreResult<Self> {
        if spec.block == 0 || spec.block % 4 != 0 || spec.start % 4 != 0 {
            return Err(CoreError::invalid(
                "block",
                "must be a positive multiple of 4",
            ));
        }
        let name = spec.name.to_owned();
        let file = File::open(spec.path).map_err(|e| CoreError::Damaged(format!("{name}: {e}")))?;
        Ok(Self {
            at: spec.start,
            buf_at: 0,
            buf: Vec::new(),
            spec,
            file,
            name,
        })
    }

    /// Append the next `n` values to `out`.
    pub(super) fn read(&mut self, mut n: usize, out: &mut Vec<u32>) -> CoreResult<()> {
        out.reserve(n.min(1 << 20)); // (a count past the file fails as it is read)
        while n > 0 {
            let end = self.buf_at + self.buf.len() as u64;
            if self.at >= end {
                self.fill()?;
                continue;
            }
            let from = (self.at - self.buf_at) as usize;
            let take = n.min((self.buf.len() - from) / 4);
            if take == 0 {
                return Err(self.damaged(self.at / self.spec.block as u64));
            }
            let bytes = &self.buf[from..from + take * 4];
            out.extend(
                bytes
                    .chunks_exact(4)
                    .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]])),
            );
            self.at += take as u64 * 4;
            n -= take;
        }
        Ok(())
    }

    /// Read the run of blocks holding `at`, and verify each (a block missing, short or
    /// other than recorded: `CoreError::Damaged` naming it).
    fn fill(&mut self) -> CoreResult<()> {
        let block = self.spec.block;
        let first = usize::try_from(self.at / block as u64).unwrap_or(usize::MAX);
        let count = RUN.min(self.spec.crcs.len().saturating_sub(first));
        if count == 0 {
            return Err(self.damaged(first as u64));
        }
        self.buf.resize(count * block, 0);
        self.buf_at = (first * block) as u64;
        let mut got = 0;
        while got < self.buf.len() {
            match self
                .file
                .read_at(&mut self.buf[got..], self.buf_at + got as u64)
            {
                Ok(0) => break,
                Ok(k) => got += k,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(CoreError::Damaged(format!("{}: {e}", self.name))),
            }
        }
        self.buf.truncate(got);
        for i in 0..count {
            let lo = (i * block).min(got);
            let hi = ((i + 1) * block).min(got);
            let whole = hi - lo == block || first + i + 1 == self.spec.crcs.len();
            if lo == hi || !whole || crc32fast::hash(&self.buf[lo..hi]) != self.spec.crcs[first + i]
            {
                self.buf.truncate(lo); // (only what was verified is served)
                if lo == 0 {
                    return Err(self.damaged((first + i) as u64));
                }
                break;
            }
        }
        Ok(())
    }

    fn damaged(&self, block: u64) -> CoreError {
        CoreError::Damaged(format!("{} fails its checksum at block {block}", self.name))
    }
}

/// Where a merge takes each term's base postings from, term after term.
pub(super) trait BaseTerms {
    /// Term `t`'s (docs, tfs) in the base.
    fn term(&mut self, t: usize) -> CoreResult<(&[u32], &[u32])>;
}

/// A base held in memory (or mapped).
pub(super) struct Mapped<'a, 'b>(pub(super) &'a Base<'b>);

impl BaseTerms for Mapped<'_, '_> {
    fn term(&mut self, t: usize) -> CoreResult<(&[u32], &[u32])> {
        Ok(self.0.term(t))
    }
}

/// A base read from its files (terms in order), one term's postings held at a time.
pub(super) struct ReadTerms<'a> {
    offsets: &'a [u64],
    docs: CheckedReader<'a>,
    tfs: CheckedReader<'a>,
    held: (Vec<u32>, Vec<u32>),
}

impl<'a> ReadTerms<'a> {
    pub(super) fn open(
        offsets: &'a [u64],
        docs: StoredFile<'a>,
        tfs: StoredFile<'a>,
    ) -> CoreResult<Self> {
        Ok(Self {
            offsets,
            docs: CheckedReader::open(docs)?,
            tfs: CheckedReader::open(tfs)?,
            held: (Vec::new(), Vec::new()),
        })
    }
}

impl BaseTerms for ReadTerms<'_> {
    fn term(&mut self, t: usize) -> CoreResult<(&[u32], &[u32])> {
        let (Some(&lo), Some(&hi)) = (self.offsets.get(t), self.offsets.get(t + 1)) else {
            return Ok((&[], &[]));
        };
        let n = usize::try_from(hi.saturating_sub(lo)).unwrap_or(usize::MAX);
        self.held.0.clear();
        self.held.1.clear();
        self.docs.read(n, &mut self.held.0)?;
        self.tfs.read(n, &mut self.held.1)?;
        Ok((&self.held.0, &self.held.1))
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::plain;
    use super::super::{Bm25Index, Bm25Params};
    use super::*;

    const BLOCK: usize = 64;
    const HEADER: usize = 128; // (as a `.npy` file's header)

    /// `values` stored as a file (a header, then the values), and its blocks' CRC-32.
    fn stored(name: &str, values: &[u32]) -> (std::path::PathBuf, Vec<u8>, Vec<u32>) {
        let mut bytes = vec![7u8; HEADER];
        bytes.extend(values.iter().flat_map(|v| v.to_le_bytes()));
        let crcs = bytes.chunks(BLOCK).map(crc32fast::hash).collect();
        let path = std::env::temp_dir().join(format!("bm25-stored-{}-{name}", std::process::id()));
        std::fs::write(&path, &bytes).unwrap();
        (path, bytes, crcs)
    }

    fn spec<'a>(path: &'a Path, crcs: &'a [u32]) -> StoredFile<'a> {
        StoredFile {
            path,
            name: "bm25.docs.npy",
            start: HEADER as u64,
            crcs,
            block: BLOCK,
        }
    }

    #[test]
    fn a_base_read_from_its_files_merges_as_the_mapped_one_and_damage_is_named() {
        let texts: Vec<String> = (0..60)
            .map(|i| format!("apple w{} w{}", i % 7, i))
            .collect();
        let owned = Bm25Index::build(&texts, Bm25Params::default(), plain()).unwrap();
        let parts = owned.to_parts(&Base::EMPTY);
        let base = Base {
            offsets: &parts.offsets,
            docs: &parts.docs,
            tfs: &parts.tfs,
        };
        let (len, live) = (&parts.doc_len, &parts.live);
        let (terms, ends) = (&parts.terms, &parts.term_ends);
        let mut index =
            Bm25Index::open_base(owned.params, plain(), terms, ends, len, live, &base).unwrap();
        index.add(&["apple pie"]).unwrap();
        index.remove(&[3], parts.live.len()).unwrap();
        let want = index.to_parts(&base);
        let (docs_path, docs_bytes, docs_crcs) = stored("docs", &parts.docs);
        let (tfs_path, _, tfs_crcs) = stored("tfs", &parts.tfs);
        let read = |docs: StoredFile<'_>| {
            index.to_parts_read(&parts.offsets, docs, spec(&tfs_path, &tfs_crcs))
        };
        let got = read(spec(&docs_path, &docs_crcs)).unwrap();
        assert_eq!(
            (got.docs, got.tfs, got.offsets),
            (want.docs, want.tfs, want.offsets)
        );
        let damaged = |bytes: &[u8]| {
            std::fs::write(&docs_path, bytes).unwrap();
            read(spec(&docs_path, &docs_crcs)).unwrap_err().to_string()
        };
        let block = |at: usize| format!("fails its checksum at block {}", at / BLOCK);
        let cut = docs_bytes.len() / 2;
        assert!(damaged(&docs_bytes[..cut]).ends_with(&block(cut)), "cut");
        let mut flipped = docs_bytes;
        flipped[HEADER + 70] ^= 0xFF;
        let said = damaged(&flipped);
        assert_eq!(said, format!("bm25.docs.npy {}", block(HEADER + 70)));
        let _ = std::fs::remove_file(&docs_path);
        let _ = std::fs::remove_file(&tfs_path);
    }
}
