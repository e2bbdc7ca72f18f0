#!/usr/bin/env python3
# -*- coding: utf-8 -*-
"""Science DMZ Kit: the authenticated bridge from Zeek's NetControl to the kit's
response plan (playbooks/respond.yml).

  serve  runs on the control node: it accepts signed block requests over HTTP and
         runs respond.yml for each, one at a time, returning the playbook's verdict.
  send   runs on a Zeek sensor (NetControl's drop action calls it through Exec):
         it signs one request and exits 0 only when the block was applied.

Requests are JSON, signed with HMAC-SHA256 over the exact body with a shared key
(header X-SDMZ-Signature); each carries a timestamp and a random nonce, and the
bridge refuses stale timestamps and nonces it has already seen. The bridge runs
a fixed argv (no shell), so no field of a request can become a command. Whether an
address may be blocked (never a collaborator) is decided by respond.yml, the one
place that rule lives. Standard library only, so a sensor needs nothing but python3.
"""
from __future__ import annotations

import argparse
import hashlib
import hmac
import http.server
import ipaddress
import json
import os
import re
import secrets
import stat
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

SIGNATURE_HEADER = "X-SDMZ-Signature"
REASON = re.compile(r"^[A-Za-z0-9 _.,:;()/+-]{1,200}$")
MAX_BODY = 4096


class RequestError(Exception):
    """A refused request: HTTP status and the reason, logged and returned."""

    def __init__(self, status, reason):
        super().__init__(reason)
        self.status = status
        self.reason = reason


def read_key(path):
    """The shared key; refused when others may read the file."""
    info = os.stat(path)
    if info.st_mode & (stat.S_IRWXO | stat.S_IWGRP):
        raise SystemExit("%s: the key file must not be readable by others or writable by its group "
                         "(chmod 0640 or 0600)" % path)
    with open(path, "rb") as handle:
        key = handle.read().strip()
    if len(key) < 32:
        raise SystemExit("%s: the key is shorter than 32 bytes" % path)
    return key


def sign(key, body):
    return hmac.new(key, body, hashlib.sha256).hexdigest()


def block_request(address, ttl_seconds, reason, now=None):
    return json.dumps({"action": "block", "address": address, "ttl": int(ttl_seconds), "reason": reason,
                       "timestamp": int(now if now is not None else time.time()),
                       "nonce": secrets.token_hex(16)}, sort_keys=True).encode()


class Verifier:
    """Signature, freshness and replay checks; then the request's own fields."""

    def __init__(self, key, window=60, max_ttl=7 * 86400, clock=time.time):
        self.key = key
        self.window = window
        self.max_ttl = max_ttl
        self.clock = clock
        self.seen = {}
        self.lock = threading.Lock()

    def verify(self, body, signature):
        if not signature or not hmac.compare_digest(sign(self.key, body), signature):
            raise RequestError(401, "bad signature")
        try:
            request = json.loads(body)
        except ValueError as exc:
            raise RequestError(400, "body is not JSON") from exc
        if not isinstance(request, dict):
            raise RequestError(400, "body is not a JSON object")
        now = self.clock()
        timestamp = request.get("timestamp")
        if not isinstance(timestamp, int) or abs(now - timestamp) > self.window:
            raise RequestError(401, "stale or missing timestamp (allowed skew %ds)" % self.window)
        nonce = request.get("nonce")
        if not isinstance(nonce, str) or not re.fullmatch(r"[0-9a-f]{32}", nonce):
            raise RequestError(400, "missing or malformed nonce")
        with self.lock:
            for old in [n for n, expiry in self.seen.items() if expiry < now]:
                del self.seen[old]
            if nonce in self.seen:
                raise RequestError(409, "replayed nonce")
            self.seen[nonce] = now + 2 * self.window
        return self.check_fields(request)

    def check_fields(self, request):
        if request.get("action") != "block":
            raise RequestError(400, "unknown action %r" % request.get("action"))
        try:
            network = ipaddress.ip_network(str(request.get("address")), strict=True)
        except ValueError as exc:
            raise RequestError(400, "address: %s" % exc) from exc
        ttl = request.get("ttl")
        if not isinstance(ttl, int) or not 1 <= ttl <= self.max_ttl:
            raise RequestError(400, "ttl: must be 1-%d seconds" % self.max_ttl)
        reason = request.get("reason")
        if not isinstance(reason, str) or not REASON.match(reason):
            raise RequestError(400, "reason: 1-200 letters, digits, spaces and _ . , : ; ( ) / + -")
        return {"address": str(network), "ttl": ttl, "reason": reason}


def respond_argv(args, block):
    """The fixed response-plan command; the request's fields travel as one JSON argument."""
    extra = json.dumps({"block": block["address"], "ttl": "%ds" % block["ttl"],
                        "reason": "zeek netcontrol: " + block["reason"]})
    return [args.ansible_playbook, "-i", args.inventory, os.path.join(args.project, "playbooks", "respond.yml"),
            "-e", extra]


def make_handler(args, verifier, run_lock, log):
    class Handler(http.server.BaseHTTPRequestHandler):
        server_version = "sdmz-netcontrol-bridge"

        def log_message(self, fmt, *values):  # one line per request, written by _reply
            return

        def _reply(self, status, payload):
            body = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            log("%s %s %d %s" % (self.client_address[0], self.path, status,
                                 payload.get("error") or payload.get("result")))

        def do_POST(self):  # noqa: N802 (http.server's naming)
            if self.path != "/v1/block":
                self._reply(404, {"error": "unknown path"})
                return
            length = int(self.headers.get("Content-Length") or 0)
            if not 0 < length <= MAX_BODY:
                self._reply(413, {"error": "body must be 1-%d bytes" % MAX_BODY})
                return
            body = self.rfile.read(length)
            try:
                block = verifier.verify(body, self.headers.get(SIGNATURE_HEADER))
            except RequestError as exc:
                self._reply(exc.status, {"error": exc.reason})
                return
            argv = respond_argv(args, block)
            with run_lock:  # one change to the border at a time
                result = subprocess.run(argv, capture_output=True, text=True, timeout=args.playbook_timeout,
                                        check=False, cwd=args.project)
            if result.returncode != 0:
                tail = (result.stdout + result.stderr).strip().splitlines()[-12:]
                self._reply(422, {"error": "respond.yml refused or failed (exit %d)" % result.returncode,
                                  "detail": tail, "address": block["address"]})
                return
            self._reply(200, {"result": "blocked", "address": block["address"], "ttl": block["ttl"]})

    return Handler


def serve(args):
    key = read_key(args.key_file)
    host, _, port = args.listen.rpartition(":")
    verifier = Verifier(key, window=args.window, max_ttl=args.max_ttl)

    def log(line):
        print(line, file=sys.stderr, flush=True)

    server = http.server.ThreadingHTTPServer((host.strip("[]"), int(port)),
                                             make_handler(args, verifier, threading.Lock(), log))
    log("sdmz-netcontrol-bridge listening on %s (inventory %s)" % (args.listen, args.inventory))
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


def send(args):
    key = read_key(args.key_file)
    body = block_request(args.address, args.ttl, args.reason)
    request = urllib.request.Request(args.url, data=body, method="POST",
                                     headers={"Content-Type": "application/json", SIGNATURE_HEADER: sign(key, body)})
    try:
        with urllib.request.urlopen(request, timeout=args.timeout) as response:
            print(response.read().decode())
            return 0
    except urllib.error.HTTPError as exc:
        print("sdmz-netcontrol-send: refused (%d): %s" % (exc.code, exc.read().decode()), file=sys.stderr)
        return 2
    except (urllib.error.URLError, OSError) as exc:
        print("sdmz-netcontrol-send: cannot reach the bridge at %s: %s" % (args.url, exc), file=sys.stderr)
        return 3


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="sdmz-netcontrol-bridge", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    srv = sub.add_parser("serve", help="accept signed block requests and run respond.yml")
    srv.add_argument("--listen", default="127.0.0.1:8740", help="ADDR:PORT (default 127.0.0.1:8740)")
    srv.add_argument("--key-file", required=True)
    srv.add_argument("--project", default=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                     help="the kit's checkout (where playbooks/respond.yml is)")
    srv.add_argument("--inventory", required=True)
    srv.add_argument("--ansible-playbook", default="ansible-playbook")
    srv.add_argument("--window", type=int, default=60, help="allowed clock skew, seconds")
    srv.add_argument("--max-ttl", type=int, default=7 * 86400, help="longest block, seconds")
    srv.add_argument("--playbook-timeout", type=int, default=600)
    snd = sub.add_parser("send", help="ask the bridge to block an address")
    snd.add_argument("--url", required=True, help="http://BRIDGE:PORT/v1/block")
    snd.add_argument("--key-file", required=True)
    snd.add_argument("--ttl", type=int, required=True, help="seconds")
    snd.add_argument("--reason", required=True)
    snd.add_argument("--timeout", type=float, default=660)
    snd.add_argument("address")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    return serve(args) if args.command == "serve" else send(args)


if __name__ == "__main__":
    sys.exit(main())
