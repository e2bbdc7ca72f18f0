#!/usr/bin/python
# -*- coding: utf-8 -*-
# Science DMZ Kit: read-only show commands through Netmiko, where NAPALM has no getter.
from __future__ import annotations

DOCUMENTATION = r"""
---
module: network_device_show
short_description: Run read-only show commands on a network device through Netmiko
description:
  - For what NAPALM has no getter for - queue and buffer counters, ACL hit counters, platform
    checks. Never changes the device; the same in check mode.
  - On sdmz_linux the kit's agent output (sdmz-netconf counters) is JSON and is returned parsed
    as I(acl_counters).
options:
  platform: {description: The kit's platform name., type: str, required: true}
  hostname: {description: Management address., type: str, required: true}
  username: {description: Login., type: str, required: true}
  password: {description: Password (from ansible-vault)., type: str, default: "", no_log: true}
  connection_args: {description: Extra Netmiko ConnectHandler arguments (key_file, port, alt_key_file, ...)., type: dict, default: {}}
  commands: {description: Show commands., type: list, elements: str, required: true}
author: Science DMZ Kit
"""

RETURN = r"""
output: {description: Command -> text., returned: success, type: dict}
acl_counters: {description: "sdmz_linux: named counters and per-rule counters of the kit's table.", returned: when asked, type: dict}
"""

import json
import traceback

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

try:
    from netmiko import ConnectHandler
    HAS_NETMIKO = True
except ImportError:
    HAS_NETMIKO = False
    NETMIKO_IMPORT_ERROR = traceback.format_exc()

DEVICE_TYPES = {"eos": "arista_eos", "junos": "juniper_junos", "nxos_ssh": "cisco_nxos",
                "iosxr": "cisco_xr", "sdmz_linux": "linux"}


def main():
    module = AnsibleModule(
        argument_spec=dict(
            platform=dict(type="str", required=True, choices=sorted(DEVICE_TYPES)),
            hostname=dict(type="str", required=True),
            username=dict(type="str", required=True),
            password=dict(type="str", default="", no_log=True),
            connection_args=dict(type="dict", default={}),
            commands=dict(type="list", elements="str", required=True),
        ),
        supports_check_mode=True,
    )
    if not HAS_NETMIKO:
        module.fail_json(msg=missing_required_lib("netmiko"), exception=NETMIKO_IMPORT_ERROR)
    params = module.params
    try:
        conn = ConnectHandler(device_type=DEVICE_TYPES[params["platform"]], host=params["hostname"],
                              username=params["username"], password=params["password"] or None,
                              **params["connection_args"])
    except Exception as exc:
        module.fail_json(msg="cannot reach %s over SSH: %s" % (params["hostname"], exc))
    output, result = {}, {}
    try:
        for command in params["commands"]:
            output[command] = conn.send_command(command, read_timeout=60)
            if params["platform"] == "sdmz_linux" and command.rstrip().endswith("sdmz-netconf counters"):
                try:
                    result["acl_counters"] = json.loads(output[command])
                except ValueError:
                    module.fail_json(msg="%s: '%s' did not return JSON: %s" % (params["hostname"], command,
                                                                              output[command][:500]))
    finally:
        conn.disconnect()
    module.exit_json(changed=False, output=output, **result)


if __name__ == "__main__":
    main()
