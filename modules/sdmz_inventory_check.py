#!/usr/bin/python
# -*- coding: utf-8 -*-
# Science DMZ Kit: check an inventory before anything is changed.
from __future__ import annotations

DOCUMENTATION = r"""
module: sdmz_inventory_check
short_description: Validate a Science DMZ Kit inventory against its JSON schema and cross-host rules
description:
  - Validates every host's C(sdmz_*) variables and the site-wide variables against
    C(schemas/inventory.schema.json) (JSON Schema 2020-12, with IP and CIDR formats checked by
    Python's ipaddress module), then the rules that span entries: an address used by two hosts,
    a service a collaborator uses that the catalogue does not define, a reversed port range,
    an interface on a lab segment that is not declared.
  - Reports every problem as one line naming the host (or collaborator) and the key, and fails
    if there is any. Changes nothing; runs on the control node.
version_added: "0.1.0"
author: Science DMZ Kit
requirements: [jsonschema >= 4.18]
options:
  hosts:
    description: Per host, C({groups, vars}) as the C(sdmz_inventory_view) filter builds it.
    type: dict
    required: true
  site:
    description: The site-wide variables (C(sdmz_local_site), C(sdmz_collaborators), ...).
    type: dict
    required: true
  schema:
    description: Path to the inventory JSON schema.
    type: path
    required: true
"""

EXAMPLES = r"""
- name: Check the inventory
  sdmz_inventory_check:
    hosts: "{{ hostvars | sdmz_inventory_view(groups['all']) }}"
    site: {sdmz_local_site: site_a, sdmz_collaborators: []}
    schema: "{{ playbook_dir }}/../schemas/inventory.schema.json"
"""

RETURN = r"""
problems:
  description: One line per problem, naming the host or collaborator and the key.
  returned: always
  type: list
  elements: str
"""

import datetime
import ipaddress
import json

from ansible.module_utils.sdmz_acl import active_blocklist, collaborator_sources, parse_expiry
from ansible.module_utils.basic import AnsibleModule, missing_required_lib

try:
    import jsonschema
    HAS_JSONSCHEMA = True
except ImportError:  # reported by main()
    HAS_JSONSCHEMA = False


def _ip_format(kind):
    """A format check backed by ipaddress; its exception text becomes the reason."""
    def check(value):
        if not isinstance(value, str):
            return True
        if kind == "ipv4-interface":
            ipaddress.IPv4Interface(value)
            return "/" in value or _raise("needs a prefix length, e.g. %s/24" % value)
        if kind == "ipv6-interface":
            ipaddress.IPv6Interface(value)
            return "/" in value or _raise("needs a prefix length, e.g. %s/64" % value)
        if kind == "ipv4-network":
            ipaddress.IPv4Network(value)
        elif kind == "ipv6-network":
            ipaddress.IPv6Network(value)
        elif kind == "ip-network":
            ipaddress.ip_network(value)
        elif kind == "ip-address":
            ipaddress.ip_address(value)
        elif kind == "date-time-utc":
            parse_expiry(value)
        elif kind == "port-range":
            low, _, high = value.partition("-")
            low, high = int(low), int(high or low)
            if not 1 <= low <= 65535 or not 1 <= high <= 65535:
                _raise("ports are 1-65535")
            if low > high:
                _raise("range is reversed (%d > %d)" % (low, high))
        return True
    return check


def _raise(reason):
    raise ValueError(reason)


FORMATS = ("ipv4-interface", "ipv6-interface", "ipv4-network", "ipv6-network",
           "ip-network", "ip-address", "port-range", "date-time-utc")
FORMAT_WORDS = {
    "ipv4-interface": "a valid IPv4 interface address (ADDRESS/PREFIXLEN)",
    "ipv6-interface": "a valid IPv6 interface address (ADDRESS/PREFIXLEN)",
    "ipv4-network": "a valid IPv4 network (no host bits set)",
    "ipv6-network": "a valid IPv6 network (no host bits set)",
    "ip-network": "a valid network in CIDR notation",
    "ip-address": "a valid IP address",
    "port-range": "a valid port or port range",
    "date-time-utc": "an ISO 8601 date-time with a time zone",
}


def format_checker():
    checker = jsonschema.FormatChecker(formats=())
    for kind in FORMATS:
        checker.checks(kind, raises=(ValueError, TypeError))(_ip_format(kind))
    return checker


def where(path, document):
    """('hosts','dtn1','vars','sdmz_interfaces',0,'mtu') -> ('host dtn1', 'sdmz_interfaces[0].mtu')."""
    path = list(path)
    if path[:1] == ["hosts"] and len(path) >= 2:
        owner = "host %s" % path[1]
        rest = path[3:] if path[2:3] == ["vars"] else path[2:]
    elif path[:2] == ["site", "sdmz_collaborators"] and len(path) >= 3:
        entry = document["site"]["sdmz_collaborators"][path[2]]
        name = entry.get("name") if isinstance(entry, dict) else None
        owner = "collaborator %s" % (name or "#%d" % path[2])
        rest = path[3:]
    else:
        owner = "site"
        rest = path[1:]
    key = ""
    for part in rest:
        key += "[%d]" % part if isinstance(part, int) else ("." if key else "") + str(part)
    return owner, key


def describe(error, document):
    owner, key = where(error.absolute_path, document)
    schema = error.schema if isinstance(error.schema, dict) else {}
    if error.validator == "required":
        missing = error.message.split("'")[1]
        group = schema.get("x-sdmz-group")
        why = "hosts in group '%s' require it" % group if group else "required"
        return "%s: %s: missing (%s)" % (owner, (key + "." if key else "") + missing, why)
    if error.validator == "additionalProperties":
        known = set(schema.get("properties", {}))
        extras = sorted(set(error.instance) - known)
        text = schema.get("x-sdmz-message", "is not a key this entry takes")
        return "; ".join("%s: %s: %s" % (owner, (key + "." if key else "") + e, text) for e in extras)
    value = json.dumps(error.instance) if not isinstance(error.instance, (dict, list)) else ""
    if error.validator == "format":
        reason = " (%s)" % error.cause if error.cause else ""
        return "%s: %s: %s is not %s%s" % (owner, key, value, FORMAT_WORDS.get(error.validator_value,
                                                                         error.validator_value), reason)
    if "x-sdmz-message" in schema:
        key = key or schema.get("x-sdmz-key", "entry")
        return "%s: %s: %s%s" % (owner, key, (value + " ") if value else "", schema["x-sdmz-message"])
    if error.validator == "enum":
        return "%s: %s: %s is not one of %s" % (owner, key, value, ", ".join(map(str, error.validator_value)))
    return "%s: %s: %s" % (owner, key or "entry", error.message)


def schema_problems(document, schema):
    validator_cls = jsonschema.validators.validator_for(schema)
    validator = validator_cls(schema, format_checker=format_checker())
    problems = []
    for error in validator.iter_errors(document):
        # An if/then/anyOf failure: report the leaf errors it holds, not the wrapper.
        leaves = [error]
        if error.validator in ("allOf",) and error.context:
            leaves = error.context
        for leaf in leaves:
            line = describe(leaf, document)
            for part in line.split("; "):
                if part not in problems:
                    problems.append(part)
    return problems


def cross_problems(document):
    """Rules that span entries; the schema has already vetted each entry's shape."""
    problems = []
    site = document.get("site", {})
    owners = {}
    for host, entry in sorted(document.get("hosts", {}).items()):
        addresses = set()
        for iface in entry.get("vars", {}).get("sdmz_interfaces", []) or []:
            for key in ("ipv4", "ipv6"):
                try:
                    addresses.add((str(ipaddress.ip_interface(iface[key]).ip), iface["name"] + "." + key))
                except (KeyError, ValueError, TypeError):
                    continue
        for address, key in sorted(addresses):
            if address in owners and owners[address][0] != host:
                problems.append("host %s: sdmz_interfaces %s: address %s is already used by host %s (%s)"
                                % (host, key, address, owners[address][0], owners[address][1]))
            else:
                owners.setdefault(address, (host, key))
        names = [i.get("name") for i in entry.get("vars", {}).get("sdmz_interfaces", []) or []]
        for dup in sorted({n for n in names if names.count(n) > 1}):
            problems.append("host %s: sdmz_interfaces: interface %s is listed twice" % (host, dup))

    catalogue = dict(site.get("sdmz_service_catalogue") or {})
    catalogue.update(site.get("sdmz_services") or {})
    seen = set()
    for collab in site.get("sdmz_collaborators") or []:
        if not isinstance(collab, dict):
            continue
        name = collab.get("name", "?")
        if name in seen:
            problems.append("collaborator %s: name: listed twice" % name)
        seen.add(name)
        for service in collab.get("services") or []:
            if service not in catalogue:
                problems.append("collaborator %s: services: unknown service '%s' (known: %s)"
                                % (name, service, ", ".join(sorted(catalogue))))

    # Overlapping collaborator prefixes (shadowed ACL entries) and blocklist entries that
    # would block a collaborator: the same checks the network_device role makes per device.
    sources = collaborator_sources(site.get("sdmz_collaborators") or [], problems)
    active_blocklist(site.get("sdmz_acl_blocklist") or [], sources,
                     datetime.datetime.now(datetime.timezone.utc), problems)

    segments = {s.get("name") for s in site.get("sdmz_lab_segments") or [] if isinstance(s, dict)}
    if segments:
        for host, entry in sorted(document.get("hosts", {}).items()):
            for i, iface in enumerate(entry.get("vars", {}).get("sdmz_interfaces", []) or []):
                seg = iface.get("lab_segment")
                if seg and seg not in segments:
                    problems.append("host %s: sdmz_interfaces[%d].lab_segment: '%s' is not in sdmz_lab_segments"
                                    % (host, i, seg))
    return problems


def main():
    module = AnsibleModule(
        argument_spec=dict(
            hosts=dict(type="dict", required=True),
            site=dict(type="dict", required=True),
            schema=dict(type="path", required=True),
        ),
        supports_check_mode=True,
    )
    if not HAS_JSONSCHEMA:
        module.fail_json(msg=missing_required_lib("jsonschema"))
    try:
        with open(module.params["schema"], encoding="utf-8") as handle:
            schema = json.load(handle)
    except (OSError, ValueError) as exc:
        module.fail_json(msg="cannot read the inventory schema %s: %s" % (module.params["schema"], exc))
    document = {"hosts": module.params["hosts"], "site": module.params["site"]}
    problems = schema_problems(document, schema)
    if not problems:
        problems = cross_problems(document)
    if problems:
        module.fail_json(msg="inventory has %d problem(s); nothing was changed:\n%s"
                         % (len(problems), "\n".join("  - " + p for p in problems)), problems=problems)
    module.exit_json(changed=False, problems=[], msg="inventory OK: %d hosts" % len(document["hosts"]))


if __name__ == "__main__":
    main()
