"""Check isolab's FLOP formulas against `torch.utils.flop_counter.FlopCounterMode`.

Every compute component of a GRPO step is measured around the real call and compared with
`isolab.compute.flops` / `isolab.compute.ledger`:

- search: `model.generate(...)` with KV cache, sampled, exactly `c` new tokens;
- learning: TRL's own `GRPOTrainer._get_per_token_logps_and_entropies` (fused LM head,
  completion positions scored) + a GRPO-style loss, then `backward()`, one per update pass;
  the reference forward (β > 0: a separate model, or LoRA adapters disabled) and the
  old-policy forward (num_iterations > 1), both without grad;
- reward: a `*ForSequenceClassification` forward over prompt + completion.

Architectures (random weights, eager attention: `FlopCounterMode` does not see CPU SDPA):

- `tiny-llama`: isolab's `tiny-m` shape, full multi-head attention;
- `smollm2-135m`: SmolLM2-135M's exact shape (30 layers, hidden 576, 9 heads / 3 KV heads,
  head dim 64, intermediate 1536, vocab 49152, tied embeddings), grouped-query attention;
- `qwen2.5-0.5b/4L`: Qwen2.5-0.5B's block (hidden 896, 14 heads / 2 KV heads, head dim 64,
  intermediate 4864, q/k/v biases, tied embeddings) with 4 of its 24 layers and a 32k vocab
  (shrunk for CPU speed; the shape class — GQA 7:1, head dim 64, qkv bias, tying — is kept);
- `qwen1.5-moe-a2.7b/2L`: Qwen1.5-MoE-A2.7B's sparse block (hidden 2048, 16 heads, head dim
  128, q/k/v biases, experts of width 1408 with top-4 routing, a shared expert of width 5632
  and its sigmoid gate) with 2 of its 24 layers, 8 of its 60 experts and a 32k vocab;
- `mixtral-8x7b/2L`: Mixtral-8x7B's block at a quarter width (hidden 1024, intermediate 3584,
  8 heads / 2 KV heads, head dim 128, 8 experts, top-2, no shared expert), 2 of 32 layers.
- the other dense families at their real block shapes, 2 layers and a vocabulary cut to 32k:
  `mistral-7b/2L@¼` (a quarter of Mistral-7B's width, GQA 4:1, head dim 128), `qwen3-0.6b/2L`
  (q/k norms, head dim 128 ≠ hidden/heads), `gemma2-2b/2L` (head dim 256, softcapped logits,
  sandwich norms), `phi3-mini/2L` (fused qkv and gate-up projections), `olmo2-1b/2L` (q/k norms,
  post-norms), `pythia-410m/2L` (GPT-NeoX: parallel attention and MLP, partial rotary, plain
  MLP) and `granite-3-2b/2L` (its four multipliers; no sequence-classification head, so no
  reward-model row). Phi3's and GPT-NeoX's LoRA rows adapt o/down and the MLP projections:
  adapters on a fused projection are not counted (`lora_targets` refuses them by name).

Mixtures of experts run transformers 5's default experts implementation, `grouped_mm`, as
isolab's models do. Each is run with full fine-tuning and LoRA (r = 8 on q, k, v, o), for a step with β = 0 and
one update pass, and a step with β = 0.04 and num_iterations = 2. Rollouts have several prompt
and completion lengths; each (prompt, completion) bucket is its own unpadded batch, so the
per-sequence lengths given to the formulas are exactly what runs. Two extra rows per model:
the update with TRL's CUDA head path (only completion positions projected; forced on CPU) and
with gradient checkpointing (hardware FLOPs).

`FlopCounterMode` misses in-place `addmm_`, which TRL's fused LM-head backward uses to
accumulate its gradient GEMMs (everywhere but CUDA bf16/fp16); the count below registers it
like `addmm`. It has no formula for `aten._grouped_mm` (the `grouped_mm` experts, forward and
both gradients) either; one is registered too. `tests/test_flops.py` runs the same comparison
on tiny models, with LoRA on q,k,v,o, on q,v only (PEFT's Llama default) and on all linear
layers (dense models only), and `tests/test_flops_families.py` on twelve families.

Run: `.venv/bin/python benchmarks/flops_accuracy.py [--arch tiny-llama ...]` (≈ 25 min on a
loaded 2-core machine for all twelve; the largest, Gemma2 and Phi3, take 3–4 min each).
"""

from __future__ import annotations

import argparse
import contextlib
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import SimpleNamespace

import torch
import trl.trainer.utils as trl_utils
from torch.utils.flop_counter import FlopCounterMode

from isolab.compute.flops import forward_flops, generation_flops, reward_model_flops, training_flops
from isolab.compute.ledger import FlopLedger

TOLERANCE = 0.02
PAD, EOS = 0, 1


def _addmm_flop(self_shape, a_shape, b_shape, *args, out_shape=None, **kwargs) -> int:
    return 2 * a_shape[0] * a_shape[1] * b_shape[1]


def _grouped_mm_flop(a_shape, b_shape, *args, out_shape=None, **kwargs) -> int:
    """`aten._grouped_mm`, transformers' `grouped_mm` experts: `2·M·K·N` summed over groups.

    Offsets split one operand's rows (2D × 3D forward, 3D × 2D) or the shared dimension (2D × 2D,
    the weight gradient) among the experts; every row lies in some group (no expert-parallel
    sentinels here), so the groups together cost one product of the full 2D operand.
    """
    if len(a_shape) == 2 and len(b_shape) == 2:
        return 2 * a_shape[0] * a_shape[1] * b_shape[1]
    return 2 * math.prod(out_shape) * a_shape[-1]


FLOP_FORMULAS_MISSING = {
    torch.ops.aten.addmm_: _addmm_flop,
    torch.ops.aten._grouped_mm: _grouped_mm_flop,
}


def count_flops(fn: Callable[[], object]) -> tuple[int, object]:
    """Run `fn` under `FlopCounterMode` (plus in-place addmm, grouped mm); return (FLOPs, result)."""
    with FlopCounterMode(display=False, custom_mapping=FLOP_FORMULAS_MISSING) as counter:
        out = fn()
    return counter.get_total_flops(), out


# ---- architectures --------------------------------------------------------------------------
def arch_configs() -> dict[str, object]:
    from transformers import (
        Gemma2Config,
        GPTNeoXConfig,
        GraniteConfig,
        LlamaConfig,
        MistralConfig,
        MixtralConfig,
        Olmo2Config,
        Phi3Config,
        Qwen2Config,
        Qwen2MoeConfig,
        Qwen3Config,
    )

    common = dict(
        pad_token_id=PAD,
        eos_token_id=EOS,
        bos_token_id=2,
        max_position_embeddings=512,
        num_labels=1,
    )
    return {
        "tiny-llama": LlamaConfig(
            hidden_size=128,
            intermediate_size=512,
            num_hidden_layers=4,
            num_attention_heads=4,
            num_key_value_heads=4,
            vocab_size=32,
            tie_word_embeddings=False,
            **common,
        ),
        "smollm2-135m": LlamaConfig(
            hidden_size=576,
            intermediate_size=1536,
            num_hidden_layers=30,
            num_attention_heads=9,
            num_key_value_heads=3,
            vocab_size=49152,
            tie_word_embeddings=True,
            **common,
        ),
        "qwen2.5-0.5b/4L": Qwen2Config(
            hidden_size=896,
            intermediate_size=4864,
            num_hidden_layers=4,
            num_attention_heads=14,
            num_key_value_heads=2,
            vocab_size=32768,
            tie_word_embeddings=True,
            **common,
        ),
        # The other dense families, each at its real block shape (2 layers, vocab cut to 32k):
        "mistral-7b/2L@¼": MistralConfig(  # a quarter of the width, heads and ratios kept
            hidden_size=1024,
            intermediate_size=3584,
            num_hidden_layers=2,
            num_attention_heads=8,
            num_key_value_heads=2,
            head_dim=128,
            sliding_window=4096,
            vocab_size=32000,
            tie_word_embeddings=False,
            **common,
        ),
        "qwen3-0.6b/2L": Qwen3Config(
            hidden_size=1024,
            intermediate_size=3072,
            num_hidden_layers=2,
            num_attention_heads=16,
            num_key_value_heads=8,
            head_dim=128,
            vocab_size=32768,
            tie_word_embeddings=True,
            **common,
        ),
        "gemma2-2b/2L": Gemma2Config(
            hidden_size=2304,
            intermediate_size=9216,
            num_hidden_layers=2,
            num_attention_heads=8,
            num_key_value_heads=4,
            head_dim=256,
            query_pre_attn_scalar=256,
            sliding_window=4096,
            vocab_size=32768,
            **common,
        ),
        "phi3-mini/2L": Phi3Config(
            hidden_size=3072,
            intermediate_size=8192,
            num_hidden_layers=2,
            num_attention_heads=32,
            num_key_value_heads=32,
            vocab_size=32064,
            **common,
        ),
        "olmo2-1b/2L": Olmo2Config(
            hidden_size=2048,
            intermediate_size=8192,
            num_hidden_layers=2,
            num_attention_heads=16,
            num_key_value_heads=16,
            vocab_size=32768,
            **common,
        ),
        "pythia-410m/2L": GPTNeoXConfig(
            hidden_size=1024,
            intermediate_size=4096,
            num_hidden_layers=2,
            num_attention_heads=16,
            rotary_pct=0.25,
            vocab_size=32768,
            **common,
        ),
        "granite-3-2b/2L": GraniteConfig(
            hidden_size=2048,
            intermediate_size=8192,
            num_hidden_layers=2,
            num_attention_heads=32,
            num_key_value_heads=8,
            embedding_multiplier=12.0,
            residual_multiplier=0.22,
            attention_multiplier=0.015625,
            logits_scaling=8.0,
            vocab_size=32768,
            tie_word_embeddings=True,
            **common,
        ),
        "qwen1.5-moe-a2.7b/2L": Qwen2MoeConfig(
            hidden_size=2048,
            intermediate_size=5632,
            moe_intermediate_size=1408,
            shared_expert_intermediate_size=5632,
            num_experts=8,
            num_experts_per_tok=4,
            num_hidden_layers=2,
            num_attention_heads=16,
            num_key_value_heads=16,
            vocab_size=32768,
            tie_word_embeddings=False,
            **common,
        ),
        "mixtral-8x7b/2L": MixtralConfig(
            hidden_size=1024,
            intermediate_size=3584,
            num_local_experts=8,
            num_experts_per_tok=2,
            num_hidden_layers=2,
            num_attention_heads=8,
            num_key_value_heads=2,
            vocab_size=32000,
            tie_word_embeddings=False,
            **common,
        ),
    }


ATTENTION_PROJECTIONS = ("q_proj", "k_proj", "v_proj", "o_proj")
# Fused attention projections (Phi3's `qkv_proj`, GPT-NeoX's `query_key_value`) are not counted
# as LoRA targets (`isolab.compute.shapes.lora_targets` refuses them by name); these families'
# LoRA rows adapt their MLP projections instead.
LORA_TARGETS = {
    "phi3-mini/2L": ("o_proj", "down_proj"),
    "pythia-410m/2L": ("dense_h_to_4h", "dense_4h_to_h"),
}
# (prompt length, completion length, rollouts): several lengths, one unpadded batch each.
DEFAULT_BUCKETS = ((7, 5, 3), (12, 9, 2), (4, 14, 1))


def build_policy(config, lora_rank: int = 0, lora_targets=ATTENTION_PROJECTIONS):
    """The policy as TRL holds it: eager attention, fused LM head, PEFT wrapper when LoRA."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, attn_implementation="eager")
    trl_utils.add_fused_lm_head(model, outputs=("log_probs", "entropy"))
    lora = None
    if lora_rank:
        lora = LoraConfig(
            r=lora_rank,
            lora_alpha=2 * lora_rank,
            lora_dropout=0.0,
            target_modules=list(lora_targets)
            if not isinstance(lora_targets, str)
            else lora_targets,
        )
        model = get_peft_model(model, lora)
    return model, lora


def build_reference(config):
    """A separate reference model (full fine-tuning), fused head as TRL patches it."""
    from transformers import AutoModelForCausalLM

    ref = AutoModelForCausalLM.from_config(config, attn_implementation="eager").eval()
    trl_utils.add_fused_lm_head(ref)
    return ref


def build_reward_model(config):
    """The family's `*ForSequenceClassification`, or None where it has none (Granite)."""
    from transformers import AutoModelForSequenceClassification

    try:
        model = AutoModelForSequenceClassification.from_config(config, attn_implementation="eager")
    except ValueError:
        return None
    return model.eval()


# ---- the real calls ---------------------------------------------------------------------------
_TRL_SELF = SimpleNamespace(
    accelerator=SimpleNamespace(autocast=contextlib.nullcontext, is_main_process=True)
)


@contextlib.contextmanager
def trl_head_path(compact: bool) -> Iterator[None]:
    """Force TRL's fused head to project only completion positions (its CUDA path) or all."""
    original = trl_utils._use_triton
    trl_utils._use_triton = lambda device: compact
    try:
        yield
    finally:
        trl_utils._use_triton = original


def _batch(vocab: int, p: int, c: int, rows: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(3, vocab, (rows, p + c), generator=g)


def _logps(model, ids: torch.Tensor, completion_len: int, compute_entropy: bool):
    from trl import GRPOTrainer

    mask = torch.ones_like(ids)
    return GRPOTrainer._get_per_token_logps_and_entropies(
        _TRL_SELF, model, ids, mask, completion_len, compute_entropy=compute_entropy
    )


def measure_generation(model, vocab: int, buckets) -> int:
    total = 0
    model.eval()
    for i, (p, c, rows) in enumerate(buckets):
        prompt = _batch(vocab, p, 0, rows, seed=i)

        def run(prompt=prompt, c=c):
            with torch.no_grad():
                return model.generate(
                    input_ids=prompt,
                    attention_mask=torch.ones_like(prompt),
                    do_sample=True,
                    max_new_tokens=c,
                    min_new_tokens=c,
                    pad_token_id=PAD,
                    eos_token_id=EOS,
                )

        flops, out = count_flops(run)
        if out.shape[1] != p + c:
            raise RuntimeError(f"generate produced {out.shape[1] - p} tokens, expected {c}")
        total += flops
    return total


def measure_update(model, vocab: int, buckets) -> int:
    """One GRPO update pass: TRL's log-prob forward with entropy, a clipped-ratio loss, backward."""
    total = 0
    model.train()
    for i, (p, c, rows) in enumerate(buckets):
        ids = _batch(vocab, p, c, rows, seed=100 + i)
        fwd, (logps, entropy, _) = count_flops(lambda ids=ids, c=c: _logps(model, ids, c, True))
        advantages = torch.randn(rows, 1)
        ratio = torch.exp(logps - logps.detach())
        loss = (
            -(torch.min(ratio * advantages, ratio.clamp(0.8, 1.2) * advantages)).mean()
            - 0.005 * entropy.mean()
        )
        bwd, _ = count_flops(loss.backward)
        model.zero_grad(set_to_none=True)
        total += fwd + bwd
    return total


def measure_logprob_forward(model, vocab: int, buckets, disable_adapters: bool = False) -> int:
    total = 0
    model.eval()
    for i, (p, c, rows) in enumerate(buckets):
        ids = _batch(vocab, p, c, rows, seed=200 + i)
        ctx = model.disable_adapter() if disable_adapters else contextlib.nullcontext()
        with torch.no_grad(), ctx:
            flops, _ = count_flops(lambda ids=ids, c=c: _logps(model, ids, c, False))
        total += flops
    return total


def measure_reward(reward_model, vocab: int, buckets) -> int:
    total = 0
    for i, (p, c, rows) in enumerate(buckets):
        ids = _batch(vocab, p, c, rows, seed=300 + i)
        with torch.no_grad():
            flops, _ = count_flops(
                lambda ids=ids: reward_model(input_ids=ids, attention_mask=torch.ones_like(ids))
            )
        total += flops
    return total


@contextlib.contextmanager
def gradient_checkpointing(model, is_peft: bool) -> Iterator[None]:
    """Transformers' per-block checkpointing (non-reentrant, its default), as TRL enables it.

    TRL calls `enable_input_require_grads()` on a PEFT model; transformers' own enable does it
    too for `input_ids` models. The model should not be reused afterwards.
    """
    if hasattr(model, "activation_checkpointing_enable"):  # transformers ≥ 5 name
        model.activation_checkpointing_enable(
            activation_checkpointing_kwargs={"use_reentrant": False}
        )
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    if is_peft:
        model.enable_input_require_grads()
    try:
        yield
    finally:
        if hasattr(model, "activation_checkpointing_disable"):
            model.activation_checkpointing_disable()
        else:
            model.gradient_checkpointing_disable()


# ---- comparison -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Row:
    arch: str
    mode: str
    scenario: str
    component: str
    formula: float
    measured: float

    @property
    def rel_err(self) -> float:
        return (
            abs(self.formula - self.measured) / self.measured
            if self.measured
            else float(self.formula != 0)
        )


def lengths(buckets):
    prompts = [p for p, _, rows in buckets for _ in range(rows)]
    completions = [c for _, c, rows in buckets for _ in range(rows)]
    return prompts, completions


def compare_arch(
    arch: str,
    config,
    lora_rank: int,
    buckets=DEFAULT_BUCKETS,
    steps=((0.0, 1), (0.04, 2)),
    lora_targets=ATTENTION_PROJECTIONS,
) -> list[Row]:
    """Measure every component for one architecture and mode and compare with the formulas."""
    mode = f"lora-r{lora_rank}" if lora_rank else "full"
    if lora_rank and tuple(lora_targets) != ATTENTION_PROJECTIONS:
        mode += "-" + (
            lora_targets if isinstance(lora_targets, str) else "".join(t[0] for t in lora_targets)
        )
    vocab = config.vocab_size
    model, lora = build_policy(config, lora_rank, lora_targets)
    reward_model = build_reward_model(config)
    prompts, completions = lengths(buckets)
    seqs = [p + c for p, c in zip(prompts, completions, strict=True)]
    cpu_logits = [
        s - 1 for s in seqs
    ]  # TRL's fused head off CUDA: every position of the row but the last

    with trl_head_path(compact=False):
        measured = {
            "search": measure_generation(model, vocab, buckets),
            "update": measure_update(model, vocab, buckets),
            "old": measure_logprob_forward(model, vocab, buckets),
        }
        if reward_model is not None:
            measured["reward"] = measure_reward(reward_model, vocab, buckets)
        if lora is None:
            measured["ref"] = measure_logprob_forward(build_reference(config), vocab, buckets)
        else:
            measured["ref"] = measure_logprob_forward(model, vocab, buckets, disable_adapters=True)
    with trl_head_path(compact=True):
        update_compact = measure_update(model, vocab, buckets)
    # Last: transformers leaves the input-grad hook on a PEFT-wrapped model after disabling.
    with trl_head_path(compact=False), gradient_checkpointing(model, lora is not None):
        update_gc = measure_update(model, vocab, buckets)

    rows = [
        Row(
            arch,
            mode,
            "component",
            "search: generate",
            generation_flops(config, prompts, completions, lora),
            measured["search"],
        ),
        Row(
            arch,
            mode,
            "component",
            "update: fwd+bwd",
            training_flops(config, seqs, cpu_logits, lora),
            measured["update"],
        ),
        Row(
            arch,
            mode,
            "component",
            "update: CUDA head",
            training_flops(config, seqs, completions, lora),
            update_compact,
        ),
        Row(
            arch,
            mode,
            "component",
            "update: grad ckpt (hw)",
            training_flops(config, seqs, cpu_logits, lora, gradient_checkpointing=True),
            update_gc,
        ),
        Row(
            arch,
            mode,
            "component",
            "reference fwd",
            forward_flops(config, seqs, cpu_logits),
            measured["ref"],
        ),
        Row(
            arch,
            mode,
            "component",
            "old-policy fwd",
            forward_flops(config, seqs, cpu_logits, lora),
            measured["old"],
        ),
    ]
    if reward_model is not None:
        rows.append(
            Row(
                arch,
                mode,
                "component",
                "reward model fwd",
                reward_model_flops(config, seqs),
                measured["reward"],
            )
        )
    # Whole steps through the ledger: learning = passes·update + [β > 0] ref + [passes > 1] old.
    for beta, passes in steps:
        ledger = FlopLedger(
            config, lora=lora, reward_model_config=config if reward_model is not None else None
        )
        ledger.record_generation(prompts, completions)
        if reward_model is not None:
            ledger.record_reward_model(seqs)
        if passes > 1:
            ledger.record_old_policy_forward(seqs, cpu_logits)
        if beta > 0:
            ledger.record_reference_forward(seqs, cpu_logits)
        ledger.record_policy_update(seqs, cpu_logits, passes=passes)
        step = ledger.end_step(rollouts=len(seqs))
        learning = (
            passes * measured["update"]
            + (beta > 0) * measured["ref"]
            + (passes > 1) * measured["old"]
        )
        scenario = f"β={beta:g}, μ={passes}"
        actual = {
            "search": measured["search"],
            "learning": learning,
            "reward": measured.get("reward", 0),
        }
        actual["total"] = sum(actual.values())
        rows += [
            Row(arch, mode, scenario, f"ledger {k}", step[f"flops_step/{k}"], v)
            for k, v in actual.items()
        ]
    return rows


def format_table(rows: list[Row]) -> str:
    head = f"{'arch':<20} {'mode':<8} {'step':<14} {'component':<24} {'formula':>12} {'measured':>12} {'rel.err':>9}"
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(
            f"{r.arch:<20} {r.mode:<8} {r.scenario:<14} {r.component:<24} "
            f"{r.formula:>12.4e} {r.measured:>12.4e} {r.rel_err:>9.2e}"
        )
    return "\n".join(lines)


def format_summary(rows: list[Row]) -> str:
    archs = list(dict.fromkeys(r.arch for r in rows))
    components = list(dict.fromkeys(r.component for r in rows))
    head = f"{'max rel. error':<24}" + "".join(f"{a:>22}" for a in archs)
    lines = [head, "-" * len(head)]
    for comp in components:
        cells = []
        for a in archs:
            errs = [r.rel_err for r in rows if r.arch == a and r.component == comp]
            cells.append(f"{max(errs):>22.2e}" if errs else f"{'-':>22}")
        lines.append(f"{comp:<24}" + "".join(cells))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    configs = arch_configs()
    parser.add_argument("--arch", nargs="*", default=list(configs), choices=list(configs))
    parser.add_argument("--lora-rank", type=int, default=8)
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch CPU threads (1 avoids contention on shared cores)",
    )
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    rows: list[Row] = []
    for arch in args.arch:
        for rank in (0, args.lora_rank):
            t0 = time.perf_counter()
            targets = LORA_TARGETS.get(arch, ATTENTION_PROJECTIONS)
            rows += compare_arch(arch, configs[arch], rank, lora_targets=targets)
            print(
                f"# {arch} {'lora' if rank else 'full'}: {time.perf_counter() - t0:.1f} s",
                flush=True,
            )
    print(format_table(rows))
    print()
    print(format_summary(rows))
    worst = max(rows, key=lambda r: r.rel_err)
    verdict = "PASS" if worst.rel_err <= TOLERANCE else "FAIL"
    print(
        f"\n{verdict}: worst {worst.rel_err:.2e} ({worst.arch} {worst.mode} {worst.component}), tolerance {TOLERANCE:.0%}"
    )
    if verdict == "FAIL":
        raise SystemExit(1)


if __name__ == "__main__":
    main()
