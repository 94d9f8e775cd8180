"""`same_claims`: what tells a restatement from a changed fact, when two texts' vectors are
near-identical (the briefing's near-duplicates, the consolidation summary)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from octobrain.memory.summary import claims, negations, same_claims
from octobrain.text import analyze

GROUPS = (
    "the a is it into such their there then with With WITH",  # stopwords
    "not no never don't cannot 3 4 v2.3.1 2.3.1",  # negations and numbers
    "running runs ran run Indentation indent uses tabs tab",  # stems met from other words
    "Café cafe ﬁle file ＡＢＣ abc x\u00ady xy",  # folded alike
    "IL-6 il6 TNF-α alpha C++ c# max_connections max os.path.join connections e.g.",
    "በአማርኛ ไทย 🙂",  # kept as they are
)
WORDS = [word for group in GROUPS for word in group.split()]


def _terms_meet(one: str, other: str) -> bool:
    """The rule as first written: numbers alike, negated alike, a stemmed term in common."""

    def of(text: str) -> tuple[frozenset[str], int, frozenset[str]]:
        (said,) = analyze([text], stem=False, stopwords=False)
        (terms,) = analyze([text])
        return claims(text).numbers, negations(said), frozenset(terms)

    (n1, neg1, t1), (n2, neg2, t2) = of(one), of(other)
    return n1 == n2 and neg1 == neg2 and not t1.isdisjoint(t2)


@settings(max_examples=500, deadline=None)
@given(
    st.lists(st.sampled_from(WORDS), max_size=6).map(" ".join),
    st.lists(st.sampled_from(WORDS), max_size=6).map(" ".join),
)
def test_a_shared_word_found_before_stemming_tells_what_the_stemmed_terms_tell(
    one: str, other: str
) -> None:
    # A word both texts hold that is no stopword settles it without stemming either text.
    assert same_claims(one, other) == _terms_meet(one, other)
