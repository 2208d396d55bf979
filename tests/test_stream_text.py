import random

from gepard.stream.text import MAX_CHARS, segment_stream, segment_text

TEXT = ("Sure, I can help with that. Dr. Smith will see you at 3.30 pm on Friday! Would you like a reminder? "
        "The clinic is on Main St. near the park; parking is free.\nThanks, and have a great day")


def test_sentences_abbreviations_and_decimals():
    assert segment_text(TEXT) == [
        "Sure, I can help with that.",
        "Dr. Smith will see you at 3.30 pm on Friday!",
        "Would you like a reminder?",
        "The clinic is on Main St. near the park;",
        "parking is free.",
        "Thanks, and have a great day",
    ]


def test_first_segment_ends_early_at_a_comma_after_a_few_words():
    assert segment_text("Sure thing, let me check that, and I will get back to you. Bye.") == [
        "Sure thing, let me check that,", "and I will get back to you.", "Bye."]
    assert segment_text("Well, of course. Yes, I can, I think, do it.") == ["Well, of course.", "Yes, I can, I think, do it."]


def test_delta_stream_gives_the_same_segments_as_the_whole_text():
    rng = random.Random(0)
    for text in (TEXT, "word " * 120 + "end.", "A, b, c, d, e, f. G"):
        for _ in range(20):
            cuts = sorted(rng.sample(range(1, len(text)), k=min(len(text) - 1, rng.randint(1, 40))))
            deltas = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)])]
            assert list(segment_stream(deltas)) == segment_text(text)


def test_long_text_without_punctuation_is_cut_at_spaces():
    segments = segment_text("word " * 200)
    assert all(len(s) <= MAX_CHARS for s in segments)
    assert " ".join(segments).split() == ["word"] * 200


def test_segments_come_before_the_text_is_complete():
    seen = []

    def deltas():
        for word in "Hello there, how are you doing today? I am fine.".split(" "):
            yield word + " "
            seen.append(word)

    first = next(iter(segment_stream(deltas())))
    assert first == "Hello there, how are you doing today?"
    assert len(seen) == 6  # decided by the delta "today? ", before "I am fine." was even produced
