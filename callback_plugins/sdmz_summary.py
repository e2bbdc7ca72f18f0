# -*- coding: utf-8 -*-
# Science DMZ Kit: a short "what was deployed where" table at the end of a run.
from __future__ import annotations

DOCUMENTATION = r"""
name: sdmz_summary
type: aggregate
short_description: Summarise, per host, which roles ran and what they changed
description:
  - At the end of a playbook, prints a Markdown table (host, management address, groups, roles applied, ok,
    changed, failed, skipped) and writes it to C(build/summary/<playbook>.md).
  - Roles may publish facts named C(<role>_unsupported) (a list of items that could not be
    applied, each with a reason); their count is shown so nothing unsupported passes silently.
requirements:
  - enabled in ansible.cfg (callbacks_enabled)
"""

import os
from collections import defaultdict

from ansible.plugins.callback import CallbackBase


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "sdmz_summary"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self):
        super().__init__()
        self.playbook_name = "playbook"
        self.roles = defaultdict(dict)          # host -> role -> "changed" | "ok" | "failed"
        self.counts = defaultdict(lambda: defaultdict(int))
        self.unsupported = defaultdict(int)
        self.groups = {}
        self.addresses = {}

    def v2_playbook_on_start(self, playbook):
        self.playbook_name = os.path.splitext(os.path.basename(playbook._file_name))[0]
        # Always the kit's own build/ (playbooks may live elsewhere, e.g. tests/fixtures).
        self.summary_dir = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                        "build", "summary")

    def v2_playbook_on_play_start(self, play):
        inventory = play.get_variable_manager()._inventory
        for host in inventory.get_hosts():
            names = sorted(g.name for g in host.get_groups() if g.name not in ("all", "ungrouped"))
            self.groups[host.name] = names
            address = host.get_vars().get("sdmz_mgmt_address")
            if address:
                self.addresses[host.name] = str(address)

    def _record(self, result, outcome):
        host = result._host.get_name()
        self.counts[host][outcome] += 1
        role = result._task._role.get_name() if result._task._role else None
        if role:
            previous = self.roles[host].get(role, "ok")
            rank = {"ok": 0, "changed": 1, "failed": 2}
            self.roles[host][role] = outcome if rank.get(outcome, 0) > rank[previous] else previous
        facts = (result._result or {}).get("ansible_facts") or {}
        for key, value in facts.items():
            if key.endswith("_unsupported") and isinstance(value, list):
                self.unsupported[host] = len(value)

    def v2_runner_on_ok(self, result):
        self._record(result, "changed" if result._result.get("changed") else "ok")

    def v2_runner_on_failed(self, result, ignore_errors=False):
        if not ignore_errors:
            self._record(result, "failed")

    def v2_runner_on_unreachable(self, result):
        self._record(result, "failed")

    def v2_runner_on_skipped(self, result):
        self.counts[result._host.get_name()]["skipped"] += 1

    def v2_playbook_on_stats(self, stats):
        hosts = sorted(stats.processed.keys())
        lines = [
            "## %s: what was deployed where" % self.playbook_name,
            "",
            "| host | address | groups | roles (result) | ok | changed | failed | unsupported |",
            "|---|---|---|---|---:|---:|---:|---:|",
        ]
        for host in hosts:
            s = stats.summarize(host)
            roles = ", ".join("%s (%s)" % (r, o) for r, o in sorted(self.roles[host].items())) or "-"
            failed = s["failures"] + s["unreachable"]
            lines.append("| %s | %s | %s | %s | %d | %d | %d | %d |" % (
                host, self.addresses.get(host, "-"), " ".join(self.groups.get(host, [])) or "-", roles,
                s["ok"], s["changed"], failed, self.unsupported.get(host, 0)))
        text = "\n".join(lines) + "\n"
        try:
            os.makedirs(self.summary_dir, exist_ok=True)
            with open(os.path.join(self.summary_dir, self.playbook_name + ".md"), "w", encoding="utf-8") as out:
                out.write(text)
        except OSError as exc:
            self._display.warning("sdmz_summary: cannot write the summary: %s" % exc)
        self._display.display("\n" + text)
