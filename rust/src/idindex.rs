//! `IdIndex`: which rows of a table hold any of a few string ids, without reading every row.
//!
//! The memory mirror keeps every relationship as one Arrow table; a search asks for the edges
//! touching its candidates, and a scan of both id columns costs O(edges) per search (≈ 6 ms at
//! 100k edges, ≈ 55 ms at 1M: a conversation store has an edge per turn). The index holds each
//! row's ids as 64-bit hashes sorted once, so a lookup is a binary search per id asked.
//!
//! Strings come as Arrow lays them out: string `i` is `data[offsets[i]..offsets[i + 1]]`. A
//! hash match is only a candidate: two ids may share a hash, so the caller compares the ids of
//! the rows returned (a handful) before using them.

use std::hash::Hasher;

use rayon::prelude::*;
use rustc_hash::FxHasher;

use crate::error::{CoreError, CoreResult};

/// Strings in Arrow's layout (`offsets` has one entry more than there are strings).
#[derive(Debug, Clone, Copy)]
pub struct Strings<'a> {
    pub offsets: &'a [i64],
    pub data: &'a [u8],
}

impl<'a> Strings<'a> {
    /// Check the layout once, so that `get` cannot go out of bounds; `arg` names the argument.
    pub fn checked(offsets: &'a [i64], data: &'a [u8], arg: &'static str) -> CoreResult<Self> {
        if offsets.is_empty() {
            return Err(CoreError::invalid(
                arg,
                "offsets must hold at least one entry",
            ));
        }
        let mut previous = 0i64;
        for &o in offsets {
            if o < previous {
                return Err(CoreError::invalid(
                    arg,
                    "offsets must be non-negative and non-decreasing",
                ));
            }
            previous = o;
        }
        if usize::try_from(previous).map_or(true, |end| end > data.len()) {
            return Err(CoreError::invalid(arg, "offsets must end within the data"));
        }
        Ok(Self { offsets, data })
    }

    /// How many strings there are.
    pub fn len(&self) -> usize {
        self.offsets.len() - 1
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub(crate) fn get(&self, i: usize) -> &'a [u8] {
        // In bounds by `checked`: offsets are non-negative, ordered and end within `data`.
        let start = usize::try_from(self.offsets[i]).unwrap_or_default();
        let end = usize::try_from(self.offsets[i + 1]).unwrap_or_default();
        &self.data[start..end]
    }
}

/// The 64-bit hash the index files an id under.
pub fn id_hash(bytes: &[u8]) -> u64 {
    let mut hasher = FxHasher::default();
    hasher.write(bytes);
    hasher.write_usize(bytes.len());
    hasher.finish()
}

/// Every row's ids, as (hash, row) pairs sorted by hash.
#[derive(Debug, Clone, Default)]
pub struct IdIndex {
    pairs: Vec<(u64, u32)>,
    row_count: usize,
}

impl IdIndex {
    /// Index the rows of a table by the ids in `columns` (each one string per row).
    pub fn build(columns: &[Strings<'_>]) -> CoreResult<Self> {
        let row_count = columns.first().map_or(0, Strings::len);
        if columns.iter().any(|c| c.len() != row_count) {
            return Err(CoreError::invalid(
                "columns",
                "must all hold one string per row",
            ));
        }
        let rows = u32::try_from(row_count)
            .map_err(|_| CoreError::invalid("columns", "must hold at most 4,294,967,295 rows"))?;
        let mut pairs: Vec<(u64, u32)> = Vec::with_capacity(row_count * columns.len());
        for column in columns {
            let hashed: Vec<(u64, u32)> = (0..rows)
                .into_par_iter()
                .map(|r| (id_hash(column.get(r as usize)), r))
                .collect();
            pairs.extend(hashed);
        }
        pairs.par_sort_unstable_by_key(|&(hash, _)| hash);
        Ok(Self { pairs, row_count })
    }

    /// The rows indexed.
    pub fn row_count(&self) -> usize {
        self.row_count
    }

    /// The rows holding an id hashed like one of `wanted` (ascending, each once): a superset
    /// of the rows that hold one of them.
    pub fn rows_of(&self, wanted: &Strings<'_>) -> Vec<u32> {
        let mut out = Vec::new();
        for i in 0..wanted.len() {
            let h = id_hash(wanted.get(i));
            let start = self.pairs.partition_point(|&(x, _)| x < h);
            out.extend(
                self.pairs[start..]
                    .iter()
                    .take_while(|&&(x, _)| x == h)
                    .map(|&(_, row)| row),
            );
        }
        out.sort_unstable();
        out.dedup();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Arrow's layout of `items`.
    fn layout(items: &[&str]) -> (Vec<i64>, Vec<u8>) {
        let mut offsets = vec![0i64];
        let mut data = Vec::new();
        for s in items {
            data.extend_from_slice(s.as_bytes());
            offsets.push(data.len() as i64);
        }
        (offsets, data)
    }

    fn strings<'a>(parts: &'a (Vec<i64>, Vec<u8>)) -> Strings<'a> {
        Strings::checked(&parts.0, &parts.1, "strings").unwrap()
    }

    #[test]
    fn finds_every_row_holding_an_id_in_either_column() {
        let sources = layout(&["a", "b", "c", "a", ""]);
        let targets = layout(&["b", "c", "a", "a", "d"]);
        let index = IdIndex::build(&[strings(&sources), strings(&targets)]).unwrap();
        assert_eq!(index.row_count(), 5);
        let ask = |ids: &[&str]| index.rows_of(&strings(&layout(ids)));
        assert_eq!(ask(&["a"]), vec![0, 2, 3]);
        assert_eq!(ask(&["c", "b", "c"]), vec![0, 1, 2]);
        assert_eq!(ask(&["d", ""]), vec![4]);
        assert!(ask(&["ab", "zz"]).is_empty());
        assert!(ask(&[]).is_empty());
    }

    #[test]
    fn the_same_as_a_scan_on_many_rows() {
        let ids: Vec<String> = (0..5000)
            .map(|i| format!("id-{}", i * 7919 % 3001))
            .collect();
        let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
        let (sources, targets) = (layout(&refs[..2500]), layout(&refs[2500..]));
        let index = IdIndex::build(&[strings(&sources), strings(&targets)]).unwrap();
        let wanted = ["id-0", "id-7", "id-1500", "id-2999", "id-3000", "none"];
        let scan: Vec<u32> = (0..2500u32)
            .filter(|&r| {
                let r = r as usize;
                wanted.contains(&refs[r]) || wanted.contains(&refs[2500 + r])
            })
            .collect();
        assert!(!scan.is_empty());
        assert_eq!(index.rows_of(&strings(&layout(&wanted))), scan);
    }

    #[test]
    fn bad_layouts_and_ragged_columns_name_the_rule() {
        let data = b"abc";
        let err = |offsets: &[i64]| Strings::checked(offsets, data, "ids").unwrap_err();
        assert!(err(&[]).to_string().starts_with("ids: offsets must hold"));
        assert!(err(&[0, 2, 1]).to_string().contains("non-decreasing"));
        assert!(err(&[-1, 2]).to_string().contains("non-negative"));
        assert!(err(&[0, 4]).to_string().contains("within the data"));
        let (one, two) = (layout(&["a"]), layout(&["a", "b"]));
        let ragged = IdIndex::build(&[strings(&one), strings(&two)]).unwrap_err();
        assert!(ragged.to_string().starts_with("columns: must all hold"));
        assert_eq!(IdIndex::build(&[]).unwrap().row_count(), 0);
    }
}
