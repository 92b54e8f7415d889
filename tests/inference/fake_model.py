#!/usr/bin/env python3
"""A small OpenAI-compatible model server for tests and benchmarks (stdlib only).

    python3 fake_model.py --port N [--model-id ID] [--ready-after S] [--latency-ms MS]
                          [--chunks K] [--chunk-delay-ms MS] [--host 0.0.0.0] [--verbose]

Routes:
  GET  /health               503 {"status":"loading"} for --ready-after seconds, then 200 {"status":"ok"}
  GET  /v1/models            {"object":"list","data":[{"id": MODEL_ID, "object":"model"}]}
  GET  /v1/models/MODEL_ID   that one model (404 for another id)
  GET  /stats                {"requests": n, "inflight": m} (n counts completion requests)
  POST /v1/chat/completions  echoes the last user message ("echo: ..."); "stream": true sends
  POST /v1/completions       K server-sent-event chunks, then "data: [DONE]";
                             "stream_options": {"include_usage": true} adds a last chunk
                             with no choices and the usage (and "usage": null on the others)
  POST /v1/embeddings        one vector of --embedding-dim floats per input string, the
                             same for the same text (from its SHA-256), unit length;
                             "encoding_format": "base64" sends them as little-endian
                             float32 in base64, as the OpenAI SDKs ask by default
Anything else: 404 JSON. Every response carries X-Replica-Port and X-Replica-Pid, so a
test behind a gateway can tell which replica answered. HTTP/1.1 keep-alive; SIGTERM and
SIGINT exit 0.
"""

import argparse
import base64
import hashlib
import json
import math
import os
import signal
import struct
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class State:
    def __init__(self, args):
        self.args = args
        self.started = time.monotonic()
        self.lock = threading.Lock()
        self.requests = 0
        self.inflight = 0


def last_user_text(body):
    """The text to echo: the last user message (chat) or the prompt (completions)."""
    messages = body.get("messages")
    if isinstance(messages, list):
        for m in reversed(messages):
            if isinstance(m, dict) and m.get("role") == "user":
                content = m.get("content")
                if isinstance(content, list):  # [{"type": "text", "text": ...}]
                    return " ".join(
                        p.get("text", "") for p in content if isinstance(p, dict))
                return "" if content is None else str(content)
        return ""
    prompt = body.get("prompt", "")
    if isinstance(prompt, list):
        prompt = prompt[-1] if prompt else ""
    return str(prompt)


def count_tokens(text):
    return max(1, len(text.split())) if text else 0


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fake-model/1"
    # Headers and body go out in two writes; with Nagle on, the body waits for
    # the client's delayed ACK (40 ms) on a keep-alive connection.
    disable_nagle_algorithm = True
    state = None  # set by main

    def log_message(self, fmt, *args):
        if self.state.args.verbose:
            sys.stderr.write("fake_model: %s - %s\n" % (self.address_string(), fmt % args))

    # ---- helpers ----------------------------------------------------------

    def _common_headers(self):
        self.send_header("X-Replica-Port", str(self.state.args.port))
        self.send_header("X-Replica-Pid", str(os.getpid()))

    def _json(self, code, obj):
        data = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self._common_headers()
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _error(self, code, message, kind="invalid_request_error"):
        self._json(code, {"error": {"message": message, "type": kind, "code": code}})

    def _read_body(self):
        length = self.headers.get("Content-Length")
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    break
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            return b"".join(chunks)
        return self.rfile.read(int(length)) if length else b""

    # ---- routes -----------------------------------------------------------

    def do_GET(self):
        path = self.path.split("?", 1)[0]
        if path == "/health":
            if time.monotonic() - self.state.started < self.state.args.ready_after:
                return self._json(503, {"status": "loading"})
            return self._json(200, {"status": "ok"})
        if path == "/v1/models":
            return self._json(200, {"object": "list", "data": [
                {"id": self.state.args.model_id, "object": "model",
                 "created": int(time.time()), "owned_by": "heteroflow-tests"}]})
        if path.startswith("/v1/models/"):
            if path[len("/v1/models/"):] != self.state.args.model_id:
                return self._error(404, "no model " + path[len("/v1/models/"):], "not_found")
            return self._json(200, {"id": self.state.args.model_id, "object": "model",
                                    "created": int(time.time()), "owned_by": "heteroflow-tests"})
        if path == "/stats":
            with self.state.lock:
                stats = {"requests": self.state.requests, "inflight": self.state.inflight}
            return self._json(200, stats)
        return self._error(404, "no route for GET " + path, "not_found")

    def do_HEAD(self):
        self.do_GET()

    def do_POST(self):
        path = self.path.split("?", 1)[0]
        raw = self._read_body()  # always consumed, so keep-alive stays in step
        if path not in ("/v1/chat/completions", "/v1/completions", "/v1/embeddings"):
            return self._error(404, "no route for POST " + path, "not_found")
        try:
            body = json.loads(raw or b"null")
        except (ValueError, UnicodeDecodeError) as e:
            return self._error(400, "body is not valid JSON: %s" % e)
        if not isinstance(body, dict):
            return self._error(400, "body must be a JSON object")
        with self.state.lock:
            self.state.requests += 1
            self.state.inflight += 1
        try:
            if path == "/v1/embeddings":
                self._embed(body)
            else:
                self._complete(path, body)
        finally:
            with self.state.lock:
                self.state.inflight -= 1

    def _embed(self, body):
        inputs = body.get("input")
        if isinstance(inputs, str):
            inputs = [inputs]
        if (not isinstance(inputs, list) or not inputs
                or not all(isinstance(x, str) or (isinstance(x, list) and all(isinstance(t, int) for t in x))
                           for x in inputs)):
            return self._error(400, "input must be a string, a list of strings or of token lists")
        fmt = body.get("encoding_format", "float")
        if fmt not in ("float", "base64"):
            return self._error(400, "encoding_format must be float or base64")
        dim = self.state.args.embedding_dim
        data, tokens = [], 0
        for i, x in enumerate(inputs):
            text = x if isinstance(x, str) else " ".join(str(t) for t in x)
            tokens += count_tokens(text) if isinstance(x, str) else len(x)
            digest = b""
            while len(digest) < 4 * dim:
                digest += hashlib.sha256(text.encode() + bytes([len(digest) // 32])).digest()
            raw = [int.from_bytes(digest[4 * k:4 * k + 4], "little") / 2**32 - 0.5 for k in range(dim)]
            norm = math.sqrt(sum(v * v for v in raw)) or 1.0
            vec = [v / norm for v in raw]
            emb = base64.b64encode(struct.pack("<%df" % dim, *vec)).decode() if fmt == "base64" else vec
            data.append({"object": "embedding", "index": i, "embedding": emb})
        self._json(200, {"object": "list", "data": data, "model": body.get("model") or self.state.args.model_id,
                         "usage": {"prompt_tokens": tokens, "total_tokens": tokens}})

    def _complete(self, path, body):
        args = self.state.args
        if args.latency_ms > 0:
            time.sleep(args.latency_ms / 1000.0)
        chat = path == "/v1/chat/completions"
        model = body.get("model") or args.model_id
        text = "echo: " + last_user_text(body)
        rid = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex[:24]
        created = int(time.time())
        prompt_tokens = count_tokens(last_user_text(body))
        completion_tokens = count_tokens(text)
        usage = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                 "total_tokens": prompt_tokens + completion_tokens}
        if body.get("stream") is True:
            options = body.get("stream_options")
            with_usage = isinstance(options, dict) and options.get("include_usage") is True
            return self._stream(chat, rid, created, model, text, usage if with_usage else None)
        if chat:
            choice = {"index": 0, "message": {"role": "assistant", "content": text},
                      "finish_reason": "stop"}
            obj = "chat.completion"
        else:
            choice = {"index": 0, "text": text, "finish_reason": "stop", "logprobs": None}
            obj = "text_completion"
        self._json(200, {
            "id": rid, "object": obj, "created": created, "model": model,
            "choices": [choice], "usage": usage})

    def _stream(self, chat, rid, created, model, text, usage=None):
        args = self.state.args
        k = max(1, args.chunks)
        # The text split into k pieces (some may be empty when it is short).
        step = -(-len(text) // k) if text else 0
        pieces = [text[i * step:(i + 1) * step] for i in range(k)]
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self._common_headers()
        self.end_headers()
        self.wfile.flush()

        def send_chunk(data):
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()

        try:
            for i, piece in enumerate(pieces):
                last = i == k - 1
                if chat:
                    delta = {"content": piece}
                    if i == 0:
                        delta["role"] = "assistant"
                    choice = {"index": 0, "delta": delta,
                              "finish_reason": "stop" if last else None}
                    obj = "chat.completion.chunk"
                else:
                    choice = {"index": 0, "text": piece, "logprobs": None,
                              "finish_reason": "stop" if last else None}
                    obj = "text_completion"
                event = {"id": rid, "object": obj, "created": created, "model": model,
                         "choices": [choice]}
                if usage is not None:
                    event["usage"] = None
                send_chunk(b"data: " + json.dumps(event).encode() + b"\n\n")
                if not last and args.chunk_delay_ms > 0:
                    time.sleep(args.chunk_delay_ms / 1000.0)
            if usage is not None:
                event = {"id": rid, "object": obj, "created": created, "model": model,
                         "choices": [], "usage": usage}
                send_chunk(b"data: " + json.dumps(event).encode() + b"\n\n")
            send_chunk(b"data: [DONE]\n\n")
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 256


def parse_args(argv=None):
    p = argparse.ArgumentParser(description="fake OpenAI-compatible model server")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--host", default="0.0.0.0")
    p.add_argument("--model-id", default="fake-model")
    p.add_argument("--ready-after", type=float, default=0.0,
                   help="seconds /health answers 503 after start")
    p.add_argument("--latency-ms", type=float, default=0.0,
                   help="delay before each completion starts")
    p.add_argument("--chunks", type=int, default=5, help="stream chunks per answer")
    p.add_argument("--chunk-delay-ms", type=float, default=50.0,
                   help="delay between stream chunks")
    p.add_argument("--embedding-dim", type=int, default=8, help="floats per embedding")
    p.add_argument("--verbose", action="store_true", help="log every request on stderr")
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    Handler.state = State(args)
    server = Server((args.host, args.port), Handler)
    if args.port == 0:  # for ad-hoc use: report the port the kernel chose
        args.port = server.server_address[1]

    def stop(signum, frame):
        # shutdown() waits for serve_forever, so it runs on another thread.
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    sys.stderr.write("fake_model: model %s listening on %s:%d (pid %d)\n"
                     % (args.model_id, args.host, args.port, os.getpid()))
    sys.stderr.flush()
    try:
        server.serve_forever(poll_interval=0.2)
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
