"""A small HTTP chart repository: serves a folder made by ``helm repo index`` on 127.0.0.1.

The demo runs one (in its own process, stopped at exit) beside the local
cluster's OCI registry, and records it in the cluster directory (``record``:
its URL and the PID + start time of the process serving it) so that
``helmdeck cluster status`` shows it while that process lives (:func:`serving`);
tests and benchmarks run their own. GET only, with an
``ETag`` and ``Last-Modified`` on every file and a 304 for a matching
``If-None-Match`` (as chart repositories on object storage answer), optional
basic auth, and counters of the requests seen.
"""

from __future__ import annotations

import base64
import email.utils
import hashlib
import http.server
import json
import os
import threading
from pathlib import Path

from localcluster.process import proc_start_time


class _Handler(http.server.BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: object) -> None:
        pass  # quiet: the app owns the terminal

    def do_GET(self) -> None:
        srv = self.server
        srv.requests.append(self.path)
        if srv.auth is not None and self.headers.get("Authorization") != srv.auth:
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="charts"')
            self.end_headers()
            return
        path = (srv.folder / self.path.lstrip("/").split("?", 1)[0]).resolve()
        if not path.is_file() or srv.folder.resolve() not in path.parents:
            self.send_response(404)
            self.end_headers()
            return
        body = path.read_bytes()
        etag = '"' + hashlib.sha256(body).hexdigest()[:16] + '"'
        modified = email.utils.formatdate(path.stat().st_mtime, usegmt=True)
        if self.headers.get("If-None-Match") == etag:
            srv.not_modified += 1
            self.send_response(304)
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("ETag", etag)
        self.send_header("Last-Modified", modified)
        self.end_headers()
        self.wfile.write(body)


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    folder: Path
    auth: str | None
    requests: list[str]
    not_modified: int


def serving(record: Path) -> str | None:
    """The URL a :class:`ChartRepoServer` recorded in ``record``, while the process that serves it lives
    (checked by PID and start time, so a reused PID does not count); None without a live record."""
    try:
        data = json.loads(record.read_text())
        url, pid, started = str(data["url"]), int(data["pid"]), int(data["startTime"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return url if proc_start_time(pid) == started else None


class ChartRepoServer:
    """Serves ``folder`` on ``127.0.0.1:port`` (0: any free port) from a daemon thread until :meth:`stop`;
    ``auth=(user, password)`` requires basic auth. ``url`` is ``http://127.0.0.1:<port>``. With ``record``,
    the URL and this process's PID and start time are written there (JSON: ``url``, ``pid``, ``startTime``)
    and removed at :meth:`stop` (:func:`serving` reads it).

    Raises OSError when ``port`` is taken or ``record`` cannot be written.
    """

    def __init__(self, folder: Path, auth: tuple[str, str] | None = None, *, port: int = 0,
                 record: Path | None = None):
        folder.mkdir(parents=True, exist_ok=True)
        self.folder = folder
        self._srv = _Server(("127.0.0.1", port), _Handler)
        self._srv.folder = folder
        self._srv.auth = "Basic " + base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode() if auth else None
        self._srv.requests = []
        self._srv.not_modified = 0
        self.port: int = self._srv.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._srv.serve_forever, daemon=True)
        self._thread.start()
        self._record = record
        if record is not None:
            try:
                _write_record(record, self.url)
            except OSError:
                self.stop()
                raise

    @property
    def requests(self) -> list[str]:
        """The paths asked for, in order."""
        return self._srv.requests

    @property
    def not_modified(self) -> int:
        """How many requests were answered 304."""
        return self._srv.not_modified

    def stop(self) -> None:
        self._srv.shutdown()
        self._srv.server_close()
        if self._record is not None and serving(self._record) == self.url:  # another run's record stays
            self._record.unlink(missing_ok=True)


def _write_record(record: Path, url: str) -> None:
    pid = os.getpid()
    tmp = record.with_name(f".{record.name}.{pid}")
    tmp.write_text(json.dumps({"url": url, "pid": pid, "startTime": proc_start_time(pid)}))
    tmp.replace(record)
