//! The sparse merge loop: each cluster's links live in a hash map of its neighbours, so memory
//! and work follow the number of candidate pairs (see the parent module for the rules).

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};

use super::{Best, Linkage, NO_MERGE};

/// What two clusters know about their cross pairs above the cutoff, and the linkage that
/// follows (`score`: `NO_MERGE` when the two may not merge).
#[derive(Debug, Clone, Copy)]
struct Link {
    count: u64,
    min: f32,
    score: f64,
}

/// A cluster's best merge as it stood when queued; the heap pops the highest score, then the
/// smallest `(a, b)`. Stale once cluster `a`'s best changed (`stamp`).
#[derive(Debug)]
struct Candidate {
    score: f64,
    a: u32,
    b: u32,
    stamp: u32,
}

impl Ord for Candidate {
    fn cmp(&self, other: &Self) -> Ordering {
        self.score
            .total_cmp(&other.score)
            .then_with(|| (other.a, other.b).cmp(&(self.a, self.b)))
            .then_with(|| self.stamp.cmp(&other.stamp))
    }
}
impl PartialOrd for Candidate {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl PartialEq for Candidate {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Candidate {}

/// Sparse agglomeration state, indexed by cluster id (= smallest row in the cluster).
///
/// Each cluster keeps its best merge with a larger cluster id (`best`, ties to the smaller
/// id), and the heap holds one entry per change of a cluster's best. The pair the heap pops
/// first is then the best merge overall, ties to the smallest `(a, b)`, as the module docs
/// define. A merge re-scores the merged cluster against its neighbours once, and re-scans only
/// the neighbours whose best was one of the two clusters merged: when most pairs are similar
/// (thousands of near-copies of one note), a heap of every candidate pair would be popped
/// O(n²) times at O(log n²) cache misses each, which dominated the whole clustering.
pub(super) struct Agglomerator<'a> {
    x: &'a [f32],
    d: usize,
    linkage: Linkage,
    cutoff: f64,
    members: Vec<Vec<u32>>,
    adj: Vec<HashMap<u32, Link>>,
    sums: Vec<Option<Vec<f64>>>,
    best: Vec<Option<Best>>,
    stamp: Vec<u32>,
    heap: BinaryHeap<Candidate>,
}

impl<'a> Agglomerator<'a> {
    pub(super) fn new(
        x: &'a [f32],
        n: usize,
        d: usize,
        linkage: Linkage,
        cutoff: f64,
        pairs: &[(u32, u32, f32)],
    ) -> Self {
        let mut agg = Self {
            x,
            d,
            linkage,
            cutoff,
            members: (0..n as u32).map(|i| vec![i]).collect(),
            adj: vec![HashMap::new(); n],
            sums: vec![None; n],
            best: vec![None; n],
            stamp: vec![0; n],
            heap: BinaryHeap::new(),
        };
        for &(i, j, sim) in pairs {
            // Between two singletons both linkages are the pair's cosine.
            let link = Link {
                count: 1,
                min: sim,
                score: f64::from(sim),
            };
            agg.adj[i as usize].insert(j, link);
            agg.adj[j as usize].insert(i, link);
            let offer = Best {
                score: link.score,
                partner: j,
            };
            if offer.beats(agg.best[i as usize]) {
                agg.best[i as usize] = Some(offer);
            }
        }
        for a in 0..n as u32 {
            agg.queue(a);
        }
        agg
    }

    /// Put cluster `a`'s current best on the heap (the entries before it go stale).
    fn queue(&mut self, a: u32) {
        let ai = a as usize;
        self.stamp[ai] = self.stamp[ai].wrapping_add(1);
        if let Some(best) = self.best[ai] {
            self.heap.push(Candidate {
                score: best.score,
                a,
                b: best.partner,
                stamp: self.stamp[ai],
            });
        }
    }

    /// Recompute cluster `a`'s best from its links to larger ids, and queue it.
    fn rescan(&mut self, a: u32) {
        let mut best = None;
        for (&c, link) in &self.adj[a as usize] {
            let offer = Best {
                score: link.score,
                partner: c,
            };
            if c > a && link.score != NO_MERGE && offer.beats(best) {
                best = Some(offer);
            }
        }
        self.best[a as usize] = best;
        self.queue(a);
    }

    fn row(&self, c: u32) -> &[f32] {
        &self.x[c as usize * self.d..(c as usize + 1) * self.d]
    }

    fn sum_vector(&self, c: u32) -> Vec<f64> {
        match &self.sums[c as usize] {
            Some(sum) => sum.clone(),
            None => self.row(c).iter().map(|&v| f64::from(v)).collect(),
        }
    }

    /// `(Σ rows of a) · (Σ rows of c)` without copying either sum.
    fn sum_dot(&self, a: u32, c: u32) -> f64 {
        match (&self.sums[a as usize], &self.sums[c as usize]) {
            (Some(p), Some(q)) => p.iter().zip(q).map(|(u, v)| u * v).sum(),
            (Some(p), None) => p
                .iter()
                .zip(self.row(c))
                .map(|(u, &v)| u * f64::from(v))
                .sum(),
            (None, Some(q)) => q
                .iter()
                .zip(self.row(a))
                .map(|(u, &v)| u * f64::from(v))
                .sum(),
            (None, None) => {
                let (p, q) = (self.row(a), self.row(c));
                p.iter()
                    .zip(q)
                    .map(|(&u, &v)| f64::from(u) * f64::from(v))
                    .sum()
            }
        }
    }

    /// Linkage of clusters `a` and `c` if they may merge, else `NO_MERGE`.
    fn score(&self, a: u32, c: u32, link: Link) -> f64 {
        let size_a = self.members[a as usize].len() as u64;
        let size_c = self.members[c as usize].len() as u64;
        let score = match self.linkage {
            // A missing pair is below the cutoff, so the minimum would be too.
            Linkage::Complete if link.count == size_a * size_c => f64::from(link.min),
            Linkage::Complete => return NO_MERGE,
            Linkage::Average => self.sum_dot(a, c) / (size_a * size_c) as f64,
        };
        if score >= self.cutoff {
            score
        } else {
            NO_MERGE
        }
    }

    pub(super) fn run(&mut self) {
        // A cluster's entries go stale when its best changes; dropping them once they make up
        // half the heap keeps pops cheap (amortised O(pushes)).
        let mut clean_len = self.heap.len().max(4096);
        while let Some(top) = self.heap.pop() {
            if self.stamp[top.a as usize] == top.stamp {
                self.merge(top.a, top.b);
            }
            if self.heap.len() > 2 * clean_len {
                let stamp = &self.stamp;
                self.heap.retain(|c| stamp[c.a as usize] == c.stamp);
                clean_len = self.heap.len().max(4096);
            }
        }
    }

    /// Merge cluster `b` into `a` (`a < b`), re-score `a` against its neighbours, and bring
    /// every best that named `a` or `b` up to date.
    fn merge(&mut self, a: u32, b: u32) {
        let (ai, bi) = (a as usize, b as usize);
        if self.linkage == Linkage::Average {
            let mut sum = self.sum_vector(a);
            for (s, t) in sum.iter_mut().zip(self.sum_vector(b)) {
                *s += t;
            }
            self.sums[ai] = Some(sum);
            self.sums[bi] = None;
        }
        let moved = std::mem::take(&mut self.members[bi]);
        self.members[ai].extend(moved);
        self.best[bi] = None;
        self.queue(b); // no entry: b's old ones go stale

        let mut merged = std::mem::take(&mut self.adj[ai]);
        merged.remove(&b);
        for (c, link) in std::mem::take(&mut self.adj[bi]) {
            if c == a {
                continue;
            }
            merged
                .entry(c)
                .and_modify(|l| {
                    l.count += link.count;
                    l.min = l.min.min(link.min);
                })
                .or_insert(link);
        }
        let neighbours: Vec<u32> = merged.keys().copied().collect();
        for &c in &neighbours {
            let mut link = merged[&c];
            link.score = self.score(a, c, link);
            merged.insert(c, link);
            let neighbour = &mut self.adj[c as usize];
            neighbour.remove(&b);
            neighbour.insert(a, link);
        }
        self.adj[ai] = merged;
        self.rescan(a);
        for c in neighbours {
            let ci = c as usize;
            match self.best[ci] {
                Some(best) if best.partner == a || best.partner == b => self.rescan(c),
                current if c < a => {
                    let offer = Best {
                        score: self.adj[ai][&c].score,
                        partner: a,
                    };
                    if offer.score != NO_MERGE && offer.beats(current) {
                        self.best[ci] = Some(offer);
                        self.queue(c);
                    }
                }
                _ => {}
            }
        }
    }

    /// Each cluster's rows, indexed by cluster id (empty for the clusters merged away).
    pub(super) fn into_members(self) -> Vec<Vec<u32>> {
        self.members
    }
}
