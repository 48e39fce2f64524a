"""A local stand-in of the Hugging Face Hub's upload API (create a repo, check a card's YAML,
pre-upload, commit),
enough for huggingface_hub's `create_repo` and `upload_folder` of small files: what a commit
holds lands in a folder, so a test reads exactly what was uploaded."""

from __future__ import annotations

import base64
import http.server
import json
import threading
from pathlib import Path


class HubStandIn:
    def __init__(self, root: Path):
        self.root, self.requests, self.cards = root, [], []
        handler = type("Handler", (_Handler,), {"hub": self})
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

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

    def _reply(self, value: dict) -> None:
        data = json.dumps(value).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
