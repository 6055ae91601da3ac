"""A gpufaas cluster on one machine, for tests and benchmarks: real
`gpufaas serve` gateways, each on its own loopback address (127.0.0.2,
127.0.0.3, ...) with its own state directory, behind a real nginx (Debian's)
running the shipped routing files (deploy/nginx) as the current user with its
own prefix, so no root is needed.

Functions are MLPs from the independent numpy reference
(tests/functions/ref_models.py), each with its own random weights, inputs and
expected outputs, so every answer can be checked.

Environment (set by meson): GF_GPUFAAS, GF_WORKER, GF_SOURCE_ROOT.
"""
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import types
import uuid

import numpy as np

SRC = os.environ.get("GF_SOURCE_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(SRC, "tests", "functions"))
import ref_models  # noqa: E402  (the independent reference)

NGINX_DIR = os.path.join(SRC, "deploy", "nginx")


def find_nginx():
    """The nginx binary, or None (deploy/install-deps.sh --test installs it)."""
    for p in (shutil.which("nginx"), "/usr/sbin/nginx"):
        if p and os.access(p, os.X_OK):
            return p
    return None


def free_port(addrs):
    """A TCP port free on every address in addrs (bound and released)."""
    for _ in range(200):
        s = socket.socket()
        s.bind((addrs[0], 0))
        port = s.getsockname()[1]
        s.close()
        ok = True
        for a in addrs:
            t = socket.socket()
            try:
                t.bind((a, port))
            except OSError:
                ok = False
            finally:
                t.close()
        if ok:
            return port
    raise RuntimeError("no free port")


# ---- functions ---------------------------------------------------------------------

class Function:
    """An MLP function: manifest, weights and one checked request."""

    def __init__(self, name, seed, dims=(32, 48, 8), batch=2, tmp="/tmp"):
        rng = np.random.default_rng(seed)
        w = ref_models.Weights("F32", rng)
        a = types.SimpleNamespace(mlp_dims=",".join(map(str, dims)),
                                  mlp_acts=",".join(["tanh"] * (len(dims) - 2) + ["identity"]),
                                  batch=batch, softmax=False)
        manifest, inputs, outputs = ref_models.case_mlp(a, w)
        manifest["name"] = name
        manifest["max_queue_delay_us"] = 0
        self.name = name
        self.manifest = json.dumps(manifest).encode()
        path = os.path.join(tmp, f"{name}.safetensors")
        ref_models.write_safetensors(path, w.tensors)
        with open(path, "rb") as f:
            self.weights = f.read()
        os.unlink(path)
        self.x = np.frombuffer(inputs[0][3], dtype="<f4").reshape(inputs[0][2])
        self.want = outputs[0][1]
        self.body = json.dumps({"inputs": [{"name": "x", "datatype": "FP32",
                                            "shape": list(self.x.shape),
                                            "data": self.x.ravel().tolist()}]}).encode()

    def correct(self, answer):
        """True when a v1 invoke answer (parsed JSON) matches the reference."""
        try:
            out = answer["outputs"][0]
            y = np.asarray(out["data"], dtype=np.float64).reshape(out["shape"])
        except (KeyError, IndexError, TypeError, ValueError):
            return False
        return y.shape == self.want.shape and np.allclose(y, self.want, rtol=1e-4, atol=1e-5)

    def multipart(self):
        boundary = uuid.uuid4().hex
        parts = []
        for field, fname, content in (("manifest", "m.json", self.manifest),
                                      ("weights", "w.safetensors", self.weights)):
            parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{field}"; '
                         f'filename="{fname}"\r\nContent-Type: application/octet-stream\r\n\r\n'
                         .encode() + content + b"\r\n")
        parts.append(f"--{boundary}--\r\n".encode())
        return b"".join(parts), f"multipart/form-data; boundary={boundary}"


# ---- HTTP ----------------------------------------------------------------------------

class Client:
    """One keep-alive HTTP/1.1 connection to host:port (reconnects when it breaks).
    Not thread-safe: one per thread."""

    def __init__(self, host, port, timeout=60):
        self.host, self.port, self.timeout = host, port, timeout
        self.conn = None

    def request(self, method, path, body=None, headers=None):
        """(status, headers dict (lower-case names), body bytes); status 0 and the
        error text as body when the exchange failed."""
        for attempt in (0, 1):
            if self.conn is None:
                self.conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
            try:
                self.conn.request(method, path, body=body, headers=headers or {})
                r = self.conn.getresponse()
                data = r.read()
                hdrs = {k.lower(): v for k, v in r.getheaders()}
                if hdrs.get("connection", "").lower() == "close":
                    self.close()
                return r.status, hdrs, data
            except (OSError, http.client.HTTPException) as e:
                self.close()
                # a kept-alive connection the peer closed meanwhile: once more, fresh
                if attempt == 1 or not isinstance(e, (http.client.RemoteDisconnected,
                                                      BrokenPipeError, ConnectionResetError)):
                    return 0, {}, str(e).encode()
        return 0, {}, b"unreachable"

    def close(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def invoke(self, fn):
        """Invoke fn with its request: (ok, status, upstream, answer or message)."""
        st, h, b = self.request("POST", f"/v1/functions/{fn.name}/invoke", fn.body,
                                {"Content-Type": "application/json"})
        up = h.get("x-gpufaas-upstream", "")
        if st != 200:
            return False, st, up, b.decode(errors="replace")[:300]
        try:
            ans = json.loads(b)
        except ValueError:
            return False, st, up, "not JSON"
        return fn.correct(ans), st, up, ans

    def deploy(self, fn, token=None):
        body, ctype = fn.multipart()
        h = {"Content-Type": ctype}
        if token:
            h["Authorization"] = f"Bearer {token}"
        st, hd, b = self.request("POST", "/v1/functions", body, h)
        return st, hd.get("x-gpufaas-upstream", ""), b


def last_upstream(up):
    """The node that answered, from X-Gpufaas-Upstream ("a, b" after a retry)."""
    return up.split(",")[-1].strip() if up else ""


# ---- processes -----------------------------------------------------------------------

class Gateway:
    """One `gpufaas serve` on its own loopback address and state directory;
    with a shared store, it sees the store through a symbolic link of its own
    (root/nodeK.shared), so that one node can lose sight of it."""

    def __init__(self, root, index, port, args=(), shared=None, scan_ms=500):
        self.index = index
        self.host = f"127.0.0.{2 + index}"
        self.port = port
        self.addr = f"{self.host}:{port}"
        self.root = root
        self.state = os.path.join(root, f"node{index}")
        self.log = os.path.join(root, f"node{index}.log")
        self.args = list(args)
        self.shared = shared
        self.link = os.path.join(root, f"node{index}.shared")
        if shared is not None:
            os.symlink(shared, self.link)
            self.args += ["--shared-store", self.link, "--shared-store-scan", str(scan_ms)]
        self.proc = None

    def store_visible(self, visible):
        """Let this node see the shared store, or not (its view of it vanishes,
        as when a mount goes away)."""
        tmp = self.link + ".new"
        os.symlink(self.shared if visible else os.path.join(self.root, "gone"), tmp)
        os.replace(tmp, self.link)

    def start(self, timeout=60, ready=True):
        """Start it; wait until it listens and (ready) answers ready."""
        logf = open(self.log, "ab")
        self.proc = subprocess.Popen(
            [os.environ["GF_GPUFAAS"], "serve", "--listen", self.addr, "--state-dir", self.state,
             "--worker", os.environ["GF_WORKER"], *self.args],
            stdout=subprocess.PIPE, stderr=logf, stdin=subprocess.DEVNULL)
        logf.close()
        deadline = time.monotonic() + timeout
        line = self.proc.stdout.readline().decode().strip()
        if not line.startswith("gpufaas: serving on"):
            self.kill()
            raise RuntimeError(f"gateway {self.addr} did not start: {line!r}\n{self.tail()}")
        if not ready:
            return
        c = Client(self.host, self.port, timeout=5)
        while time.monotonic() < deadline:
            st, _, _ = c.request("GET", "/v2/health/ready")
            if st == 200:
                c.close()
                return
            time.sleep(0.05)
        raise RuntimeError(f"gateway {self.addr} never became ready\n{self.tail()}")

    def client(self, timeout=60):
        return Client(self.host, self.port, timeout=timeout)

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def kill(self, sig=signal.SIGKILL):
        if self.running():
            self.proc.send_signal(sig)
        if self.proc is not None:
            code = self.proc.wait(timeout=60)
            self.proc.stdout.close()
            self.proc = None
            return code
        return None

    def tail(self, n=3000):
        try:
            with open(self.log, "rb") as f:
                return f.read()[-n:].decode(errors="replace")
        except OSError:
            return ""


class Nginx:
    """A real nginx with the shipped routing files and an upstream listing the
    gateways: `hash $gpufaas_function consistent` (or round robin)."""

    def __init__(self, root, gateways, balance="hash", fail_timeout=1):
        self.exe = find_nginx()
        self.prefix = os.path.join(root, "nginx")
        self.gateways = gateways
        self.balance = balance
        self.fail_timeout = fail_timeout
        self.port = None
        self.proc = None

    def conf(self):
        user = "user root;\n" if os.geteuid() == 0 else ""  # workers otherwise drop to nobody
        lb = "hash $gpufaas_function consistent;" if self.balance == "hash" else "# round robin"
        servers = "".join(f"        server {g.addr} max_fails=1 fail_timeout={self.fail_timeout}s;\n"
                          for g in self.gateways)
        return f"""{user}worker_processes 1;
pid {self.prefix}/nginx.pid;
error_log {self.prefix}/error.log warn;
events {{ worker_connections 1024; }}
http {{
    access_log {self.prefix}/access.log;
    client_body_temp_path {self.prefix}/client_body;
    proxy_temp_path {self.prefix}/proxy;
    fastcgi_temp_path {self.prefix}/fastcgi;
    uwsgi_temp_path {self.prefix}/uwsgi;
    scgi_temp_path {self.prefix}/scgi;
    include {NGINX_DIR}/gpufaas.conf;
    upstream gpufaas {{
        {lb}
{servers}        keepalive 16;
    }}
    server {{
        listen 127.0.0.1:{self.port};
        include {NGINX_DIR}/gpufaas-locations.inc;
    }}
}}
"""

    def start(self):
        os.makedirs(self.prefix, exist_ok=True)
        for _ in range(5):
            self.port = free_port(["127.0.0.1"])
            path = os.path.join(self.prefix, "nginx.conf")
            with open(path, "w") as f:
                f.write(self.conf())
            self.proc = subprocess.Popen([self.exe, "-p", self.prefix, "-c", path,
                                          "-g", "daemon off;"],
                                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                         stdin=subprocess.DEVNULL)
            c = Client("127.0.0.1", self.port, timeout=2)
            for _ in range(100):
                if self.proc.poll() is not None:
                    break
                try:
                    socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                    return
                except OSError:
                    time.sleep(0.05)
            c.close()
            err = self.proc.stderr.read().decode(errors="replace") if self.proc.poll() is not None \
                else ""
            self.stop()
            if "Address already in use" not in err:
                raise RuntimeError(f"nginx did not start: {err}")
        raise RuntimeError("nginx: no port")

    def client(self, timeout=60):
        return Client("127.0.0.1", self.port, timeout=timeout)

    def stop(self):
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGQUIT)  # graceful
                try:
                    self.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
            self.proc.stderr.close()
            self.proc = None


class Cluster:
    """n gateways behind one nginx. Use as a context manager."""

    def __init__(self, root, n=3, gateway_args=(), balance="hash", fail_timeout=1,
                 shared=False):
        self.root = root
        addrs = [f"127.0.0.{2 + i}" for i in range(n)]
        port = free_port(addrs)
        self.shared = os.path.join(root, "shared") if shared else None
        if self.shared:
            os.makedirs(self.shared)
        self.gateways = [Gateway(root, i, port, gateway_args, self.shared) for i in range(n)]
        self.nginx = Nginx(root, self.gateways, balance, fail_timeout)

    def __enter__(self):
        try:
            for g in self.gateways:
                g.start()
            self.nginx.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc):
        if exc[0] is not None:
            self.dump()
        self.close()

    def by_addr(self, addr):
        for g in self.gateways:
            if g.addr == addr:
                return g
        return None

    def dump(self):
        for g in self.gateways:
            sys.stderr.write(f"---- {g.addr} ({g.log}) ----\n{g.tail()}\n")
        try:
            with open(os.path.join(self.nginx.prefix, "error.log")) as f:
                sys.stderr.write(f"---- nginx error.log ----\n{f.read()[-3000:]}\n")
        except OSError:
            pass

    def close(self):
        self.nginx.stop()
        for g in self.gateways:
            g.kill(signal.SIGTERM)
