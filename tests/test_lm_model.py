import torch
from transformers import AutoModelForCausalLM

from gepard.lm.layout import Vocab
from gepard.lm.model import LMConfig, build_lm, init_audio_embeddings
from gepard.lm.voice import ReferenceCompressor, VoiceConfig

TINY = LMConfig(hidden_size=32, layers=2, heads=2, kv_heads=1, head_dim=16, intermediate_size=64, max_positions=256)
VOCAB = Vocab(text_size=40, codebook_size=60)


def test_saved_lm_is_a_stock_checkpoint(tmp_path):
    torch.manual_seed(0)
    model = build_lm(TINY, VOCAB).eval()
    init_audio_embeddings(model, VOCAB, [5, 4, 3])
    model.save_pretrained(tmp_path)
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path).eval()  # no custom code
    assert type(loaded).__name__ == "Qwen3ForCausalLM"
    prefix = torch.randn(1, 8, TINY.hidden_size)
    tokens = torch.tensor([[40, 3, 5, 42, 43, 50, 51]])
    with torch.no_grad():
        embeds = torch.cat([prefix, model.get_input_embeddings()(tokens)], dim=1)
        a = model(inputs_embeds=embeds).logits
        b = loaded(inputs_embeds=torch.cat([prefix, loaded.get_input_embeddings()(tokens)], dim=1)).logits
    assert torch.allclose(a, b, atol=1e-5)


def test_audio_embeddings_follow_the_fsq_grid():
    torch.manual_seed(0)
    model = build_lm(TINY, VOCAB)
    init_audio_embeddings(model, VOCAB, [5, 4, 3])
    emb = model.get_input_embeddings().weight[VOCAB.audio_offset:]
    # codes 0 and 1 differ by one step of the first FSQ digit; code 0 and 59 by the largest jump
    near = (emb[0] - emb[1]).norm()
    far = (emb[0] - emb[59]).norm()
    assert near < far


def test_reference_compressor_shapes_padding_and_null_prefix():
    torch.manual_seed(0)
    comp = ReferenceCompressor(VoiceConfig(lm_hidden_size=32, dim=16, heads=2, prefix_len=4, levels=[5, 4, 3])).eval()
    codes = torch.randint(0, 60, (2, 30))
    out = comp(codes, torch.tensor([30, 12]))
    assert out.shape == (2, 4, 32)
    # frames past a row's length do not change its prefix
    changed = codes.clone()
    changed[1, 12:] = 0
    assert torch.allclose(comp(changed, torch.tensor([30, 12]))[1], out[1], atol=1e-6)
    assert comp.null(3).shape == (3, 4, 32)
