"""Selectors by name, for commands: `--select NAME[:ARG][,KEY=VALUE...]`, joined with `&` (all of)
or `|` (any of). Examples: `by-user-accuracy:low`, `by-example:misclassified,min_count=5`, `oov`,
`random:fraction=0.1`, `unlabeled:max_confidence=0.6`, `public-density:eps=0.001`,
`by-example:misclassified&random:fraction=0.5`."""

from __future__ import annotations

import dataclasses

from fedgen_debug.selectors import criteria
from fedgen_debug.selectors.base import AllOf, AnyOf, Selector
from fedgen_debug.spec_grammar import split_spec

# name: (class, the setting a bare positional argument sets, its allowed values or None)
REGISTRY: dict[str, tuple[type, str | None, tuple | None]] = {
    "random": (criteria.RandomExamples, None, None),
    "by-example": (criteria.ByExampleCorrectness, "keep", ("misclassified", "correct")),
    "oov": (criteria.OutOfVocabulary, None, None),
    "by-user-accuracy": (criteria.ByUserMetric, "direction", ("low", "high")),
    "unlabeled": (criteria.Unlabeled, None, None),
    "public-density": (criteria.PublicDensity, None, None),
}


def _convert(cls, key: str, value: str):
    field = {f.name: f for f in dataclasses.fields(cls)}[key]
    kind = str(field.type)
    try:
        if "int" in kind and "float" not in kind:
            return int(value)
        if "float" in kind:
            return float(value)
    except ValueError:
        raise ValueError(f"{key} must be a number. Found {value!r}.") from None
    return value


def _parse_one(text: str) -> Selector:
    parts = split_spec(text)
    if parts.name not in REGISTRY:
        raise ValueError(f"Unknown selector {parts.name!r}. Valid selectors: {', '.join(REGISTRY)}.")
    cls, positional, allowed = REGISTRY[parts.name]
    fields = {f.name for f in dataclasses.fields(cls)}
    settings = {}
    for key, value in parts.settings:
        if key not in fields:
            raise ValueError(f"{parts.name}: unknown setting {key!r} (settings: {', '.join(sorted(fields)) or 'none'}).")
        settings[key] = _convert(cls, key, value)
    for part in parts.positional:
        if not positional or positional in settings:
            raise ValueError(f"{parts.name}: unexpected {part!r}.")
        if allowed and part not in allowed:
            raise ValueError(f"{parts.name}: {part!r} is not one of {', '.join(allowed)}.")
        settings[positional] = part
    return cls(**settings)


def parse_selector(text: str) -> Selector:
    """A selector from its command-line form; raises ValueError listing the valid names."""
    if "&" in text and "|" in text:
        raise ValueError("mixing '&' and '|' is ambiguous; compose in code with AllOf/AnyOf.")
    for sep, combinator in (("&", AllOf), ("|", AnyOf)):
        if sep in text:
            return combinator(tuple(_parse_one(p) for p in text.split(sep)))
    return _parse_one(text)


def failing_then_working(first: str, second: str) -> bool:
    """Whether selector `first` gathers where the primary model fails and `second` where it works (T4's
    low then high, T2's misclassified then correct): a pair whose suspect is `first` (`Selector.failing`).
    A name that no longer parses (a run released by another version, an edited config) says nothing, as
    a random selection does: the pair then keeps its given order instead of failing the whole report."""
    try:
        return [parse_selector(first).failing, parse_selector(second).failing] == [True, False]
    except ValueError:
        return False


def describe_all() -> list[dict]:
    rows = []
    for name, (cls, positional, allowed) in REGISTRY.items():
        settings = {f.name: (f.default if f.default is not dataclasses.MISSING else None)
                    for f in dataclasses.fields(cls)}
        rows.append({"name": name, "task": cls.task, "argument": positional, "choices": list(allowed or []),
                     "settings": settings, "needs_outputs": list(cls().required_outputs),
                     "summary": " ".join((cls.__doc__ or "").split()).split(". ")[0].rstrip(".")})
    return rows
