#!/usr/bin/env python3
"""A stand-in Schema Registry for the tests: NOT a real registry.

None of the real ones (Confluent, Apicurio, Karapace, Redpanda) installs on the test machines
(they need a JVM or are not packaged), so this serves the part of the documented Confluent
REST API that reclass and confluent-kafka's clients use, the way the real one answers it:

  POST /subjects/{subject}/versions   {"schema": "..."} -> {"id": N, ...} (the same schema
                                      under any subject gets the same id)
  POST /subjects/{subject}            lookup: the registered version, or 404 error 40403
  GET  /schemas/ids/{id}              {"schema": "..."} or 404 {"error_code": 40403}
  GET  /subjects, /subjects/{s}/versions, /subjects/{s}/versions/{v|latest}

Ids start at --first-id (real registries hand out ids like 100042 in shared clusters). The
state lives in --state (JSON), so a restart (the tests' registry outage) keeps every id.
--user-info USER:PASSWORD requires that basic auth (401 otherwise), as a secured registry does.

  schema_registry.py --port P --state FILE [--first-id N] [--user-info U:P]
"""
import argparse
import base64
import json
import os
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

CT = "application/vnd.schemaregistry.v1+json"


def canonical(schema_text):
    return json.dumps(json.loads(schema_text), sort_keys=True, separators=(",", ":"))


class State:
    def __init__(self, path, first_id):
        self.path, self.lock = path, threading.Lock()
        self.d = {"next_id": first_id, "schemas": {}, "subjects": {}}
        if os.path.exists(path):
            with open(path) as f:
                self.d = json.load(f)

    def save(self):
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.d, f)
        os.replace(tmp, self.path)

    def find(self, canon):
        for sid, s in self.d["schemas"].items():
            if canonical(s) == canon:
                return int(sid)
        return None

    def register(self, subject, schema_text):
        canon = canonical(schema_text)
        with self.lock:
            sid = self.find(canon)
            if sid is None:
                sid = self.d["next_id"]
                self.d["next_id"] += 1
                self.d["schemas"][str(sid)] = schema_text
            versions = self.d["subjects"].setdefault(subject, [])
            if sid not in versions:
                versions.append(sid)
            self.save()
            return sid, versions.index(sid) + 1


def make_handler(state, user_info):
    class H(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt, *args):
            pass

        def reply(self, code, obj):
            body = json.dumps(obj).encode()
            self.send_response(code)
            self.send_header("Content-Type", CT)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def authorized(self):
            if not user_info:
                return True
            want = "Basic " + base64.b64encode(user_info.encode()).decode()
            if self.headers.get("Authorization") == want:
                return True
            self.reply(401, {"error_code": 401, "message": "Unauthorized"})
            return False

        def not_found(self, code, what):
            self.reply(404, {"error_code": code, "message": what + " not found"})

        def do_GET(self):
            if not self.authorized():
                return
            path = self.path.split("?")[0].rstrip("/")
            d = state.d
            m = re.fullmatch(r"/schemas/ids/(\d+)", path)
            if m:
                s = d["schemas"].get(m.group(1))
                return self.reply(200, {"schema": s}) if s else self.not_found(40403, "Schema")
            if path == "/subjects":
                return self.reply(200, sorted(d["subjects"]))
            m = re.fullmatch(r"/subjects/([^/]+)/versions", path)
            if m:
                v = d["subjects"].get(m.group(1))
                return self.reply(200, list(range(1, len(v) + 1))) if v else self.not_found(40401, "Subject")
            m = re.fullmatch(r"/subjects/([^/]+)/versions/(\w+)", path)
            if m:
                v = d["subjects"].get(m.group(1))
                if not v:
                    return self.not_found(40401, "Subject")
                i = len(v) if m.group(2) == "latest" else int(m.group(2))
                if not 1 <= i <= len(v):
                    return self.not_found(40402, "Version")
                sid = v[i - 1]
                return self.reply(200, {"subject": m.group(1), "version": i, "id": sid,
                                        "schema": d["schemas"][str(sid)]})
            self.reply(404, {"error_code": 404, "message": "no such endpoint in the stand-in"})

        def do_POST(self):
            if not self.authorized():
                return
            n = int(self.headers.get("Content-Length") or 0)
            try:
                body = json.loads(self.rfile.read(n) or b"{}")
                schema_text = body["schema"]
                canonical(schema_text)
            except (ValueError, KeyError):
                return self.reply(422, {"error_code": 42201, "message": "Invalid schema"})
            if body.get("schemaType", "AVRO") != "AVRO":
                return self.reply(422, {"error_code": 42201, "message": "only AVRO here"})
            path = self.path.split("?")[0].rstrip("/")
            m = re.fullmatch(r"/subjects/([^/]+)/versions", path)
            if m:
                sid, ver = state.register(m.group(1), schema_text)
                return self.reply(200, {"id": sid, "subject": m.group(1), "version": ver,
                                        "schema": schema_text})
            m = re.fullmatch(r"/subjects/([^/]+)", path)
            if m:
                sid = state.find(canonical(schema_text))
                v = state.d["subjects"].get(m.group(1), [])
                if sid is None or sid not in v:
                    return self.not_found(40403, "Schema")
                return self.reply(200, {"subject": m.group(1), "version": v.index(sid) + 1,
                                        "id": sid, "schema": schema_text})
            self.reply(404, {"error_code": 404, "message": "no such endpoint in the stand-in"})

    return H


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--state", required=True)
    ap.add_argument("--first-id", type=int, default=100001)
    ap.add_argument("--user-info", default=os.environ.get("STANDIN_REGISTRY_USER_INFO"))
    a = ap.parse_args()
    srv = ThreadingHTTPServer(("127.0.0.1", a.port), make_handler(State(a.state, a.first_id), a.user_info))
    srv.daemon_threads = True
    print("schema registry stand-in on http://127.0.0.1:%d" % a.port, flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    main()
