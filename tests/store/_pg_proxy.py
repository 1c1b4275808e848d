"""A loopback TCP proxy in front of PostgreSQL that can cut a connection around COMMIT.

It parses the client's wire-protocol messages (startup, then typed messages) and, when
armed, reacts to the first commit point: a simple-query ``COMMIT`` (``on="commit"``), or
a ``Sync`` message (``on="sync"``: where an autocommit statement sent with the extended
protocol commits):

- ``"before"``: the message is never forwarded; both sockets close (the server rolls back).
- ``"after"``: the message is forwarded; the server's answer (sent once the commit is
  durable) is swallowed and both sockets close: the write landed, the client cannot know.

- ``"hold"``: the message waits until ``release`` is set, then goes on (a commit held open
  while another session races it).

``refuse = True`` makes it close every new connection at once (the server "is gone").
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading

__all__ = ["CommitProxy"]

_UNTYPED_REQUESTS = {80877103, 80877104}  # SSLRequest, GSSENCRequest


class CommitProxy:
    """Forward 127.0.0.1:<port> to the server; see the module docstring."""

    def __init__(self, host: str = "127.0.0.1", port: int = 5432) -> None:
        self.target = (host, port)
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.port = self.listener.getsockname()[1]
        self.mode: str | None = None
        self.on = "commit"
        self.refuse = False
        self.fired = threading.Event()
        self.release = threading.Event()
        self._lock = threading.Lock()
        self._socks: list[socket.socket] = []
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def dsn(self, dbname: str = "test", user: str = "postgres") -> str:
        return (
            f"postgresql://{user}@127.0.0.1:{self.port}/{dbname}?sslmode=disable&gssencmode=disable"
        )

    def arm(self, mode: str, on: str = "commit") -> None:
        with self._lock:
            self.fired.clear()
            self.mode = mode
            self.on = on

    def close(self) -> None:
        self._closed = True
        with contextlib.suppress(OSError):
            self.listener.close()
        with self._lock:
            socks, self._socks = self._socks, []
        for s in socks:
            with contextlib.suppress(OSError):
                s.close()

    # -- internals -----------------------------------------------------------------

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if self.refuse:
                client.close()
                continue
            try:
                upstream = socket.create_connection(self.target)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._socks += [client, upstream]
            pair = _Pair(self, client, upstream)
            threading.Thread(target=pair.client_to_server, daemon=True).start()
            threading.Thread(target=pair.server_to_client, daemon=True).start()


class _Pair:
    def __init__(self, proxy: CommitProxy, client: socket.socket, upstream: socket.socket) -> None:
        self.proxy = proxy
        self.client = client
        self.upstream = upstream
        self.swallow_reply = threading.Event()

    def _cut(self) -> None:
        for s in (self.client, self.upstream):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                s.close()

    def _read(self, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = self.client.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("client closed")
            buf += chunk
        return buf

    def client_to_server(self) -> None:
        try:
            while True:  # untyped: requests, then the startup message
                head = self._read(8)
                length, code = struct.unpack("!II", head)
                rest = self._read(length - 8)
                self.upstream.sendall(head + rest)
                if code not in _UNTYPED_REQUESTS:
                    break
            while True:
                head = self._read(5)
                kind, length = head[:1], struct.unpack("!I", head[1:])[0]
                body = self._read(length - 4)
                is_commit = kind == b"Q" and body.upper().startswith(b"COMMIT")
                point = "commit" if is_commit else "sync" if kind == b"S" else None
                if point is not None and point == self.proxy.on:
                    with self.proxy._lock:
                        mode, self.proxy.mode = self.proxy.mode, None
                    if mode == "before":
                        self.proxy.fired.set()
                        self._cut()
                        return
                    if mode == "after":
                        self.swallow_reply.set()
                    if mode == "hold":
                        self.proxy.fired.set()
                        self.proxy.release.wait(60)
                self.upstream.sendall(head + body)
        except OSError:
            self._cut()
        except ConnectionError:
            self._cut()

    def server_to_client(self) -> None:
        try:
            while True:
                data = self.upstream.recv(65536)
                if not data:
                    break
                if self.swallow_reply.is_set():
                    self.proxy.fired.set()
                    break
                self.client.sendall(data)
        except OSError:
            pass
        self._cut()
