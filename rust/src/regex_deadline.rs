//! Regex search that stops at a deadline, for lines whose worst case could outlast it.
//!
//! The `regex` crate is linear in the input, but once its lazy DFA gives up it pays the compiled
//! program's size at every byte, and a search cannot be interrupted: `[ab]*a[ab]{30000}z` (within
//! the 4 MiB size limit) ran 171 s over one 1 MB line. `regex_match.rs` therefore bounds each
//! line's worst case ([`worst_case`]: line bytes × NFA bytes × a measured constant); a line whose
//! bound fits in the time left (and under a second) goes to `regex`, unless its pattern can match
//! empty and the line is not ASCII (`regex` retries an empty match inside a character one byte
//! later, from where its search began: quadratic); any other line goes to [`Bounded`]:
//! the lazy DFA (`regex_dfa.rs`), falling back to a Pike VM (`regex_nfa.rs`) where the DFA
//! quits, both reading the clock as they go. [`Bounded`] reports the match `regex` reports:
//! leftmost-first, the same syntax and size limits, and an empty match that splits a character
//! skipped (to the next character at once: the match `regex` finds by retrying byte by byte).

use std::time::{Duration, Instant};

use regex_automata::nfa::thompson::{self, WhichCaptures, NFA};
use regex_automata::util::prefilter::Prefilter;
use regex_automata::util::syntax;
use regex_automata::MatchKind;

use crate::error::{CoreError, CoreResult};
use crate::regex_dfa::{LazyCache, LazyDfa, Stop};
use crate::regex_match::SIZE_LIMIT;
use crate::regex_nfa::PikeVm;

/// Worst-case `regex` search time per line byte per byte of compiled NFA, in picoseconds. The
/// slowest shape measured is a pattern whose lazy DFA builds a new state at nearly every byte
/// before giving up, `[ab]*a[ab]{N}[^ab]` over random `a`/`b` text: 250-750 ps for NFAs of
/// 1.6-32 kB (the most on lines of 2-30 kB, the DFA still building), 170-220 ps at 240-720 kB
/// once its Pike VM runs. Rounded up; a line estimated under a second runs in about that.
pub const PS_PER_BYTE_NFA_BYTE: f64 = 1000.0;

/// A bound on the NFA bytes of any pattern `regex_match::compile` accepts (the NFA size limit,
/// with room for what the limit does not count): lines short enough to go to `regex` whatever
/// the pattern need no NFA built to tell.
pub const MAX_NFA_BYTES: usize = 2 * SIZE_LIMIT;

/// Work units (about one NFA state visited or one DFA transition) between two clock reads:
/// well under a millisecond of work, so a search stops within about a millisecond of its deadline.
const CHECK_EVERY: u64 = 1 << 16;

/// The search ran past its deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Late;

/// A point in time searches must stop at (none: never), read every [`CHECK_EVERY`] work units.
#[derive(Debug)]
pub struct Deadline {
    at: Option<Instant>,
    work: u64,
}

impl Deadline {
    /// The deadline `limit` from now (`None`, or a limit past what the clock can hold: none).
    pub fn after(limit: Option<Duration>) -> Self {
        Self {
            at: limit.and_then(|l| Instant::now().checked_add(l)),
            work: 0,
        }
    }

    /// Time left (`None`: no deadline).
    pub fn remaining(&self) -> Option<Duration> {
        self.at
            .map(|at| at.saturating_duration_since(Instant::now()))
    }

    /// Whether the deadline has passed.
    pub fn is_past(&self) -> bool {
        self.at.is_some_and(|at| Instant::now() > at)
    }

    /// Count `units` of work done; past the deadline, `Late` (the clock is read only now and then).
    #[inline]
    pub fn charge(&mut self, units: u64) -> Result<(), Late> {
        self.work += units;
        if self.work < CHECK_EVERY {
            return Ok(());
        }
        self.work = 0;
        if self.is_past() {
            Err(Late)
        } else {
            Ok(())
        }
    }
}

/// Upper estimate of the seconds `regex` may take over `bytes` bytes with an NFA of `nfa_bytes`
/// (plain `f64`: it is asked once per line).
pub fn worst_case(bytes: usize, nfa_bytes: usize) -> f64 {
    bytes as f64 * nfa_bytes as f64 * PS_PER_BYTE_NFA_BYTE * 1e-12
}

fn syntax_config(case_insensitive: bool) -> syntax::Config {
    // The `regex` crate's defaults for a `&str` regex (Unicode, UTF-8, nest limit 250).
    syntax::Config::new()
        .case_insensitive(case_insensitive)
        .utf8(true)
}

fn thompson_config() -> thompson::Config {
    thompson::Config::new()
        .utf8(true)
        .nfa_size_limit(Some(SIZE_LIMIT))
        .shrink(false)
        .which_captures(WhichCaptures::None)
}

fn invalid(e: impl std::fmt::Display) -> CoreError {
    CoreError::invalid("pattern", e.to_string())
}

/// The forward NFA of `pattern` as [`Bounded`] searches it; its `memory_usage()` is the program
/// size in [`worst_case`].
pub fn forward_nfa(pattern: &str, case_insensitive: bool) -> CoreResult<NFA> {
    thompson::Compiler::new()
        .syntax(syntax_config(case_insensitive))
        .configure(thompson_config())
        .build(pattern)
        .map_err(invalid)
}

/// A regex searched under a deadline: the lazy DFA when it can, else the Pike VM.
#[derive(Debug)]
pub struct Bounded {
    nfa: NFA,
    dfa: Option<LazyDfa>,
}

/// The mutable state of searches with one [`Bounded`]; reused across lines.
#[derive(Debug)]
pub struct BoundedCache {
    dfa: Option<LazyCache>,
    vm: Option<PikeVm>,
}

impl Bounded {
    /// Build the engines for `pattern` (already accepted by `regex_match::compile`) around its
    /// [`forward_nfa`].
    pub fn new(pattern: &str, case_insensitive: bool, nfa: NFA) -> CoreResult<Self> {
        let hir = syntax::parse_with(pattern, &syntax_config(case_insensitive)).map_err(invalid)?;
        let reverse = thompson::Compiler::new()
            .configure(thompson_config().reverse(true))
            .build_from_hir(&hir)
            .map_err(invalid)?;
        let prefilter = Prefilter::from_hir_prefix(MatchKind::LeftmostFirst, &hir);
        let dfa = LazyDfa::new(&nfa, reverse, prefilter, SIZE_LIMIT);
        Ok(Self { nfa, dfa })
    }

    /// A fresh cache for [`Bounded::find`].
    pub fn create_cache(&self) -> BoundedCache {
        BoundedCache {
            dfa: self.dfa.as_ref().map(LazyDfa::create_cache),
            vm: None,
        }
    }

    /// Byte span of the first match in `line`, as `regex::Regex::find` reports it, or `Late`.
    pub fn find(
        &self,
        cache: &mut BoundedCache,
        line: &str,
        deadline: &mut Deadline,
    ) -> Result<Option<(usize, usize)>, Late> {
        let mut from = 0;
        loop {
            match self.find_from(cache, line.as_bytes(), from, deadline)? {
                // An empty match inside a character: `regex` searches again one byte later,
                // and again, until it starts past it. No match starts before it (it is the
                // leftmost), nor inside the character (a non-empty match is UTF-8, an empty
                // one there is split too): the next search starts at the next character.
                Some((_, end)) if !line.is_char_boundary(end) => {
                    from = end + 1;
                    while !line.is_char_boundary(from) {
                        from += 1;
                    }
                }
                found => return Ok(found),
            }
        }
    }

    fn find_from(
        &self,
        cache: &mut BoundedCache,
        hay: &[u8],
        from: usize,
        deadline: &mut Deadline,
    ) -> Result<Option<(usize, usize)>, Late> {
        if let (Some(dfa), Some(dfa_cache)) = (&self.dfa, &mut cache.dfa) {
            match dfa.find(dfa_cache, hay, from, deadline) {
                Ok(found) => return Ok(found),
                Err(Stop::Late) => return Err(Late),
                Err(Stop::Quit) => {}
            }
        }
        let vm = cache.vm.get_or_insert_with(|| PikeVm::new(&self.nfa));
        vm.find(&self.nfa, hay, from, deadline)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::regex_match::compile;

    const HOSTILE: &str = "[ab]*a[ab]{3000}z";

    const PATTERNS: &[&str] = &[
        "foo",
        r"\d{4}-\d{2}-\d{2}",
        "(?i)error|warn",
        r"\bfoo\w+",
        r"\b",
        r"\B",
        r"\Bé",
        r"(?-u:\b)x",
        "",
        "a*",
        "x*?",
        "^",
        "$",
        "^$",
        "^a",
        "a$",
        "(?m)^b",
        "a|ab",
        "ab|a",
        "samwise|sam",
        "(foo|foobar)baz",
        "(a+)+$",
        r"\w+",
        r"\W",
        ".*",
        ".",
        "é+",
        "straße",
        r"\p{Greek}+",
        "[^a]",
        "a{2,5}?",
        r"\S+\s+\S+",
        "[ab]*a[ab]{3}z",
        r"\w{2}\b",
        "(?:)|é",
        r"(?-u:\B)",
        r"(?-u:\B)é|z",
    ];

    /// Haystacks with ASCII, multi-byte and case-folding text, and pseudo-random mixes.
    fn haystacks() -> Vec<String> {
        let mut out: Vec<String> = [
            "",
            "a",
            "foo bar",
            "éa",
            "aé",
            "ééé",
            "Straße STRASSE strasse",
            "2024-01-02 error: foobarbaz",
            "WARN: ébène foobar Foo_x",
            "ab abz aabbz abababz",
            "a a aé a",
            "a ééé z",
            "日本語 foo_bar",
            "x\u{300}y αβγ ΑΒΓ",
            "sam samwise",
            "bb\nb",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        let alphabet: Vec<char> = "abzé xf0o-9Σσ_".chars().collect();
        let mut state: u64 = 0x2545_f491_4f6c_dd1d;
        for len in [5, 17, 40, 300] {
            for _ in 0..6 {
                let s = (0..len)
                    .map(|_| {
                        state = state
                            .wrapping_mul(6_364_136_223_846_793_005)
                            .wrapping_add(1);
                        alphabet[(state >> 33) as usize % alphabet.len()]
                    })
                    .collect();
                out.push(s);
            }
        }
        out
    }

    /// `len` pseudo-random `a`/`b`: the lazy DFA of `[ab]*a[ab]{N}z` cannot keep its states.
    pub(crate) fn random_ab(len: usize) -> String {
        let mut state: u64 = 7;
        (0..len)
            .map(|_| {
                state = state
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1);
                if (state >> 40) & 1 == 0 {
                    'a'
                } else {
                    'b'
                }
            })
            .collect()
    }

    fn unlimited() -> Deadline {
        Deadline::after(None)
    }

    #[test]
    fn both_engines_report_the_match_regex_reports() {
        let texts = haystacks();
        let (mut dfa_answers, mut searches) = (0, 0);
        for case_insensitive in [false, true] {
            for pattern in PATTERNS {
                let re = compile(pattern, case_insensitive).unwrap();
                let engine = Bounded::new(
                    pattern,
                    case_insensitive,
                    forward_nfa(pattern, case_insensitive).unwrap(),
                )
                .unwrap();
                let mut with_dfa = engine.create_cache();
                let mut vm_only = BoundedCache {
                    dfa: None,
                    vm: None,
                };
                for text in &texts {
                    let want = re.find(text).map(|m| (m.start(), m.end()));
                    for cache in [&mut with_dfa, &mut vm_only] {
                        let got = engine.find(cache, text, &mut unlimited()).unwrap();
                        assert_eq!(got, want, "{pattern:?} (i: {case_insensitive}) in {text:?}");
                    }
                    let (dfa, cache) = (engine.dfa.as_ref(), with_dfa.dfa.as_mut());
                    let by_dfa =
                        dfa.unwrap()
                            .find(cache.unwrap(), text.as_bytes(), 0, &mut unlimited());
                    dfa_answers += usize::from(by_dfa.is_ok());
                    searches += 1;
                }
            }
        }
        // The DFA answers most searches itself (it quits on `\b` next to non-ASCII text).
        assert!(
            dfa_answers * 10 > searches * 8,
            "{dfa_answers} of {searches}"
        );
    }

    #[test]
    fn a_long_line_with_many_dfa_states_matches_too() {
        // Enough distinct states to clear the DFA cache, then the Pike VM (or not) takes over.
        let line = format!("{}az{}", "ab".repeat(20_000), "b".repeat(100));
        for pattern in ["[ab]*a[ab]{12}z", r"\w{20}z", r"(?i)A[ab]{2}Z|zb{50}"] {
            let re = compile(pattern, false).unwrap();
            let engine =
                Bounded::new(pattern, false, forward_nfa(pattern, false).unwrap()).unwrap();
            let got = engine.find(&mut engine.create_cache(), &line, &mut unlimited());
            assert_eq!(got.unwrap(), re.find(&line).map(|m| (m.start(), m.end())));
        }
    }

    #[test]
    fn a_hostile_pattern_stops_at_the_deadline() {
        let line = random_ab(1_000_000);
        let engine = Bounded::new(HOSTILE, false, forward_nfa(HOSTILE, false).unwrap()).unwrap();
        let limit = Duration::from_millis(200);
        let started = Instant::now();
        let mut deadline = Deadline::after(Some(limit));
        let got = engine.find(&mut engine.create_cache(), &line, &mut deadline);
        let took = started.elapsed();
        assert_eq!(got, Err(Late));
        assert!(
            took >= limit && took < limit + Duration::from_secs(3),
            "stopped after {took:?}"
        );
    }

    #[test]
    fn the_worst_case_grows_with_line_and_program() {
        let small = forward_nfa("foo", false).unwrap().memory_usage();
        let big = forward_nfa("[ab]*a[ab]{3000}z", false)
            .unwrap()
            .memory_usage();
        assert!(big > 100 * small);
        // A literal over a 1 MiB line goes to `regex`; the hostile pattern over it cannot.
        assert!(worst_case(1 << 20, small) < 1.0);
        assert!(worst_case(1 << 20, big) > 10.0);
        assert!(worst_case(100, MAX_NFA_BYTES) < 1.0);
    }
}
