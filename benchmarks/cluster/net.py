"""The run's network: one namespace for the database, one for the producers, one per host.

    db namespace:  bridge br0 198.18.0.1/24, PostgreSQL listening there (and the delay relay)
    app namespace: eth0 198.18.0.9   (producers: the web servers, never cut)
    host i:        eth0 198.18.0.(10+i), `runworkers -n 2`

Every host reaches the database over its own veth pair into the bridge, so one host can be
cut off (its port on the bridge set down: packets are dropped, TCP connections stall as in a
real partition, and resume when the link comes back) while the others carry on. The addresses
(198.18.0.0/15 is reserved for benchmark networks) exist only inside this run's namespaces:
the machine's own interfaces, routes and servers are never touched, and two runs never
collide because every namespace is named after the harness's pid.

Latency and loss use `tc netem` where the kernel has it. Some kernels (this project's CI
machines among them) are built without sch_netem: latency then goes through a small relay in
the db namespace (relay.py) and loss through nftables rules in the db namespace.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass

SUBNET = "198.18.0"
PREFIX_LENGTH = 24
DB_ADDRESS = f"{SUBNET}.1"
APP_ADDRESS = f"{SUBNET}.9"
#: Namespaces of a run: sq<pid>db, sq<pid>app, sq<pid>h1 ... (see `stale_prefixes`).
NAME_PATTERN = re.compile(r"^sq(\d+)(db|app|h\d+)$")


class NetworkError(RuntimeError):
    """The namespaces could not be made (not root, no `ip`, a kernel without veth...)."""


def host_address(host: int) -> str:
    return f"{SUBNET}.{10 + host}"


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        ["ip", *args], capture_output=True, text=True, stdin=subprocess.DEVNULL, check=False
    )
    if check and result.returncode:
        raise NetworkError(f"ip {' '.join(args)}: {result.stderr.strip()}")
    return result


def netns_list() -> list[str]:
    result = ip("netns", "list", check=False)
    return [line.split()[0] for line in result.stdout.splitlines() if line.strip()]


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def stale_namespaces(names: list[str], alive: object = pid_alive) -> list[str]:
    """Namespaces left by runs whose harness is gone (killed with SIGKILL, say)."""
    stale = []
    for name in names:
        match = NAME_PATTERN.match(name)
        if match and not alive(int(match.group(1))):  # type: ignore[operator]
            stale.append(name)
    return stale


def kill_namespace_processes(namespace: str) -> None:
    """SIGKILL whatever still runs in one of this run's namespaces (all of it is ours)."""
    result = ip("netns", "pids", namespace, check=False)
    for pid in result.stdout.split():
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(pid), signal.SIGKILL)


def delete_namespace(namespace: str) -> None:
    """Its processes, then the namespace: its veths, bridge, qdiscs and rules go with it."""
    kill_namespace_processes(namespace)
    for _ in range(50):
        if ip("netns", "del", namespace, check=False).returncode == 0:
            return
        time.sleep(0.1)


def remove_stale() -> list[str]:
    stale = stale_namespaces(netns_list())
    for name in stale:
        delete_namespace(name)
    return stale


def netem_available() -> bool:
    """Whether this kernel has sch_netem: try it on a throwaway namespace's loopback."""
    probe = f"sq{os.getpid()}probe"
    ip("netns", "add", probe)
    try:
        result = subprocess.run(
            ["tc", "-n", probe, "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms"],
            capture_output=True,
            stdin=subprocess.DEVNULL,
            check=False,
        )
        return result.returncode == 0
    finally:
        ip("netns", "del", probe, check=False)


@dataclass
class Network:
    """The namespaces of one run; `create()` builds them, `destroy()` removes all of it."""

    hosts: int
    prefix: str = ""

    def __post_init__(self) -> None:
        self.prefix = self.prefix or f"sq{os.getpid()}"
        self.created: list[str] = []
        self.cut_hosts: set[int] = set()
        self.nft_loss = False

    @property
    def db_ns(self) -> str:
        return f"{self.prefix}db"

    @property
    def app_ns(self) -> str:
        return f"{self.prefix}app"

    def host_ns(self, host: int) -> str:
        return f"{self.prefix}h{host}"

    def exec_prefix(self, namespace: str) -> list[str]:
        return ["ip", "netns", "exec", namespace]

    def host_prefix(self, host: int) -> list[str]:
        """Run a command on host `host`: in its namespace, under its own hostname (worker
        ids start with the hostname, so every attempt in a job's history names its host)."""
        return [
            *self.exec_prefix(self.host_ns(host)),
            "unshare",
            "--uts",
            "--",
            "sh",
            "-c",
            'hostname "$0" && exec "$@"',
            self.hostname(host),
        ]

    def hostname(self, host: int) -> str:
        return f"{self.prefix}-h{host}"

    def _namespace(self, name: str) -> None:
        ip("netns", "add", name)
        self.created.append(name)
        ip("-n", name, "link", "set", "lo", "up")

    def _attach(self, namespace: str, port: str, address: str) -> None:
        """A veth pair: eth0 in `namespace`, `port` on the db namespace's bridge."""
        # Both ends are born in their namespaces: no name ever exists in the machine's own.
        ip(
            "link", "add", "eth0", "netns", namespace,
            "type", "veth", "peer", "name", port, "netns", self.db_ns,
        )  # fmt: skip
        ip("-n", self.db_ns, "link", "set", port, "master", "br0", "up")
        ip("-n", namespace, "addr", "add", f"{address}/{PREFIX_LENGTH}", "dev", "eth0")
        ip("-n", namespace, "link", "set", "eth0", "up")

    def create(self) -> None:
        if os.geteuid() != 0:
            raise NetworkError("network namespaces need root")
        if not shutil.which("ip"):
            raise NetworkError("the `ip` command (iproute2) is missing")
        try:
            self._namespace(self.db_ns)
            ip("-n", self.db_ns, "link", "add", "br0", "type", "bridge")
            ip("-n", self.db_ns, "addr", "add", f"{DB_ADDRESS}/{PREFIX_LENGTH}", "dev", "br0")
            ip("-n", self.db_ns, "link", "set", "br0", "up")
            self._namespace(self.app_ns)
            self._attach(self.app_ns, "app", APP_ADDRESS)
            for host in range(1, self.hosts + 1):
                self._namespace(self.host_ns(host))
                self._attach(self.host_ns(host), f"h{host}", host_address(host))
        except BaseException:
            self.destroy()
            raise

    def destroy(self) -> None:
        for name in reversed(self.created):
            delete_namespace(name)
        self.created.clear()

    # Faults ---------------------------------------------------------------------------------

    def cut(self, host: int) -> None:
        """Cut `host` off: its bridge port goes down and every packet either way is lost."""
        ip("-n", self.db_ns, "link", "set", f"h{host}", "down")
        self.cut_hosts.add(host)

    def heal(self, host: int) -> None:
        ip("-n", self.db_ns, "link", "set", f"h{host}", "up")
        self.cut_hosts.discard(host)

    def shape(self, host: int, latency_ms: float, loss_pct: float, netem: bool) -> None:
        """Add `latency_ms` of round trip (half each way) and `loss_pct` each way on the link
        of `host`. Without netem, only loss is done here (the relay adds the latency)."""
        if netem:
            for namespace, device in ((self.db_ns, f"h{host}"), (self.host_ns(host), "eth0")):
                args = ["tc", "-n", namespace, "qdisc", "replace", "dev", device, "root", "netem"]
                if latency_ms:
                    args += ["delay", f"{latency_ms / 2:g}ms"]
                if loss_pct:
                    args += ["loss", f"{loss_pct:g}%"]
                subprocess.run(args, check=True, capture_output=True, stdin=subprocess.DEVNULL)
        elif loss_pct:
            self._nft_loss(host, loss_pct)

    def _nft_loss(self, host: int, loss_pct: float) -> None:
        if not shutil.which("nft"):
            raise NetworkError(
                "--loss needs tc netem (this kernel has none) or nftables (apt-get install "
                "nftables)"
            )
        address = host_address(host)
        threshold = round(loss_pct * 100)  # numgen over 0..9999: hundredths of a percent
        rules = []
        if not self.nft_loss:
            rules += [
                "add table inet sqloss",
                "add chain inet sqloss input { type filter hook input priority 0 ; }",
                "add chain inet sqloss output { type filter hook output priority 0 ; }",
            ]
            self.nft_loss = True
        rules += [
            f"add rule inet sqloss input ip saddr {address} numgen random mod 10000 < "
            f"{threshold} drop",
            f"add rule inet sqloss output ip daddr {address} numgen random mod 10000 < "
            f"{threshold} drop",
        ]
        subprocess.run(
            [*self.exec_prefix(self.db_ns), "nft", "-f", "-"],
            input="\n".join(rules) + "\n",
            text=True,
            check=True,
            capture_output=True,
        )
