# -*- coding: utf-8 -*-
# Science DMZ Kit: the rows of the post-rollout report (roles/site_verify), from
# each probing host's registered results.
from __future__ import annotations

import json


def _line(lines, pattern):
    for line in lines or []:
        if pattern in line:
            return line.strip()
    return ""


def _tcp_rows(host, results):
    for r in results.get("results", []):
        ok = r["status"] != "error" and (r["status"] in ("open", "refused")) == (r["expect"] == "reach")
        yield {"check": "acl", "from": host, "to": "%s %s tcp/%s" % (r["destination_host"], r["address"], r["port"]),
               "service": r["service"], "expect": r["expect"], "got": r["status"], "detail": r["detail"], "ok": ok}


def _icmp_rows(host, results):
    for r in results.get("results", []):
        if "item" not in r or r.get("skipped"):
            continue
        got = "reach" if r.get("rc") == 0 else "drop"
        yield {"check": "acl", "from": host, "to": "%s %s icmp" % (r["item"]["destination_host"], r["item"]["address"]),
               "service": r["item"]["service"], "expect": r["item"]["expect"], "got": got,
               "detail": _line(r.get("stdout_lines"), "packet loss"), "ok": got == r["item"]["expect"]}


def _mtu_rows(host, results, mtu):
    for r in results.get("results", []):
        if "item" not in r or r.get("skipped"):
            continue
        lines = (r.get("stdout_lines") or []) + (r.get("stderr_lines") or [])
        detail = _line(lines, "packet loss") or _line(lines, "too long") or _line(lines, "mtu")
        yield {"check": "path-mtu", "from": host, "to": "%s %s" % (r["item"]["destination_host"], r["item"]["address"]),
               "service": "MTU %s, DF set" % mtu, "expect": "reach", "got": "reach" if r.get("rc") == 0 else "drop",
               "detail": detail, "ok": r.get("rc") == 0}


def _iperf3_rows(host, results):
    for r in results.get("results", []):
        if "item" not in r or r.get("skipped"):
            continue
        try:
            data = json.loads(r.get("stdout") or "{}")
        except ValueError:
            data = {}
        end = data.get("end") or {}
        bps = (end.get("sum_received") or {}).get("bits_per_second", 0)
        retransmits = (end.get("sum_sent") or {}).get("retransmits", "n/a")
        ok = r.get("rc") == 0 and bps > 0
        yield {"check": "iperf3", "from": host,
               "to": "%s %s:%s" % (r["item"]["server_host"], r["item"]["address"], r["item"]["port"]),
               "service": "throughput", "expect": "measured", "got": "%.2f Gbit/s" % (bps / 1e9),
               "detail": "retransmits %s" % retransmits if ok else (data.get("error") or r.get("stderr") or ""),
               "ok": ok, "bits_per_second": bps, "retransmits": retransmits}


def sdmz_verify_rows(hostvars, hosts, mtu):
    """One row per check: what was probed, from where, what the policy expects, what happened."""
    rows = []
    for host in hosts:
        found = hostvars[host]
        rows += _tcp_rows(host, found.get("site_verify_tcp") or {})
        rows += _icmp_rows(host, found.get("site_verify_icmp") or {})
        rows += _mtu_rows(host, found.get("site_verify_mtu_result") or {}, mtu)
        rows += _iperf3_rows(host, found.get("site_verify_iperf3") or {})
    return rows


def sdmz_verify_table(rows):
    """The rows as aligned text lines, failures marked."""
    return ["%-4s %-8s %-6s -> %-36s %-28s expect %-8s got %-10s %s" % (
        "ok" if r["ok"] else "FAIL", r["check"], r["from"], r["to"], r["service"][:28], r["expect"], r["got"],
        r["detail"]) for r in rows]


class FilterModule:
    def filters(self):
        return {"sdmz_verify_rows": sdmz_verify_rows, "sdmz_verify_table": sdmz_verify_table}
