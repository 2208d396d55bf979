"""DPO: the loss on a hand-computed case, rewards, pair building, sequence log-probs, and a tiny end-to-end run."""

import json
import math

import pytest
import torch
import torch.nn.functional as F

from gepard.dpo.loss import dpo_loss
from gepard.dpo.pairs import Rollout, build_pairs
from gepard.dpo.rewards import RewardWeights, expected_duration, length_penalty, reward
from gepard.lm.layout import IGNORE, pad_sequences, training_sequence
from tests.conftest import tiny_speech_lm


def test_dpo_loss_hand_computed():
    # chosen: policy -2.0, reference -2.4 (+0.4); rejected: policy -3.0, reference -2.8 (-0.2)
    # margin 0.6, beta 2 -> -log sigmoid(1.2) = log(1 + e^-1.2) = 0.263282
    loss = dpo_loss(torch.tensor([-2.0]), torch.tensor([-3.0]), torch.tensor([-2.4]), torch.tensor([-2.8]), beta=2.0)
    assert loss.item() == pytest.approx(math.log(1 + math.exp(-1.2)), abs=1e-6)
    assert loss.item() == pytest.approx(0.263282, abs=1e-6)
    same = dpo_loss(torch.tensor([-1.0, -5.0]), torch.tensor([-2.0, -1.0]), torch.tensor([-1.0, -5.0]),
                    torch.tensor([-2.0, -1.0]))
    assert same.item() == pytest.approx(math.log(2), abs=1e-6)  # a policy equal to its reference: no preference
    # with the chosen rollout's NLL (weight 0.5): + 0.5 * 2.0 = 1.263282
    rpo = dpo_loss(torch.tensor([-2.0]), torch.tensor([-3.0]), torch.tensor([-2.4]), torch.tensor([-2.8]), beta=2.0,
                   nll_weight=0.5)
    assert rpo.item() == pytest.approx(1.263282, abs=1e-6)


def test_dpo_loss_gradient_raises_chosen_and_lowers_rejected():
    chosen, rejected = torch.tensor([-2.0], requires_grad=True), torch.tensor([-2.0], requires_grad=True)
    dpo_loss(chosen, rejected, torch.tensor([-2.0]), torch.tensor([-2.0])).backward()
    assert chosen.grad.item() < 0 < rejected.grad.item()  # descent raises chosen, lowers rejected


def test_length_penalty_is_two_sided_and_free_within_tolerance():
    assert length_penalty(1.0, 1.0, 0.3) == 0 and length_penalty(1.25, 1.0, 0.3) == 0
    assert length_penalty(2.0, 1.0, 0.3) == pytest.approx(length_penalty(0.5, 1.0, 0.3))  # too long = too short
    assert length_penalty(2.0, 1.0, 0.3) == pytest.approx(math.log(2) - math.log(1.3))
    assert length_penalty(0.0, 1.0, 0.3) > length_penalty(0.5, 1.0, 0.3) > 0  # stopping at once is worst


def test_reward_prefers_right_words_right_length_right_voice():
    w = RewardWeights()
    good = reward(0.0, 1.0, 1.0, 0.8, w)
    assert good == pytest.approx(0.4)
    assert reward(0.5, 1.0, 1.0, 0.8, w) < good
    assert reward(0.0, 3.0, 1.0, 0.8, w) < good and reward(0.0, 0.2, 1.0, 0.8, w) < good
    assert reward(0.0, 1.0, 1.0, 0.5, w) < good
    assert reward(3.0, 1.0, 1.0, 0.8, w) == reward(1.0, 1.0, 1.0, 0.8, w)  # WER counts up to 1
    assert expected_duration("Hello there.", 10.0) == pytest.approx(1.1)  # "hello there": 11 characters


def test_pairs_take_the_best_of_all_against_the_worst_single_pass():
    r = [Rollout(0, 0, False, [1], True, -0.9), Rollout(0, 1, False, [2], True, -0.2),
         Rollout(0, 0, True, [3], True, 0.3), Rollout(0, 1, True, [4], True, -1.5),  # worst is CFG: not rejected
         Rollout(1, 0, False, [5], True, -0.5), Rollout(1, 1, False, [6], True, -0.45),  # margin 0.05: dropped
         Rollout(2, 0, True, [7], True, 0.0)]  # no single-pass sample: nothing to reject
    [(chosen, rejected)] = build_pairs(r, min_margin=0.2)
    assert (chosen.codes, rejected.codes) == ([3], [1])
    assert len(build_pairs(r, min_margin=0.0)) == 2


def test_sequence_logprobs_are_mean_logprobs_of_the_labelled_tokens():
    model = tiny_speech_lm()
    ids = model.tokenizer.encode("yes").ids
    seqs = [training_sequence(ids, [3, 17, 59], model.vocab, 2), training_sequence(ids, [5, 8], model.vocab, 2,
                                                                                    stopped=False)]
    assert seqs[1][1][-1] != model.vocab.special("<eos>")  # a cut-off rollout has no <eos> to learn
    batch = pad_sequences(seqs, model.vocab)
    prefix = torch.randn(2, 4, 32, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        got = model.sequence_logprobs(prefix, batch["ids"], batch["labels"], batch["lengths"])
        for row, (seq_ids, labels) in enumerate(seqs):
            embeds = model.embed(prefix[row: row + 1], torch.tensor([seq_ids]))
            logits = model.lm(inputs_embeds=embeds).logits[0, 4:]
            keep = torch.tensor(labels) != IGNORE
            expected = -F.cross_entropy(logits[keep], torch.tensor(labels)[keep])
            assert got[row].item() == pytest.approx(expected.item(), abs=1e-5)


def test_prompts_from_a_texts_file_take_voices_and_references_from_the_shards(tmp_path):
    from gepard.dpo.pipeline import DPOConfig, make_prompts
    from gepard.data.prepare import read_shards
    from tests.test_lm_train import write_shards

    write_shards(tmp_path / "shards")
    (tmp_path / "texts.txt").write_text("Yes.\nNo way!\nThe train leaves at nine tonight.\nSee you at the station soon.\n")
    cfg = DPOConfig(shards=[str(tmp_path / "shards")], texts=str(tmp_path / "texts.txt"), prompts=3, short_share=0.6)
    prompts = make_prompts(cfg)
    shard_codes = {speaker: [c.tolist() for *_, s, c in read_shards(tmp_path / "shards") if s == speaker]
                   for speaker in ("s0", "s1", "s2")}
    assert [len(p["text"].split()) <= 3 for p in prompts] == [True, True, False]  # round(3 * 0.6) short ones first
    assert {p["text"] for p in prompts} <= {"Yes.", "No way!", "The train leaves at nine tonight.",
                                            "See you at the station soon."}
    for p in prompts:  # each reference is a crop of one of its voice's utterances
        assert any(str(p["ref_codes"])[1:-1] in str(c) for c in shard_codes[p["speaker"]])
    assert prompts == make_prompts(cfg)  # deterministic


def test_dpo_pipeline_end_to_end_on_tiny_models(tmp_path, tiny_lm_dir, tiny_codec_dir):
    pytest.importorskip("faster_whisper")
    pytest.importorskip("resemblyzer")
    from gepard.dpo.pipeline import DPOConfig, train_dpo
    from gepard.lm.speech_lm import SpeechLM
    from tests.test_lm_train import write_shards

    write_shards(tmp_path / "shards")
    cfg = DPOConfig(run_dir=str(tmp_path / "dpo"), model=str(tiny_lm_dir), codec=str(tiny_codec_dir),
                    shards=[str(tmp_path / "shards")], prompts=3, samples=2, steps=2, batch_pairs=2, min_margin=0.0, lr=1e-3,
                    checkpoint_every=1, threads=1)
    export = train_dpo(cfg)
    rollouts = [json.loads(line) for line in (tmp_path / "dpo" / "rollouts.jsonl").read_text().splitlines()]
    assert len(rollouts) == 3 * 2 * 2
    assert {(r["seed"], r["cfg"]) for r in rollouts} == {(seed, on) for seed in (0, 1) for on in (True, False)}
    log = [json.loads(line) for line in (tmp_path / "dpo" / "log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log] == [1, 2]
    assert log[0]["loss"] == pytest.approx(math.log(2), abs=0.02)  # the policy starts as its own reference
    tuned, base = SpeechLM.from_pretrained(export), SpeechLM.from_pretrained(tiny_lm_dir)
    assert not all(torch.equal(a, b) for a, b in zip(tuned.lm.parameters(), base.lm.parameters()))  # the LM moved
    assert all(torch.equal(a, b) for a, b in zip(tuned.voice.state_dict().values(), base.voice.state_dict().values()))
    assert sorted(p.name for p in (export / "voices").iterdir()) == sorted(
        p.name for p in (tiny_lm_dir / "voices").iterdir())
    cfg.steps = 3  # resumes from the checkpoint, rollouts and pairs kept
    train_dpo(cfg)
    assert len((tmp_path / "dpo" / "log.jsonl").read_text().splitlines()) == 3
