"""Running the CLI on a real terminal (a pty), for the tests of what a terminal sees."""

from __future__ import annotations

import os
import pty
import subprocess
import sys


def on_a_terminal(
    args: list[str], env: dict[str, str] | None = None, *, stdin: bool = True
) -> tuple[int, str]:
    """Run ``toolledger ARGS`` with stdout, stderr (and stdin, unless ``stdin=False``) on a
    pty; return its exit status and output (the tty's ``\\r\\n`` read as ``\\n``)."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "toolledger", *args],
        stdin=follower if stdin else None,
        stdout=follower,
        stderr=follower,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), **(env or {})},
    )
    os.close(follower)
    output = drain(leader)
    return proc.wait(60), output.decode("utf-8").replace("\r\n", "\n")


def drain(leader: int) -> bytes:
    """All a pty's leader reads until the other side closes (EOF or EIO), then close it."""
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: every process holding the follower has closed it
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    return b"".join(chunks)
