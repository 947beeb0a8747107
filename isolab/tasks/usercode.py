"""Functions of the user's that isolab calls: a run config's `reward: file.py:function` and a
task card's `verifier: file.py:function`.

Only a plain Python function of the user's own qualifies, with the signature it is called
with (`REWARD`, `VERIFIER`): not a builtin or C function (`os:system` would hand completions
to a shell), not a class, not a function of the standard library or of an installed package
(isolab's own excepted). `check_spec` refuses what it can without running anything (the
planning commands' check); `load_function` imports the code and checks the function itself.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.machinery
import importlib.util
import inspect
import site
import sys
import sysconfig
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from isolab.userinput import brief


@dataclass(frozen=True)
class Call:
    """How isolab calls a function of the user's: `shown` for messages, `takes` whether a
    signature accepts that call."""

    shown: str
    takes: Callable[[inspect.Signature], bool]


def _takes_reward(sig: inspect.Signature) -> bool:
    """TRL calls `reward_func(prompts=..., completions=..., completion_ids=...,
    **dataset_columns)`: `completions` by keyword, and the rest through `**kwargs`."""
    completions = sig.parameters.get("completions")
    keyword = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    var_kw = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in sig.parameters.values())
    return completions is not None and completions.kind in keyword and var_kw


def _takes_verifier(sig: inspect.Signature) -> bool:
    """A card's verifier is called as `verify(completion_text, gold_answer)`."""
    try:
        sig.bind("completion", "gold")
    except TypeError:
        return False
    return True


REWARD = Call("function(prompts, completions, **kwargs) -> list[float]", _takes_reward)
VERIFIER = Call("function(completion_text, gold_answer) -> bool", _takes_verifier)


def _system_roots() -> list[Path]:
    """Where the standard library and installed packages live (this environment's and the
    base interpreter's)."""
    paths = sysconfig.get_paths()
    roots = [paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths]
    roots += site.getsitepackages() + [site.getusersitepackages()]
    return [Path(r).resolve() for r in roots]


def _not_the_users(file: str | Path | None) -> str | None:
    """Why code in `file` is not the user's own (None: it is): the standard library or an
    installed package. isolab's own files are isolab's, wherever it is installed."""
    if file is None:
        return "it has no source file (a builtin or C function)"
    path = Path(file).resolve()
    if path.is_relative_to(Path(__file__).resolve().parents[1]):  # the isolab package
        return None
    for root in _system_roots():
        if path.is_relative_to(root):
            return f"it comes from {root} (the standard library or an installed package)"
    return None


def _refused(spec: str, what: str, why: str, call: Call) -> ValueError:
    return ValueError(
        f"{what} = {brief(spec)}: {why}; give a Python function of your own, in "
        f"path/to/file.py:function or module:function, called as {call.shown}"
    )


def split_spec(spec: str, base: Path, what: str) -> tuple[str, Path | None, str]:
    """(module name, its file or None, function name) of `module:function` or
    `path/to/file.py:function` (a file relative to `base` that must exist)."""
    module_name, sep, func_name = str(spec).rpartition(":")
    if not sep or not module_name or not func_name.isidentifier():
        raise ValueError(
            f"{what} = {brief(spec)}: write module:function (importable) or "
            "path/to/file.py:function"
        )
    if not module_name.endswith(".py"):
        return module_name, None, func_name
    file = Path(module_name)
    file = file if file.is_absolute() else base / file
    if not file.is_file():
        raise ValueError(f"{what} = {brief(spec)}: no file {file}")
    return module_name, file, func_name


def check_spec(spec: str, base: Path, what: str, call: Call) -> None:
    """Refuse `spec` where that needs no import: a malformed spec, a missing file, a module of
    the standard library or of an installed package. Runs none of the user's code (finding a
    top-level module's file executes nothing)."""
    module_name, file, _ = split_spec(spec, base, what)
    if file is not None:
        why = _not_the_users(file)
    else:
        top = module_name.split(".")[0]
        if top in sys.stdlib_module_names or top in sys.builtin_module_names:
            why = f"{top} is a module of Python's standard library"
        else:
            found = importlib.machinery.PathFinder.find_spec(top)
            if found is None:
                raise ValueError(
                    f"{what} = {brief(spec)}: no module {top} on Python's path; give "
                    "path/to/file.py:function, or install the module"
                )
            where = found.origin or next(iter(found.submodule_search_locations or []), None)
            why = _not_the_users(where) if where else None
    if why:
        raise _refused(spec, what, why, call)


def load_function(spec: str, base: Path, what: str, call: Call) -> Callable:
    """The function `module:function` or `path/to/file.py:function` (relative to `base`), once
    it is a plain Python function of the user's whose signature takes `call`; else a ValueError
    naming `what` and the fix. Imports (runs) the user's module."""
    check_spec(spec, base, what, call)
    module_name, file, func_name = split_spec(spec, base, what)
    try:
        module = _file_module(file) if file is not None else importlib.import_module(module_name)
    except Exception as exc:  # the user's module failed to import: say which and why
        raise ValueError(
            f"{what} = {brief(spec)}: importing {module_name} failed: {type(exc).__name__}: {exc}"
        ) from exc
    func = getattr(module, func_name, None)
    if not callable(func):
        raise ValueError(f"{what} = {brief(spec)}: {module_name} has no function {func_name}")
    if not inspect.isfunction(func):  # a class, a builtin, a C function, a callable object
        why = f"{func_name} is a {type(func).__name__}, not a Python function"
        raise _refused(spec, what, why, call)
    why = _not_the_users(func.__code__.co_filename)  # `from shutil import rmtree as f`
    if why:
        raise _refused(spec, what, f"{func_name} is not yours: {why}", call)
    if not call.takes(inspect.signature(func)):
        why = f"{func_name}{inspect.signature(func)} does not take that call"
        raise _refused(spec, what, why, call)
    return func


def _file_module(file: Path) -> Any:
    """The module of a Python file, executed once per version of the file (an edited file is
    executed again); a file that fails to execute leaves nothing in `sys.modules`."""
    stamp = f"{file.resolve()}@{file.stat().st_mtime_ns}"
    key = f"isolab_user_{hashlib.sha256(stamp.encode()).hexdigest()[:12]}"
    if key in sys.modules:
        return sys.modules[key]
    loaded = importlib.util.spec_from_file_location(key, file)
    if loaded is None or loaded.loader is None:
        raise ImportError(f"{file} is not a Python module")
    module = importlib.util.module_from_spec(loaded)
    sys.modules[key] = module
    try:
        loaded.loader.exec_module(module)
    except BaseException:
        del sys.modules[key]
        raise
    return module
