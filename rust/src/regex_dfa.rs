//! The lazy DFA of a deadline-bounded search (see `regex_deadline.rs`): regex-automata's hybrid
//! DFAs, stepped one byte at a time by this loop so the clock is read as it goes. The forward DFA
//! finds where the leftmost-first match ends (a literal prefilter skipping to candidates), the
//! reverse DFA where it starts. The loops follow regex-automata's own `find_fwd` / `find_rev`
//! (`hybrid/search.rs`) without their unrolling and unchecked indexing, and the DFAs are
//! configured as the `regex` crate configures its own.
//!
//! The DFA quits, and the caller falls back to the Pike VM, on a Unicode `\b` next to non-ASCII
//! text, or when its cache thrashes (too many states for too few bytes, as for a hostile pattern).

use regex_automata::hybrid::dfa::{Cache, DFA};
use regex_automata::hybrid::LazyStateID;
use regex_automata::nfa::thompson::NFA;
use regex_automata::util::prefilter::Prefilter;
use regex_automata::{Anchored, Input, MatchKind, Span};

use crate::regex_deadline::{Deadline, Late};

/// Most bytes the forward hot loop reads between two charges to the deadline.
const RUN: usize = 4096;

/// Why the DFA gave no answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// Past the deadline.
    Late,
    /// The DFA cannot search this text (a quit byte, or its cache gave up): use the Pike VM.
    Quit,
}

impl From<Late> for Stop {
    fn from(_: Late) -> Self {
        Self::Late
    }
}

/// Forward and reverse lazy DFAs of one pattern.
#[derive(Debug)]
pub struct LazyDfa {
    fwd: DFA,
    rev: DFA,
    /// The start state never depends on the bytes before it (no look-behind at the start), so a
    /// prefilter jump need not recompute it.
    universal_start: bool,
    /// Work units charged for a transition the DFA may have to build: one NFA state each.
    build_cost: u64,
}

/// The two DFAs' caches.
#[derive(Debug)]
pub struct LazyCache {
    fwd: Cache,
    rev: Cache,
}

impl LazyDfa {
    /// The DFAs of `nfa` and its reverse `nfa_rev`; `None` if they cannot be built.
    pub fn new(
        nfa: &NFA,
        nfa_rev: NFA,
        prefilter: Option<Prefilter>,
        cache_capacity: usize,
    ) -> Option<Self> {
        let config = DFA::config()
            .match_kind(MatchKind::LeftmostFirst)
            .specialize_start_states(prefilter.is_some())
            .prefilter(prefilter)
            .unicode_word_boundary(true)
            .cache_capacity(cache_capacity)
            .skip_cache_capacity_check(false)
            .minimum_cache_clear_count(Some(3))
            .minimum_bytes_per_state(Some(10));
        let fwd = DFA::builder()
            .configure(config.clone())
            .build_from_nfa(nfa.clone())
            .ok()?;
        let rev_config = config
            .match_kind(MatchKind::All)
            .prefilter(None)
            .specialize_start_states(false);
        let rev = DFA::builder()
            .configure(rev_config)
            .build_from_nfa(nfa_rev)
            .ok()?;
        Some(Self {
            fwd,
            rev,
            universal_start: nfa.look_set_prefix_any().is_empty(),
            build_cost: nfa.states().len() as u64,
        })
    }

    /// Fresh caches for [`LazyDfa::find`].
    pub fn create_cache(&self) -> LazyCache {
        LazyCache {
            fwd: self.fwd.create_cache(),
            rev: self.rev.create_cache(),
        }
    }

    /// Byte span of the leftmost-first match in `hay[from..]`.
    pub fn find(
        &self,
        cache: &mut LazyCache,
        hay: &[u8],
        from: usize,
        deadline: &mut Deadline,
    ) -> Result<Option<(usize, usize)>, Stop> {
        let Some(end) = self.find_end(&mut cache.fwd, hay, from, deadline)? else {
            return Ok(None);
        };
        if end == from {
            return Ok(Some((from, from)));
        }
        let start = self.find_start(&mut cache.rev, hay, from, end, deadline)?;
        // The reverse search always finds the start of a forward match; if not, do not guess.
        start.map(|start| Some((start, end))).ok_or(Stop::Quit)
    }

    /// One transition of `dfa` on `byte`, charging the deadline for any state it builds.
    #[inline]
    fn step(
        &self,
        dfa: &DFA,
        cache: &mut Cache,
        sid: LazyStateID,
        byte: u8,
        at: usize,
        deadline: &mut Deadline,
    ) -> Result<LazyStateID, Stop> {
        deadline.charge(1)?;
        if !sid.is_tagged() {
            let next = dfa.next_state_untagged(cache, sid, byte);
            if !next.is_unknown() {
                return Ok(next);
            }
        }
        deadline.charge(self.build_cost)?;
        cache.search_update(at);
        dfa.next_state(cache, sid, byte).map_err(|_| Stop::Quit)
    }

    fn restart(&self, cache: &mut Cache, hay: &[u8], at: usize) -> Result<LazyStateID, Stop> {
        let input = Input::new(hay).span(at..hay.len());
        self.fwd
            .start_state_forward(cache, &input)
            .map_err(|_| Stop::Quit)
    }

    /// End of the leftmost-first match in `hay[from..]` (forward DFA).
    fn find_end(
        &self,
        cache: &mut Cache,
        hay: &[u8],
        from: usize,
        deadline: &mut Deadline,
    ) -> Result<Option<usize>, Stop> {
        let dfa = &self.fwd;
        let prefilter = dfa.get_config().get_prefilter();
        let mut sid = self.restart(cache, hay, from)?;
        let mut at = from;
        let mut found = None;
        if let Some(pre) = prefilter {
            match pre.find(hay, Span::from(at..hay.len())) {
                None => return Ok(None),
                Some(span) => {
                    at = span.start;
                    if !self.universal_start {
                        sid = self.restart(cache, hay, at)?;
                    }
                }
            }
        }
        cache.search_start(at);
        while at < hay.len() {
            // The hot loop: transitions already in the cache, to states needing no attention.
            let run = at;
            let stop = hay.len().min(at + RUN);
            while at < stop && !sid.is_tagged() {
                let next = dfa.next_state_untagged(cache, sid, hay[at]);
                if next.is_tagged() {
                    break; // unknown, match, dead, quit or start: the step below handles it
                }
                sid = next;
                at += 1;
            }
            deadline.charge((at - run) as u64)?;
            if at == hay.len() {
                break;
            }
            sid = self.step(dfa, cache, sid, hay[at], at, deadline)?;
            if sid.is_tagged() {
                if sid.is_start() {
                    // Skip to the next candidate, unless a match is pending (it may still grow).
                    if let (Some(pre), None) = (prefilter, found) {
                        match pre.find(hay, Span::from(at..hay.len())) {
                            None => {
                                cache.search_finish(hay.len());
                                return Ok(None);
                            }
                            Some(span) if span.start > at => {
                                at = span.start;
                                if !self.universal_start {
                                    sid = self.restart(cache, hay, at)?;
                                }
                                continue;
                            }
                            Some(_) => {}
                        }
                    }
                } else if sid.is_match() {
                    // Matches are delayed by one byte: this one ended before `hay[at]`.
                    found = Some(at);
                } else if sid.is_dead() {
                    cache.search_finish(at);
                    return Ok(found);
                } else if sid.is_quit() {
                    return Err(Stop::Quit);
                }
            }
            at += 1;
        }
        sid = dfa.next_eoi_state(cache, sid).map_err(|_| Stop::Quit)?;
        if sid.is_match() {
            found = Some(hay.len());
        }
        cache.search_finish(hay.len());
        Ok(found)
    }

    /// Start of the match ending at `end` (reverse DFA, anchored at `end`, no earlier than `from`).
    fn find_start(
        &self,
        cache: &mut Cache,
        hay: &[u8],
        from: usize,
        end: usize,
        deadline: &mut Deadline,
    ) -> Result<Option<usize>, Stop> {
        let dfa = &self.rev;
        let input = Input::new(hay).span(from..end).anchored(Anchored::Yes);
        let mut sid = dfa
            .start_state_reverse(cache, &input)
            .map_err(|_| Stop::Quit)?;
        let mut found = None;
        let mut at = end - 1;
        cache.search_start(at);
        loop {
            sid = self.step(dfa, cache, sid, hay[at], at, deadline)?;
            if sid.is_match() {
                found = Some(at + 1);
            } else if sid.is_dead() {
                cache.search_finish(at);
                return Ok(found);
            } else if sid.is_quit() {
                return Err(Stop::Quit);
            }
            if at == from {
                break;
            }
            at -= 1;
        }
        // The position before `from` (or the end of input) decides a look-behind at the start.
        sid = match from.checked_sub(1) {
            Some(before) => self.step(dfa, cache, sid, hay[before], before, deadline)?,
            None => dfa.next_eoi_state(cache, sid).map_err(|_| Stop::Quit)?,
        };
        if sid.is_match() {
            found = Some(from);
        } else if sid.is_quit() {
            return Err(Stop::Quit);
        }
        cache.search_finish(from);
        Ok(found)
    }
}
