"""A local stand-in of the Hugging Face Hub's API: uploads (create a repo, check a card's YAML,
pre-upload, commit) and downloads (a file's metadata, the file itself, by byte ranges),
enough for huggingface_hub's `create_repo` and `upload_folder` of small files: what a commit
holds lands in a folder, so a test reads exactly what was uploaded."""

from __future__ import annotations

import base64
import hashlib
import http.server
import json
import threading
import urllib.parse
from pathlib import Path


class HubStandIn:
    def __init__(self, root: Path):
        self.root, self.requests, self.cards = root, [], []
        self.files: dict[str, bytes] = {}  # "org/name/file" -> its bytes, served for download
        self.recorded_sha256: dict[str, str] = {}  # a file's SHA-256 as the Hub states it (default: true)
        self.cut_next_download = False  # send half of the next file, then drop the connection
        handler = type("Handler", (_Handler,), {"hub": self})
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def describe(self, key: str) -> dict:
        """A file as the Hub's paths-info states it: size and the SHA-256 of its content (LFS)."""
        data = self.files[key]
        sha = self.recorded_sha256.get(key, hashlib.sha256(data).hexdigest())
        path = key.split("/", 2)[2]
        return {
            "type": "file",
            "path": path,
            "size": len(data),
            "oid": "0" * 40,
            "lfs": {"oid": sha, "size": len(data), "pointerSize": 134},
        }

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class _Handler(http.server.BaseHTTPRequestHandler):
    hub: HubStandIn

    def log_message(self, *args) -> None:  # quiet: the test reads `requests`
        pass

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.hub.requests.append((self.path, self.headers.get("Authorization")))
        if self.path == "/api/repos/create":
            repo = json.loads(body)
            name = f"{repo['organization']}/{repo['name']}"
            (self.hub.root / name).mkdir(parents=True, exist_ok=True)
            self._reply({"url": f"{self.hub.url}/{name}", "name": name})
        elif self.path == "/api/validate-yaml":  # a README.md's YAML, checked before the commit
            self.hub.cards.append(json.loads(body)["content"])
            self._reply({"errors": [], "warnings": []})
        elif "/paths-info/" in self.path:
            repo = self.path.removeprefix("/api/models/").split("/paths-info/")[0]
            paths = urllib.parse.parse_qs(body.decode())["paths"]  # a form, as huggingface_hub sends it
            self._reply([self.hub.describe(f"{repo}/{path}") for path in paths])
        elif "/preupload/" in self.path:
            files = json.loads(body)["files"]
            self._reply(
                {
                    "files": [
                        {"path": f["path"], "uploadMode": "regular", "shouldIgnore": False} for f in files
                    ]
                }
            )
        elif "/commit/" in self.path:
            repo = self.path.removeprefix("/api/models/").split("/commit/")[0]
            for line in body.decode().splitlines():
                entry = json.loads(line)
                if entry["key"] == "file":
                    target = self.hub.root / repo / entry["value"]["path"]
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_bytes(base64.b64decode(entry["value"]["content"]))
            self._reply({"commitUrl": f"{self.hub.url}/{repo}/commit/{'0' * 40}", "commitOid": "0" * 40})
        else:
            self.send_error(404)

    def do_HEAD(self) -> None:
        self._download(send=False)

    def do_GET(self) -> None:
        self._download(send=True)

    def _download(self, send: bool) -> None:
        self.hub.requests.append(
            (f"{self.command} {self.path} {self.headers.get('Range') or ''}".strip(), None)
        )
        repo, _, rest = self.path.lstrip("/").partition("/resolve/")
        key = f"{repo}/{rest.partition('/')[2]}"
        if key not in self.hub.files:
            self.send_error(404)
            return
        data = self.hub.files[key]
        start = int(self.headers["Range"].split("=")[1].split("-")[0]) if self.headers.get("Range") else 0
        self.send_response(206 if start else 200)
        etag = hashlib.sha256(data).hexdigest()
        for header, value in (
            ("Content-Length", len(data) - start), ("ETag", f'"{etag}"'), ("X-Linked-Etag", f'"{etag}"'),
            ("X-Linked-Size", len(data)), ("X-Repo-Commit", "0" * 40), ("Accept-Ranges", "bytes"),
        ):  # fmt: skip
            self.send_header(header, str(value))
        if start:
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        self.end_headers()
        if not send:
            return
        if self.hub.cut_next_download:
            self.hub.cut_next_download = False
            self.wfile.write(data[start : start + (len(data) - start) // 2])
            self.wfile.flush()
            self.connection.shutdown(2)  # the connection drops mid-file
            return
        self.wfile.write(data[start:])

    def _reply(self, value: dict | list) -> None:
        data = json.dumps(value).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
