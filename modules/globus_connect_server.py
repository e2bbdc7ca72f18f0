#!/usr/bin/python
# -*- coding: utf-8 -*-
# Science DMZ Kit: Globus Connect Server v5 endpoint, node, storage gateway and collection.
from __future__ import annotations

DOCUMENTATION = r"""
---
module: globus_connect_server
short_description: Set up a Globus Connect Server v5 node non-interactively, reading the state first
description:
  - Reads what exists (the deployment key, the node's info.json, the storage gateways and
    collections the CLI lists) and runs only the missing steps, in order -
    C(endpoint setup) (only where no deployment key exists), C(node setup), a POSIX
    C(storage-gateway create) and a mapped C(collection create).
  - The client credentials reach the CLI through its environment, never its argv; they are
    marked no_log. It never runs C(globus-connect-server login localhost).
  - In check mode, reads the state and returns the steps it would run.
  - Where the CLI is not installed, changes nothing and returns C(unsupported) with the reason.
options:
  client_id: {description: The Globus service client id., type: str, required: true, no_log: false}
  client_secret: {description: Its secret (from ansible-vault)., type: str, required: true, no_log: true}
  display_name: {description: The endpoint's display name., type: str, required: true}
  organization: {description: Organization shown on the endpoint., type: str, required: true}
  owner: {description: Owner identity (e.g. user@example.org)., type: str, required: true}
  contact_email: {description: Support contact., type: str, required: true}
  deployment_key_path: {description: Where the deployment key is on this host., type: path, required: true}
  data_ports: {description: "[LOW, HIGH] incoming data ports (the ACL catalogue's range).", type: list, elements: int, required: true}
  storage_gateway: {description: "{display_name, domains}.", type: dict, required: true}
  collection: {description: "{display_name, base_path}.", type: dict, required: true}
  info_path: {description: The node's info.json., type: path, default: /var/lib/globus-connect-server/info.json}
author: Science DMZ Kit
"""

RETURN = r"""
steps: {description: "The steps run (or, in check mode, that would run): step, why, argv.", returned: always, type: list}
unsupported: {description: Why nothing could be done here (empty when supported)., returned: always, type: str}
endpoint_id: {description: The endpoint id once known., returned: always, type: str}
"""

import json
import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.sdmz_globus import (CLI, GlobusError, check_desired, cli_environment, endpoint_id,
                                              parse_list, plan)


def _read(path):
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except OSError:
        return None


def _run(module, argv, env):
    rc, out, err = module.run_command(argv, environ_update=env)
    if rc != 0:
        module.fail_json(msg="%s failed (exit %d): %s" % (" ".join(argv[:4]), rc, (err or out).strip()[-2000:]))
    return out


def main():
    module = AnsibleModule(
        argument_spec=dict(
            client_id=dict(type="str", required=True, no_log=False),
            client_secret=dict(type="str", required=True, no_log=True),
            display_name=dict(type="str", required=True),
            organization=dict(type="str", required=True),
            owner=dict(type="str", required=True),
            contact_email=dict(type="str", required=True),
            deployment_key_path=dict(type="path", required=True),
            data_ports=dict(type="list", elements="int", required=True),
            storage_gateway=dict(type="dict", required=True),
            collection=dict(type="dict", required=True),
            info_path=dict(type="path", default="/var/lib/globus-connect-server/info.json"),
        ),
        supports_check_mode=True,
    )
    desired = dict(module.params)
    try:
        check_desired(desired)
    except GlobusError as exc:
        module.fail_json(msg="; ".join(exc.problems), problems=exc.problems)
    cli = module.get_bin_path(CLI)
    key_text = _read(desired["deployment_key_path"])
    info_text = _read(desired["info_path"])
    ident = endpoint_id(key_text, info_text)
    if not cli:
        # What would run, from the files alone; nothing is run or changed.
        steps = plan({"deployment_key": key_text is not None, "node_configured": info_text is not None}, desired)
        module.exit_json(changed=False, steps=steps, endpoint_id=ident or "",
                         unsupported="%s is not installed on this host (globus_connect_server_install: false, or "
                                     "no package); these steps could not run: %s"
                                     % (CLI, ", ".join(s["step"] for s in steps)))
    env = cli_environment(desired, ident)
    state = {"deployment_key": key_text is not None, "node_configured": info_text is not None}
    if ident and info_text is not None:
        state["gateways"] = parse_list(_run(module, [cli, "-F", "json", "storage-gateway", "list"], env), "storage-gateway")
        state["collections"] = parse_list(_run(module, [cli, "-F", "json", "collection", "list"], env), "collection")
    steps = plan(state, desired)
    if module.check_mode or not steps:
        module.exit_json(changed=bool(steps), steps=steps, endpoint_id=ident or "", unsupported="")
    gateway_id = None
    for step in steps:
        argv = [cli] + step["argv"][1:]
        if "{gateway_id}" in argv:
            argv[argv.index("{gateway_id}")] = gateway_id
        out = _run(module, argv, env)
        if step["step"] == "endpoint setup":
            os.chmod(desired["deployment_key_path"], 0o600)
            ident = endpoint_id(_read(desired["deployment_key_path"]))
            env = cli_environment(desired, ident)
        elif step["step"] == "node setup":
            ident = endpoint_id(_read(desired["deployment_key_path"]), _read(desired["info_path"])) or ident
            env = cli_environment(desired, ident)
        elif step["step"] == "storage-gateway create":
            try:
                gateway_id = json.loads(out).get("id")
            except (ValueError, AttributeError):
                module.fail_json(msg="storage-gateway create: could not read the new gateway's id from the CLI output")
    module.exit_json(changed=True, steps=steps, endpoint_id=ident or "", unsupported="")


if __name__ == "__main__":
    main()
