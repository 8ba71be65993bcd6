#!/usr/bin/env python3
"""A scripted OpenAI-compatible server with a known service time, for `tune` and
`bench --find-capacity` tests (not a model of any engine's scheduler).

N slots serve requests first come, first served; each request holds a slot for exactly S
seconds, then streams its tokens at once. So the server completes at most N/S requests per
second, and a request's time to first token is its wait for a slot plus S.

usage: scripted_server.py --port P [--slots N] [--service-ms S] [--tokens K]
                          [--mode serve|exit|hang]
  exit: print a start-up error and exit 3 (a server that dies at start-up)
  hang: never listen (a server that never becomes ready)
"""
import argparse, json, queue, sys, threading, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ap = argparse.ArgumentParser()
ap.add_argument("--port", type=int, required=True)
ap.add_argument("--slots", type=int, default=4)
ap.add_argument("--service-ms", type=float, default=100.0)
ap.add_argument("--tokens", type=int, default=4)
ap.add_argument("--mode", default="serve")
a = ap.parse_args()

if a.mode == "exit":
    print(f"error: cannot load model (scripted failure, port {a.port})", file=sys.stderr)
    sys.exit(3)
if a.mode == "hang":
    print("loading forever (scripted)", file=sys.stderr, flush=True)
    while True:
        time.sleep(3600)

S = a.service_ms / 1000.0
# First come, first served: N worker threads take requests from one FIFO queue and hold each
# for S. (A threading.Semaphore lets newcomers barge past woken waiters, which gives some
# requests waits far beyond an M/D/N queue's.)
fifo = queue.Queue()


def slot_worker():
    while True:
        done = fifo.get()
        time.sleep(S)
        done.set()


for _ in range(a.slots):
    threading.Thread(target=slot_worker, daemon=True).start()


class H(BaseHTTPRequestHandler):
    # Keep-alive (bodies carry Content-Length), so the client's pooled connections are reused
    # and the accept loop adds no per-request cost to the service time.
    protocol_version = "HTTP/1.1"
    # Headers and body go out in separate writes: without TCP_NODELAY, Nagle's algorithm and
    # the client's delayed ACK hold the body back ~40 ms.
    disable_nagle_algorithm = True

    def log_message(self, *args):
        pass

    def _json(self, obj):
        body = json.dumps(obj).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path == "/health":
            self._json({"status": "ok"})
        elif self.path == "/v1/models":
            self._json({"object": "list", "data": [{"id": "scripted", "object": "model"}]})
        else:
            self.send_error(404)

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        self.rfile.read(n)
        done = threading.Event()
        fifo.put(done)
        done.wait()
        out = []
        for _ in range(a.tokens):
            out.append("data: " + json.dumps({"choices": [{"index": 0, "text": "x"}]}) + "\n\n")
        usage = {"prompt_tokens": 1, "completion_tokens": a.tokens, "total_tokens": a.tokens + 1}
        out.append("data: " + json.dumps({"choices": [], "usage": usage}) + "\n\n")
        out.append("data: [DONE]\n\n")
        body = "".join(out).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024  # the listen backlog (read when the socket is opened)

    def handle_error(self, request, client_address):
        pass  # clients closing early (cancelled requests, readiness probes) are not errors


Server(("127.0.0.1", a.port), H).serve_forever()
