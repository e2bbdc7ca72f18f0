# -*- coding: utf-8 -*-
"""NAPALM driver for a Linux router managed by the Science DMZ Kit.

NAPALM finds it as platform ``sdmz_linux`` (module ``napalm_sdmz_linux``). It
talks SSH through Netmiko (device_type ``linux``) and runs the on-device
agent ``sdmz-netconf`` through sudo for everything that changes state; the
agent replaces the ``inet sdmz`` nftables table atomically and keeps the
rollback snapshot and the commit-confirm timer on the device, so a
connection lost mid-change still ends in a known configuration.
"""
from __future__ import annotations

import json
import socket

from napalm.base import NetworkDriver
from napalm.base.exceptions import (CommandErrorException, CommitError, ConnectionClosedException,
                                    ConnectionException, MergeConfigException, ReplaceConfigException)
from netmiko import ConnectHandler
from netmiko.exceptions import NetmikoAuthenticationException, NetmikoTimeoutException

AGENT = "/usr/local/sbin/sdmz-netconf"


class SdmzLinuxDriver(NetworkDriver):
    """Linux router: nftables ACLs, interface MTU and tbf port-buffer shapers."""

    def __init__(self, hostname, username, password, timeout=60, optional_args=None):
        self.hostname = hostname
        self.username = username
        self.password = password
        self.timeout = timeout
        args = dict(optional_args or {})
        self.sudo = args.pop("sudo", "sudo -n")
        self.agent = args.pop("agent", AGENT)
        self.netmiko_args = {key: args[key] for key in (
            "port", "key_file", "use_keys", "allow_agent", "ssh_strict", "system_host_keys",
            "alt_host_keys", "alt_key_file", "ssh_config_file", "passphrase", "conn_timeout",
            "auth_timeout", "banner_timeout") if key in args}
        self.device = None
        self.candidate = None

    # --- connection --------------------------------------------------------

    def open(self):
        try:
            self.device = ConnectHandler(device_type="linux", host=self.hostname, username=self.username,
                                         password=self.password or None, timeout=self.timeout,
                                         **self.netmiko_args)
        except (NetmikoAuthenticationException, NetmikoTimeoutException, socket.error, OSError) as exc:
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise ConnectionException("cannot reach %s over SSH: %s" % (self.hostname, first)) from exc
        version = self._exec([self.agent, "version"], privileged=True, allow_fail=True)
        if version[0] != 0:
            self.close()
            raise ConnectionException(
                "%s: the agent %s cannot be run through sudo (%s); install it with the network_device "
                "role (tag install)" % (self.hostname, self.agent, (version[2] or version[1]).strip()))

    def close(self):
        if self.device is not None:
            try:
                self.device.disconnect()
            finally:
                self.device = None

    def is_alive(self):
        transport = self.device.remote_conn.get_transport() if self.device else None
        return {"is_alive": bool(transport and transport.is_active())}

    def _exec(self, argv, stdin="", privileged=False, allow_fail=False):
        """Run one command on its own SSH channel: (exit status, stdout, stderr)."""
        if self.device is None:
            raise ConnectionClosedException("%s: not connected" % self.hostname)
        command = " ".join(_quote(a) for a in argv)
        if privileged and self.sudo:
            command = "%s %s" % (self.sudo, command)
        try:
            channel = self.device.remote_conn.get_transport().open_session(timeout=self.timeout)
            channel.settimeout(self.timeout)
            channel.exec_command(command)
            if stdin:
                channel.sendall(stdin.encode())
            channel.shutdown_write()
            out, err = _read_all(channel)
            status = channel.recv_exit_status()
            channel.close()
        except (socket.error, EOFError, OSError) as exc:
            raise ConnectionClosedException("%s: connection lost running %s: %s" % (self.hostname, argv[0], exc)) from exc
        if status != 0 and not allow_fail:
            raise CommandErrorException("%s: %s exited %d: %s" % (self.hostname, command, status, (err or out).strip()))
        return status, out, err

    def _agent(self, *args, stdin="", allow_fail=False):
        return self._exec([self.agent, *args], stdin=stdin, privileged=True, allow_fail=allow_fail)

    # --- configuration -----------------------------------------------------

    def _load(self, filename, config, error):
        if filename:
            with open(filename, encoding="utf-8") as handle:
                config = handle.read()
        if not config:
            raise error("%s: no configuration given" % self.hostname)
        status, out, err = self._agent("check", stdin=config, allow_fail=True)
        if status != 0:
            raise error("%s: the candidate was refused: %s" % (self.hostname, (err or out).strip()))
        return config

    def load_replace_candidate(self, filename=None, config=None):
        self.candidate = self._load(filename, config, ReplaceConfigException)

    def load_merge_candidate(self, filename=None, config=None):
        """Interface lines merge into the running ones; a table in the candidate replaces the running table."""
        text = self._load(filename, config, MergeConfigException)
        self.candidate = merge_configs(self._agent("running")[1], text)

    def compare_config(self):
        if self.candidate is None:
            return ""
        return self._agent("diff", stdin=self.candidate)[1].strip()

    def discard_config(self):
        self.candidate = None

    def commit_config(self, message="", revert_in=None):
        if self.candidate is None:
            raise CommitError("%s: nothing to commit (load a candidate first)" % self.hostname)
        if self.has_pending_commit():
            raise CommitError("%s: a commit is waiting for confirmation; confirm or roll it back first" % self.hostname)
        args = ["apply"] + (["--revert-in", str(int(revert_in))] if revert_in else [])
        status, out, err = self._agent(*args, stdin=self.candidate, allow_fail=True)
        if status != 0:
            raise CommitError("%s: commit failed, the previous configuration is in place: %s"
                              % (self.hostname, (err or out).strip()))
        self.candidate = None

    def confirm_commit(self):
        if not self.has_pending_commit():
            raise CommitError("%s: no commit is waiting for confirmation" % self.hostname)
        self._agent("confirm")

    def has_pending_commit(self):
        return self._agent("pending")[1].strip() == "yes"

    def rollback(self):
        self._agent("rollback")

    def get_config(self, retrieve="all", full=False, sanitized=False, format="text"):
        running = self._agent("running")[1] if retrieve in ("all", "running") else ""
        # Startup: what the boot unit re-applies, the last commit.
        startup = self._agent("startup")[1] if retrieve in ("all", "startup") else ""
        return {"running": running, "startup": startup,
                "candidate": (self.candidate or "") if retrieve in ("all", "candidate") else ""}

    # --- getters -----------------------------------------------------------

    def _links(self):
        return json.loads(self._exec(["ip", "-j", "-s", "-d", "link", "show"])[1])

    def get_facts(self):
        _, out, _ = self._exec(["sh", "-c", "cat /proc/uptime; hostname; hostname -f 2>/dev/null || hostname; "
                                "uname -sr; cat /etc/machine-id"])
        uptime, hostname, fqdn, os_version, machine_id = (out.splitlines() + [""] * 5)[:5]
        return {"uptime": float(uptime.split()[0]), "vendor": "Linux", "model": "sdmz_linux",
                "hostname": hostname.strip(), "fqdn": fqdn.strip(), "os_version": os_version.strip(),
                "serial_number": machine_id.strip(),
                "interface_list": sorted(link["ifname"] for link in self._links())}

    def get_interfaces(self):
        speeds = self._speeds()
        result = {}
        for link in self._links():
            flags = link.get("flags", [])
            result[link["ifname"]] = {
                "is_up": link.get("operstate") in ("UP", "UNKNOWN") and "LOWER_UP" in flags,
                "is_enabled": "UP" in flags, "description": link.get("ifalias", ""),
                "last_flapped": -1.0, "mtu": int(link.get("mtu", 0)),
                "speed": float(speeds.get(link["ifname"], -1)),
                "mac_address": link.get("address", "").upper() if link.get("link_type") == "ether" else "",
            }
        return result

    def _speeds(self):
        """Mbit/s from sysfs; -1 where the kernel does not know (veth, loopback)."""
        _, out, _ = self._exec(["sh", "-c", "for d in /sys/class/net/*; do printf '%s ' \"${d##*/}\"; "
                                "cat \"$d/speed\" 2>/dev/null || echo -1; done"])
        speeds = {}
        for line in out.splitlines():
            name, _, value = line.partition(" ")
            try:
                speeds[name] = int(value)
            except ValueError:
                speeds[name] = -1
        return speeds

    def get_interfaces_counters(self):
        result = {}
        for link in self._links():
            stats = link.get("stats64", {})
            rx, tx = stats.get("rx", {}), stats.get("tx", {})
            result[link["ifname"]] = {
                "tx_errors": tx.get("errors", 0), "rx_errors": rx.get("errors", 0),
                "tx_discards": tx.get("dropped", 0), "rx_discards": rx.get("dropped", 0),
                "tx_octets": tx.get("bytes", 0), "rx_octets": rx.get("bytes", 0),
                # Linux counts packets, not their cast; multicast is known on receive only.
                "tx_unicast_packets": tx.get("packets", 0),
                "rx_unicast_packets": rx.get("packets", 0) - rx.get("multicast", 0),
                "tx_multicast_packets": 0, "rx_multicast_packets": rx.get("multicast", 0),
                "tx_broadcast_packets": 0, "rx_broadcast_packets": 0,
            }
        return result

    def cli(self, commands, encoding="text"):
        """Commands through Netmiko's shell, as on any other platform."""
        return {command: self.device.send_command(command) for command in commands}


def merge_configs(running, candidate):
    """Candidate interface lines override running ones; the candidate's table, if any, wins."""
    def split(text):
        lines, table = [], []
        for line in text.splitlines():
            if table or line.strip().startswith("table "):
                table.append(line)
            elif line.strip() and not line.strip().startswith("#"):
                lines.append(line.strip())
        return lines, table
    run_lines, run_table = split(running)
    cand_lines, cand_table = split(candidate)
    keys = {tuple(line.split()[:3]) for line in cand_lines}
    merged = [line for line in run_lines if tuple(line.split()[:3]) not in keys] + cand_lines
    return "\n".join(merged + (cand_table or run_table)) + "\n"


def _read_all(channel):
    out, err = [], []
    while True:
        if channel.recv_ready():
            out.append(channel.recv(65536))
            continue
        if channel.recv_stderr_ready():
            err.append(channel.recv_stderr(65536))
            continue
        # The end of output is the server's EOF, not its exit status: sshd may send the exit
        # status while the command's last output is still on its way.
        if channel.eof_received and not channel.recv_ready() and not channel.recv_stderr_ready():
            break
        channel.status_event.wait(0.05)
    return b"".join(out).decode(errors="replace"), b"".join(err).decode(errors="replace")


def _quote(arg):
    safe = all(c.isalnum() or c in "-_./=:@%+," for c in arg)
    return arg if safe and arg else "'" + arg.replace("'", "'\\''") + "'"
