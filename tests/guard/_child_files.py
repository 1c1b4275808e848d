"""What the guard tests' child processes share: an effect line, and waiting for a file.

A child runs as a script (``python tests/guard/_x_child.py ...``), so it imports this
module by its bare name: ``from _child_files import append, wait_for``.
"""

from __future__ import annotations

import os
import time
from pathlib import Path


def append(path: Path, line: str) -> None:
    """Append ``line`` to ``path`` in one ``O_APPEND`` write (an effect other processes see)."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def wait_for(path: Path, seconds: float = 60.0) -> None:
    """Wait until ``path`` exists (the test's signal); ``TimeoutError`` after ``seconds``."""
    deadline = time.monotonic() + seconds
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} never appeared")
        time.sleep(0.002)
