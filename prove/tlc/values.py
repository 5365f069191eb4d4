"""TLA+ values as TLC prints them: parsed into Python (model values, sets, functions), printed
back, and flattened to dotted paths for trace diffs."""

from __future__ import annotations

import json
import re
from typing import Any


class ModelValue(str):
    """A TLC model value (w1, Nobody), kept apart from strings for printing."""


class TSet(tuple):
    """A TLA+ set, kept in TLC's printed order."""


class TFun(dict):
    """A TLA+ function printed as ``(k :> v @@ ...)``, keyed by the printed key."""


_TOKEN = re.compile(
    r'\s*(?:(?P<str>"(?:[^"\\]|\\.)*")|(?P<num>-?\d+)|(?P<sym>\|->|<<|>>|:>|@@|[\[\]{}(),])'
    r"|(?P<id>[A-Za-z_][A-Za-z0-9_]*))"
)


def _tokens(text: str) -> list[tuple[str, str]]:
    out, pos = [], 0
    text = text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise ValueError(f"cannot parse TLA+ value near {text[pos : pos + 30]!r}")
        pos = m.end()
        kind = m.lastgroup
        out.append((kind, m.group(kind)))
    return out


def parse_value(text: str) -> Any:
    """Parse one TLA+ value as TLC prints it into Python data.

    Records become dicts, sequences lists, sets :class:`TSet`, functions (``a :> 1 @@ b :> 2``)
    dicts keyed by the printed key, strings str, model values :class:`ModelValue`.
    """
    toks = _tokens(text)
    pos = 0

    def peek() -> tuple[str, str] | None:
        return toks[pos] if pos < len(toks) else None

    def take(expected: str | None = None) -> tuple[str, str]:
        nonlocal pos
        tok = toks[pos]
        if expected is not None and tok[1] != expected:
            raise ValueError(f"expected {expected!r}, got {tok[1]!r}")
        pos += 1
        return tok

    def items(close: str) -> list[Any]:
        vals = []
        if peek() and peek()[1] == close:
            take(close)
            return vals
        while True:
            vals.append(value())
            tok = take()
            if tok[1] == close:
                return vals
            if tok[1] != ",":
                raise ValueError(f"expected ',' or {close!r}, got {tok[1]!r}")

    def function_body(first: Any) -> TFun:
        result = TFun()
        take(":>")
        result[render(first)] = value()
        while peek() and peek()[1] == "@@":
            take("@@")
            key = value()
            take(":>")
            result[render(key)] = value()
        return result

    def value() -> Any:
        kind, tok = take()
        if kind == "str":
            return json.loads(tok) if "\\" in tok else tok[1:-1]
        if kind == "num":
            return int(tok)
        if kind == "id":
            if tok == "TRUE":
                return True
            if tok == "FALSE":
                return False
            return ModelValue(tok)
        if tok == "<<":
            return items(">>")
        if tok == "{":
            return TSet(items("}"))
        if tok == "[":
            rec: dict[str, Any] = {}
            if peek() and peek()[1] == "]":
                take("]")
                return rec
            while True:
                _, field = take()
                take("|->")
                rec[field] = value()
                tok2 = take()
                if tok2[1] == "]":
                    return rec
                if tok2[1] != ",":
                    raise ValueError(f"bad record near {tok2[1]!r}")
        if tok == "(":
            first = value()
            if peek() and peek()[1] == ":>":
                fn = function_body(first)
                take(")")
                return fn
            take(")")
            return first
        raise ValueError(f"unexpected token {tok!r}")

    result = value()
    if pos != len(toks):
        raise ValueError(f"trailing tokens after value: {toks[pos : pos + 3]}")
    return result


def render(v: Any) -> str:
    """Render a parsed value compactly (strings without quotes)."""
    if isinstance(v, bool):
        return "TRUE" if v else "FALSE"
    if isinstance(v, TSet):
        return "{" + ", ".join(render(x) for x in v) + "}"
    if isinstance(v, list):
        return "<<" + ", ".join(render(x) for x in v) + ">>"
    if isinstance(v, dict):
        return "[" + ", ".join(f"{k} {render(x)}" for k, x in v.items()) + "]"
    return str(v)


def flatten(value: Any, path: str = "") -> dict[str, Any]:
    """Flatten records (``a.b``), functions (``a[w1]``) and sequences of records (``a[2]``)
    into ``path -> leaf``; sets and other values stay leaves."""
    out: dict[str, Any] = {}
    if isinstance(value, TFun) and value:
        for k, v in value.items():
            out.update(flatten(v, f"{path}[{k}]"))
    elif isinstance(value, dict) and value:
        for k, v in value.items():
            out.update(flatten(v, f"{path}.{k}" if path else k))
    elif isinstance(value, list) and value and all(isinstance(x, dict) for x in value):
        for i, v in enumerate(value, 1):
            out[f"{path}[{i}]"] = v
    else:
        out[path] = value
    return out
