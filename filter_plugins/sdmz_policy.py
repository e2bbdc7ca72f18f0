# -*- coding: utf-8 -*-
# Science DMZ Kit: the permitted flows, derived from the collaborators and the
# services catalogue (policy/services.yml), as a filter. The derivation itself is
# module_utils/sdmz_acl.py (policy_flows), shared with the network ACLs; Terraform's
# sdmz_policy module derives the same list, and a test compares the two.
from __future__ import annotations

import importlib.util
from pathlib import Path

from ansible.errors import AnsibleFilterError

# Controller-side plugins cannot import the kit's module_utils by package name, so the
# one implementation is loaded from its file.
_SPEC = importlib.util.spec_from_file_location(
    "sdmz_kit_acl", Path(__file__).resolve().parent.parent / "module_utils" / "sdmz_acl.py")
sdmz_acl = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(sdmz_acl)


def sdmz_policy_flows(collaborators, catalogue):
    """One entry per permitted flow: who (collaborator, prefix) may reach which
    hosts (destination group) with which protocol and ports, and why (service)."""
    try:
        return sdmz_acl.policy_flows(collaborators or [], catalogue)
    except sdmz_acl.PolicyError as exc:
        raise AnsibleFilterError("sdmz_policy_flows: %s" % exc) from exc


class FilterModule:
    def filters(self):
        return {"sdmz_policy_flows": sdmz_policy_flows}
