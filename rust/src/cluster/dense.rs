//! The dense merge loop: when a large share of all pairs is above the cutoff, the links of every
//! pair of clusters live in one condensed upper-triangular matrix instead of hash maps. It makes
//! the same decisions as the sparse loop, bit for bit: the same link scores (computed by the
//! same arithmetic in the same order) and the same pick, highest score then smallest `(a, b)`.
//!
//! An entry is `NO_LINK` when the two clusters share no pair above the cutoff, `NO_MERGE` when
//! they do but may not merge, else their linkage (which is `>= cutoff`). A cluster that was
//! merged away has `NO_LINK` with every other.

use super::{Best, Linkage, NO_MERGE};

/// Dot products computed side by side in `average_scores`.
const LANES: usize = 8;

/// No cross pair above the cutoff: no link at all (the sparse loop's missing map entry).
const NO_LINK: f64 = f64::NAN;

/// Dense agglomeration state, indexed by cluster id (= smallest row in the cluster).
pub(super) struct Agglomerator {
    n: usize,
    d: usize,
    linkage: Linkage,
    cutoff: f64,
    members: Vec<Vec<u32>>,
    /// `links[index(i, j)]` for `i < j`: row `i` holds its partners `i+1..n` contiguously.
    links: Vec<f64>,
    /// Average linkage only: each cluster's sum of rows (a row as f64 for a singleton).
    sums: Vec<f64>,
    best: Vec<Option<Best>>,
    alive: Vec<u32>,
}

impl Agglomerator {
    /// The matrix holds `n·(n-1)/2` f64: 16.8 MB for a sleep window of 2,048 rows.
    pub(super) fn new(
        x: &[f32],
        n: usize,
        d: usize,
        linkage: Linkage,
        cutoff: f64,
        pairs: &[(u32, u32, f32)],
    ) -> Self {
        let mut agg = Self {
            n,
            d,
            linkage,
            cutoff,
            members: (0..n as u32).map(|i| vec![i]).collect(),
            links: vec![NO_LINK; n * n.saturating_sub(1) / 2],
            sums: match linkage {
                Linkage::Average => x.iter().map(|&v| f64::from(v)).collect(),
                Linkage::Complete => Vec::new(),
            },
            best: vec![None; n],
            alive: (0..n as u32).collect(),
        };
        for &(i, j, sim) in pairs {
            // Between two singletons both linkages are the pair's cosine.
            let at = agg.index(i as usize, j as usize);
            agg.links[at] = f64::from(sim);
        }
        for a in 0..n as u32 {
            agg.rescan(a);
        }
        agg
    }

    /// Each cluster's rows, indexed by cluster id (empty for the clusters merged away).
    pub(super) fn into_members(self) -> Vec<Vec<u32>> {
        self.members
    }

    fn index(&self, i: usize, j: usize) -> usize {
        debug_assert!(i < j);
        i * (2 * self.n - i - 1) / 2 + (j - i - 1)
    }

    /// The link between two distinct clusters.
    fn link(&self, a: u32, c: u32) -> f64 {
        let (i, j) = if a < c { (a, c) } else { (c, a) };
        self.links[self.index(i as usize, j as usize)]
    }

    fn set_link(&mut self, a: u32, c: u32, value: f64) {
        let (i, j) = if a < c { (a, c) } else { (c, a) };
        let at = self.index(i as usize, j as usize);
        self.links[at] = value;
    }

    /// Recompute cluster `a`'s best merge from its links to larger ids.
    fn rescan(&mut self, a: u32) {
        let ai = a as usize;
        let start = if ai + 1 < self.n {
            self.index(ai, ai + 1)
        } else {
            0
        };
        let row = &self.links[start..start + (self.n - ai - 1)];
        let mut best = None;
        for (k, &score) in row.iter().enumerate() {
            // NO_LINK (NaN) and NO_MERGE both fail this; every merge-able score passes.
            if score >= self.cutoff {
                let offer = Best {
                    score,
                    partner: (ai + 1 + k) as u32,
                };
                if offer.beats(best) {
                    best = Some(offer);
                }
            }
        }
        self.best[ai] = best;
    }

    /// The next merge: the highest best, ties to the smallest `(a, b)` (ids are unique, so the
    /// smallest `a`); the sparse loop's heap pops the same one.
    fn next(&self) -> Option<(u32, u32)> {
        let mut pick: Option<(u32, Best)> = None;
        for &a in &self.alive {
            if let Some(best) = self.best[a as usize] {
                if pick.is_none_or(|(_, p)| best.score.total_cmp(&p.score).is_gt()) {
                    pick = Some((a, best));
                }
            }
        }
        pick.map(|(a, best)| (a, best.partner))
    }

    pub(super) fn run(&mut self) {
        while let Some((a, b)) = self.next() {
            self.merge(a, b);
        }
    }

    /// Merge cluster `b` into `a` (`a < b`), re-score `a` against every live cluster, and bring
    /// every best that named `a` or `b` up to date.
    fn merge(&mut self, a: u32, b: u32) {
        let (ai, bi) = (a as usize, b as usize);
        let d = self.d;
        if self.linkage == Linkage::Average {
            // Σa += Σb: the sparse loop's `sum_vector(a) + sum_vector(b)`, element by element.
            let (head, tail) = self.sums.split_at_mut(bi * d);
            for (s, t) in head[ai * d..(ai + 1) * d].iter_mut().zip(&tail[..d]) {
                *s += t;
            }
        }
        let moved = std::mem::take(&mut self.members[bi]);
        self.members[ai].extend(moved);
        self.best[bi] = None;
        self.alive.retain(|&c| c != b);

        // The clusters linked to `a` or `b`; the rest stay unlinked (`NO_LINK`) to the merged one.
        let mut linked = Vec::new();
        for &c in &self.alive {
            if c != a && !(self.link(a, c).is_nan() && self.link(b, c).is_nan()) {
                linked.push(c);
            }
        }
        let scores = match self.linkage {
            Linkage::Complete => linked
                .iter()
                .map(|&c| {
                    let (p, q) = (self.link(a, c), self.link(b, c));
                    // A full link's score is its minimum cosine; a missing cross pair (or one
                    // that already barred the merge) bars it.
                    if p >= self.cutoff && q >= self.cutoff {
                        p.min(q)
                    } else {
                        NO_MERGE
                    }
                })
                .collect(),
            Linkage::Average => self.average_scores(a, &linked),
        };
        for c in 0..self.n as u32 {
            if c != b {
                self.set_link(b, c, NO_LINK);
            }
        }
        for (&c, &score) in linked.iter().zip(&scores) {
            self.set_link(a, c, score);
        }

        self.rescan(a);
        for (&c, &score) in linked.iter().zip(&scores) {
            let ci = c as usize;
            match self.best[ci] {
                Some(best) if best.partner == a || best.partner == b => self.rescan(c),
                current if c < a => {
                    let offer = Best { score, partner: a };
                    if score != NO_MERGE && offer.beats(current) {
                        self.best[ci] = Some(offer);
                    }
                }
                _ => {}
            }
        }
    }

    /// Average linkage of the merged cluster `a` with each of `others`: `(Σa)·(Σc) / (|a|·|c|)`,
    /// or `NO_MERGE` below the cutoff. Each dot product is summed in row order from -0.0, as
    /// `Iterator::sum` does in the sparse loop, so the scores are the same to the bit; four run
    /// side by side because one sum's additions wait on each other.
    fn average_scores(&self, a: u32, others: &[u32]) -> Vec<f64> {
        let d = self.d;
        let sum = |c: u32| &self.sums[c as usize * d..(c as usize + 1) * d];
        let p = sum(a);
        let mut dots = Vec::with_capacity(others.len());
        let mut groups = others.chunks_exact(LANES);
        for group in &mut groups {
            let qs: [&[f64]; LANES] = std::array::from_fn(|j| sum(group[j]));
            let mut acc = [-0.0f64; LANES];
            for (k, &u) in p.iter().enumerate() {
                for j in 0..LANES {
                    acc[j] += u * qs[j][k];
                }
            }
            dots.extend(acc);
        }
        for &c in groups.remainder() {
            dots.push(p.iter().zip(sum(c)).map(|(u, v)| u * v).sum());
        }
        let size_a = self.members[a as usize].len() as u64;
        others
            .iter()
            .zip(dots)
            .map(|(&c, dot)| {
                let score = dot / (size_a * self.members[c as usize].len() as u64) as f64;
                if score >= self.cutoff {
                    score
                } else {
                    NO_MERGE
                }
            })
            .collect()
    }
}
