"""The Ray bridge of ``heloom serve --ray ADDRESS``: node servers on every Ray node.

``heloom serve --ray ADDRESS`` starts this module as a child process
(``python -m heloom.ray_nodes --address ADDRESS --heloom-bin PATH ...``). It connects to the
Ray cluster and starts one actor pinned to each alive node (``NodeAffinitySchedulingStrategy``,
``soft=False``). Each actor runs the same ``heloom`` binary as a *node server*
(``heloom serve`` on a fresh data directory, with as many threads as the node has CPUs) and a
bearer token it creates for it. The front (the Rust server the clients talk to) places jobs
on the node servers over heloom's HTTP API.

The protocol with the front is one JSON object per line on stdout:

- ``{"event": "join", "node_id", "url", "token", "threads", "ip"}``: a node server is ready;
- ``{"event": "leave", "node_id", "reason"}``: a node left the cluster, or its server died
  (a later ``join`` for the same node is a fresh server, with no keys);
- ``{"event": "ready", "nodes": N}``: the first round of joins is over;
- ``{"event": "error", "message"}``: the bridge cannot go on (it exits non-zero).

It polls ``ray.nodes()`` every ``--poll`` seconds for nodes that join or leave, and exits,
stopping its actors and their servers, when its stdin closes (the front stopped or died).

The ``heloom`` binary must exist at ``--heloom-bin`` on every node (on one machine it does;
on a real cluster install it at the same path everywhere, or pass ``--heloom-bin heloom`` to
take it from each node's PATH).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

#: Exit status when Ray is not installed.
EXIT_NO_RAY = 3
#: Tenant name of the front on every node server.
NODE_TENANT = "front"
#: Prefix of the node servers' data directories (in the node's temporary directory).
DIR_PREFIX = "heloom-node-"
#: The file in a node server's data directory that names its process.
PID_FILE = "server.pid"


def _emit(event: str, **fields: Any) -> None:
    """Writes one protocol line on stdout."""
    sys.stdout.write(json.dumps({"event": event, **fields}) + "\n")
    sys.stdout.flush()


def _log(message: str) -> None:
    sys.stderr.write(f"heloom.ray_nodes: {message}\n")
    sys.stderr.flush()


def _die_with_parent() -> None:
    """In the node server's process before exec: SIGKILL it when the actor that started it
    dies (Linux ``PR_SET_PDEATHSIG``; elsewhere the actor's ``stop`` is the only way)."""
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class NodeServer:
    """A ``heloom serve`` node server on this Ray node (the body of the Ray actor)."""

    def __init__(
        self, heloom_bin: str, threads: int, host: str, allow_insecure: bool, extra: list[str]
    ) -> None:
        import ray

        self.node_id: str = ray.get_runtime_context().get_node_id()
        self.threads = max(1, threads)
        _clean_stale()
        self.dir = tempfile.mkdtemp(prefix=DIR_PREFIX)
        data = self.dir
        out = subprocess.run(
            [heloom_bin, "serve", "token", "create", "--data", data, "--tenant", NODE_TENANT],
            capture_output=True,
            text=True,
            timeout=60,
        )
        if out.returncode != 0:
            raise RuntimeError(f"{heloom_bin} serve token create failed: {out.stderr.strip()}")
        self.token = out.stdout.strip()
        args = [heloom_bin, "serve", "--data", data, "--listen", f"{host}:0"]
        args += ["--threads", str(self.threads)]
        # The front keeps the records and results durably; a node's store is scratch.
        args.append("--scratch")
        if not _is_loopback(host):
            # Nodes talk over the cluster's network: keep it private (docs/serve-api.md).
            args.append("--allow-remote")
        if allow_insecure:
            args.append("--allow-insecure")
        args += extra
        self.log_path = os.path.join(data, "serve.log")
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                args,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=log,
                preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
            )
        with open(os.path.join(data, PID_FILE), "w") as f:
            f.write(str(self.proc.pid))
        self.url = ""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            text = self._log_text()
            m = re.search(r"listening on (https?://\S+)", text)
            if m:
                self.url = m.group(1)
                break
            if self.proc.poll() is not None:
                raise RuntimeError(f"the node server exited: {text.strip()[-2000:]}")
            time.sleep(0.05)
        if not self.url:
            self.proc.kill()
            raise RuntimeError(f"the node server did not start in 60 s: {self._log_text()[-2000:]}")
        self.ip = host

    def _log_text(self) -> str:
        try:
            with open(self.log_path, "rb") as f:
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    def info(self) -> dict[str, Any]:
        """What the front needs to use this node server."""
        return {
            "node_id": self.node_id,
            "url": self.url,
            "token": self.token,
            "threads": self.threads,
            "ip": self.ip,
            "pid": self.proc.pid,
        }

    def alive(self) -> bool:
        """Whether the node server still runs."""
        return self.proc.poll() is None

    def stop(self) -> None:
        """Stops the node server and removes its data directory."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        shutil.rmtree(self.dir, ignore_errors=True)


def _clean_stale() -> None:
    """Removes node server data directories whose server is gone (left by a node server
    killed with its actor, which had no chance to remove its own)."""
    base = tempfile.gettempdir()
    for name in os.listdir(base):
        path = os.path.join(base, name)
        if not name.startswith(DIR_PREFIX) or not os.path.isdir(path):
            continue
        try:
            with open(os.path.join(path, PID_FILE)) as f:
                pid = int(f.read().strip())
        except (OSError, ValueError):
            # No server was started there (or it is starting now): only old ones go.
            with contextlib.suppress(OSError):
                if time.time() - os.path.getmtime(path) > 3600:
                    shutil.rmtree(path, ignore_errors=True)
            continue
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            shutil.rmtree(path, ignore_errors=True)
        except OSError:
            pass


def _is_loopback(host: str) -> bool:
    return host == "localhost" or host.startswith("127.") or host == "::1"


def _local_addresses() -> set[str]:
    """This machine's addresses (a node on one of them gets a loopback node server)."""
    out = {"127.0.0.1"}
    with contextlib.suppress(OSError):
        out.update(str(a[4][0]) for a in socket.getaddrinfo(socket.gethostname(), None))
    try:
        import ray

        out.add(ray.util.get_node_ip_address())  # type: ignore[no-untyped-call]
    except Exception:  # best effort: only decides loopback or not
        pass
    return {str(a) for a in out}


def _unreachable(address: str, timeout: float = 10.0) -> str | None:
    """Why a ``HOST:PORT`` address takes no TCP connection, or ``None`` (also for ``auto``
    and other forms, which ``ray.init`` resolves): Ray itself retries for minutes."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        return None
    if "://" in host:
        return None
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
            return None
    except OSError as e:
        return str(e)


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m heloom.ray_nodes",
        description="Starts heloom node servers on every Ray node for `heloom serve --ray`.",
    )
    p.add_argument("--address", required=True, help="the Ray cluster (ray.init address)")
    p.add_argument("--heloom-bin", required=True, help="the heloom binary, on every node")
    p.add_argument("--allow-insecure", action="store_true", help="node servers accept test keys")
    p.add_argument("--poll", type=float, default=2.0, help="seconds between looks at the nodes")
    p.add_argument(
        "--node-host",
        default="auto",
        help="address node servers listen on: auto (loopback for nodes on this machine, "
        "else the node's IP, then --allow-remote), or an address",
    )
    p.add_argument("--namespace", default="heloom", help="Ray namespace of the actors")
    p.add_argument("--node-arg", action="append", default=[], help="extra `heloom serve` flag")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Runs the bridge until stdin closes; returns the exit status."""
    args = _parse(argv)
    try:
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
    except ImportError as e:
        msg = f"Ray is not installed in {sys.executable} ({e}): pip install 'heloom[ray]'"
        _log(msg)
        _emit("error", message=msg)
        return EXIT_NO_RAY
    unreachable = _unreachable(args.address)
    if unreachable:
        msg = f"no Ray cluster at {args.address}: {unreachable}"
        _log(msg)
        _emit("error", message=msg)
        return 1
    try:
        ray.init(
            address=args.address,
            namespace=args.namespace,
            log_to_driver=False,
            logging_level=logging.WARNING,
            configure_logging=True,
        )
    except Exception as e:  # any failure to connect is reported alike
        msg = f"cannot connect to the Ray cluster at {args.address}: {e}"
        _log(msg)
        _emit("error", message=msg)
        return 1

    stop = threading.Event()

    def watch_stdin() -> None:
        try:
            while sys.stdin.buffer.read(4096):
                pass
        except (OSError, ValueError):
            pass
        stop.set()

    threading.Thread(target=watch_stdin, daemon=True, name="stdin").start()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())

    local = _local_addresses()
    actor_cls = ray.remote(num_cpus=0, max_restarts=0)(NodeServer)
    actors: dict[str, Any] = {}  # node id -> actor, ready
    pending: dict[str, tuple[Any, Any, float]] = {}  # node id -> (actor, info ref, since)
    announced_ready = False

    def host_for(ip: str) -> str:
        if args.node_host != "auto":
            return str(args.node_host)
        return "127.0.0.1" if ip in local else ip

    def drop(node_id: str, reason: str) -> None:
        actor = actors.pop(node_id, None)
        if actor is not None:
            _emit("leave", node_id=node_id, reason=reason)
            with contextlib.suppress(Exception):  # the actor may be gone already
                ray.get(actor.stop.remote(), timeout=5)
            ray.kill(actor)

    while not stop.is_set():
        try:
            listed = ray.nodes()  # type: ignore[no-untyped-call]
            nodes = {n["NodeID"]: n for n in listed if n.get("Alive")}
        except Exception as e:  # the GCS may be restarting: try again
            _log(f"reading the nodes: {e}")
            stop.wait(args.poll)
            continue
        # Nodes that left: their servers are gone with them.
        for node_id in list(actors):
            if node_id not in nodes:
                drop(node_id, "the node left the cluster")
        for node_id in list(pending):
            if node_id not in nodes:
                stale, _, _ = pending.pop(node_id)
                ray.kill(stale)
        # Servers that died on nodes still there.
        if actors:
            pings = {node_id: a.alive.remote() for node_id, a in actors.items()}
            ready, _ = ray.wait(list(pings.values()), num_returns=len(pings), timeout=5)
            done = set(ready)
            for node_id, ref in pings.items():
                if ref not in done:
                    continue
                try:
                    ok = bool(ray.get(ref))
                except Exception:  # the actor died
                    ok = False
                if not ok:
                    drop(node_id, "its node server or actor died")
        # New nodes: one actor each, pinned to the node.
        for node_id, n in nodes.items():
            if node_id in actors or node_id in pending:
                continue
            cpus = int(n.get("Resources", {}).get("CPU", 1) or 1)
            ip = str(n.get("NodeManagerAddress", "127.0.0.1"))
            strategy = NodeAffinitySchedulingStrategy(node_id=node_id, soft=False)
            actor: Any = actor_cls.options(
                scheduling_strategy=strategy, name=f"heloom-node-{node_id[:16]}-{os.getpid()}"
            ).remote(args.heloom_bin, cpus, host_for(ip), args.allow_insecure, args.node_arg)
            pending[node_id] = (actor, actor.info.remote(), time.monotonic())
        if pending:
            refs = {ref: node_id for node_id, (_, ref, _) in pending.items()}
            first = not announced_ready
            ready, _ = ray.wait(list(refs), num_returns=len(refs), timeout=90 if first else 0.1)
            for ref in ready:
                node_id = refs[ref]
                actor, _, _ = pending.pop(node_id)
                try:
                    info = ray.get(ref)
                except Exception as e:  # report and try again next round
                    _log(f"starting the node server on node {node_id}: {e}")
                    ray.kill(actor)
                    continue
                actors[node_id] = actor
                _emit("join", **info)
            for node_id, (actor, _, since) in list(pending.items()):
                if time.monotonic() - since > 120:
                    _log(f"the node server on node {node_id} did not start in 120 s")
                    pending.pop(node_id)
                    ray.kill(actor)
        if not announced_ready:
            announced_ready = True
            _emit("ready", nodes=len(actors))
        stop.wait(args.poll)

    for node_id in list(actors):
        drop(node_id, "the bridge is stopping")
    for actor, _, _ in pending.values():
        ray.kill(actor)
    ray.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
