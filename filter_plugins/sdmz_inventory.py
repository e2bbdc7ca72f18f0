# -*- coding: utf-8 -*-
# Science DMZ Kit: filters that turn inventory variables into the shapes
# modules take. Pure functions; no side effects.
from __future__ import annotations

from ansible.errors import AnsibleFilterError

# Site-wide keys (group_vars/all); everything else named sdmz_* is per host.
SITE_KEYS = (
    "sdmz_local_site",
    "sdmz_collaborators",
    "sdmz_services",
    "sdmz_lab_segments",
    "sdmz_streams",
    "sdmz_acl_blocklist",
)


def _plain(value):
    """Deep-copy Ansible's lazy containers into plain dicts, lists and scalars."""
    if isinstance(value, dict) or hasattr(value, "items"):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, str):
        return str(value)
    return value


def sdmz_apt_mirror(texts):
    """The Debian mirror and suite the control node's own apt sources use.

    Takes the texts of /etc/apt/sources.list and /etc/apt/sources.list.d/*
    (one-line and deb822 formats) and returns {"mirror": URI, "suite": SUITE}
    for the first plain `deb` source of the main archive (not -security,
    -updates or -backports).
    """
    candidates = []
    for text in texts or []:
        text = str(text)
        if "Types:" in text or "URIs:" in text:
            for stanza in text.split("\n\n"):
                fields = {}
                for line in stanza.splitlines():
                    if line.startswith("#") or ":" not in line:
                        continue
                    key, _, val = line.partition(":")
                    fields[key.strip().lower()] = val.split()
                if "deb" in fields.get("types", []):
                    for uri in fields.get("uris", []):
                        for suite in fields.get("suites", []):
                            candidates.append((uri, suite))
        else:
            for line in text.splitlines():
                words = line.split("#", 1)[0].split()
                if not words or words[0] != "deb":
                    continue
                words = [w for w in words[1:] if not w.startswith("[") and not w.endswith("]")]
                if len(words) >= 2:
                    candidates.append((words[0], words[1]))
    for uri, suite in candidates:
        if "-" not in suite and "security" not in uri:
            return {"mirror": uri.rstrip("/"), "suite": suite}
    raise AnsibleFilterError(
        "no Debian archive found in the control node's apt sources "
        "(/etc/apt/sources.list, /etc/apt/sources.list.d/): set lab_image_mirror and lab_image_suite")


def sdmz_lab_nodes(hostvars, hosts):
    """The lab wiring (sdmz_lab_net's `nodes`) from each lab host's inventory."""
    nodes = []
    for name in hosts:
        hv = hostvars[name]
        interfaces = []
        for iface in _plain(hv.get("sdmz_interfaces", [])):
            entry = {"name": iface["name"], "segment": iface.get("lab_segment"), "mtu": iface.get("mtu")}
            for key in ("ipv4", "ipv6"):
                if iface.get(key):
                    entry[key] = iface[key]
            interfaces.append(entry)
        nodes.append({
            "name": str(name),
            "forwarding": bool(hv.get("sdmz_forwarding", False)),
            "interfaces": interfaces,
            "routes": _plain(hv.get("sdmz_routes", [])),
        })
    return nodes


def sdmz_inventory_view(hostvars, hosts):
    """Each host's groups and per-host sdmz_* variables, as validation reads them."""
    view = {}
    for name in hosts:
        hv = hostvars[name]
        variables = {}
        for key in hv.keys():
            if str(key).startswith("sdmz_") and key not in SITE_KEYS:
                variables[str(key)] = _plain(hv[key])
        groups = [str(g) for g in hv.get("group_names", [])]
        view[str(name)] = {"groups": groups, "vars": variables}
    return view


class FilterModule:
    def filters(self):
        return {
            "sdmz_apt_mirror": sdmz_apt_mirror,
            "sdmz_lab_nodes": sdmz_lab_nodes,
            "sdmz_inventory_view": sdmz_inventory_view,
        }
