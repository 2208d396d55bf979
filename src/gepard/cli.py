"""The `gepard` command line."""

from __future__ import annotations

import functools
import math
import os
from pathlib import Path

import typer

from gepard.engine.base import DEFAULT_TEMPERATURE, DEFAULT_TOP_P

app = typer.Typer(no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
                  help="Gepard: streaming text-to-speech for real-time voice agents.")
codec_app = typer.Typer(no_args_is_help=True, help="Encode and decode audio with the neural codec.")
train_app = typer.Typer(no_args_is_help=True, help="Train models.")
eval_app = typer.Typer(no_args_is_help=True, help="Measure models; reports go to docs/results/.")
app.add_typer(codec_app, name="codec")
app.add_typer(train_app, name="train")
data_app = typer.Typer(no_args_is_help=True, help="Prepare training data.")
app.add_typer(eval_app, name="eval")
app.add_typer(data_app, name="data")
voice_app = typer.Typer(no_args_is_help=True, help="Named voices stored with a speech LM.")
app.add_typer(voice_app, name="voice")

CODEC_OPTION = typer.Option(None, "--codec", help="Codec folder (default: the shipped models/codec).")
MODEL_OPTION = typer.Option(None, "--model", help="Speech LM folder (default: the shipped models/lm).")
ENGINE_OPTION = typer.Option("torch", "--engine", help="torch (embedded, default) or vllm (needs gepard[vllm]).")
RENDER_OPTION = typer.Option("mean", "--render", help="What the decoder renders of each frame: mean (the LM's "
                             "expected values, default) or codes (the sampled codes).")


def invocation(ctx: typer.Context) -> str:
    """The command line that ran `ctx`, with the options the user gave: for the top of every report."""
    parts = ["gepard", *ctx.command_path.split()[1:]]
    for param in ctx.command.params:
        source = ctx.get_parameter_source(param.name)
        if source is not None and source.name == "COMMANDLINE":
            value = ctx.params[param.name]
            if getattr(param, "is_flag", False):
                parts.append(param.opts[0] if value else param.secondary_opts[0])
            elif isinstance(value, (list, tuple)):  # a repeated option: the flag once per value
                parts += [f"{param.opts[0]} {v}" for v in value]
            else:
                parts.append(f"{param.opts[0]} {value}" if param.opts[0].startswith("-") else str(value))
    return " ".join(parts)


def early_engine(engine: str, model: Path | None, slots: int):
    """With the torch engine, start its process now: it loads the model while this one imports torch."""
    if engine != "torch":
        return engine
    from gepard.engine.process import EngineProcess
    from gepard.paths import lm_dir

    return EngineProcess(lm_dir(model), slots)


def parse_levels(text: str) -> list[int]:
    """"8,8,8,5,5,5" -> [8, 8, 8, 5, 5, 5]; each level at least 2, codebook at most 65,536."""
    try:
        levels = [int(n) for n in text.split(",")]
    except ValueError:
        raise ValueError(f"--levels must be comma-separated integers, got {text!r}") from None
    if not levels or min(levels) < 2 or math.prod(levels) > 65536:
        raise ValueError(f"--levels {text}: each level must be >= 2 and their product <= 65,536")
    return levels


def user_errors(fn):
    """Report expected failures (bad files, bad arguments) as one line on stderr, exit code 1."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        from gepard.audio import AudioError

        try:
            return fn(*args, **kwargs)
        except (AudioError, FileNotFoundError, ValueError, OSError) as e:
            typer.secho(f"error: {e}", err=True, fg="red")
            raise typer.Exit(1) from None

    return wrapper


@app.command("say")
@user_errors
def say(
    text: str = typer.Argument(..., help="What to say; '-' reads standard input (as it arrives, with --stream)."),
    out: str = typer.Option("out.wav", "-o", "--out", help="Output audio file (.wav, .flac); '-' writes raw "
                                                          "16-bit PCM to standard output."),
    voice: str = typer.Option(None, help="A named voice of the model, or a reference clip (.wav, .flac, ...)."),
    seed: int = typer.Option(0, help="Sampling seed: the same seed gives the same audio."),
    stream: bool = typer.Option(False, "--stream", help="Write audio as it is generated."),
    model: Path = MODEL_OPTION,
    codec: Path = CODEC_OPTION,
    engine: str = ENGINE_OPTION,
    render: str = RENDER_OPTION,
):
    """Speak TEXT into an audio file (or standard output)."""
    import codecs
    import time

    engine = early_engine(engine, model, slots=16)
    import torch

    from gepard.api import TTS
    from gepard.engine.process import half_the_cores
    from gepard.stream.sink import AudioSink

    torch.set_num_threads(half_the_cores())  # the codec's; the engine process has the other half
    if text == "-":
        decoder = codecs.getincrementaldecoder("utf-8")()
        stdin_deltas = iter(lambda: decoder.decode(os.read(0, 4096)), "")
        text = stdin_deltas if stream else "".join(stdin_deltas)
    with TTS.load(model, codec, engine=engine, rendering=render) as tts:
        start, first, samples = time.perf_counter(), None, 0
        with AudioSink(out, tts.sample_rate, write_as_generated=stream) as sink:
            for chunk in tts.stream(text, voice=voice, seed=seed):
                first = first or time.perf_counter()
                sink.write(chunk)
                samples += len(chunk)
        elapsed, seconds = time.perf_counter() - start, samples / tts.sample_rate
    typer.echo(f"{out}: {seconds:.2f} s of speech in {elapsed:.2f} s (RTF {elapsed / max(seconds, 1e-9):.2f}, "
               f"first audio after {((first or start) - start) * 1000:.0f} ms)", err=out == "-")


@app.command("serve")
@user_errors
def serve(
    host: str = typer.Option("127.0.0.1"),
    port: int = typer.Option(8000),
    model: Path = MODEL_OPTION,
    codec: Path = CODEC_OPTION,
    data_dir: Path = typer.Option(Path("gepard-data"), help="Where uploaded voices are kept."),
    max_streams: int = typer.Option(16, help="Streams generating at once (the engine's batch)."),
    max_queue: int = typer.Option(32, help="Requests that may wait; beyond that, 429."),
    max_text_chars: int = typer.Option(4096, help="Longest input (413 beyond)."),
    engine: str = ENGINE_OPTION,
    render: str = RENDER_OPTION,
):
    """OpenAI-compatible speech server with a WebSocket for streaming text, voices, metrics and a web page."""
    engine = early_engine(engine, model, slots=max_streams)
    import torch
    import uvicorn

    from gepard.api import TTS
    from gepard.engine.process import half_the_cores
    from gepard.server.app import create_app, uvicorn_settings
    from gepard.server.limits import Limits

    torch.set_num_threads(half_the_cores())  # the codec's and the server's; the engine process has the other half
    limits = Limits(max_streams, max_queue, max_text_chars)
    with TTS.load(model, codec, slots=max_streams, engine=engine, rendering=render) as tts:
        # SIGTERM/Ctrl-C: HTTP streams get limits.shutdown_grace_s to finish, WebSocket sessions are closed
        uvicorn.run(create_app(tts, data_dir, limits), host=host, port=port, log_level="info",
                    **uvicorn_settings(limits))


@app.command("bench")
@user_errors
def bench(
    ctx: typer.Context,
    model: Path = MODEL_OPTION,
    codec: Path = CODEC_OPTION,
    concurrency: str = typer.Option("1,2,4,8,16", help="Comma-separated stream counts for the sweep."),
    rounds: int = typer.Option(1, help="Texts each stream speaks back to back in the sweep."),
    threads: int = typer.Option(0, help="CPU threads of this process (the codec); 0: half the cores, the "
                                        "torch engine's process has the other half."),
    engines: str = typer.Option("torch", help="Comma-separated engines to measure in the same run: torch, vllm."),
    peers: str = typer.Option("", help="Comma-separated peer TTS to measure too: piper, kokoro (extra `peers`)."),
    out: Path = typer.Option(Path("docs/results/bench.md"), help="Report (.json and .png beside it)."),
    render: str = RENDER_OPTION,
):
    """Single-stream RTF/TTFA, a concurrency sweep, a latency breakdown and the HF baseline."""
    import datetime

    import torch

    from gepard.api import TTS
    from gepard.engine.process import half_the_cores
    from gepard.eval.bench import TEXTS, run_bench, write_bench_report
    from gepard.eval.peers import load_peer, measure_peer
    from gepard.eval.machine import describe_machine

    torch.set_num_threads(threads or half_the_cores())
    levels = [int(n) for n in concurrency.split(",")]
    runs = {}
    for engine in engines.split(","):
        with TTS.load(model, codec, slots=max(levels), engine=engine, rendering=render) as tts:
            runs[engine] = run_bench(tts, levels, rounds)
    measured = {name: measure_peer(load_peer(name), TEXTS) for name in filter(None, peers.split(","))}
    write_bench_report(runs, measured, invocation(ctx), out, describe_machine(), datetime.date.today().isoformat())
    typer.echo(out.read_text())


@voice_app.command("add")
@user_errors
def voice_add(
    name: str = typer.Argument(..., help="Voice name (letters, digits, '_', '-', '.'); 'default' is used "
                                         "when no voice is given."),
    reference: Path = typer.Argument(..., help="A clip of the voice: 1-15 s of speech, any format and rate."),
    model: Path = MODEL_OPTION,
    codec: Path = CODEC_OPTION,
):
    """Clone a voice from a reference clip once and store it by name with the model."""
    from gepard.api import TTS
    from gepard.lm.voices import save_voice

    with TTS.load(model, codec, slots=1) as tts:
        typer.echo(f"saved {save_voice(tts.model_dir, name, tts.voice(str(reference))[0])}")


@voice_app.command("list")
@user_errors
def voice_list(model: Path = MODEL_OPTION):
    """The named voices of a speech LM."""
    from gepard.lm.voices import list_voices
    from gepard.paths import models_dir

    typer.echo("\n".join(list_voices(model or models_dir() / "lm")) or "(no named voices)")


@data_app.command("prepare")
@user_errors
def data_prepare(
    source: str = typer.Argument(..., help="A manifest (.jsonl, LJSpeech folder) or a shared split name "
                                           "(codec_train, teacher_test, real_heldout, short_register)."),
    out: Path = typer.Argument(..., help="Shard folder (e.g. shards/train); an interrupted run resumes."),
    codec: Path = CODEC_OPTION,
    threads: int = typer.Option(2, help="CPU threads."),
):
    """Encode every utterance with the codec into token shards for LM training."""
    import torch

    from gepard.codec.files import load_codec
    from gepard.data.manifests import SHARED_SPLITS, read_manifest, shared_split
    from gepard.data.prepare import prepare_shards

    torch.set_num_threads(threads)
    utterances = shared_split(source) if source in SHARED_SPLITS else read_manifest(Path(source))
    prepare_shards(load_codec(codec), utterances, out)
    typer.echo(f"{len(utterances)} utterances -> {out}")


@data_app.command("synthesize")
@user_errors
def data_synthesize(
    out: Path = typer.Argument(..., help="Folder for the clips and manifest.jsonl; an interrupted run resumes."),
    texts: Path = typer.Option(None, help="Sentences, one per line (default: the shared pool's training "
                                          "sentences that no corpus voice speaks yet)."),
    voices: str = typer.Option("all", help="Comma-separated corpus teacher voices, used in turn, or 'all'."),
    limit: int = typer.Option(0, help="Speak only the first N sentences (0: all)."),
    jobs: int = typer.Option(2, help="Worker processes."),
):
    """Speak more training sentences in the corpus's teacher voices (piper, Kokoro, flite + sox)."""
    from gepard.data.synthesize import TEACHER_VOICES, synthesize, unspoken_sentences
    from gepard.paths import shared_data_dir

    if texts is None:
        data = shared_data_dir()
        if data is None:
            raise FileNotFoundError("no --texts given and the shared corpus is not here (set GEPARD_DATA)")
        sentences = unspoken_sentences(data)
    else:
        sentences = [line.strip() for line in texts.read_text(encoding="utf-8").splitlines() if line.strip()]
    sentences = sentences[:limit] if limit else sentences
    names = list(TEACHER_VOICES) if voices == "all" else [v.strip() for v in voices.split(",") if v.strip()]
    manifest = synthesize(sentences, names, out, jobs)
    typer.echo(f"{len(sentences)} sentences in {len(names)} voices -> {manifest}; "
               f"next: gepard data prepare {manifest} shards/NAME")


@data_app.command("sentences")
@user_errors
def data_sentences(
    out: Path = typer.Argument(..., help="Text file to write, one sentence per line."),
    count: int = typer.Option(10000, help="How many sentences."),
    seed: int = typer.Option(0, help="Random seed."),
    pool: bool = typer.Option(False, "--pool", help="Write the pool's own training texts instead (all of them, "
                              "1-2 word replies included: e.g. the prompts of gepard train dpo --texts)."),
):
    """New training sentences recombined from the shared pool's training text (never a held-out one)."""
    from gepard.data.sentences import markov_sentences, pool_sentences
    from gepard.paths import shared_data_dir

    data = shared_data_dir()
    if data is None:
        raise FileNotFoundError("the shared corpus is not here (set GEPARD_DATA)")
    training, held_out = pool_sentences(data)
    sentences = training if pool else markov_sentences(training, count, held_out, seed)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(sentences) + "\n", encoding="utf-8")
    typer.echo(f"{len(sentences)} sentences -> {out}; next: gepard data synthesize DIR --texts {out}")


@codec_app.command("encode")
@user_errors
def codec_encode(src: Path, dst: Path, codec: Path = CODEC_OPTION):
    """Audio file (any rate, any channels) -> codes as a .npy array (J,) of int64."""
    import numpy as np

    from gepard.codec.files import encode_file, load_codec

    model = load_codec(codec)
    codes = encode_file(model, src)
    if dst.suffix != ".npy":
        raise ValueError(f"{dst}: the codes file must end in .npy")
    dst.parent.mkdir(parents=True, exist_ok=True)
    np.save(dst, codes)
    typer.echo(f"{src} -> {dst}: {len(codes)} frames ({len(codes) / model.config.frame_rate:.2f} s)")


@codec_app.command("decode")
@user_errors
def codec_decode(src: Path, dst: Path, codec: Path = CODEC_OPTION):
    """Codes (.npy) -> 16 kHz mono audio file (.wav, .flac)."""
    import numpy as np

    from gepard.codec.files import decode_to_file, load_codec

    try:
        codes = np.load(src, allow_pickle=False)
    except Exception as e:
        raise ValueError(f"{src}: not a .npy codes file ({e})") from None
    model = load_codec(codec)
    n = decode_to_file(model, codes, dst)
    typer.echo(f"{src} -> {dst}: {n / model.config.sample_rate:.2f} s")


@codec_app.command("roundtrip")
@user_errors
def codec_roundtrip(src: Path, dst: Path, codec: Path = CODEC_OPTION):
    """Audio file -> codes -> 16 kHz mono audio file: hear what the codec keeps."""
    from gepard.codec.files import load_codec, roundtrip_file

    model = load_codec(codec)
    codes, n = roundtrip_file(model, src, dst)
    typer.echo(f"{src} -> {dst}: {n / model.config.sample_rate:.2f} s, {len(codes)} frames, "
               f"{model.bitrate / 1000:.2f} kbit/s")


@eval_app.command("codec")
@user_errors
def eval_codec_cmd(
    ctx: typer.Context,
    codec: Path = CODEC_OPTION,
    limit: int = typer.Option(0, help="Use only the first N utterances of each set (0 = all)."),
    threads: int = typer.Option(2, help="CPU threads for the ASR and the codec."),
    out: Path = typer.Option(Path("docs/results/codec.md"), help="Report path (.json and .png beside it)."),
    train_log: Path = typer.Option(None, help="The codec run's log.jsonl, for the training curve."),
):
    """WER, speaker similarity, DNSMOS, bitrate and speed of the codec on held-out speech."""
    from gepard.codec.files import load_codec
    from gepard.eval.codec_report import evaluate_codec, write_report

    results = evaluate_codec(load_codec(codec), limit=limit, threads=threads)
    write_report(results, invocation(ctx), out, train_log)
    typer.echo(out.read_text())


@eval_app.command("lm")
@user_errors
def eval_lm_cmd(
    ctx: typer.Context,
    model: Path = MODEL_OPTION,
    codec: Path = CODEC_OPTION,
    limit: int = typer.Option(0, help="Use only the first N utterances of each set (0 = all)."),
    threads: int = typer.Option(2, help="CPU threads."),
    out: Path = typer.Option(Path("docs/results/lm.md"), help="Report path (.json beside it)."),
    train_log: Path = typer.Option(None, help="The LM run's log.jsonl, for training facts."),
    engine: str = ENGINE_OPTION,
    voices: str = typer.Option("", help="Only these corpus voices, comma-separated (default: all): a model trained "
                               "on a few voices is measured on its own."),
    temperature: float = typer.Option(DEFAULT_TEMPERATURE, help="Sampling temperature (0 = greedy)."),
    top_p: float = typer.Option(DEFAULT_TOP_P, help="Nucleus sampling mass (1 = off)."),
    render: str = RENDER_OPTION,
):
    """WER, speaker similarity, short-register failure and runaway rates of the speech LM."""
    from gepard.api import TTS
    from gepard.engine.base import SamplingParams
    from gepard.eval.lm_report import evaluate_lm, write_report

    with TTS.load(model, codec, engine=engine, rendering=render) as tts:
        results = evaluate_lm(tts, limit=limit, threads=threads,
                              sampling=SamplingParams(temperature=temperature, top_p=top_p),
                              voices=[v for v in voices.split(",") if v] or None)
    write_report(results, invocation(ctx), out, train_log)
    typer.echo(out.read_text())


@eval_app.command("alignment")
@user_errors
def eval_alignment_cmd(
    ctx: typer.Context,
    models: list[Path] = typer.Option(None, "--model", help="Speech LM folders to compare (default: the shipped "
                                      "models/lm); repeat the flag for several."),
    codec: Path = CODEC_OPTION,
    limit: int = typer.Option(24, help="Held-out sentences per model."),
    train_shards: Path = typer.Option(Path("shards/train"), help="Training shards: the text gap on training utterances and the unigram NLL."),
    threads: int = typer.Option(2, help="CPU threads."),
    out: Path = typer.Option(Path("docs/results/alignment.md"), help="Report path (.json and .png beside it)."),
):
    """Does the LM read its text? Per layer and head, how its audio frames attend to the text."""
    import torch

    from gepard.codec.files import load_codec
    from gepard.eval.alignment_report import evaluate_alignment, write_alignment_report
    from gepard.lm.speech_lm import SpeechLM
    from gepard.paths import lm_dir

    torch.set_num_threads(threads)
    folders = [lm_dir(f) for f in models] if models else [lm_dir()]
    results = evaluate_alignment({os.path.relpath(f): SpeechLM.from_pretrained(f) for f in folders},
                                 load_codec(codec), limit, train_shards)
    write_alignment_report(results, invocation(ctx), out)
    typer.echo(out.read_text())


@eval_app.command("probes")
@user_errors
def eval_probes_cmd(
    ctx: typer.Context,
    model: Path = MODEL_OPTION,
    codec: Path = CODEC_OPTION,
    limit: int = typer.Option(0, help="Use only the first N items of each set (0 = all)."),
    rollouts: int = typer.Option(4, help="Seeds per item and mode (for min-WER)."),
    voices: str = typer.Option("", help="Only these corpus voices, comma-separated (default: all), as in eval lm."),
    threads: int = typer.Option(2, help="CPU threads."),
    out: Path = typer.Option(Path("docs/results/probes.md"), help="Report path (.json and .png beside it)."),
):
    """Short-register probes: per-frame entropy/NLL, onset entropy, min-WER, failure rate vs text budget."""
    from gepard.api import TTS
    from gepard.eval.probes import run_probes, write_probes_report

    with TTS.load(model, codec, slots=1) as tts:
        rows = run_probes(tts, limit, rollouts, threads, [v for v in voices.split(",") if v] or None)
    write_probes_report(rows, invocation(ctx), out)
    typer.echo(out.read_text())


@eval_app.command("dpo")
@user_errors
def eval_dpo_cmd(
    ctx: typer.Context,
    dpo_model: Path = typer.Option(Path("runs/dpo/export"), help="The DPO-tuned model (gepard train dpo)."),
    model: Path = MODEL_OPTION,
    codec: Path = CODEC_OPTION,
    limit: int = typer.Option(0, help="Use only the first N utterances of each set (0 = all)."),
    cfg_scale: float = typer.Option(3.0, help="Text CFG scale of the two-pass baseline."),
    cfg_frames: int = typer.Option(20, help="Frames the two-pass baseline guides."),
    voices: str = typer.Option("", help="Only these corpus voices, comma-separated (default: all), as in eval lm."),
    threads: int = typer.Option(2, help="CPU threads."),
    out: Path = typer.Option(Path("docs/results/dpo.md"), help="Report path (.json beside it)."),
):
    """Single-pass base vs two-pass CFG base vs single-pass DPO on held-out normal and short-register prompts."""
    from gepard.api import TTS
    from gepard.eval.dpo_report import configurations, write_dpo_report
    from gepard.eval.lm_report import evaluate_lm
    from gepard.paths import models_dir

    results = {}
    for name, folder, sampling in configurations(model or models_dir() / "lm", dpo_model, cfg_scale, cfg_frames):
        with TTS.load(folder, codec, slots=32) as tts:
            results[name] = evaluate_lm(tts, limit, threads, sampling, plain_short=False,
                                        voices=[v for v in voices.split(",") if v] or None)
    write_dpo_report(results, invocation(ctx), out, dpo_model.parent / "log.jsonl")
    typer.echo(out.read_text())


@eval_app.command("server")
@user_errors
def eval_server_cmd(
    ctx: typer.Context,
    model: Path = MODEL_OPTION,
    codec: Path = CODEC_OPTION,
    sessions: str = typer.Option("16,32", help="Comma-separated numbers of concurrent WebSocket sessions."),
    duration: float = typer.Option(120.0, help="Seconds each level runs."),
    words_per_s: float = typer.Option(15.0, help="Pace at which each session sends its words (LLM speed)."),
    engine: str = ENGINE_OPTION,
    trace_memory: bool = typer.Option(False, "--trace-memory", help="Also track Python's heap (tracemalloc) "
                                      "and report the allocation sites that grew most."),
    out: Path = typer.Option(Path("docs/results/server.md"), help="Report path (.json beside it)."),
):
    """Load test: concurrent LLM-paced WebSocket sessions against a local server -> TTFA, underruns, errors."""
    import datetime
    import tempfile

    import torch

    from gepard.api import TTS
    from gepard.engine.process import half_the_cores
    from gepard.eval.load import run_load, write_server_report
    from gepard.eval.machine import describe_machine
    from gepard.server.app import create_app
    from gepard.server.limits import Limits

    torch.set_num_threads(half_the_cores())  # as `gepard serve` runs
    levels = [int(n) for n in sessions.split(",")]
    with TTS.load(model, codec, slots=max(levels), engine=engine) as tts, tempfile.TemporaryDirectory() as data_dir:
        app = create_app(tts, Path(data_dir), Limits(max_streams=max(levels), max_queue=max(levels)))
        results = run_load(app, levels, duration, words_per_s, trace_memory=trace_memory)
    write_server_report(results, invocation(ctx), out, describe_machine(), datetime.date.today().isoformat(),
                        words_per_s)
    typer.echo(out.read_text())


@train_app.command("codec")
@user_errors
def train_codec_cmd(
    run_dir: str = typer.Option("runs/codec", help="Checkpoints and logs; an existing run resumes."),
    steps: int = typer.Option(4500, help="Total optimizer steps."),
    batch_size: int = typer.Option(16),
    lr: float = typer.Option(1e-3, help="Peak learning rate (lower it to fine-tune from --init)."),
    stride: int = typer.Option(4, help="STFT hops (10 ms) per codec frame: 4 = 25 Hz, 2 = 50 Hz."),
    threads: int = typer.Option(2, help="CPU threads."),
    stop_at: int = typer.Option(0, help="Stop early at this step (keeps the schedule of --steps)."),
    adversarial_from: int = typer.Option(-1, help="Add the multi-resolution discriminator from this step on."),
    phase_weight: float = typer.Option(0.0, help="Weight of the instantaneous-frequency/group-delay losses."),
    train: Path = typer.Option(None, help="Training manifest (.jsonl or LJSpeech folder); default: shared corpus."),
    val: Path = typer.Option(None, help="Validation manifest; default: the shared teacher test set."),
    freeze_encoder: bool = typer.Option(False, "--freeze-encoder", help="Train the decoder only (resuming a "
                                        "run): the codes stay the same, so token shards and a speech LM trained "
                                        "on them stay valid."),
    semantic_weight: float = typer.Option(0.0, help="Weight of the semantic loss: the codes predict Whisper "
                                          "tiny.en's encoder frame by frame (0: off)."),
    phone_weight: float = typer.Option(0.0, help="Weight of the phone loss: the codes name the flite phone of "
                                       "their frame (needs phone-track manifests, scripts/flite_track.py; 0: off)."),
    listener: Path = typer.Option(None, help="A phone listener (`gepard train listener`) whose beliefs about "
                                  "the resynthesis must match its beliefs about the original."),
    listener_weight: float = typer.Option(1.0, help="Weight of the listener's divergence (with --listener)."),
    whisper_weight: float = typer.Option(0.0, help="Weight of the Whisper ear: Whisper tiny.en's encoder must hear "
                                         "the resynthesis as it hears the original, layer by layer (0: off)."),
    levels: str = typer.Option("", help="FSQ levels per latent channel, e.g. 4,4,4,4,4,4 (codebook = their "
                               "product); default: the --init codec's, else the shipped grid."),
    init: Path = typer.Option(None, help="Start a new run from this saved codec's weights (e.g. with other "
                              "--levels); its architecture is kept."),
    frame_dim: int = typer.Option(0, help="Width of the layers at the frame rate, encoder and decoder (a new "
                                  "codec; 0: the default, 384)."),
    frame_depth: int = typer.Option(0, help="ConvNeXt blocks at the frame rate, each side (0: the default, 6)."),
    fine_dim: int = typer.Option(0, help="Width of the layers at the 10 ms STFT rate (0: the default, 256)."),
    fine_depth: int = typer.Option(0, help="ConvNeXt blocks at the 10 ms STFT rate, each side (0: the default, 4)."),
    lm_values: Path = typer.Option(None, help="Token shards of the --train clips (gepard data prepare with this "
                                   "codec): the decoder also learns to render the speech LM's teacher-forced beliefs "
                                   "about them, as `gepard say` gives them (needs --freeze-encoder)."),
    lm_model: Path = typer.Option(None, help="The speech LM for --lm-values (default: the shipped one)."),
    lm_share: float = typer.Option(0.5, min=0.0, max=1.0, help="Share of each batch decoded from the LM's beliefs."),
    export: str = typer.Option("", help="Also save the trained codec here (config.json + model.safetensors)."),
):
    """Train the FSQ codec (default data: the shared corpus's real + teacher speech, minus held-out speakers)."""
    from gepard.codec.files import load_codec
    from gepard.codec.model import CodecConfig
    from gepard.codec.train import SHARED_TRAINING_DATA, TrainConfig, train_codec
    from gepard.data.manifests import read_manifest, shared_split

    sizes = {k: v for k, v in (("frame_dim", frame_dim), ("frame_depth", frame_depth), ("fine_dim", fine_dim),
                                ("fine_depth", fine_depth)) if v}
    if init and sizes:
        raise ValueError("--init keeps the architecture of the codec it starts from: drop the size options")
    if any(v < 1 for v in sizes.values()):
        raise ValueError("the size options must be positive")
    codec = load_codec(init).config if init else CodecConfig(stride=stride, **sizes)
    if levels:
        if init and len(parse_levels(levels)) != len(codec.levels):
            raise ValueError(f"--init keeps the {len(codec.levels)} latent channels of the codec it starts from: "
                             f"--levels must name {len(codec.levels)} levels")
        codec.levels = parse_levels(levels)
    cfg = TrainConfig(run_dir=run_dir, steps=steps, batch_size=batch_size, lr=lr, threads=threads,
                      stop_at=stop_at or steps, adversarial_from=adversarial_from,
                      phase_weight=phase_weight, freeze_encoder=freeze_encoder,
                      semantic_weight=semantic_weight, phone_weight=phone_weight, init=str(init or ""), codec=codec,
                      listener=str(listener or ""), listener_weight=listener_weight, whisper_weight=whisper_weight,
                      lm_values=str(lm_values or ""), lm_model=str(lm_model or ""), lm_share=lm_share,
                      train_data=str(train) if train else SHARED_TRAINING_DATA)
    model = train_codec(cfg, read_manifest(train) if train else shared_split("codec_train"),
                        read_manifest(val) if val else shared_split("teacher_test"))
    if export:
        model.save_pretrained(export)
        typer.echo(f"saved {export}")


@train_app.command("listener")
@user_errors
def train_listener_cmd(
    train: Path = typer.Option(..., help="Phone-track training manifest (scripts/flite_track.py)."),
    val: Path = typer.Option(..., help="Phone-track validation manifest."),
    out: Path = typer.Option(Path("runs/listener"), help="Where the listener is saved."),
    steps: int = typer.Option(1500),
    batch_size: int = typer.Option(32),
    lr: float = typer.Option(1e-3, help="Peak learning rate (one-cycle schedule)."),
    threads: int = typer.Option(2, help="CPU threads."),
):
    """Train the phone listener that `gepard train codec --listener` uses as a perceptual loss."""
    import torch

    from gepard.codec.dataset import RandomCrops, build_audio_cache
    from gepard.codec.listener import ListenerConfig, train_listener
    from gepard.codec.phones import build_phone_cache, load_phones
    from gepard.data.manifests import read_manifest

    torch.set_num_threads(threads)
    frame_samples = ListenerConfig().frame_samples
    crops = []
    for seed, manifest in enumerate((train, val)):
        utts = read_manifest(manifest)
        folder = build_audio_cache(utts, ".cache")
        phones = load_phones(build_phone_cache(folder, utts, frame_samples))
        crops.append(RandomCrops(folder, 40 * frame_samples, seed=seed, frame_targets={"phones": phones}))
    result = train_listener(*crops, out, steps=steps, batch_size=batch_size, lr=lr)
    typer.echo(f"saved {out}: held-out phone accuracy {100 * result['val_accuracy']:.1f} %, "
               f"loss {result['val_loss']:.3f}")


@train_app.command("lm")
@user_errors
def train_lm_cmd(
    run_dir: str = typer.Option("runs/lm", help="Checkpoints, log and loss plot; an existing run resumes."),
    shards: list[str] = typer.Option(["shards/train"], help="Token shard folders (gepard data prepare)."),
    steps: int = typer.Option(3000),
    batch_frames: int = typer.Option(2048, help="Audio frames per batch and process (sets the batch size)."),
    hidden: int = typer.Option(256, help="LM width (a multiple of 64)."),
    layers: int = typer.Option(6, help="LM transformer layers."),
    lr: float = typer.Option(2e-3, help="Peak learning rate."),
    threads: int = typer.Option(2, help="CPU threads per process."),
    align_weight: float = typer.Option(1.0, help="Weight of the guided-alignment loss (0: off)."),
    align_layer: int = typer.Option(2, help="The layer whose first heads learn to read the text."),
    align_heads: int = typer.Option(2, help="How many of that layer's query heads are guided."),
    align_sigma: float = typer.Option(0.2, help="Width of the guided diagonal, as a share of the utterance."),
    align_frames: bool = typer.Option(False, help="The text is a frame-level track (one token per audio frame, "
                                      "padded): frame j is guided to token j, not along the whole text."),
    dropout: float = typer.Option(0.1, help="Dropout on each layer's attention and MLP output (training only)."),
    corrupt: float = typer.Option(0.1, help="Share of audio input tokens replaced by random codes (training only)."),
    text_dropout: float = typer.Option(0.0, help="Share of training rows that read the null text instead of their "
                                                 "own, so two-pass text CFG has a trained unconditional branch."),
    val_shards: list[str] = typer.Option([], help="Held-out token shards, whose NLL is logged every --val-every "
                                                  "steps."),
    supcon: float = typer.Option(0.0, help="Weight of the SupCon loss on voice prefixes (same speaker together)."),
    diversity: float = typer.Option(0.0, help="Weight of the loss keeping a prefix's K vectors apart."),
    text_vocab: int = typer.Option(512, help="Text tokens (byte-level BPE; 256 is one token per byte)."),
    text_front_end: str = typer.Option("text", help="What the tokenizer reads: 'text' as written, 'ipa' "
                                                    "(US English IPA from gruut), or 'track' (one phone per frame in "
                                                    "flite's timing; shards from scripts/flite_track.py); "
                                                    "lm/frontend.py."),
    init: str = typer.Option("", help="Start a new run from this model's weights (the tokenizer may differ)."),
    export: str = typer.Option("", help="Also save the trained model here as a release (bf16)."),
    best_export: str = typer.Option("", help="Save a release (bf16) here whenever the held-out NLL reaches a new "
                                             "low (needs --val-shards)."),
    val_every: int = typer.Option(100, help="Steps between held-out NLL measurements."),
    checkpoint_every: int = typer.Option(100, help="Steps between resumable training checkpoints."),
):
    """Train the speech LM (under `torchrun --nproc_per_node N` it trains data-parallel)."""
    from gepard.lm.alignment import AlignmentConfig
    from gepard.lm.frontend import check_front_end
    from gepard.lm.model import LMConfig
    from gepard.lm.train import LMTrainConfig, train_lm

    heads = hidden // 64
    lm = LMConfig(hidden_size=hidden, layers=layers, heads=heads, kv_heads=max(1, heads // 2),
                  intermediate_size=3 * hidden)
    model = train_lm(LMTrainConfig(run_dir=run_dir, shards=shards, steps=steps, batch_frames=batch_frames,
                                   lr=lr, threads=threads, lm=lm, dropout=dropout, corrupt=corrupt,
                                   text_dropout=text_dropout,
                                   val_shards=val_shards, text_vocab=text_vocab, init=init,
                                   best_export=best_export, val_every=val_every, checkpoint_every=checkpoint_every,
                                   text_front_end=check_front_end(text_front_end), supcon=supcon,
                                   diversity=diversity,
                                   alignment=AlignmentConfig(align_weight, align_layer, align_heads, align_sigma,
                                                             align_frames)))
    if export and int(os.environ.get("RANK", "0")) == 0:
        model.save_pretrained(export)
        typer.echo(f"saved {export}")


@train_app.command("dpo")
@user_errors
def train_dpo_cmd(
    run_dir: str = typer.Option("runs/dpo", help="Prompts, scored rollouts, pairs, checkpoints; a run resumes."),
    model: str = typer.Option("models/lm", help="The model to improve (also the frozen DPO reference)."),
    codec: str = typer.Option(None, help="The codec the model speaks (default: the shipped models/codec)."),
    shards: list[str] = typer.Option(["shards/train"], help="Token shards the prompts (and their voices) come from."),
    texts: str = typer.Option(None, help="One prompt text per line, each given a voice of the shards "
                                        "(needed for a phone-track model, whose shards hold tracks)."),
    prompts: int = typer.Option(200, help="Prompts to roll out."),
    short_share: float = typer.Option(0.6, min=0.0, max=1.0, help="Share of the prompts that are short (at most 3 "
                                                                  "words): the short register."),
    samples: int = typer.Option(4, help="Rollouts per prompt with single-pass and again with two-pass CFG."),
    steps: int = typer.Option(200, help="DPO optimizer steps."),
    lr: float = typer.Option(1e-5),
    beta: float = typer.Option(2.0, help="DPO beta (on length-normalized log-probs)."),
    nll_weight: float = typer.Option(0.0, help="Add this times the chosen rollouts' NLL to the loss (RPO)."),
    threads: int = typer.Option(2, help="CPU threads."),
    seed: int = typer.Option(0, help="Picks the prompts, their voices and references (a new round: a new seed)."),
):
    """Distil two-pass text CFG into single-pass weights: rollouts, rewards, pairs, DPO -> RUN_DIR/export."""
    from gepard.dpo.pipeline import DPOConfig, train_dpo

    export = train_dpo(DPOConfig(run_dir=run_dir, model=model, codec=codec, shards=shards, texts=texts,
                                 prompts=prompts, short_share=short_share, samples=samples, steps=steps, lr=lr,
                                 beta=beta, nll_weight=nll_weight, threads=threads, seed=seed))
    typer.echo(f"saved {export}")


if __name__ == "__main__":
    app()
