"""The LM's text front ends: IPA from gruut, stamped into the checkpoint and replayed by inference."""

import pytest

from gepard.lm.frontend import ipa, null_units, to_units
from gepard.lm.layout import Repetition
from gepard.lm.model import LMConfig
from gepard.lm.speech_lm import SpeechLM
from gepard.lm.tokenizer import encode_text
from gepard.lm.train import LMTrainConfig, build
from gepard.lm.voice import VoiceConfig


def test_ipa_spells_words_as_us_english_phonemes_and_keeps_punctuation():
    assert ipa("Hi, Alex!") == "hˈaɪ, ˈælɪks!"
    assert ipa("Yes.") == "jˈɛs."
    assert ipa("What time is it?").endswith("?")


def test_ipa_spells_out_numbers_and_survives_odd_input():
    assert ipa("7") == ipa("seven")
    assert ipa("   ") == ""
    assert ipa("<eos> 🙂") != "<eos> 🙂"  # never raises; markup-like text is read as words


def test_text_front_end_is_the_identity_and_unknown_names_are_refused():
    assert to_units("Hi, Alex!", "text") == "Hi, Alex!"
    assert null_units("text") == "" and null_units("ipa") == ""  # CFG's unconditional branch: no text
    with pytest.raises(ValueError, match="unknown text front end 'phones'"):
        to_units("hi", "phones")


def test_the_front_end_is_stamped_into_the_checkpoint_and_replayed(tmp_path):
    cfg = LMTrainConfig(text_vocab=300, levels=[5, 4, 3], repetition=Repetition(), text_front_end="ipa",
                        lm=LMConfig(hidden_size=32, layers=2, heads=2, kv_heads=1, head_dim=16, intermediate_size=64,
                                    max_positions=512),
                        voice=VoiceConfig(dim=16, heads=2, blocks=1, prefix_len=4))
    model = build(cfg, ["hello there", "yes", "see you at nine"])
    model.save_pretrained(tmp_path / "m")
    again = SpeechLM.from_pretrained(tmp_path / "m")
    assert again.text_front_end == "ipa"
    ids = again.encode_text("See you at nine.")
    assert ids == encode_text(again.tokenizer, ipa("See you at nine.")) != encode_text(again.tokenizer,
                                                                                      "See you at nine.")
