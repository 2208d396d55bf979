"""Text tokenizer: byte-level BPE (never an unknown character) followed by the special tokens."""

from __future__ import annotations

from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from gepard.lm.layout import SPECIAL_TOKENS, Vocab


def train_tokenizer(texts: list[str], vocab_size: int = 1024) -> Tokenizer:
    """Byte-level BPE with `vocab_size` text tokens; the special tokens get the ids right after them."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(texts, trainer)
    text_size = tok.get_vocab_size()
    tok.add_special_tokens(list(SPECIAL_TOKENS))
    if [tok.token_to_id(s) for s in SPECIAL_TOKENS] != list(range(text_size, text_size + len(SPECIAL_TOKENS))):
        raise RuntimeError("special tokens did not land right after the text tokens")
    return tok


def text_vocab_size(tok: Tokenizer) -> int:
    return tok.token_to_id(SPECIAL_TOKENS[0])


def vocab_for(tok: Tokenizer, codebook_size: int) -> Vocab:
    return Vocab(text_size=text_vocab_size(tok), codebook_size=codebook_size)


def encode_text(tok: Tokenizer, text: str) -> list[int]:
    """Text -> text token ids; special-token strings in user text ("<eos>") stay plain text."""
    tok.encode_special_tokens = True
    return tok.encode(text, add_special_tokens=False).ids


def load_tokenizer(path: str | Path) -> Tokenizer:
    return Tokenizer.from_file(str(Path(path) / "tokenizer.json"))
