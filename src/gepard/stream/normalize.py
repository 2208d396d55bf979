"""Written forms -> spoken words: numbers, ordinals, years, money, percentages, times, abbreviations.

`spell_numbers` is shared by speech synthesis and by WER scoring, so both read "19th" as "nineteenth".
"""

from __future__ import annotations

import re

from num2words import num2words

CURRENCY = {"$": ("dollar", "dollars", "cent", "cents"), "€": ("euro", "euros", "cent", "cents"),
            "£": ("pound", "pounds", "penny", "pence")}
_TIME = re.compile(r"\b([01]?\d|2[0-3]):([0-5]\d)\b")
_MONEY = re.compile(r"([$€£])\s?(\d{1,3}(?:,\d{3})+|\d+)(?:\.(\d{2}))?\b")
_NUMBER = re.compile(r"(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(st|nd|rd|th|s)?(%)?")
_SAINT = re.compile(r"(?<!\w)St\.(?=\s+[A-Z])")  # "St. Louis" -> "Saint Louis"; otherwise "St." is "Street"
ABBREVIATIONS = {"Dr.": "Doctor", "Mr.": "Mister", "Mrs.": "Missus", "Ms.": "Miz", "St.": "Street",
                 "Prof.": "Professor", "e.g.": "for example", "i.e.": "that is", "etc.": "et cetera", "vs.": "versus",
                 "Jr.": "Junior", "approx.": "approximately", "&": "and", "@": "at", "+": "plus"}


def _time(m: re.Match) -> str:
    hours, minutes = int(m.group(1)), int(m.group(2))
    if minutes == 0:
        return f"{num2words(hours)} o'clock"
    return f"{num2words(hours)} {'oh ' + num2words(minutes) if minutes < 10 else num2words(minutes)}"


def _money(m: re.Match) -> str:
    one, many, cent, cents = CURRENCY[m.group(1)]
    amount = int(m.group(2).replace(",", ""))
    words = f"{num2words(amount)} {one if amount == 1 else many}"
    if m.group(3) and int(m.group(3)):
        c = int(m.group(3))
        words += f" {num2words(c)} {cent if c == 1 else cents}"
    return words


def _number(m: re.Match) -> str:
    integer, decimals, suffix, percent = m.groups()
    n = int(integer.replace(",", ""))
    if suffix in ("st", "nd", "rd", "th") and not decimals:
        words = num2words(n, to="ordinal")
    elif 1000 <= n <= 2099 and "," not in integer and not decimals and not percent and n % 1000 >= 10:
        words = num2words(n, to="year")  # "1865", "2024"; "1030" as Whisper writes "ten thirty"
    else:
        words = num2words(n)
    if decimals:
        words += " point " + " ".join(num2words(int(d)) for d in decimals[1:])
    if suffix == "s":  # "1990s" -> "nineteen nineties"
        words = words[:-1] + "ies" if words.endswith("y") else words + "s"
    return words.replace(",", "") + (" percent" if percent else "")


def spell_numbers(text: str) -> str:
    """Times, money, then every other number written out in words."""
    text = _TIME.sub(_time, text)
    text = _MONEY.sub(_money, text)
    return _NUMBER.sub(lambda m: f" {_number(m)} ", text).replace("  ", " ")


def normalize_for_speech(text: str) -> str:
    """What the speech LM reads: abbreviations expanded, numbers spelled out, whitespace tidied."""
    text = _SAINT.sub("Saint", text)
    for short, full in ABBREVIATIONS.items():
        text = re.sub(rf"(?<!\w){re.escape(short)}(?=\s|$)" if short[0].isalpha() else re.escape(short),
                      f" {full} " if not short[0].isalpha() else full, text)
    return " ".join(spell_numbers(text).split()).replace(" ,", ",").replace(" .", ".")
