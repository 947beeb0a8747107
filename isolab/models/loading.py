"""Loading a model (`load`): a preset (built on first use), a local folder or a hub id, checked
before anything is built or logged (`check_source`), and refused while it ships Python code of
its own that the run config does not trust (`refuse_unless_trusted`, `refuse_remote_code`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from isolab.hub import hub_reachable
from isolab.models.tiny import CHAT_PRESETS, REAL_PRESETS, TINY_PRESETS, preset_names
from isolab.models.weights import build

if TYPE_CHECKING:  # torch is imported where weights are loaded, not to read a name
    import torch
    from transformers import PreTrainedTokenizerBase


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
