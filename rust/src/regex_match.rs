//! Regex line matching for `knowledge match`: the `regex` crate (finite automata, linear time in
//! the input, no catastrophic backtracking), a bounded compiled size and a cap on matches.
//!
//! Lines: each text is split on `\n`, one trailing `\r` is stripped from every line, and a text
//! ending in `\n` has no extra empty last line (as `grep` sees it). Line numbers are 1-based and
//! absolute within their text. One match is reported per matching line: the span of the first
//! match, in characters (Unicode scalar values, i.e. Python `str` indices).
//!
//! Under a time limit, a line whose worst case could outlast it is searched by an engine that
//! reads the clock (`regex_deadline.rs`); results are the same.

use std::time::Duration;

use regex::{Regex, RegexBuilder};

use crate::error::{CoreError, CoreResult};
use crate::regex_deadline::{
    forward_nfa, worst_case, Bounded, BoundedCache, Deadline, MAX_NFA_BYTES,
};

/// Upper bound on the compiled program and on the lazy DFA cache, so a hostile pattern such as
/// `\w{1000}{1000}` fails to compile instead of taking memory.
pub const SIZE_LIMIT: usize = 4 << 20;

/// One matching line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineMatch {
    /// Position of the text in the input list.
    pub text_index: usize,
    /// 1-based line number inside that text.
    pub line_number: usize,
    /// The line without its line ending.
    pub line: String,
    /// Character span `[start, end)` of the first match in `line`.
    pub start: usize,
    pub end: usize,
    /// Up to `context` lines before and after the match, from the same text (each cut to
    /// `context_chars` characters when given).
    pub before: Vec<String>,
    pub after: Vec<String>,
}

/// Matches in input order, and whether more matching lines existed beyond the cap.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MatchResult {
    pub matches: Vec<LineMatch>,
    pub truncated: bool,
}

/// Compile `pattern` with the size limits; an invalid pattern is an error naming `pattern`.
pub fn compile(pattern: &str, case_insensitive: bool) -> CoreResult<Regex> {
    RegexBuilder::new(pattern)
        .case_insensitive(case_insensitive)
        .size_limit(SIZE_LIMIT)
        .dfa_size_limit(SIZE_LIMIT)
        .build()
        .map_err(|e| CoreError::invalid("pattern", e.to_string()))
}

/// The lines of `text` as this module defines them.
pub fn split_lines(text: &str) -> Vec<&str> {
    if text.is_empty() {
        return Vec::new();
    }
    let body = text.strip_suffix('\n').unwrap_or(text);
    body.split('\n')
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
        .collect()
}

/// Report the lines of `texts` that `pattern` matches, in order, at most `max_matches` of them.
pub fn match_lines(
    texts: &[String],
    pattern: &str,
    case_insensitive: bool,
    max_matches: usize,
    context: usize,
) -> CoreResult<MatchResult> {
    match_lines_within(
        texts,
        pattern,
        case_insensitive,
        max_matches,
        context,
        None,
        None,
    )
}

/// Longest time a line may be estimated to take for it to go to the `regex` crate, which cannot
/// be stopped; a line that may take longer is searched by [`Bounded`], which can.
const FAST_PATH_MAX: Duration = Duration::from_secs(1);

/// `match_lines`, given up with a `TimeLimitExceeded` error naming `pattern` once `limit` has
/// passed: a pattern that compiles within the size limit may still cost its program's size at
/// every byte, which over megabytes of text is minutes. Lines whose worst case fits in the time
/// left go to `regex`; others to a search that reads the clock as it goes (`regex_deadline.rs`),
/// with the same results. Context lines are cut to their first `context_chars` characters when
/// given: a caller that shows only that much need not receive each long line twice per context
/// (`2 × context` copies of a text whose every line matches).
pub fn match_lines_within(
    texts: &[String],
    pattern: &str,
    case_insensitive: bool,
    max_matches: usize,
    context: usize,
    context_chars: Option<usize>,
    limit: Option<Duration>,
) -> CoreResult<MatchResult> {
    if max_matches == 0 {
        return Err(CoreError::invalid("max_matches", "must be >= 1"));
    }
    let re = compile(pattern, case_insensitive)?;
    let mut deadline = Deadline::after(limit);
    let mut nfa = None; // built for the first line too long to go to `regex` unexamined
    let mut bounded: Option<(Bounded, BoundedCache)> = None;
    let mut result = MatchResult::default();
    for (text_index, text) in texts.iter().enumerate() {
        let late = || {
            let limit = limit.unwrap_or_default().as_secs_f64();
            CoreError::TimeLimitExceeded {
                arg: "pattern",
                rule: format!(
                    "took more than {limit} s, stopped in text {} of {}; use a simpler \
                     pattern or search fewer sources",
                    text_index + 1,
                    texts.len()
                ),
            }
        };
        let lines = split_lines(text);
        for (idx, &line) in lines.iter().enumerate() {
            let fast = match deadline.remaining() {
                None => true,
                Some(left) if left.is_zero() => return Err(late()),
                Some(left) => {
                    let budget = left.min(FAST_PATH_MAX).as_secs_f64();
                    worst_case(line.len(), MAX_NFA_BYTES) <= budget || {
                        let nfa = match &nfa {
                            Some(nfa) => nfa,
                            None => nfa.insert(forward_nfa(pattern, case_insensitive)?),
                        };
                        // An empty match inside a character makes `regex` search again one
                        // byte later, from where that search began: quadratic in the line
                        // (`(?-u:\B)` over 256 kB of `a ` and one `é` took 68 s).
                        worst_case(line.len(), nfa.memory_usage()) <= budget
                            && (line.is_ascii() || !nfa.has_empty())
                    }
                }
            };
            let found = if fast {
                re.find(line).map(|m| (m.start(), m.end()))
            } else {
                if bounded.is_none() {
                    let nfa = nfa.clone().expect("built for the bound");
                    let engine = Bounded::new(pattern, case_insensitive, nfa)?;
                    let cache = engine.create_cache();
                    bounded = Some((engine, cache));
                }
                let (engine, cache) = bounded.as_mut().expect("built above");
                engine
                    .find(cache, line, &mut deadline)
                    .map_err(|_| late())?
            };
            if let Some((byte_start, byte_end)) = found {
                if result.matches.len() == max_matches {
                    result.truncated = true;
                    return Ok(result);
                }
                let start = line[..byte_start].chars().count();
                let end = start + line[byte_start..byte_end].chars().count();
                let (before, after) = if context > 0 {
                    let lo = idx.saturating_sub(context);
                    let hi = (idx + 1 + context).min(lines.len());
                    let cut = |lines: &[&str]| clip_all(lines, context_chars);
                    (cut(&lines[lo..idx]), cut(&lines[idx + 1..hi]))
                } else {
                    (Vec::new(), Vec::new())
                };
                result.matches.push(LineMatch {
                    text_index,
                    line_number: idx + 1,
                    line: line.to_owned(),
                    start,
                    end,
                    before,
                    after,
                });
            }
        }
    }
    Ok(result)
}

/// `lines` owned, each cut to its first `chars` characters when given.
fn clip_all(lines: &[&str], chars: Option<usize>) -> Vec<String> {
    let clip = |line: &str| match chars.and_then(|n| line.char_indices().nth(n)) {
        Some((at, _)) => line[..at].to_owned(),
        None => line.to_owned(),
    };
    lines.iter().map(|line| clip(line)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn lines_are_split_like_grep() {
        assert_eq!(split_lines(""), Vec::<&str>::new());
        assert_eq!(split_lines("\n"), vec![""]);
        assert_eq!(split_lines("a\r\nb\n"), vec!["a", "b"]);
        assert_eq!(split_lines("a\n\nb\r"), vec!["a", "", "b"]);
    }

    #[test]
    fn reports_absolute_line_numbers_and_char_spans() {
        let r = match_lines(&texts(&["zero\r\nhé foo\r\n", "foo"]), "fo+", false, 10, 0).unwrap();
        assert!(!r.truncated);
        assert_eq!(r.matches.len(), 2);
        let m = &r.matches[0];
        assert_eq!(
            (m.text_index, m.line_number, m.line.as_str()),
            (0, 2, "hé foo")
        );
        assert_eq!((m.start, m.end), (3, 6));
        assert_eq!((r.matches[1].text_index, r.matches[1].line_number), (1, 1));
    }

    #[test]
    fn cap_stops_and_flags() {
        let t = texts(&["a\na\na", "a"]);
        let r = match_lines(&t, "a", false, 3, 0).unwrap();
        assert_eq!(r.matches.len(), 3);
        assert!(r.truncated);
        let r = match_lines(&t, "a", false, 4, 0).unwrap();
        assert_eq!(r.matches.len(), 4);
        assert!(!r.truncated);
    }

    #[test]
    fn context_lines_stay_inside_the_text() {
        let r = match_lines(&texts(&["1\n2\nhit\n4", "hit\n6"]), "hit", false, 10, 2).unwrap();
        assert_eq!(r.matches[0].before, vec!["1", "2"]);
        assert_eq!(r.matches[0].after, vec!["4"]);
        assert!(r.matches[1].before.is_empty());
        assert_eq!(r.matches[1].after, vec!["6"]);
    }

    #[test]
    fn context_lines_are_cut_to_context_chars() {
        let t = texts(&["ééé\nab\nhit\nxyzw"]);
        let r = match_lines_within(&t, "hit", false, 9, 2, Some(2), None).unwrap();
        assert_eq!(r.matches[0].before, vec!["éé", "ab"]);
        assert_eq!(r.matches[0].after, vec!["xy"]);
        assert_eq!(r.matches[0].line, "hit");
    }

    #[test]
    fn case_and_anchors() {
        let t = texts(&["Foo\nxfoo"]);
        assert_eq!(
            match_lines(&t, "^foo", true, 9, 0).unwrap().matches.len(),
            1
        );
        assert_eq!(
            match_lines(&t, "foo$", false, 9, 0).unwrap().matches.len(),
            1
        );
    }

    #[test]
    fn catastrophic_pattern_is_linear() {
        let line = format!("{}b", "a".repeat(50_000));
        let r = match_lines(&[line], "(a+)+$", false, 5, 0).unwrap();
        assert_eq!(r.matches.len(), 0);
    }

    #[test]
    fn a_pattern_past_its_time_is_an_error_naming_it() {
        let t = texts(&["a\n"; 1000]);
        let none = Some(Duration::ZERO);
        let late = match_lines_within(&t, "a", false, 5, 0, None, none).unwrap_err();
        assert!(matches!(late, CoreError::TimeLimitExceeded { .. }));
        assert!(late
            .to_string()
            .starts_with("pattern: took more than 0 s, stopped in text 1"));
        let ample = Some(Duration::from_secs(60));
        assert_eq!(
            match_lines_within(&t, "a", false, 5, 0, None, ample)
                .unwrap()
                .matches
                .len(),
            5
        );
    }

    #[test]
    fn a_limit_past_what_the_clock_holds_is_no_limit() {
        // `Instant::now() + Duration::MAX` panicked: "overflow when adding duration to instant".
        let r = match_lines_within(&texts(&["a"]), "a", false, 5, 0, None, Some(Duration::MAX));
        assert_eq!(r.unwrap().matches.len(), 1);
    }

    #[test]
    fn an_empty_match_inside_a_character_costs_one_pass_not_one_per_byte() {
        // `regex` retried the search one byte later each time, from its start: 256 kB of
        // `a ` ending in `é` took 68 s under `(?-u:\B)`, which matches empty only inside `é`
        // and at the end, past the limit (it cannot be stopped).
        let line = format!("{}aé", "a ".repeat(128_000));
        let started = std::time::Instant::now();
        let found = match_lines_within(
            std::slice::from_ref(&line),
            r"(?-u:\B)",
            false,
            5,
            0,
            None,
            Some(Duration::from_secs(10)),
        )
        .unwrap();
        let chars = line.chars().count();
        assert_eq!(
            (found.matches[0].start, found.matches[0].end),
            (chars, chars)
        );
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
    }

    #[test]
    fn a_hostile_pattern_over_one_long_line_stops_at_the_limit() {
        // `regex` would spend minutes inside this one line; the limit is kept to within a margin.
        let line = vec![crate::regex_deadline::tests::random_ab(1_000_000)];
        let limit = Duration::from_millis(200);
        let started = std::time::Instant::now();
        let late = match_lines_within(&line, "[ab]*a[ab]{3000}z", false, 5, 0, None, Some(limit));
        let took = started.elapsed();
        let late = late.unwrap_err();
        assert!(matches!(late, CoreError::TimeLimitExceeded { .. }));
        assert!(late
            .to_string()
            .starts_with("pattern: took more than 0.2 s, stopped in text 1 of 1;"));
        assert!(
            took < limit + Duration::from_secs(3),
            "stopped after {took:?}"
        );
    }

    #[test]
    fn errors_name_the_argument() {
        let bad = match_lines(&texts(&["x"]), "(", false, 1, 0).unwrap_err();
        assert!(bad.to_string().starts_with("pattern:"));
        let huge = match_lines(&texts(&["x"]), r"\w{1000}{1000}", false, 1, 0).unwrap_err();
        assert!(huge.to_string().starts_with("pattern:"));
        let cap = match_lines(&texts(&["x"]), "x", false, 0, 0).unwrap_err();
        assert!(cap.to_string().starts_with("max_matches:"));
    }
}
