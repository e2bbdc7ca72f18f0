# -*- coding: utf-8 -*-
# Science DMZ Kit: the site's pSConfig template, derived from the inventory.
#
# Pure functions, shared by the perfsonar_psconfig module and the unit tests.
# Input: the site's measurement points (inventory hosts in the perfsonar group),
# the collaborators' perfSONAR addresses, and the kit's test definitions; output:
# a pSConfig JSON template (perfSONAR 5) with a mesh of the local points and a
# disjoint group local <-> collaborators. Every problem is one line naming the key.
from __future__ import annotations

import ipaddress
import re

# The pScheduler test types the kit schedules, and the spec keys each may set
# beyond source/dest (which the template fills per pair).
TEST_TYPES = {
    "throughput": ("duration", "omit", "parallel", "bandwidth", "window-size", "mss", "udp",
                   "ip-version", "single-ended"),
    "latencybg": ("packet-interval", "packet-count", "duration", "packet-padding", "ip-version",
                  "flip", "data-ports"),
    "trace": ("probe-type", "first-ttl", "hops", "ip-version", "sendwait", "wait"),
    "rtt": ("count", "interval", "length", "ttl", "ip-version", "timeout"),
}
# Durations as pSConfig's own schema writes them (ISO 8601: PnW nD T nH nM nS).
DURATION = re.compile(r"^P(?:\d+(?:\.\d+)?W)?(?:\d+(?:\.\d+)?D)?"
                      r"(?:T(?:\d+(?:\.\d+)?H)?(?:\d+(?:\.\d+)?M)?(?:\d+(?:\.\d+)?S)?)?$")
SPEC_DURATIONS = ("duration", "omit", "interval", "timeout", "sendwait", "wait")
NAME = re.compile(r"^[a-zA-Z0-9:._\-]+$")
ARCHIVERS = ("http", "esmond", "rabbitmq", "syslog", "kafka", "postgresql", "failer", "snmptrap", "tcp")


class PsconfigError(Exception):
    """Problems in the inventory or the role's variables; one line each."""

    def __init__(self, problems):
        super().__init__("\n".join(problems))
        self.problems = problems


def is_duration(text):
    """Whether `text` is an ISO 8601 duration pSConfig accepts (and not the empty 'P')."""
    return isinstance(text, str) and text not in ("P", "PT") and bool(DURATION.match(text)) \
        and not text.endswith("T")


def _address(text, where, problems):
    try:
        return str(ipaddress.ip_address(str(text)))
    except ValueError:
        problems.append("%s: '%s' is not an IP address" % (where, text))
        return None


def _points(points, problems):
    """Local measurement points: [{name, address}] -> {name: address}."""
    local = {}
    for index, point in enumerate(points or []):
        where = "perfsonar_points[%d] (%s)" % (index, point.get("name", "?"))
        name, address = point.get("name"), point.get("address")
        if not name or not NAME.match(str(name)):
            problems.append("%s.name: must be letters, digits and : . _ -" % where)
            continue
        if not address:
            problems.append("%s.address: the host has no DMZ address to measure from" % where)
            continue
        address = _address(address, where + ".address", problems)
        if address:
            local[name] = address
    if not local and not problems:
        problems.append("perfsonar_points: no measurement point of this site is in the perfsonar group")
    return local


def _remote_points(collaborators, problems):
    """Collaborators' perfSONAR addresses (sdmz_collaborators[].perfsonar)."""
    remote = {}
    for c_index, collab in enumerate(collaborators or []):
        for p_index, text in enumerate(collab.get("perfsonar") or []):
            where = "sdmz_collaborators[%d] (%s).perfsonar[%d]" % (c_index, collab.get("name", "?"), p_index)
            address = _address(text, where, problems)
            if address:
                remote["%s-%s" % (collab.get("name", "collab%d" % c_index), address.replace(":", "."))] = address
    return remote


def _test(name, test, problems):
    where = "perfsonar_tests.%s" % name
    kind = test.get("type")
    if kind not in TEST_TYPES:
        problems.append("%s.type: unknown test type '%s' (one of %s)" % (where, kind, ", ".join(sorted(TEST_TYPES))))
        return None
    spec = {"source": "{% address[0] %}", "dest": "{% address[1] %}"}
    for key, value in sorted((test.get("spec") or {}).items()):
        if key not in TEST_TYPES[kind]:
            problems.append("%s.spec.%s: not a %s setting the kit passes on (one of %s)"
                            % (where, key, kind, ", ".join(TEST_TYPES[kind])))
            continue
        if key in SPEC_DURATIONS and not is_duration(value):
            problems.append("%s.spec.%s: '%s' is not an ISO 8601 duration (e.g. PT30S)" % (where, key, value))
            continue
        spec[key] = value
    for key in ("interval", "slip"):
        if key in test and not is_duration(test[key]):
            problems.append("%s.%s: '%s' is not an ISO 8601 duration (e.g. PT4H)" % (where, key, test[key]))
    if kind != "latencybg" and "interval" not in test:
        problems.append("%s.interval: missing (how often the test repeats, e.g. PT4H)" % where)
    return {"type": kind, "spec": spec}


def _archives(archives, problems):
    result = {}
    for name, archive in sorted((archives or {}).items()):
        where = "perfsonar_archives.%s" % name
        if not NAME.match(str(name)):
            problems.append("%s: archive names are letters, digits and : . _ -" % where)
            continue
        if archive.get("archiver") not in ARCHIVERS:
            problems.append("%s.archiver: unknown archiver '%s' (one of %s)"
                            % (where, archive.get("archiver"), ", ".join(ARCHIVERS)))
            continue
        if not isinstance(archive.get("data"), dict):
            problems.append("%s.data: missing (the archiver's settings)" % where)
            continue
        result[name] = {"archiver": archive["archiver"], "data": archive["data"]}
        if "ttl" in archive:
            if not is_duration(archive["ttl"]):
                problems.append("%s.ttl: '%s' is not an ISO 8601 duration" % (where, archive["ttl"]))
            result[name]["ttl"] = archive["ttl"]
    return result


def template(site, points, collaborators, tests, archives=None):
    """The pSConfig template. Raises PsconfigError with every problem found."""
    problems = []
    local = _points(points, problems)
    remote = _remote_points(collaborators, problems)
    for name in set(local) & set(remote):
        problems.append("perfsonar_points: '%s' is both a local point and a collaborator's" % name)
    rendered_tests, schedules, tasks = {}, {}, {}
    if not tests:
        problems.append("perfsonar_tests: no tests defined")
    for name, test in sorted((tests or {}).items()):
        if not NAME.match(str(name)):
            problems.append("perfsonar_tests.%s: test names are letters, digits and : . _ -" % name)
            continue
        rendered = _test(name, test, problems)
        if rendered is None:
            continue
        rendered_tests[name] = rendered
        schedule = None
        if rendered["type"] != "latencybg":  # latencybg runs continuously: no schedule
            schedule = "every-%s" % name
            schedules[schedule] = {"repeat": test.get("interval"), "slip": test.get("slip", test.get("interval")),
                                   "sliprand": True}
        groups = [("mesh", "%s-mesh" % site)]
        if remote:
            groups.append(("disjoint", "%s-collaborators" % site))
        for _kind, group in groups:
            task = {"group": group, "test": name}
            if schedule:
                task["schedule"] = schedule
            if archives:
                task["archives"] = sorted(archives)
            tasks["%s-%s" % (group, name)] = task
    rendered_archives = _archives(archives, problems)
    if problems:
        raise PsconfigError(problems)
    addresses = {name: {"address": address} for name, address in sorted(local.items())}
    addresses.update({name: {"address": address, "no-agent": True} for name, address in sorted(remote.items())})
    groups = {"%s-mesh" % site: {"type": "mesh", "addresses": [{"name": n} for n in sorted(local)]}}
    if remote:
        groups["%s-collaborators" % site] = {
            "type": "disjoint",
            "a-addresses": [{"name": n} for n in sorted(local)],
            "b-addresses": [{"name": n} for n in sorted(remote)]}
    result = {"_meta": {"display-name": "Science DMZ Kit: %s measurement mesh" % site,
                        "generated-by": "sdmz-kit perfsonar role (derived from the inventory)"},
              "addresses": addresses, "groups": groups, "tests": rendered_tests, "tasks": tasks}
    if schedules:
        result["schedules"] = schedules
    if rendered_archives:
        result["archives"] = rendered_archives
    return result
