//! The CRC-32 (zlib's) of many table rows at once, from their Arrow columns: what
//! `octobrain.store.schema._crc` computes of one row (its readable reference), so that a whole
//! table is checked against its `checksum` column without making a Python object per row.
//!
//! A row's sum runs over its columns in order. Per column:
//! - a text value: its length (u32 LE) then its UTF-8 bytes; a null reads as "";
//! - a fixed-width value (a float32, or a time as i64 microseconds): its bytes, a null as `-`;
//! - a list: its item count (u32 LE; a null list has none), then each item as its length and
//!   its bytes, a null item as `-`.

use rayon::prelude::*;

use crate::error::{CoreError, CoreResult};
use crate::idindex::Strings;

const NULL: &[u8] = b"-";

/// The values of a column (or the items of a list column).
#[derive(Debug, Clone, Copy)]
pub enum Values<'a> {
    /// Variable-width values in Arrow's layout (text).
    Bytes(Strings<'a>),
    /// Values of `width` bytes each, back to back.
    Fixed { data: &'a [u8], width: usize },
}

impl Values<'_> {
    fn len(&self) -> usize {
        match self {
            Self::Bytes(strings) => strings.len(),
            Self::Fixed { data, width } => data.len() / width,
        }
    }

    fn get(&self, i: usize) -> &[u8] {
        match self {
            Self::Bytes(strings) => strings.get(i),
            Self::Fixed { data, width } => &data[i * width..(i + 1) * width],
        }
    }
}

/// One checked column: its values, which of them are valid (None: all), and, for a list
/// column, the lists' offsets into the values (Arrow's layout) and which lists are valid.
#[derive(Debug, Clone, Copy)]
pub struct Column<'a> {
    pub values: Values<'a>,
    pub valid: Option<&'a [bool]>,
    pub lists: Option<(&'a [i64], Option<&'a [bool]>)>,
}

impl Column<'_> {
    /// Check the layout once for `rows` rows, so that summing cannot go out of bounds.
    pub fn checked(self, rows: usize) -> CoreResult<Self> {
        if let Values::Fixed { data, width } = self.values {
            if width == 0 || data.len() % width != 0 {
                return Err(CoreError::invalid(
                    "columns",
                    "fixed-width data must hold whole values of a non-zero width",
                ));
            }
        }
        let values = self.values.len();
        if self.valid.is_some_and(|v| v.len() != values) {
            return Err(CoreError::invalid(
                "columns",
                "validity must hold one flag per value",
            ));
        }
        let held = match self.lists {
            None => values,
            Some((offsets, valid)) => {
                let ordered = offsets.first().is_some_and(|&o| o >= 0)
                    && offsets.windows(2).all(|w| w[0] <= w[1]);
                let ends = offsets
                    .last()
                    .map_or(0, |&o| usize::try_from(o).unwrap_or(0));
                if !ordered || ends > values {
                    return Err(CoreError::invalid(
                        "columns",
                        "list offsets must be non-negative, non-decreasing and end within the items",
                    ));
                }
                if valid.is_some_and(|v| v.len() + 1 != offsets.len()) {
                    return Err(CoreError::invalid(
                        "columns",
                        "list validity must hold one flag per list",
                    ));
                }
                offsets.len() - 1
            }
        };
        if held != rows {
            return Err(CoreError::invalid(
                "columns",
                "must all hold one value per row",
            ));
        }
        Ok(self)
    }

    fn is_valid(flags: Option<&[bool]>, i: usize) -> bool {
        flags.is_none_or(|v| v[i])
    }

    fn sum_row(&self, row: usize, hasher: &mut crc32fast::Hasher) {
        let item = |hasher: &mut crc32fast::Hasher, i: usize, null: &[u8], prefixed: bool| {
            let raw = if Self::is_valid(self.valid, i) {
                self.values.get(i)
            } else {
                null
            };
            if prefixed {
                hasher.update(&len_bytes(raw.len()));
            }
            hasher.update(raw);
        };
        match (self.lists, self.values) {
            (None, Values::Bytes(_)) => item(hasher, row, b"", true),
            (None, Values::Fixed { .. }) => item(hasher, row, NULL, false),
            (Some((offsets, valid)), _) => {
                let (start, end) = if Self::is_valid(valid, row) {
                    (offsets[row] as usize, offsets[row + 1] as usize)
                } else {
                    (0, 0)
                };
                hasher.update(&len_bytes(end - start));
                for i in start..end {
                    item(hasher, i, NULL, true);
                }
            }
        }
    }
}

fn len_bytes(len: usize) -> [u8; 4] {
    // (as `len(raw).to_bytes(4, "little")`: a value of 4 GiB or more is not stored)
    u32::try_from(len).unwrap_or(u32::MAX).to_le_bytes()
}

/// The CRC-32 of each of `rows` rows over `columns` (each `Column::checked` for `rows`).
pub fn row_crcs(rows: usize, columns: &[Column<'_>]) -> CoreResult<Vec<u32>> {
    let columns = columns
        .iter()
        .map(|c| c.checked(rows))
        .collect::<CoreResult<Vec<_>>>()?;
    Ok((0..rows)
        .into_par_iter()
        .map(|row| {
            let mut hasher = crc32fast::Hasher::new();
            for column in &columns {
                column.sum_row(row, &mut hasher);
            }
            hasher.finalize()
        })
        .collect())
}

/// The CRC-32 (zlib's) of each `block` bytes of `data`, the last block possibly shorter: a
/// snapshot file's block sums, as `zlib.crc32` gives them one block at a time.
pub fn block_crcs(data: &[u8], block: usize) -> CoreResult<Vec<u32>> {
    if block == 0 {
        return Err(CoreError::invalid("block", "must be at least one byte"));
    }
    Ok(data.par_chunks(block).map(crc32fast::hash).collect())
}

/// The CRC-32 of `data` continued from `value` (the sum of what came before it), as
/// `zlib.crc32(data, value)`: a large file summed piece by piece.
pub fn crc32(data: &[u8], value: u32) -> u32 {
    let mut hasher = crc32fast::Hasher::new_with_initial(value);
    hasher.update(data);
    hasher.finalize()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text<'a>(offsets: &'a [i64], data: &'a [u8]) -> Values<'a> {
        Values::Bytes(Strings::checked(offsets, data, "columns").unwrap())
    }

    #[test]
    fn a_row_sums_its_length_prefixed_parts_in_order() {
        let title = Column {
            values: text(&[0, 2, 2], b"hi"),
            valid: Some(&[true, false]),
            lists: None,
        };
        let tags = Column {
            values: text(&[0, 1], b"a"),
            valid: Some(&[false]),
            lists: Some((&[0, 1, 1], Some(&[true, false]))),
        };
        let importance = Column {
            values: Values::Fixed {
                data: &[0, 0, 128, 63, 0, 0, 0, 0],
                width: 4,
            },
            valid: Some(&[true, false]),
            lists: None,
        };
        let sums = row_crcs(2, &[title, tags, importance]).unwrap();
        let first = [
            &[2, 0, 0, 0][..],
            b"hi",
            &[1, 0, 0, 0],
            &[1, 0, 0, 0],
            b"-",
            &[0, 0, 128, 63],
        ];
        let second = [&[0, 0, 0, 0][..], &[0, 0, 0, 0], b"-"];
        assert_eq!(
            sums,
            vec![
                crc32fast::hash(&first.concat()),
                crc32fast::hash(&second.concat())
            ]
        );
    }

    #[test]
    fn a_layout_out_of_bounds_is_refused() {
        let beyond = Column {
            values: text(&[0, 1], b"a"),
            valid: None,
            lists: Some((&[0, 2], None)),
        };
        assert!(row_crcs(1, &[beyond]).is_err());
        let short = Column {
            values: text(&[0, 1], b"a"),
            valid: None,
            lists: None,
        };
        assert!(row_crcs(2, &[short]).is_err());
    }

    #[test]
    fn blocks_sum_each_slice_the_last_one_shorter() {
        let data: Vec<u8> = (0..=255).cycle().take(10).collect();
        let sums = block_crcs(&data, 4).unwrap();
        let expected: Vec<u32> = data.chunks(4).map(crc32fast::hash).collect();
        assert_eq!(sums, expected);
        assert!(block_crcs(&[], 4).unwrap().is_empty());
        assert!(block_crcs(&data, 0).is_err());
        assert_eq!(
            crc32(&data[4..], crc32(&data[..4], 0)),
            crc32fast::hash(&data)
        );
    }
}
