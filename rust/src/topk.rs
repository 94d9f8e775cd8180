//! Partial top-k selection with deterministic ties: score descending, then a tie key
//! ascending (the position, or one the caller gives each position, e.g. its id's rank).
//! Shared by every kernel that ranks positions.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// A hit ordered so that "greater" means "worse": lower score, then higher tie key.
#[derive(Debug, PartialEq)]
struct Hit {
    score: f32,
    key: i64,
    position: u32,
}

impl Eq for Hit {}

impl Ord for Hit {
    fn cmp(&self, other: &Self) -> Ordering {
        other
            .score
            .total_cmp(&self.score)
            .then_with(|| self.key.cmp(&other.key))
            .then_with(|| self.position.cmp(&other.position))
    }
}

impl PartialOrd for Hit {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// Partial top-k selection: a heap of the best `k` so far whose root is the worst kept hit,
/// so most candidates cost one comparison. Output: score descending, tie key ascending.
#[derive(Debug)]
pub struct TopK {
    k: usize,
    heap: BinaryHeap<Hit>,
    /// Score of the worst kept hit once `k` are kept (else 0): anything below cannot enter.
    pub floor: f32,
}

impl TopK {
    pub fn new(k: usize) -> Self {
        Self {
            k,
            heap: BinaryHeap::with_capacity(k.min(1024)),
            floor: 0.0,
        }
    }

    /// Offer `position`, its ties broken by the position itself.
    pub fn offer(&mut self, position: u32, score: f32) {
        self.offer_keyed(position, i64::from(position), score);
    }

    /// Offer `position`, equal scores ordered by `key` (ascending), then by position.
    pub fn offer_keyed(&mut self, position: u32, key: i64, score: f32) {
        let hit = Hit {
            score,
            key,
            position,
        };
        if self.heap.len() < self.k {
            self.heap.push(hit);
        } else if let Some(mut worst) = self.heap.peek_mut() {
            if hit < *worst {
                *worst = hit;
            }
        }
        if self.heap.len() == self.k {
            self.floor = self.heap.peek().map_or(0.0, |h| h.score);
        }
    }

    pub fn into_sorted(self) -> Vec<(u32, f32)> {
        let hits = self.heap.into_sorted_vec();
        hits.into_iter().map(|h| (h.position, h.score)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_best_k_with_ties_by_position() {
        let mut best = TopK::new(3);
        for (position, score) in [(5, 1.0), (1, 2.0), (3, 2.0), (0, 0.5), (2, 2.0), (4, 3.0)] {
            best.offer(position, score);
        }
        assert_eq!(best.into_sorted(), [(4, 3.0), (1, 2.0), (2, 2.0)]);
    }

    #[test]
    fn ties_go_by_the_key_given_also_across_the_cut() {
        // Keys the reverse of positions: of four equal scores, the two highest positions win.
        let mut best = TopK::new(3);
        for position in 0..4 {
            best.offer_keyed(position, 10 - i64::from(position), 1.0);
        }
        best.offer_keyed(9, 0, 5.0);
        assert_eq!(best.into_sorted(), [(9, 5.0), (3, 1.0), (2, 1.0)]);
    }

    #[test]
    fn floor_is_the_worst_kept_score_once_full() {
        let mut best = TopK::new(2);
        best.offer(0, 1.0);
        assert_eq!(best.floor, 0.0);
        best.offer(1, 3.0);
        best.offer(2, 2.0);
        assert_eq!(best.floor, 2.0);
        assert_eq!(TopK::new(5).into_sorted(), []);
    }
}
