import pytest

from gepard.stream.normalize import normalize_for_speech


@pytest.mark.parametrize("written, spoken", [
    ("Dr. Smith sees you at 3:30 on the 21st.", "Doctor Smith sees you at three thirty on the twenty-first."),
    ("It costs $5.50, or 10% off.", "It costs five dollars fifty cents, or ten percent off."),
    ("1,500 people in 1865", "one thousand five hundred people in eighteen sixty-five"),
    ("Call at 10:00 & bring 2.5 kg.", "Call at ten o'clock and bring two point five kg."),
    ("St. Louis is on Main St. today", "Saint Louis is on Main Street today"),
    ("the 1990s, £1 and 9:05", "the nineteen nineties, one pound and nine oh five"),
])
def test_written_forms_become_words(written, spoken):
    assert normalize_for_speech(written) == spoken
