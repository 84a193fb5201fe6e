"""The `NAME[:ARG][,KEY=VALUE...]` grammar of the command-line specs: data specs, selectors, canaries.
Only the splitting lives here; each spec validates its own names and values."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class SpecParts:
    name: str
    positional: tuple[str, ...]      # parts without '=', in order
    settings: tuple[tuple[str, str], ...]

    def settings_dict(self) -> dict[str, str]:
        return dict(self.settings)


def split_spec(text: str) -> SpecParts:
    """`"ramaswamy:n_u=16,n_e=200"` → SpecParts("ramaswamy", (), (("n_u", "16"), ("n_e", "200"))).
    A key given twice is an error (the second would silently win)."""
    name, _, rest = text.strip().partition(":")
    if not name:
        raise ValueError(f"a spec needs a name before ':'. Found {text!r}.")
    positional, settings = [], {}
    for part in (p.strip() for p in rest.split(",")):
        if not part:
            continue
        key, eq, value = part.partition("=")
        if not eq:
            positional.append(part)
        elif key in settings:
            raise ValueError(f"{name}: {key} is given twice in {text!r}.")
        else:
            settings[key] = value
    return SpecParts(name, tuple(positional), tuple(settings.items()))
