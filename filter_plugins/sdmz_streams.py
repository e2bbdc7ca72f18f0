# -*- coding: utf-8 -*-
# Science DMZ Kit: the stream requests each gateway holds, derived from the
# inventory's `sdmz_streams` (docs/streaming.md). A stream crosses two gateways:
# the producer's gateway listens for the producer and connects to the consumer's
# gateway; the consumer's gateway listens for the producer's gateway only and
# connects to the consumer. Channel i uses port + i on both gateways.
from __future__ import annotations

import ipaddress
import re

from ansible.errors import AnsibleFilterError

_ID = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
_BITS = re.compile(r"^[0-9]+[kKmMgG]?$")


def _fail(where, what):
    raise AnsibleFilterError("sdmz_streams: %s: %s" % (where, what))


def _dmz_address(hostvars, host, where):
    if host not in hostvars:
        _fail(where, "'%s' is not a host of the inventory" % host)
    for interface in hostvars[host].get("sdmz_interfaces", []):
        if interface.get("role") == "dmz" and interface.get("ipv4"):
            return str(ipaddress.ip_interface(interface["ipv4"]).ip)
    _fail(where, "'%s' has no dmz interface with an IPv4 address" % host)
    return None


def _tls_name(hostvars, gateway):
    """The DNS name a gateway's certificate carries: its inventory name unless
    stream_proxy_tls_name says otherwise."""
    return str(hostvars[gateway].get("stream_proxy_tls_name") or gateway)


def _port_range(text, where):
    match = re.fullmatch(r"(\d+)-(\d+)", str(text))
    if not match:
        _fail(where, "port range must be LOW-HIGH")
    return int(match.group(1)), int(match.group(2))


def sdmz_stream_requests(streams, hostvars, host, gateways, port_range):
    """The requests `host` holds: a list of dicts with sdmz-streamctl's keys."""
    low, high = _port_range(port_range, "stream_proxy_port_range")
    requests, ids, used = [], set(), {}
    for index, stream in enumerate(streams or []):
        where = "sdmz_streams[%d]" % index
        if not isinstance(stream, dict):
            _fail(where, "must be a mapping")
        unknown = set(stream) - {"id", "producer", "consumer", "channels", "port", "rate",
                                 "buffer", "policy", "record", "tls"}
        if unknown:
            _fail(where, "unknown key(s) %s" % ", ".join(sorted(unknown)))
        sid = str(stream.get("id", ""))
        if not _ID.match(sid):
            _fail(where + ".id", "1-64 characters of A-Z a-z 0-9 . _ -")
        if sid in ids:
            _fail(where + ".id", "'%s' is declared twice" % sid)
        ids.add(sid)
        channels, port = stream.get("channels", 1), stream.get("port")
        if not isinstance(channels, int) or not 1 <= channels <= 64:
            _fail(where + ".channels", "1-64")
        if not isinstance(port, int) or port < low or port + channels - 1 > high:
            _fail(where + ".port", "ports %s-%s must lie in stream_proxy_port_range %d-%d"
                  % (port, port + channels - 1 if isinstance(port, int) else "?", low, high))
        producer, consumer = stream.get("producer") or {}, stream.get("consumer") or {}
        for side, spec in (("producer", producer), ("consumer", consumer)):
            if spec.get("gateway") not in gateways:
                _fail("%s.%s.gateway" % (where, side),
                      "'%s' is not in the gateway group" % spec.get("gateway"))
        if producer["gateway"] == consumer["gateway"]:
            _fail(where, "producer and consumer use the same gateway")
        sources = producer.get("sources") or []
        if not sources:
            _fail(where + ".producer.sources", "list the producer's address prefixes")
        for source in sources:
            try:
                ipaddress.ip_network(source)
            except ValueError as exc:
                _fail(where + ".producer.sources", str(exc))
        try:
            ipaddress.ip_address(str(consumer.get("host", "")))
        except ValueError:
            _fail(where + ".consumer.host", "the consumer's IP address")
        cport = consumer.get("port")
        if not isinstance(cport, int) or not 1 <= cport <= 65536 - channels:
            _fail(where + ".consumer.port", "the consumer's first port")
        rate = str(stream.get("rate", "0"))
        if not _BITS.match(rate):
            _fail(where + ".rate", "bits per second, e.g. 800M or 10G")
        policy = stream.get("policy", "block")
        if policy not in ("block", "drop-oldest"):
            _fail(where + ".policy", "block or drop-oldest")
        tls = stream.get("tls", False)
        if not isinstance(tls, bool):
            _fail(where + ".tls", "true or false")
        prod_addr = _dmz_address(hostvars, producer["gateway"], where + ".producer.gateway")
        cons_addr = _dmz_address(hostvars, consumer["gateway"], where + ".consumer.gateway")
        common = {"id": sid, "channels": channels, "rate": rate, "policy": policy}
        for optional in ("buffer", "record"):
            if optional in stream:
                common[optional] = str(stream[optional])
        tls_keys = {"producer": {"tls": "none"}, "consumer": {"tls": "none"}}
        if tls:
            # Each side names the certificate it expects from the other gateway.
            tls_keys = {"producer": {"tls": "connect",
                                     "tls-peer": _tls_name(hostvars, consumer["gateway"])},
                        "consumer": {"tls": "listen",
                                     "tls-peer": _tls_name(hostvars, producer["gateway"])}}
        sides = {
            producer["gateway"]: dict(common, side="producer", **tls_keys["producer"],
                                      listen="%s:%d" % (prod_addr, port),
                                      connect="%s:%d" % (cons_addr, port),
                                      allow=",".join(str(ipaddress.ip_network(s)) for s in sources)),
            consumer["gateway"]: dict(common, side="consumer", **tls_keys["consumer"],
                                      listen="%s:%d" % (cons_addr, port),
                                      connect="%s:%d" % (consumer["host"], cport),
                                      allow="%s/32" % prod_addr),
        }
        for gateway in sides:
            for p in range(port, port + channels):
                if (gateway, p) in used:
                    _fail(where + ".port", "port %d on %s is also used by stream %s"
                          % (p, gateway, used[(gateway, p)]))
                used[(gateway, p)] = sid
        if host in sides:
            requests.append(sides[host])
    return requests


def sdmz_stream_ports(requests):
    """nftables rules' input: [{ports: 'lo-hi', allow: [...]}] per request."""
    out = []
    for request in requests:
        port = int(request["listen"].rsplit(":", 1)[1])
        out.append({"id": request["id"], "ports": "%d-%d" % (port, port + request["channels"] - 1),
                    "allow": request["allow"].split(",")})
    return out


def sdmz_stream_sockets(requests):
    """Every (address, port) the requests listen on: one per channel."""
    out = []
    for request in requests:
        address, port = request["listen"].rsplit(":", 1)
        for channel in range(request["channels"]):
            out.append({"id": request["id"], "address": address, "port": int(port) + channel})
    return out


class FilterModule:
    def filters(self):
        return {"sdmz_stream_requests": sdmz_stream_requests,
                "sdmz_stream_ports": sdmz_stream_ports,
                "sdmz_stream_sockets": sdmz_stream_sockets}
