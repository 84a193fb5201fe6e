"""Ledger populations: a population is its users, named without revealing them.

User-level DP protects people, so the ledger must know who took part in a release, not which file
held them: a copy, an edited example, a blank line, another order or another format (`data make`) of
the same users' data are the same people and get no fresh budget. A user is named by a keyed tag,
HMAC(ledger key, namespace, user id); a population by the keyed MAC of its sorted tags, e.g.
`users-3f2a9c0d1e7b5a64`. Neither reveals anything about the data to whoever reads the run store
or the ledger (the key never leaves the ledger's key directory), unlike the SHA-256 of the file that
named populations before: a candidate for one user's secret word could be checked against it.

Namespaces (`data.spec.user_namespace`): every file or TFF dataset shares one, so the same user ids
in an `.npz`, a `.jsonl`, a play or TFF's sqlite are the same people; synthetic users are simulated
per generator and seed (`synthetic-text:seed=0`), so `users=300` are the first 300 of `users=1000`.
Renaming the users makes new people as far as any tool can know: the ids are the data owner's word.

A population's member tags are kept server side beside the ledger key (`populations/KEY.tags`, checked
against KEY on read). Overlapping populations (a subset, the same users plus new ones, two plays
with shared speakers) compose per user: a user's ε composes every release on every population that
holds them, and the ledger checks the worst user of every population a release touches
(`Ledger.total`). A population key the registry does not know (a hand-written key, as in tests) is a
population of its own with no known members.
"""

from __future__ import annotations

import os

from fedgen_debug.privacy.ledger_keys import LedgerCorrupted, LedgerKeys, write_private

PREFIX = "users-"
TAGS_DIR = "populations"


class PopulationRegistry:
    def __init__(self, keys: LedgerKeys):
        self.keys = keys
        self._members: dict[str, frozenset[str] | None] = {}

    def tags(self, namespace: str, client_ids) -> list[str]:
        return sorted({self.keys.mac("user", f"{namespace}\0{cid}")[:32] for cid in client_ids})

    def key_of_tags(self, tags) -> str:
        return PREFIX + self.keys.mac("population", "\n".join(tags))[:16]

    def _path(self, key: str) -> str:
        return os.path.join(self.keys.directory, TAGS_DIR, key + ".tags")

    def register(self, namespace: str, client_ids) -> str:
        """The key of the users `client_ids` of `namespace`, their tags kept for composition."""
        tags = self.tags(namespace, client_ids)
        if not tags:
            raise ValueError("a population needs at least one user.")
        key = self.key_of_tags(tags)
        path = self._path(key)
        if not os.path.exists(path):
            os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
            write_private(path, "\n".join(tags) + "\n")
        self._members[key] = frozenset(tags)
        return key

    def members(self, key: str) -> frozenset[str] | None:
        """The tags of a registered population; None for a key the registry does not know."""
        if key not in self._members:
            path = self._path(key) if key.startswith(PREFIX) else None
            if path is None or not os.path.exists(path):
                self._members[key] = None
            else:
                with open(path, encoding="utf-8") as f:
                    tags = [t for t in f.read().split("\n") if t]
                if self.key_of_tags(sorted(tags)) != key:
                    raise LedgerCorrupted(f"{path}: the users kept for population {key} do not match its key; "
                                          "the file was edited.")
                self._members[key] = frozenset(tags)
        return self._members[key]

    def overlapping(self, tags, keys) -> list[str]:
        """Those of `keys` that share a user with `tags`."""
        tags = frozenset(tags)
        return [k for k in keys if (m := self.members(k)) is not None and not m.isdisjoint(tags)]
