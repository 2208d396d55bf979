"""Text front ends: the string the LM's tokenizer reads, made from the text the user wrote.

"text": the characters as written. "track": one phone per codec frame in flite's timing, padded to a fixed
length (lm/track.py); its training shards already hold each clip's own track (scripts/flite_track.py). "ipa": US English IPA from gruut (a lexicon plus a g2p model for
unknown words, offline, MIT), numbers and dates spelled out, stress marks kept, punctuation kept after its
word. A small model trained on a few hours of speech need not learn English spelling that way. The front
end is stamped into the checkpoint (gepard.json), so inference replays what training saw.
"""

from __future__ import annotations

import functools

FRONT_ENDS = ("text", "ipa", "track")


def check_front_end(name: str) -> str:
    if name not in FRONT_ENDS:
        raise ValueError(f"unknown text front end {name!r}: use {' or '.join(FRONT_ENDS)}")
    return name


def to_units(text: str, front_end: str) -> str:
    """`text` as the tokenizer of a model with this front end reads it."""
    name = check_front_end(front_end)
    if name == "track":
        from gepard.lm.track import track

        return track(text)
    return ipa(text) if name == "ipa" else text


def segment_chars(front_end: str) -> int:
    """The longest text segment one utterance of a model with this front end takes (a track holds 8 s)."""
    from gepard.lm.track import MAX_TRACK_CHARS
    from gepard.stream.text import MAX_CHARS

    return MAX_TRACK_CHARS if check_front_end(front_end) == "track" else MAX_CHARS


def null_units(front_end: str) -> str:
    """What the unconditional branch of text CFG reads: no text, or for a phone track a track of pads only
    (silence, which every training track ends in). Training reads it only with `--text-dropout`."""
    if check_front_end(front_end) == "track":
        from gepard.lm.track import padded_track

        return padded_track([])
    return ""


def training_units(text: str, front_end: str) -> str:
    """A token shard's text as the tokenizer reads it: shards made for the track front end hold the track of
    each clip in its own timing already."""
    return text if check_front_end(front_end) == "track" else to_units(text, front_end)


@functools.lru_cache(maxsize=65536)
def ipa(text: str) -> str:
    """'Hi, Alex!' -> 'hˈaɪ, ˈælɪks!': words as IPA separated by spaces, punctuation glued to its word."""
    from gruut import sentences

    out = []
    for sentence in sentences(text, lang="en-us", pos=False):  # the POS tagger triples the time
        for word in sentence:
            if word.is_break and out:
                out[-1] += word.text
            elif word.phonemes and not word.is_break:
                out.append("".join(word.phonemes))
    return " ".join(out)
