"""The ledger's secret key and head: what makes a rewritten ledger detectable.

A hash chain alone protects nothing against whoever can write the ledger file: they drop records,
recompute the chain and the budget is back. So every ledger line carries an HMAC under a key that is
not in the ledger file, and a separate head file (also MACed) holds the number of lines and the MAC of
the last one, so that a ledger cut short is caught too.

Where: `$FEDGEN_DEBUG_LEDGER_KEYS`, by default `<ledger home>/keys/` (0700; `ledger.key` and `head.json`
0600). The trust assumption is the run secret's: whoever holds the key directory and the ledger home is
the data owner. A modeler who can write the ledger file but not read the key cannot edit, remove,
reorder, re-chain or truncate records unnoticed; one who holds both can do anything, as the server can.
Keep the key directory on the server (or on another account) and back it up with the ledger.

The same key names populations without revealing them (`privacy.populations`).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets

from fedgen_debug.data.atomic import atomic_path

KEYS_ENV = "FEDGEN_DEBUG_LEDGER_KEYS"
KEY_FILE = "ledger.key"
HEAD_FILE = "head.json"


class LedgerCorrupted(ValueError):
    pass


def keys_dir(ledger_home: str) -> str:
    return os.path.abspath(os.path.expanduser(os.environ.get(KEYS_ENV) or os.path.join(ledger_home, "keys")))


def write_private(path: str, text: str) -> None:
    """Writes `text` atomically, owner-only (mkstemp's 0600 survives the rename)."""
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())


class LedgerKeys:
    """The key (made on first use of an empty ledger, never again) and the head of one ledger."""

    def __init__(self, directory: str):
        self.directory = directory
        self._key: bytes | None = None

    @property
    def key_path(self) -> str:
        return os.path.join(self.directory, KEY_FILE)

    def exists(self) -> bool:
        return os.path.exists(self.key_path)

    def create(self) -> None:
        """Makes the key; only for a ledger with no entry (a lost key is not silently replaced)."""
        os.makedirs(self.directory, mode=0o700, exist_ok=True)
        os.chmod(self.directory, 0o700)
        try:
            fd = os.open(self.key_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:  # another process made it first: use theirs
            return
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_hex(32) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def key(self) -> bytes:
        if self._key is None:
            if not self.exists():
                raise LedgerCorrupted(f"the ledger key {self.key_path} is missing; without it no record can be "
                                      f"verified. Restore it (or set ${KEYS_ENV} to where it is).")
            with open(self.key_path, encoding="utf-8") as f:
                self._key = bytes.fromhex(f.read().strip())
        return self._key

    def mac(self, purpose: str, payload: str) -> str:
        """HMAC-SHA256 of `payload` under the key, separated by `purpose` so that no MAC of one kind
        passes for another."""
        return hmac.new(self.key(), f"{purpose}\0{payload}".encode("utf-8"), hashlib.sha256).hexdigest()

    def verify(self, purpose: str, payload: str, mac: str) -> bool:
        return hmac.compare_digest(self.mac(purpose, payload), str(mac))

    # ---- head: how many lines the ledger has, and the MAC of the last ----------------------------

    def read_head(self) -> tuple[int, str] | None:
        path = os.path.join(self.directory, HEAD_FILE)
        if not os.path.exists(path):
            return None
        with open(path, encoding="utf-8") as f:
            head = json.load(f)
        entries, last = int(head["entries"]), str(head["last"])
        if not self.verify("head", f"{entries}:{last}", head.get("mac", "")):
            raise LedgerCorrupted(f"{path}: the head of the ledger does not verify under the ledger key; it was edited.")
        return entries, last

    def write_head(self, entries: int, last: str) -> None:
        write_private(os.path.join(self.directory, HEAD_FILE),
                       json.dumps({"entries": entries, "last": last, "mac": self.mac("head", f"{entries}:{last}")}))
