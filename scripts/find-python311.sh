#!/usr/bin/env sh
# Prints the path of a Python 3.11 interpreter, or explains what is missing and exits 1.
# TF 2.14 / TFF 0.87 support Python 3.9-3.11 only; the pinned lock file is for 3.11.
for candidate in "${PYTHON:-}" python3.11 python3 python; do
  [ -n "$candidate" ] || continue
  path=$(command -v "$candidate" 2>/dev/null) || continue
  if "$path" -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 11) else 1)' 2>/dev/null; then
    echo "$path"
    exit 0
  fi
done
echo "fedgen-debug needs Python 3.11 (TensorFlow 2.14 and TensorFlow Federated 0.87 do not" >&2
echo "support 3.12+). None was found on PATH (tried: \$PYTHON, python3.11, python3, python)." >&2
echo "Install Python 3.11 (e.g. 'apt-get install python3.11 python3.11-venv' or pyenv), or run" >&2
echo "'make PYTHON=/path/to/python3.11 ...'." >&2
exit 1
