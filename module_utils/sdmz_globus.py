# -*- coding: utf-8 -*-
# Science DMZ Kit: Globus Connect Server v5, set up non-interactively.
#
# Pure functions, shared by the globus_connect_server module and the unit tests:
# the state read from the host (and from the CLI's JSON output) goes in, the
# ordered globus-connect-server commands still missing come out. Nothing is ever
# run twice: each step is planned only when the state shows it missing.
from __future__ import annotations

import json

CLI = "globus-connect-server"
REQUIRED = ("client_id", "client_secret", "display_name", "organization", "owner", "contact_email",
            "storage_gateway", "collection")


class GlobusError(Exception):
    """Bad input or unreadable CLI output; one line each."""

    def __init__(self, problems):
        super().__init__("\n".join(problems))
        self.problems = problems


def check_desired(desired):
    """Every missing setting, named by its role variable."""
    problems = []
    for key in REQUIRED:
        value = desired.get(key)
        if value in (None, "", {}, []):
            problems.append("globus_connect_server_%s: missing%s" % (
                key, " (keep it in ansible-vault)" if key == "client_secret" else ""))
    gateway = desired.get("storage_gateway") or {}
    if gateway and not gateway.get("domains"):
        problems.append("globus_connect_server_storage_gateway.domains: name at least one identity domain "
                        "allowed to use the storage gateway")
    collection = desired.get("collection") or {}
    if collection and not str(collection.get("base_path", "")).startswith("/"):
        problems.append("globus_connect_server_collection.base_path: must be an absolute path")
    ports = desired.get("data_ports") or ()
    if len(ports) != 2 or not all(isinstance(p, int) for p in ports) or not 1024 <= ports[0] <= ports[1] <= 65535:
        problems.append("globus_connect_server_data_ports: must be [LOW, HIGH] within 1024-65535")
    if problems:
        raise GlobusError(problems)


def parse_list(text, what):
    """The `-F json` output of a `list` command: a list of objects with display_name and id."""
    try:
        data = json.loads(text or "[]")
    except ValueError as exc:
        raise GlobusError(["%s list: the CLI's output is not JSON (%s)" % (what, exc)]) from exc
    # Older CLIs wrap the list in {"data": [...]}; newer ones print a list of pages.
    if isinstance(data, dict):
        data = data.get("data", [])
    items = []
    for entry in data if isinstance(data, list) else []:
        if isinstance(entry, dict) and "data" in entry and isinstance(entry["data"], list):
            items.extend(entry["data"])
        elif isinstance(entry, dict):
            items.append(entry)
    return items


def find(items, display_name):
    for item in items:
        if item.get("display_name") == display_name:
            return item
    return None


def plan(state, desired):
    """Ordered steps still missing: [{step, argv, why}]. `state` holds
    deployment_key (bool: the endpoint exists), node_configured (bool),
    gateways and collections (lists from parse_list), or None where unknown
    (the endpoint does not exist yet, so nothing can be listed)."""
    steps = []
    key = desired["deployment_key_path"]
    if not state.get("deployment_key"):
        steps.append({"step": "endpoint setup", "why": "no deployment key exists: the endpoint is new",
                      "argv": [CLI, "endpoint", "setup", desired["display_name"],
                               "--organization", desired["organization"], "--owner", desired["owner"],
                               "--contact-email", desired["contact_email"], "--agree-to-letsencrypt-tos",
                               "--deployment-key", key]})
    if not state.get("node_configured"):
        low, high = desired["data_ports"]
        steps.append({"step": "node setup", "why": "this host is not yet a node of the endpoint",
                      "argv": [CLI, "node", "setup", "--client-id", desired["client_id"],
                               "--deployment-key", key, "--incoming-port-range", str(low), str(high)]})
    gateway = desired["storage_gateway"]
    existing = find(state.get("gateways") or [], gateway["display_name"])
    if existing is None:
        argv = [CLI, "-F", "json", "storage-gateway", "create", "posix", gateway["display_name"]]
        for domain in gateway["domains"]:
            argv += ["--domain", domain]
        steps.append({"step": "storage-gateway create", "why": "no POSIX storage gateway named '%s'"
                      % gateway["display_name"], "argv": argv})
    collection = desired["collection"]
    if existing is None or find(state.get("collections") or [], collection["display_name"]) is None:
        steps.append({"step": "collection create", "why": "no mapped collection named '%s'"
                      % collection["display_name"],
                      # The gateway id is known only once the gateway exists: filled in at run time.
                      "argv": [CLI, "-F", "json", "collection", "create", existing["id"] if existing else "{gateway_id}",
                               collection["base_path"], collection["display_name"]]})
    return steps


def cli_environment(desired, endpoint_id=None):
    """The client credentials, passed to the CLI through its environment (never argv,
    which every user on the host can read in /proc)."""
    env = {"GCS_CLI_CLIENT_ID": desired["client_id"], "GCS_CLI_CLIENT_SECRET": desired["client_secret"],
           "GLOBUS_CLIENT_SECRET": desired["client_secret"]}
    if endpoint_id:
        env["GCS_CLI_ENDPOINT_ID"] = endpoint_id
    return env


def endpoint_id(deployment_key_text, info_text=None):
    """The endpoint's id: from the node's info.json when set up, else the deployment key."""
    for text, key in ((info_text, "endpoint_id"), (deployment_key_text, "client_id")):
        if not text:
            continue
        try:
            value = json.loads(text).get(key)
        except (ValueError, AttributeError):
            continue
        if value:
            return value
    return None
