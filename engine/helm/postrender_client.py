"""The post-renderer executable helm runs: hands the manifests to helmdeck's own process, else renders them itself.

A Python process that imports PyYAML and the post-renderer costs tens of milliseconds of CPU per helm
run; this one, started with ``python -S -E`` (no site, no environment) and importing nothing beyond the
interpreter's built-in modules, costs a few. With ``--socket=PATH`` (:mod:`engine.helm.postrender_plugin`
adds it: the helmdeck process that runs helm serves renders on a Unix socket in a directory only its user
can open) it sends its arguments and stdin there and writes back what comes: the post-render is
:func:`engine.helm.postrender.run` in that process, byte for byte the same as alone. Without the flag, or
when the socket does not answer (helmdeck gone, stopped or stuck: :data:`ANSWER_WITHIN`), it loads the
interpreter's site packages (PyYAML) and runs the post-renderer itself: slower, never different.

Wire format, over one connection per render: the request is a 4-byte big-endian length, the arguments
joined by NUL (UTF-8, surrogate escapes kept), then the manifests until the client shuts its side; the
answer is one byte (the exit code: 0 rendered, 1 not post-renderable, 2 bad arguments), then the manifests
(code 0) or the message (UTF-8) until the server closes.

Runs as a script (``python -S -E .../engine/helm/postrender_client.py [--socket=PATH] [--config=PATH]
KEY=VALUE...``, stdin to stdout): it must import nothing but built-in modules at the top level.
"""

from __future__ import annotations

import os
import sys

SOCKET_FLAG = "--socket="
# helm 4 drops a failing plugin's stderr: the message also goes to the file this variable names (engine.helm.cli).
ERRORS_ENV = "HELMDECK_POSTRENDER_ERRORS"
_PREFIX = "helmdeck post-renderer: "
# Seconds the client waits on the socket, plus 2 s a MiB of manifests (the in-process render of a large chart),
# before it renders alone: a helmdeck process that is stopped (SIGSTOP, a debugger) or stuck answers nothing,
# and its helm runs must go on and end as they would without it (a paused replica's upgrade finishes; the
# replica taking over records it: issue 32).
ANSWER_WITHIN = 5.0


def encode_request(args: list[str], manifests: bytes) -> bytes:
    """The request of the wire format for ``args`` and ``manifests``."""
    header = "\0".join(args).encode("utf-8", "surrogateescape")
    return len(header).to_bytes(4, "big") + header + manifests


def decode_request(data: bytes) -> tuple[list[str], bytes]:
    """``(args, manifests)`` of a request; raises ValueError when it is cut short."""
    size = int.from_bytes(data[:4], "big")
    if len(data) < 4 + size:
        raise ValueError("post-render request cut short")
    header = data[4 : 4 + size].decode("utf-8", "surrogateescape")
    return (header.split("\0") if header else []), data[4 + size :]


def finish(code: int, out: bytes, message: str) -> int:
    """Write a render's outcome as the executable reports it: the manifests on stdout, or the message on
    stderr (and in the file ``ERRORS_ENV`` names, for helm 4); returns ``code``."""
    if code == 0:
        sys.stdout.buffer.write(out)
        sys.stdout.buffer.flush()
        return 0
    sys.stderr.write(_PREFIX + message + "\n")
    if code == 1 and os.environ.get(ERRORS_ENV):
        # open(), not pathlib: importing pathlib costs more than the whole client otherwise
        with open(os.environ[ERRORS_ENV], "w", encoding="utf-8") as fh:  # noqa: PTH123
            fh.write(_PREFIX + message + "\n")
    return code


def _ask(path: str, request: bytes) -> bytes:
    """The server's answer to ``request``; raises OSError when it cannot be reached or is silent for
    :data:`ANSWER_WITHIN` seconds (plus 2 s a MiB of ``request``) at any step (TimeoutError)."""
    import _socket  # the C module: the ``socket`` package would import enum, selectors and more

    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    sock.settimeout(ANSWER_WITHIN + 2.0 * len(request) / (1 << 20))
    try:
        sock.connect(path)
        sock.sendall(request)
        sock.shutdown(_socket.SHUT_WR)
        chunks = []
        while chunk := sock.recv(1 << 16):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        sock.close()


def _alone(args: list[str], manifests: bytes) -> tuple[int, bytes, str]:
    """The post-render in this process: the interpreter's site packages (PyYAML) loaded now, the plugin's
    copies of helmdeck's modules first on the path."""
    import site
    from pathlib import Path

    site.ENABLE_USER_SITE = False  # as ``-s``: never the user's own packages
    site.main()
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))  # <plugin>/engine/helm/<this>
    from engine.helm import postrender

    return postrender.run(args, manifests)


def main(argv: list[str] | None = None) -> int:
    """Entry point: ``--socket=PATH`` (optional) and the post-renderer's arguments; manifests stdin → stdout."""
    argv = sys.argv[1:] if argv is None else argv
    path = next((a[len(SOCKET_FLAG) :] for a in argv if a.startswith(SOCKET_FLAG)), "")
    args = [a for a in argv if not a.startswith(SOCKET_FLAG)]
    manifests = sys.stdin.buffer.read()
    if path:
        try:
            answer = _ask(path, encode_request(args, manifests))
        except OSError:
            answer = b""
        if answer:
            code = answer[0]
            return finish(code, answer[1:], "" if code == 0 else answer[1:].decode("utf-8", "replace"))
    return finish(*_alone(args, manifests))


if __name__ == "__main__":
    sys.exit(main())
