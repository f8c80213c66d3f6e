"""An OpenLineage HTTP receiver for tests: listens on 127.0.0.1 (a free
port, printed as `listening on PORT`), answers POST /api/v1/lineage with
201 and appends {"authorization": header, "event": body} as one JSON line
to argv[1]; `--fail N` answers the first N requests 503."""

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

OUT = sys.argv[1]
FAIL = int(sys.argv[3]) if len(sys.argv) > 3 and sys.argv[2] == "--fail" else 0
seen = {"n": 0}


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        seen["n"] += 1
        if self.path != "/api/v1/lineage" or seen["n"] <= FAIL:
            self.send_response(503 if self.path == "/api/v1/lineage" else 404)
            self.end_headers()
            return
        with open(OUT, "a") as f:
            f.write(json.dumps({"authorization": self.headers.get("Authorization"),
                                "event": json.loads(body)}) + "\n")
        self.send_response(201)
        self.end_headers()

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(f"listening on {server.server_address[1]}", flush=True)
server.serve_forever()
