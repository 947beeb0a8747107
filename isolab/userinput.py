"""What users type, read under limits: YAML 1.2 files and values, and short reprs for messages.

PyYAML speaks YAML 1.1, where `010` is the octal 8, `1:00` the sexagesimal 60 and a repeated
key silently replaces the first. isolab reads configs, specs and `--set` values with the YAML
1.2 core schema (https://yaml.org/spec/1.2.2/#1032-tag-resolution) instead: `010` is 10, `1:00`
and `yes` are strings (a field's type then decides), and a key given twice is an error. A file
over `MAX_YAML_BYTES`, or whose anchors and aliases expand to more than `MAX_YAML_NODES`
values (a 297-byte "billion laughs" expands to 10⁹), is refused before any object is built.
"""

from __future__ import annotations

import re
import reprlib
from pathlib import Path
from typing import Any

import yaml
from yaml.constructor import ConstructorError
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

#: Largest YAML file isolab reads: a config or a spec is a few hundred bytes.
MAX_YAML_BYTES = 1_000_000
#: Most values (scalars, lists, mappings) a YAML document may hold once its aliases are expanded.
MAX_YAML_NODES = 100_000

#: What YAML 1.2 does not allow in a stream (https://yaml.org/spec/1.2.2/#51-character-set).
_UNPRINTABLE = re.compile(r"[^\t\n\r\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_INT = re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$")
_FLOAT = re.compile(
    r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
    r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
)


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader with the YAML 1.2 core schema's scalars and unique keys."""

    yaml_implicit_resolvers: dict = {}

    def construct_yaml_int(self, node: ScalarNode) -> int:
        text = self.construct_scalar(node)
        try:
            if text.startswith(("0o", "0x")):
                return int(text[2:], 8 if text[1] == "o" else 16)
            return int(text, 10)  # `010` is ten: YAML 1.2 has no implicit octal
        except ValueError:  # over Python's 4,300 digits
            mark = node.start_mark
            assert mark is not None  # the composer marks every node it builds from a document
            raise ConstructorError(
                problem=f"an integer of {len(text):,} digits (line {mark.line + 1})"
            ) from None

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict:
        seen = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *base` may be overridden
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                duplicate = key in seen
                seen.add(key)
            except TypeError:  # an unhashable key: the base class says so
                continue
            if duplicate:
                line = key_node.start_mark.line + 1
                raise ConstructorError(
                    problem=f"key {brief(key)} is given twice (line {line}): keep one"
                )
        return super().construct_mapping(node, deep=deep)


for _tag, _pattern, _first in (
    ("null", r"^(?:~|null|Null|NULL|)$", ["~", "n", "N", ""]),
    ("bool", r"^(?:true|True|TRUE|false|False|FALSE)$", list("tTfF")),
    ("int", _INT.pattern, list("-+0123456789")),
    ("float", _FLOAT.pattern, list("-+.0123456789")),
    ("merge", r"^(?:<<)$", ["<"]),
):
    _Loader.add_implicit_resolver(f"tag:yaml.org,2002:{_tag}", re.compile(_pattern), _first)
_Loader.add_constructor("tag:yaml.org,2002:int", _Loader.construct_yaml_int)


def load_yaml(text: str) -> Any:
    """`text` parsed as YAML 1.2 (core schema); ValueError when it is not YAML, repeats a key or
    expands past `MAX_YAML_NODES` values."""
    if len(text) > MAX_YAML_BYTES:
        raise ValueError(f"{len(text):,} characters, over isolab's limit of {MAX_YAML_BYTES:,}")
    bad = _UNPRINTABLE.search(text)
    if bad:  # PyYAML's reader raises on it before any parsing, with a position and no line
        line = text.count("\n", 0, bad.start()) + 1
        raise ValueError(
            f"the character U+{ord(bad.group()):04X} at line {line} is not allowed in YAML "
            "(a NUL byte or a control character): remove it"
        )
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _expanded_size(node, {}, set())
        return loader.construct_document(node)
    except yaml.YAMLError as exc:
        raise ValueError(str(exc).splitlines()[0].rstrip(":")) from None
    except RecursionError:
        raise ValueError("nested too deeply to be a config") from None
    finally:
        loader.dispose()


def read_yaml(path: str | Path) -> Any:
    """The YAML file at `path` (see `load_yaml`); FileNotFoundError when it is missing,
    ValueError saying what is wrong when it is a folder, too large, not text or not YAML."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist")
    if not path.is_file():
        raise ValueError("a folder or a device, not a file")
    size = path.stat().st_size
    if size > MAX_YAML_BYTES:
        raise ValueError(f"{size:,} bytes, over isolab's limit of {MAX_YAML_BYTES:,}")
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError("not UTF-8 text") from None
    return load_yaml(text)


def _expanded_size(node: Node, sizes: dict[int, int], open_: set[int]) -> int:
    """Values in `node` with every alias expanded, counted without expanding them."""
    key = id(node)
    if key in sizes:
        return sizes[key]
    if key in open_:
        raise ValueError("an alias refers to the value that holds it (a cycle)")
    open_.add(key)
    if isinstance(node, SequenceNode):
        children = node.value
    elif isinstance(node, MappingNode):
        children = [part for pair in node.value for part in pair]
    else:
        children = []
    size = 1 + sum(_expanded_size(child, sizes, open_) for child in children)
    open_.discard(key)
    if size > MAX_YAML_NODES:
        raise ValueError(
            f"its anchors and aliases (&name, *name) expand to over {MAX_YAML_NODES:,} values: "
            "write the values out"
        )
    sizes[key] = size
    return size


_REPR = reprlib.Repr()
_REPR.maxstring = _REPR.maxother = 60
_REPR.maxlist = _REPR.maxtuple = _REPR.maxdict = _REPR.maxset = 8
_REPR.maxlevel = 3


def cut(text: object, limit: int) -> str:
    """`str(text)` in at most `limit` characters, "…" marking a cut (user text in a message)."""
    text = str(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def brief(value: Any) -> str:
    """`repr(value)`, cut short (a long name or a large list in an error message stays one
    readable line; the repr is never built whole)."""
    return _REPR.repr(value)
