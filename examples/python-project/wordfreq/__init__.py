"""wordfreq: the most frequent words of a text, for examples/run-project."""
import collections
import re

WORD = re.compile(r"[^\W\d_]+(?:'[^\W\d_]+)?")


def words(text):
    """The words of text, lower-cased, in order."""
    return [w.lower() for w in WORD.findall(text)]


def top(text, n=3):
    """The n most frequent words as (word, count), most frequent first;
    ties in the order the words first appear."""
    if n < 0:
        raise ValueError("n must not be negative")
    counts = collections.Counter(words(text))
    first = {}
    for i, w in enumerate(words(text)):
        first.setdefault(w, i)
    return sorted(counts.items(), key=lambda wc: (-wc[1], first[wc[0]]))[:n]
