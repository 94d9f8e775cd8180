//! A small Pike VM over regex-automata's Thompson NFA that reads the clock as it goes: the last
//! resort of a deadline-bounded search (see `regex_deadline.rs`), where the lazy DFA quits (a
//! Unicode `\b` next to non-ASCII text) or gives up (its cache thrashing). It visits each NFA
//! state at most once per byte.
//!
//! Leftmost-first, as the `regex` crate: threads are kept in priority order, a new thread starts
//! at each position until a match is found, and a match drops every thread of lower priority.

use std::mem;

use regex_automata::nfa::thompson::{State, NFA};
use regex_automata::util::primitives::StateID;

use crate::regex_deadline::{Deadline, Late};

/// The threads at one position: NFA states in priority order, each with its match's start.
#[derive(Debug)]
struct Threads {
    order: Vec<StateID>,
    /// `slot[state]` is the state's index in `order` when it is in the set.
    slot: Vec<usize>,
    start: Vec<usize>,
}

impl Threads {
    fn new(states: usize) -> Self {
        Self {
            order: Vec::with_capacity(states),
            slot: vec![0; states],
            start: vec![0; states],
        }
    }

    fn contains(&self, sid: StateID) -> bool {
        let i = self.slot[sid.as_usize()];
        i < self.order.len() && self.order[i] == sid
    }

    fn insert(&mut self, sid: StateID, start: usize) {
        self.slot[sid.as_usize()] = self.order.len();
        self.start[sid.as_usize()] = start;
        self.order.push(sid);
    }
}

/// Reusable buffers of the Pike VM for one NFA.
#[derive(Debug)]
pub struct PikeVm {
    now: Threads,
    next: Threads,
    stack: Vec<StateID>,
}

impl PikeVm {
    /// Buffers sized for `nfa`.
    pub fn new(nfa: &NFA) -> Self {
        let states = nfa.states().len();
        Self {
            now: Threads::new(states),
            next: Threads::new(states),
            stack: Vec::new(),
        }
    }

    /// Byte span of the leftmost-first match of `nfa` in `hay[from..]`, or `Late`.
    pub fn find(
        &mut self,
        nfa: &NFA,
        hay: &[u8],
        from: usize,
        deadline: &mut Deadline,
    ) -> Result<Option<(usize, usize)>, Late> {
        let Self { now, next, stack } = self;
        now.order.clear();
        let mut found = None;
        let mut at = from;
        loop {
            if found.is_none() {
                // A match starting here ranks below every thread already running.
                follow(nfa, stack, now, nfa.start_anchored(), hay, at, at);
            }
            if now.order.is_empty() && found.is_some() {
                break;
            }
            deadline.charge(now.order.len() as u64 + 1)?;
            next.order.clear();
            for &sid in &now.order {
                let start = now.start[sid.as_usize()];
                let byte = hay.get(at).copied();
                let target = match (nfa.state(sid), byte) {
                    (State::Match { .. }, _) => {
                        found = Some((start, at));
                        break;
                    }
                    (State::ByteRange { trans }, Some(b)) => {
                        trans.matches_byte(b).then_some(trans.next)
                    }
                    (State::Sparse(sparse), Some(b)) => sparse.matches_byte(b),
                    (State::Dense(dense), Some(b)) => dense.matches_byte(b),
                    _ => None,
                };
                if let Some(target) = target {
                    follow(nfa, stack, next, target, hay, at + 1, start);
                }
            }
            if at >= hay.len() {
                break;
            }
            mem::swap(now, next);
            at += 1;
        }
        Ok(found)
    }
}

/// Add `sid` and every state it reaches without reading a byte, at `at`, in priority order.
fn follow(
    nfa: &NFA,
    stack: &mut Vec<StateID>,
    threads: &mut Threads,
    sid: StateID,
    hay: &[u8],
    at: usize,
    start: usize,
) {
    stack.push(sid);
    while let Some(sid) = stack.pop() {
        if threads.contains(sid) {
            continue;
        }
        threads.insert(sid, start);
        match nfa.state(sid) {
            State::Look { look, next } if nfa.look_matcher().matches(*look, hay, at) => {
                stack.push(*next);
            }
            State::Union { alternates } => stack.extend(alternates.iter().rev()),
            State::BinaryUnion { alt1, alt2 } => stack.extend([*alt2, *alt1]),
            State::Capture { next, .. } => stack.push(*next),
            _ => {}
        }
    }
}
