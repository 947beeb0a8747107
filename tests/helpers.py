"""Helpers the tests share (not part of isolab): a tiny Llama config, a real `mlflow server`
on loopback. Fixtures are in conftest.py; these are plain functions, for module-level constants
and parametrize lists, which cannot take a fixture."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path


def tiny_llama(**overrides):
    """A `transformers.LlamaConfig` small enough for FLOP counts in milliseconds: 2 layers,
    hidden 64, MLP 256, 4 heads (full multi-head attention), a 32-token vocabulary; any field
    can be overridden (`tiny_llama(hidden_size=96, num_labels=1)` for a reward model)."""
    from transformers import LlamaConfig  # seconds to import: only the tests that build one

    fields = dict(
        hidden_size=64,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=4,
        vocab_size=32,
    )
    return LlamaConfig(**{**fields, **overrides})


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def mlflow_server(
    backend_store_uri: str,
    artifacts_dir: str | Path,
    port: int | None = None,
    log_file: str | Path | None = None,
    timeout_s: float = 180.0,
) -> Iterator[str]:
    """Start `mlflow server` on 127.0.0.1 in front of a store; yields its tracking URI.

    Use it for stores that several machines share (PostgreSQL); the server proxies artifacts
    into `artifacts_dir`. The server is stopped when the block exits.
    """
    port = port or free_port()
    cmd = [
        sys.executable,
        "-m",
        "mlflow",
        "server",
        "--backend-store-uri",
        backend_store_uri,
        "--artifacts-destination",
        Path(artifacts_dir).resolve().as_uri(),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--workers",
        "1",
    ]
    out = open(log_file, "ab") if log_file else subprocess.DEVNULL  # noqa: SIM115
    # MLflow's job runner (a huey consumer per job type, each importing MLflow: ~25 s of CPU at
    # every start) serves GenAI features that isolab's stores never use
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    proc = subprocess.Popen(
        cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, env=env
    )
    uri = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"mlflow server exited with code {proc.returncode}: {cmd}")
            try:
                with urllib.request.urlopen(f"{uri}/health", timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"mlflow server did not answer on {uri} in {timeout_s:.0f} s")
            time.sleep(0.5)
        yield uri
    finally:
        stop_group(proc, timeout_s=5)
        if log_file:
            out.close()


CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def isolab_cmd() -> list[str]:
    """The `isolab` console script of this environment (`[project.scripts]`)."""
    script = Path(sys.executable).parent / "isolab"
    if script.is_file():
        return [str(script)]
    return [sys.executable, "-c", "from isolab.cli import main; main()"]


def stop_group(proc: subprocess.Popen, timeout_s: float) -> None:
    """SIGTERM to `proc`'s process group (started with `start_new_session`), SIGKILL after
    `timeout_s`; a group already gone is fine."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def tiny_chat_model(folder: Path, reward_model: bool = False) -> Path:
    """A local instruct-model folder small enough to train in seconds: a random 2-layer Llama
    (hidden 32) over a character-level tokenizer of printable ASCII with a ChatML template, as
    a user's own model folder would be (`model: <folder>`); with `reward_model`, the same as a
    one-logit sequence classifier (`extra: {reward_model: <folder>}`). Returns the folder."""
    import string

    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    specials = ["<pad>", "<|im_start|>", "<|im_end|>"]
    chars = sorted(set(string.printable) - set("\x0b\x0c\r"))
    vocab = {t: i for i, t in enumerate([*specials, *chars, "<unk>"])}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    tok.decoder = decoders.Fuse()
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token="<pad>",
        eos_token="<|im_end|>",
        bos_token="<|im_start|>",
        unk_token="<unk>",
        additional_special_tokens=specials[1:],
    )
    fast.chat_template = CHAT_TEMPLATE
    config = LlamaConfig(
        vocab_size=len(vocab),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        max_position_embeddings=1024,
        pad_token_id=vocab["<pad>"],
        eos_token_id=vocab["<|im_end|>"],
        bos_token_id=vocab["<|im_start|>"],
        tie_word_embeddings=True,
    )
    import torch

    torch.manual_seed(0)
    if reward_model:
        from transformers import LlamaForSequenceClassification

        config.num_labels = 1
        LlamaForSequenceClassification(config).save_pretrained(folder)
    else:
        LlamaForCausalLM(config).save_pretrained(folder)
    fast.save_pretrained(folder)
    return folder


def rung(means: dict[int, float], C: float = 1024.0, sd: float = 0.01):
    """An adaptive sweep's rung: three seeds per arm (n = key, B_p = 16) at one checkpoint `C`,
    spread ±sd around the arm's mean avg@4 (tests/test_adaptive*.py)."""
    import polars as pl

    from isolab.vocab import EVAL_AVG, ROLLOUTS, RUN_KEY

    rows = [
        {
            RUN_KEY: f"{n}-{s}",
            "n": n,
            "B_p": 16,
            "seed": s,
            ROLLOUTS: C,
            EVAL_AVG: m + dev,
            "eval_problems": 300,
            "eval_k_samples": 16,
        }
        for n, m in means.items()
        for s, dev in enumerate((-sd, 0.0, sd))
    ]
    return pl.DataFrame(rows)


def run_notebook(name: str, out: Path, parameters: dict) -> list[dict]:
    """Execute the curated notebook `name` (papermill, a real kernel, in `notebooks/` as
    `make notebooks` does) into `out`, unsaved in the repository: every cell's outputs."""
    import nbformat
    import papermill

    notebooks = Path(__file__).resolve().parents[1] / "notebooks"
    papermill.execute_notebook(
        str(notebooks / f"{name}.ipynb"),
        str(out),
        parameters=parameters,
        cwd=str(notebooks),
        progress_bar=False,
        kernel_name="python3",
    )
    return [o for c in nbformat.read(out, as_version=4).cells for o in c.get("outputs", [])]


#: A live adaptive sweep small enough for a test (tests/test_adaptive_live.py and
#: tests/test_adaptive_interrupts.py): three arms of one run each, rungs at 16, 32 and 64.
ADAPTIVE_SPEC = """\
name: adaptive-smoke
description: three arms at B_p = 2; the rank cut stops at least one at the second rung.
base: {model: tiny-m, task: arithmetic, B_p: 2, eval_problems: 16, eval_k_samples: 4}
axes:
  n: [2, 4, 8]
budget_rollouts: 64
eval_points: 3
"""


def adaptive_runs(uri: str) -> list:
    """`ADAPTIVE_SPEC`'s runs in the store at `uri` (its parent and sweep runs left out)."""
    from mlflow.tracking import MlflowClient

    from isolab.tracking import RUN_KEY_TAG

    c = MlflowClient(uri)
    exp = c.get_experiment_by_name("adaptive-smoke")
    return [r for r in c.search_runs([exp.experiment_id]) if RUN_KEY_TAG in r.data.tags]


def rollouts_logged(uri: str, run) -> list[int]:
    """Every `compute/rollouts` value `run` logged, ascending."""
    from mlflow.tracking import MlflowClient

    from isolab.vocab import ROLLOUTS

    history = MlflowClient(uri).get_metric_history(run.info.run_id, ROLLOUTS)
    return sorted(int(m.value) for m in history)
