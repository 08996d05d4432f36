"""Frozen-dataclass configs: declaration, loading (YAML / TOML / dict) and `--set` overrides.

Every knob is declared once with `knob(default, help, ...)`, which keeps the help text,
the recommended value and the allowed range beside the field (as TRL's configs do).
`load(cls, path, overrides)` builds a config and checks it: an unknown key, a value of
the wrong type or one out of range raises `ConfigError` naming the dotted key and the
value. Nothing here knows about any particular trainer.

Not here: environment-variable magic, config inheritance, interpolation.
"""
from __future__ import annotations

import dataclasses
import json
import os
import re
import sys
import types
from typing import Any, Iterable, Literal, Mapping, TypeVar, Union, get_args, get_origin, get_type_hints

from ..errors import UserError

__all__ = ["knob", "redefault", "ConfigError", "load", "given_keys", "from_dict", "to_dict", "apply_overrides",
           "describe", "flatten", "changes"]

C = TypeVar("C")


class ConfigError(UserError, ValueError):
    """A bad config: the message names the dotted key and the offending value."""


def knob(default: Any = dataclasses.MISSING, help: str = "", *, min: float | None = None,
         max: float | None = None, choices: Iterable[Any] | None = None, default_factory: Any = dataclasses.MISSING):
    """A config field with its help text and (optional) range or choices."""
    meta = {"help": help, "min": min, "max": max, "choices": tuple(choices) if choices is not None else None}
    if default_factory is not dataclasses.MISSING:
        return dataclasses.field(default_factory=default_factory, metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def redefault(cls: type, name: str, default: Any):
    """The field `name` of the config class `cls` with another default: a subclass section that recommends
    another value keeps the help text and range declared once in `cls`."""
    f = {f.name: f for f in dataclasses.fields(cls)}[name]
    return dataclasses.field(default=default, metadata=f.metadata)


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", None) or str(tp).replace("typing.", "")


def _coerce(key: str, value: Any, tp: Any) -> Any:
    """Check (and gently convert) one value against a type hint; raise ConfigError naming `key`."""
    origin = get_origin(tp)
    if tp is Any:
        return value
    if origin in (Union, types.UnionType):
        args = get_args(tp)
        if value is None and type(None) in args:
            return None
        errors = []
        for a in args:
            if a is type(None):
                continue
            try:
                return _coerce(key, value, a)
            except ConfigError as e:
                errors.append(str(e))
        raise ConfigError(f"{key}: value {value!r} is not a valid {_type_name(tp)}")
    if origin is Literal:
        if isinstance(value, bool) and {"on", "off"} <= set(get_args(tp)):
            value = "on" if value else "off"  # YAML 1.1 reads on/off as booleans
        if value not in get_args(tp):
            raise ConfigError(f"{key}: value {value!r} is not one of {list(get_args(tp))}")
        return value
    if dataclasses.is_dataclass(tp):
        if isinstance(value, tp):
            return value
        if not isinstance(value, Mapping):
            raise ConfigError(f"{key}: expected a section (mapping) for {tp.__name__}, got {value!r}")
        return from_dict(tp, value, prefix=key)
    if origin in (tuple, list):
        if isinstance(value, str) or not isinstance(value, (list, tuple)):
            raise ConfigError(f"{key}: expected a list, got {value!r}")
        args = get_args(tp)
        if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
            return tuple(_coerce(f"{key}[{i}]", v, args[0]) for i, v in enumerate(value))
        if origin is tuple and args:
            if len(args) != len(value):
                raise ConfigError(f"{key}: expected {len(args)} items, got {value!r}")
            return tuple(_coerce(f"{key}[{i}]", v, a) for i, (v, a) in enumerate(zip(value, args)))
        inner = args[0] if args else Any
        return tuple(_coerce(f"{key}[{i}]", v, inner) for i, v in enumerate(value))
    if origin is dict or tp is dict:
        if not isinstance(value, Mapping):
            raise ConfigError(f"{key}: expected a mapping, got {value!r}")
        return dict(value)
    if tp is bool:
        if isinstance(value, bool):
            return value
        raise ConfigError(f"{key}: value {value!r} is not a bool (use true/false)")
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, float) and value.is_integer():
                return int(value)
            raise ConfigError(f"{key}: value {value!r} is not an int")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{key}: value {value!r} is not a number")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"{key}: value {value!r} is not a string")
        return value
    if isinstance(tp, type) and not isinstance(value, tp):
        raise ConfigError(f"{key}: value {value!r} is not a {tp.__name__}")
    return value


def _check_range(key: str, value: Any, meta: Mapping[str, Any]) -> None:
    if value is None:
        return
    lo, hi, choices = meta.get("min"), meta.get("max"), meta.get("choices")
    if choices is not None and value not in choices:
        raise ConfigError(f"{key}: value {value!r} is not one of {list(choices)}")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if lo is not None and value < lo:
            raise ConfigError(f"{key}: value {value!r} is below the minimum {lo}")
        if hi is not None and value > hi:
            raise ConfigError(f"{key}: value {value!r} is above the maximum {hi}")


def from_dict(cls: type[C], data: Mapping[str, Any], prefix: str = "") -> C:
    """Build `cls` from a mapping; unknown keys, wrong types and out-of-range values raise ConfigError."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"{prefix or '<root>'}: expected a mapping, got {data!r}")
    hints = get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    dotted = (prefix + ".") if prefix else ""
    for old, new in getattr(cls, "MOVED", {}).items():  # a key that moved: say where it went
        section, _, key = old.rpartition(".")
        node = data.get(section) if section else data
        if isinstance(node, Mapping) and key in node:
            raise ConfigError(f"config key {dotted + old!r} (value {node[key]!r}) is now {new!r}")
    unknown = [k for k in data if k not in fields]
    if unknown:
        import difflib

        key = str(unknown[0])
        near = difflib.get_close_matches(key, list(fields), n=3, cutoff=0.6)
        hint = ("did you mean " + " or ".join(repr(dotted + n) for n in near) + "?") if near else \
            (f"valid keys{' under ' + prefix if prefix else ''}: {', '.join(sorted(fields))}" if len(fields) <= 12
             else f"`reasoning-rl config --describe` lists every key")
        raise ConfigError(f"unknown config key {dotted + key!r} (value {data[key]!r}); {hint}")
    kwargs = {}
    for name, value in data.items():
        key = dotted + name
        v = _coerce(key, value, hints[name])
        _check_range(key, v, fields[name].metadata)
        kwargs[name] = v
    try:
        obj = cls(**kwargs)
    except ConfigError:
        raise
    except (TypeError, ValueError) as e:
        raise ConfigError(f"{prefix or cls.__name__}: {e}") from None
    # defaults are checked too (a subclass may narrow a range)
    for f in fields.values():
        if f.name not in kwargs:
            _check_range(dotted + f.name, getattr(obj, f.name), f.metadata)
    return obj


def to_dict(cfg: Any) -> dict[str, Any]:
    return json.loads(json.dumps(dataclasses.asdict(cfg)))


def _parse_scalar(text: str) -> Any:
    import yaml

    if not text.strip():
        return ""  # `--set tasks.instruction=` empties a text knob (YAML would read null)
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError:
        return text
    if isinstance(value, dict) and not text.lstrip().startswith("{"):
        return text.strip()  # "Do this: then that" is a sentence, not a YAML mapping (a mapping is written {...})
    if isinstance(value, str) and "#" in text and not text.lstrip().startswith(("'", '"')):
        return text.strip()  # " #..." is a YAML comment; in `--set key=text` it is part of the text
    if isinstance(value, str):  # YAML 1.1 reads "1e-4" as a string; a user means the number
        try:
            return float(value) if re.fullmatch(r"[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+", value.strip()) else value
        except ValueError:
            return value
    return value


def apply_overrides(data: dict[str, Any], overrides: Iterable[str]) -> dict[str, Any]:
    """Apply `section.key=value` strings to a nested dict (values parsed as YAML scalars)."""
    out = json.loads(json.dumps(data))
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"--set expects section.key=value, got {item!r}")
        key, raw = item.split("=", 1)
        key = key.strip()
        if not key:
            raise ConfigError(f"--set has an empty key in {item!r}")
        node = out
        parts = key.split(".")
        for p in parts[:-1]:
            nxt = node.setdefault(p, {})
            if not isinstance(nxt, dict):
                raise ConfigError(f"--set {key}: {p!r} is a value, not a section")
            node = nxt
        node[parts[-1]] = _parse_scalar(raw)
    return out


def read_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    path = os.fspath(path)
    if not os.path.exists(path):
        raise ConfigError(f"config file {path!r} does not exist")
    if os.path.isdir(path):
        raise ConfigError(f"config file {path!r} is a directory; give a YAML or TOML file")
    with open(path, "rb") as f:
        raw = f.read()
    if path.endswith(".toml"):
        if sys.version_info >= (3, 11):
            import tomllib
        else:  # Python 3.10: the same parser, published as tomli (a dependency there only)
            import tomli as tomllib

        try:
            data = tomllib.loads(raw.decode("utf-8"))
        except tomllib.TOMLDecodeError as e:
            raise ConfigError(f"config file {path!r}: {' '.join(str(e).split())}") from None
    else:
        import yaml

        try:
            data = yaml.safe_load(raw) or {}
        except yaml.YAMLError as e:
            raise ConfigError(f"config file {path!r}: not valid YAML ({' '.join(str(e).split())})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path!r}: top level must be a mapping, got {type(data).__name__}")
    return data


def given_keys(path: str | os.PathLike[str] | None = None, overrides: Iterable[str] = ()) -> set[str]:
    """The dotted keys a config file and `--set` overrides give a value to (sections opened, lists whole)."""
    data = apply_overrides(read_file(path) if path else {}, overrides)

    def walk(node: Mapping[str, Any], prefix: str) -> set[str]:
        out = set()
        for k, v in node.items():
            out |= walk(v, f"{prefix}{k}.") if isinstance(v, Mapping) else {f"{prefix}{k}"}
        return out
    return walk(data, "")


def load(cls: type[C], path: str | os.PathLike[str] | None = None, overrides: Iterable[str] = ()) -> C:
    """Defaults <- file (YAML or TOML) <- `--set` overrides, then validate."""
    data = read_file(path) if path else {}
    data = apply_overrides(data, overrides)
    return from_dict(cls, data)


def flatten(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """A nested config dict as {dotted key: value} (lists are values)."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        out.update(flatten(v, f"{prefix}{k}.") if isinstance(v, Mapping) else {f"{prefix}{k}": v})
    return out


def changes(saved: Mapping[str, Any], now: Mapping[str, Any], keep: Iterable[str] = ()) -> list[str]:
    """'key: old -> new' for every dotted key whose value differs between two config dicts, but those `keep` names
    (a key, or a prefix ending in '.')."""
    keep = tuple(keep)
    a, b = flatten(saved), flatten(now)
    return [f"{k}: {a.get(k)!r} -> {b.get(k)!r}" for k in sorted(set(a) | set(b))
            if a.get(k) != b.get(k) and not any(k == x or (x.endswith(".") and k.startswith(x)) for x in keep)]


def describe(cls: type, prefix: str = "") -> list[tuple[str, str, str]]:
    """(dotted key, default, help) for every knob, for `--help` and docs."""
    rows = []
    for f in dataclasses.fields(cls):
        key = prefix + f.name
        tp = get_type_hints(cls)[f.name]
        if dataclasses.is_dataclass(tp):
            rows.extend(describe(tp, key + "."))
            continue
        default = f.default if f.default is not dataclasses.MISSING else (
            f.default_factory() if f.default_factory is not dataclasses.MISSING else "(required)")
        rows.append((key, repr(default), f.metadata.get("help", "")))
    return rows
