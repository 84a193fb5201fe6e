"""A third source of text for calibration checks: the long descriptions of the installed Python packages
(`*.dist-info/METADATA` in site-packages; tech prose with code words, symbols and digits, closer to Stack
Overflow than to a play), one user per package, one line of 4 or more words per example (markdown
tables, code fences, directives and prompts left out; at most 200 lines a package, packages with fewer
than 5 left out), written in the `jsonl:` contract.

  .venv/bin/python evaluation/package_text_jsonl.py --out pkgtext.jsonl
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import sysconfig

SKIPPED_STARTS = ("```", "|", "..", ":", "<", "[![", "$", ">>>", "#!")


def package_lines(metadata_path: str, most: int = 200) -> list[str]:
    with open(metadata_path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    body = text.split("\n\n", 1)[1] if "\n\n" in text else ""
    lines = [line.strip() for line in body.splitlines()]
    return [line for line in lines if len(line.split()) >= 4 and not line.startswith(SKIPPED_STARTS)][:most]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--site-packages", default=sysconfig.get_paths()["purelib"])
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    with open(args.out, "w", encoding="utf-8") as out:
        for path in sorted(glob.glob(os.path.join(args.site_packages, "*.dist-info", "METADATA"))):
            user = os.path.basename(os.path.dirname(path)).split("-")[0]
            lines = package_lines(path)
            if len(lines) >= 5:
                for line in lines:
                    out.write(json.dumps({"client_id": user, "text": line}) + "\n")


if __name__ == "__main__":
    main()
