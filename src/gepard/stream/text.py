"""Incremental text segmentation: text deltas (an LLM's output) in, speakable segments out.

A segment ends at a sentence end (. ! ? ; or a newline) followed by a space; the first segment may end
early, at a comma after a few words, so speech starts sooner; no segment is longer than `max_chars`
(MAX_CHARS unless the model's front end needs shorter ones).
Every decision depends only on the text, never on how it was split into deltas, so segmenting a delta
stream gives exactly the segments of the whole text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

MAX_CHARS = 250
FIRST_MIN_WORDS = 4
ABBREVIATIONS = {"mr", "mrs", "ms", "dr", "prof", "st", "vs", "etc", "e.g", "i.e", "jr", "sr", "mt", "no", "approx"}
END = re.compile(r"[.!?;]+[\"')\]]*(?=\s)|\n")
COMMA = re.compile(r"[,:\u2014](?=\s)")


def _is_sentence_end(text: str, match: re.Match) -> bool:
    if match.group() == "\n" or match.group()[0] != ".":
        return True
    word = re.search(r"(\S+)$", text[: match.start()])
    token = word.group(1).lower() if word else ""
    return token not in ABBREVIATIONS and not re.fullmatch(r"[a-z]", token)  # "Dr." and "J." do not end


def next_segment(buffer: str, first: bool, final: bool, max_chars: int = MAX_CHARS) -> tuple[str, str] | None:
    """(segment, rest) if `buffer` already decides where its first segment ends, else None."""
    window = buffer[:max_chars + 1]
    ends = [m.end() for m in END.finditer(window) if m.end() < len(buffer) and _is_sentence_end(buffer, m)]
    if first:  # the first segment may also end at a comma after a few words
        ends += [m.end() for m in COMMA.finditer(window)
                 if m.end() < len(buffer) and len(buffer[: m.end()].split()) >= FIRST_MIN_WORDS]
    ends = [e for e in ends if e <= max_chars]
    if ends:
        return buffer[: min(ends)], buffer[min(ends):]
    if len(buffer) > max_chars:
        cut = buffer.rfind(" ", 0, max_chars + 1)
        cut = cut if cut > 0 else max_chars
        return buffer[:cut], buffer[cut:]
    if final and buffer.strip():
        return buffer, ""
    return None


def segment_stream(deltas: Iterable[str], max_chars: int = MAX_CHARS) -> Iterator[str]:
    """Text deltas -> stripped, non-empty segments, each as soon as it is decided."""
    buffer, first = "", True
    for delta in deltas:
        buffer += delta
        while (found := next_segment(buffer, first, False, max_chars)) is not None:
            segment, buffer = found
            if segment.strip():
                first = False
                yield segment.strip()
    while (found := next_segment(buffer, first, True, max_chars)) is not None:
        segment, buffer = found
        if segment.strip():
            first = False
            yield segment.strip()


def segment_text(text: str) -> list[str]:
    return list(segment_stream([text]))
