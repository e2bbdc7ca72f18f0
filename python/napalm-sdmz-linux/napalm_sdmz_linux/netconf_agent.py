#!/usr/bin/python3
# -*- coding: utf-8 -*-
"""sdmz-netconf: the on-device half of the sdmz_linux NAPALM driver.

Installed on a Linux router (or a DTN whose host firewall the kit manages) as
/usr/local/sbin/sdmz-netconf and run through sudo by the management account;
sudoers allows this one program and nothing else. It owns exactly one
nftables table (inet sdmz) and the MTU and egress shaper of the interfaces a
configuration names, and refuses anything else.

A configuration is text:

    # comments
    interface NAME mtu N
    interface NAME shaper tbf rate BITS burst BYTES limit BYTES
    interface NAME shaper tbf rate BITS burst BYTES latency MICROSECONDS
    interface NAME shaper none
    table inet sdmz { ... }          # nftables, replaced atomically with nft -f

Commands (a configuration is read from standard input):
    version | running | startup | diff | check | apply [--revert-in SECONDS] |
    confirm | pending | rollback | boot | counters

The running configuration is the last committed text when the live state still
has the fingerprint recorded at commit time; otherwise it is rendered from the
live state, so drift shows up in every diff. Python 3 standard library only.
"""
from __future__ import annotations

import difflib
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile

VERSION = "1"
TABLE = "inet sdmz"
STATE_DIR = os.environ.get("SDMZ_NETCONF_STATE", "/var/lib/sdmz-netconf")
REVERT_UNIT = "sdmz-netconf-revert"
SELF = "/usr/local/sbin/sdmz-netconf"
NAME_RE = re.compile(r"^[A-Za-z0-9_.:@-]{1,15}$")


class ConfigError(Exception):
    """Bad input: reported on stderr, exit status 2, nothing changed."""


class ApplyError(Exception):
    """The device refused a change: exit status 3."""


def run(args, stdin=None, check=True):
    proc = subprocess.run(args, input=stdin, capture_output=True, text=True, check=False)
    if check and proc.returncode != 0:
        raise ApplyError("%s: %s" % (" ".join(args), (proc.stderr or proc.stdout).strip()))
    return proc


# --- parsing -----------------------------------------------------------------

def parse(text):
    """Text -> {'interfaces': {name: {'mtu': n, 'shaper': {...} or None}}, 'nft': str}."""
    interfaces, nft_lines, in_nft = {}, [], False
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if in_nft:
            nft_lines.append(line)
            continue
        if not stripped or stripped.startswith("#"):
            continue
        if stripped.startswith("table "):
            in_nft = True
            nft_lines.append(line)
            continue
        words = stripped.split()
        if len(words) < 3 or words[0] != "interface" or not NAME_RE.match(words[1]):
            raise ConfigError("line %d: expected 'interface NAME mtu N|shaper ...' or 'table %s {', got: %s"
                              % (number, TABLE, stripped))
        entry = interfaces.setdefault(words[1], {})
        entry.update(_directive(words, number))
    nft = "\n".join(nft_lines).strip()
    for match in re.finditer(r"^\s*table\s+(\S+)\s+(\S+)", nft, re.MULTILINE):
        if "%s %s" % (match.group(1), match.group(2)) != TABLE:
            raise ConfigError("only 'table %s' may be configured, found 'table %s %s'"
                              % (TABLE, match.group(1), match.group(2)))
    return {"interfaces": interfaces, "nft": nft}


def _directive(words, number):
    name, key, args = words[1], words[2], words[3:]
    if key == "mtu" and len(args) == 1 and args[0].isdigit() and 68 <= int(args[0]) <= 65535:
        return {"mtu": int(args[0])}
    if key == "shaper" and args == ["none"]:
        return {"shaper": None}
    if key == "shaper" and len(args) == 7 and args[0] == "tbf" and args[1] == "rate" and args[3] == "burst" \
            and args[5] in ("limit", "latency") and all(a.isdigit() for a in (args[2], args[4], args[6])):
        return {"shaper": {"rate": int(args[2]), "burst": int(args[4]), args[5]: int(args[6])}}
    raise ConfigError("line %d: interface %s: cannot read '%s'" % (number, name, " ".join(words[2:])))


# --- live state --------------------------------------------------------------

def live_interface(name):
    link = run(["ip", "-j", "link", "show", "dev", name], check=False)
    if link.returncode != 0:
        return None
    mtu = json.loads(link.stdout)[0]["mtu"]
    qdiscs = json.loads(run(["tc", "-j", "qdisc", "show", "dev", name, "root"]).stdout or "[]")
    shaper = None
    for qdisc in qdiscs:
        if qdisc.get("root") and qdisc.get("kind") == "tbf":
            options = qdisc.get("options", {})
            shaper = {"rate": int(options.get("rate", 0)) * 8, "burst": int(options.get("burst", 0)),
                      "latency": int(options.get("lat", 0))}
    return {"mtu": mtu, "shaper": shaper}


def live_nft():
    proc = run(["nft", "-s", "list", "table"] + TABLE.split(), check=False)
    return proc.stdout.strip() if proc.returncode == 0 else ""


def fingerprint(names):
    state = {"interfaces": {n: live_interface(n) for n in sorted(names)}, "nft": live_nft()}
    return hashlib.sha256(json.dumps(state, sort_keys=True).encode()).hexdigest()


def live_lines(names):
    """The live MTU and shaper of `names`, as configuration lines."""
    lines = []
    for name in sorted(names):
        state = live_interface(name)
        if state is None:
            lines.append("# interface %s: absent" % name)
            continue
        shaper = state["shaper"]
        lines.append("interface %s mtu %d" % (name, state["mtu"]))
        lines.append("interface %s shaper %s" % (name, "none" if shaper is None else
                     "tbf rate %d burst %d latency %d" % (shaper["rate"], shaper["burst"], shaper["latency"])))
    return lines


def render_live(names, why):
    """The live state of `names` and the table, as a configuration that restores it."""
    nft = live_nft()
    return "\n".join(["# live state of %s (%s)" % (os.uname().nodename, why)] + live_lines(names)
                     + ([nft] if nft else [])) + "\n"


# --- the record of the last commit ------------------------------------------

def state_path(name):
    return os.path.join(STATE_DIR, name)


def read_state(name):
    try:
        with open(state_path(name), encoding="utf-8") as handle:
            return handle.read()
    except FileNotFoundError:
        return None


def write_state(name, text):
    os.makedirs(STATE_DIR, mode=0o700, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=STATE_DIR)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, state_path(name))


def remove_state(name):
    try:
        os.unlink(state_path(name))
    except FileNotFoundError:
        pass


def clean_record():
    """The last commit's text if the live state still has its fingerprint, else None."""
    record = read_state("committed.conf")
    if record is None or fingerprint(parse(record)["interfaces"]) != (read_state("committed.fp") or "").strip():
        return None
    return record


def running(extra_names=()):
    record = read_state("committed.conf")
    if record is None:
        return render_live(extra_names, "no commit recorded")
    recorded = set(parse(record)["interfaces"])
    if clean_record() is None:
        return render_live(recorded | set(extra_names), "differs from the last commit")
    outside = set(extra_names) - recorded
    if not outside:
        return record
    # Interface lines must precede the table, so those outside the commit come first.
    return "\n".join(["# interfaces outside the last commit"] + live_lines(outside)) + "\n" + record


# --- applying ------------------------------------------------------------------

def check(config):
    for name in config["interfaces"]:
        if live_interface(name) is None:
            raise ConfigError("interface %s does not exist on %s" % (name, os.uname().nodename))
    run(["nft", "-c", "-f", "-"], stdin=nft_script(config["nft"]))


def nft_script(nft):
    # Creating then deleting the table first makes the whole file one atomic replace.
    return "table %s\ndelete table %s\n%s\n" % (TABLE, TABLE, nft)


def apply_links(config):
    for name, wanted in sorted(config["interfaces"].items()):
        live = live_interface(name)
        if "mtu" in wanted and live["mtu"] != wanted["mtu"]:
            run(["ip", "link", "set", "dev", name, "mtu", str(wanted["mtu"])])
        if "shaper" in wanted:
            shaper = wanted["shaper"]
            if shaper is None:
                if live["shaper"] is not None:
                    run(["tc", "qdisc", "del", "dev", name, "root"])
                continue
            size = ["limit", str(shaper["limit"])] if "limit" in shaper else ["latency", "%dus" % shaper["latency"]]
            run(["tc", "qdisc", "replace", "dev", name, "root", "tbf", "rate", "%dbit" % shaper["rate"],
                 "burst", str(shaper["burst"])] + size)


def apply_config(config):
    run(["nft", "-f", "-"], stdin=nft_script(config["nft"]))
    apply_links(config)


def disarm():
    run(["systemctl", "stop", REVERT_UNIT + ".timer"], check=False)
    run(["systemctl", "reset-failed", REVERT_UNIT + ".service", REVERT_UNIT + ".timer"], check=False)


def commit(text, revert_in=None):
    config = parse(text)
    check(config)
    previous = read_state("committed.conf")
    names = set(config["interfaces"]) | (set(parse(previous)["interfaces"]) if previous else set())
    # Roll back to the last commit's own text while the device still matches it (re-applying
    # it reproduces the kernel's values exactly); else to the live state, drift and all.
    clean = clean_record()
    if clean is None:
        write_state("rollback.conf", render_live(names, "snapshot before a commit"))
    else:
        outside = names - set(parse(clean)["interfaces"])
        write_state("rollback.conf", "\n".join(["# snapshot before a commit"] + live_lines(outside)) + "\n" + clean)
    for name in ("committed.conf", "committed.fp"):
        old = read_state(name)
        if old is None:
            remove_state("rollback." + name)
        else:
            write_state("rollback." + name, old)
    try:
        apply_config(config)
    except ApplyError:
        apply_config(parse(read_state("rollback.conf")))
        raise
    write_state("committed.conf", text)
    write_state("committed.fp", fingerprint(config["interfaces"]) + "\n")
    disarm()
    if revert_in:
        run(["systemd-run", "--quiet", "--unit", REVERT_UNIT, "--on-active=%ds" % revert_in,
             "--timer-property=AccuracySec=100ms", SELF, "rollback"])


def rollback():
    saved = read_state("rollback.conf")
    if saved is None:
        raise ConfigError("nothing to roll back to: no commit was made through sdmz-netconf")
    apply_config(parse(saved))
    for name in ("committed.conf", "committed.fp"):
        old = read_state("rollback." + name)
        if old is None:
            remove_state(name)
        else:
            write_state(name, old)
    disarm()


def pending():
    proc = run(["systemctl", "is-active", REVERT_UNIT + ".timer"], check=False)
    return proc.stdout.strip() == "active"


def counters():
    proc = run(["nft", "-j", "list", "table"] + TABLE.split(), check=False)
    result = {"named": {}, "rules": []}
    if proc.returncode != 0:
        return result
    for item in json.loads(proc.stdout).get("nftables", []):
        if "counter" in item:
            c = item["counter"]
            result["named"][c["name"]] = {"packets": c["packets"], "bytes": c["bytes"]}
        elif "rule" in item:
            rule = item["rule"]
            for expr in rule.get("expr", []):
                if isinstance(expr, dict) and "counter" in expr and isinstance(expr["counter"], dict) \
                        and "packets" in expr["counter"]:
                    result["rules"].append({"chain": rule["chain"], "comment": rule.get("comment", ""),
                                            "packets": expr["counter"]["packets"], "bytes": expr["counter"]["bytes"]})
    return result


def main(argv):
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    command, args = argv[0], argv[1:]
    try:
        if command == "version":
            print("sdmz-netconf %s" % VERSION)
        elif command == "running":
            sys.stdout.write(running())
        elif command == "startup":
            sys.stdout.write(read_state("committed.conf") or "")
        elif command == "diff":
            text = sys.stdin.read()
            current = running(parse(text)["interfaces"])
            sys.stdout.writelines(difflib.unified_diff(current.splitlines(True), text.splitlines(True),
                                                       "running", "candidate"))
        elif command == "check":
            check(parse(sys.stdin.read()))
        elif command == "apply":
            revert_in = int(args[1]) if args[:1] == ["--revert-in"] and len(args) == 2 else None
            commit(sys.stdin.read(), revert_in)
        elif command == "confirm":
            disarm()
        elif command == "pending":
            print("yes" if pending() else "no")
        elif command == "rollback":
            rollback()
        elif command == "boot":
            record = read_state("committed.conf")
            if record is not None:
                apply_config(parse(record))
        elif command == "counters":
            print(json.dumps(counters(), sort_keys=True))
        else:
            raise ConfigError("unknown command '%s'" % command)
    except ConfigError as exc:
        print("sdmz-netconf: %s" % exc, file=sys.stderr)
        return 2
    except ApplyError as exc:
        print("sdmz-netconf: %s" % exc, file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
