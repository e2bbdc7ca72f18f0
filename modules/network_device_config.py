#!/usr/bin/python
# -*- coding: utf-8 -*-
# Science DMZ Kit: push a rendered configuration through NAPALM, safely.
from __future__ import annotations

DOCUMENTATION = r"""
---
module: network_device_config
short_description: Load, diff, commit with a confirm timer, verify and confirm (or roll back) through NAPALM
description:
  - Loads the candidate (merge, or replace where the platform's rendered configuration is
    complete for what the kit owns), shows NAPALM's compare_config diff, and in check mode
    stops there, having changed nothing.
  - Otherwise commits with C(revert_in), so the device restores its previous configuration by
    itself unless the commit is confirmed; then opens a new connection to prove the management
    path still works and checks the interfaces named in I(verify). Only then is the commit
    confirmed. If the check fails, the commit is rolled back (or, if the device cannot be
    reached any more, its own timer rolls it back) and the module fails saying what happened.
  - Platforms whose NAPALM driver has no commit-confirm are committed only when
    I(allow_unconfirmed) is true; a failed check then calls rollback().
options:
  platform: {description: NAPALM driver name (eos, junos, nxos_ssh, iosxr, sdmz_linux)., type: str, required: true}
  hostname: {description: Management address of the device., type: str, required: true}
  username: {description: Login., type: str, required: true}
  password: {description: Password (from ansible-vault); empty for key-based logins., type: str, default: "", no_log: true}
  timeout: {description: Seconds per operation., type: int, default: 30}
  optional_args: {description: NAPALM optional_args (key_file, port, alt_key_file, ssh_strict, ...)., type: dict, default: {}}
  config: {description: The rendered candidate configuration., type: str, required: true}
  mode: {description: load_merge_candidate or load_replace_candidate., type: str, choices: [merge, replace], default: merge}
  revert_in: {description: Seconds the device waits for confirmation before it rolls back by itself., type: int, default: 120}
  allow_unconfirmed: {description: Commit on platforms without commit-confirm (rollback() still runs on a failed check)., type: bool, default: false}
  verify: {description: "Checks after the commit: interfaces_up (list of names), mtu (name -> MTU).", type: dict, default: {}}
author: Science DMZ Kit
"""

RETURN = r"""
committed: {description: Whether a change was committed and confirmed., returned: always, type: bool}
rolled_back: {description: Whether a commit was rolled back after a failed check., returned: always, type: bool}
verification: {description: What the post-commit check found., returned: when committed, type: dict}
"""

import time
import traceback

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

try:
    from napalm import get_network_driver
    HAS_NAPALM = True
except ImportError:
    HAS_NAPALM = False
    NAPALM_IMPORT_ERROR = traceback.format_exc()


def connect(params, timeout=None):
    driver = get_network_driver(params["platform"])
    device = driver(params["hostname"], params["username"], params["password"],
                    timeout=timeout or params["timeout"], optional_args=params["optional_args"])
    device.open()
    return device


def check_device(params):
    """A new connection (the management path), then facts and the interfaces asked for."""
    problems, found = [], {}
    try:
        device = connect(params, timeout=min(params["timeout"], 20))
    except Exception as exc:  # any failure to reach the device is the finding
        return ["a new management connection to %s failed: %s" % (params["hostname"], exc)], found
    try:
        found["facts"] = device.get_facts()
        interfaces = device.get_interfaces()
        for name in params["verify"].get("interfaces_up", []):
            state = interfaces.get(name)
            if not state or not state["is_up"]:
                problems.append("interface %s is not up after the commit" % name)
        for name, mtu in (params["verify"].get("mtu") or {}).items():
            state = interfaces.get(name)
            if state and int(state["mtu"]) != int(mtu):
                problems.append("interface %s has MTU %s, wanted %s" % (name, state["mtu"], mtu))
        found["interfaces"] = {k: {"is_up": v["is_up"], "mtu": v["mtu"]} for k, v in interfaces.items()}
    except Exception as exc:
        problems.append("reading the device after the commit failed: %s" % exc)
    finally:
        try:
            device.close()
        except Exception:
            pass
    return problems, found


def undo(module, device, params, confirmable, problems):
    """Roll back over the session that committed; else wait for the device's own timer."""
    try:
        device.rollback()
        how = "rolled back through the committing session"
    except Exception as exc:
        if not confirmable:
            module.fail_json(msg="%s: the commit failed its check (%s) and rollback() failed too (%s): "
                                 "restore the device by hand" % (params["hostname"], "; ".join(problems), exc),
                             committed=True, rolled_back=False)
        time.sleep(params["revert_in"] + 5)
        how = "restored by the device's own commit-confirm timer after %d s" % params["revert_in"]
    after, _ = check_device(dict(params, verify={}))
    state = "the device answers again" if not after else "the device still does not answer: " + "; ".join(after)
    module.fail_json(msg="%s: the commit failed its check: %s. It was %s; %s."
                     % (params["hostname"], "; ".join(problems), how, state),
                     committed=False, rolled_back=True, problems=problems)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            platform=dict(type="str", required=True),
            hostname=dict(type="str", required=True),
            username=dict(type="str", required=True),
            password=dict(type="str", default="", no_log=True),
            timeout=dict(type="int", default=30),
            optional_args=dict(type="dict", default={}),
            config=dict(type="str", required=True),
            mode=dict(type="str", choices=["merge", "replace"], default="merge"),
            revert_in=dict(type="int", default=120),
            allow_unconfirmed=dict(type="bool", default=False),
            verify=dict(type="dict", default={}),
        ),
        supports_check_mode=True,
    )
    if not HAS_NAPALM:
        module.fail_json(msg=missing_required_lib("napalm"), exception=NAPALM_IMPORT_ERROR)
    params = module.params
    result = {"changed": False, "committed": False, "rolled_back": False}
    try:
        device = connect(params)
    except Exception as exc:
        module.fail_json(msg="cannot open %s (%s) through NAPALM: %s" % (params["hostname"], params["platform"], exc), **result)
    try:
        try:
            if params["mode"] == "replace":
                device.load_replace_candidate(config=params["config"])
            else:
                device.load_merge_candidate(config=params["config"])
            diff = device.compare_config()
        except Exception as exc:
            device.discard_config()
            module.fail_json(msg="%s refused the candidate; nothing was changed: %s" % (params["hostname"], exc), **result)
        if not diff:
            device.discard_config()
            module.exit_json(**result)
        result.update(changed=True, diff={"prepared": diff})
        if module.check_mode:
            device.discard_config()
            module.exit_json(**result)

        confirmable = True
        try:
            device.commit_config(revert_in=params["revert_in"])
        except NotImplementedError:
            if not params["allow_unconfirmed"]:
                device.discard_config()
                module.fail_json(msg="%s: the %s driver has no commit-confirm; nothing was changed. Set "
                                     "network_device_allow_unconfirmed to commit without it."
                                 % (params["hostname"], params["platform"]), **result)
            confirmable = False
            device.commit_config()
        except Exception as exc:
            module.fail_json(msg="%s: commit failed: %s" % (params["hostname"], exc), **result)

        problems, found = check_device(params)
        result["verification"] = found
        if problems:
            undo(module, device, params, confirmable, problems)
        if confirmable:
            try:
                device.confirm_commit()
            except Exception:
                # The committing session may have been cut; the new one reached the device.
                fresh = connect(params)
                try:
                    fresh.confirm_commit()
                finally:
                    fresh.close()
        result["committed"] = True
        module.exit_json(**result)
    finally:
        try:
            device.close()
        except Exception:
            pass


if __name__ == "__main__":
    main()
