#!/usr/bin/env python3
"""talkops plugin bridge: serves a Python sandbox backend over the talkops plugin protocol.

talkops writes this file to a temporary directory and runs it with python3; it needs only
the standard library. It speaks protocol version 1 (docs/plugin-protocol.md) on stdin and
stdout, one JSON object per line, and logs to stderr.

  bridge.py --backend module:Class    a SandboxBackendProtocol class; each sandbox is
                                      Class(**options)
  bridge.py --entry-point NAME        a SandboxProvider registered under the entry-point
                                      group talkops.sandbox_providers or
                                      deepagents_code.sandbox_providers
  bridge.py --list-entry-points       print the names registered there as a JSON list

A backend needs `id`, `execute(command, *, timeout=None)` returning output, exit_code and
truncated, `upload_files([(path, bytes)])` and `download_files([path])`, as the seeds'
SandboxBackendProtocol defines them. The sandbox is deleted with the first of `delete`,
`close`, `stop`, `terminate` or `cleanup` the backend has; a provider's own
`delete(sandbox_id=...)` is used for entry points.
"""

import argparse
import base64
import importlib
import json
import os
import posixpath
import shlex
import sys
import tarfile
import tempfile
import threading
import traceback
import uuid

PROTOCOL = 1
GROUPS = ("talkops.sandbox_providers", "deepagents_code.sandbox_providers")
UPLOAD_BATCH = 8 << 20  # bytes handed to one upload_files call
TEARDOWN_METHODS = ("delete", "close", "stop", "terminate", "cleanup")


class ProtocolError(Exception):
    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


def log(*args):
    print("bridge:", *args, file=sys.stderr, flush=True)


def field(obj, name, default=None):
    """Reads name from a dataclass-like object or a dict (backends return either)."""
    if isinstance(obj, dict):
        return obj.get(name, default)
    return getattr(obj, name, default)


def load_object(spec):
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ProtocolError("invalid", "backend %r: want module:Class" % spec)
    try:
        obj = importlib.import_module(module_name)
    except Exception as exc:  # the message says which module and why
        raise ProtocolError("invalid", "backend %r: import %s: %s: %s" % (spec, module_name, type(exc).__name__, exc))
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ProtocolError("invalid", "backend %r: module %s has no %s" % (spec, module_name, attr))
    return obj


def entry_points():
    """Returns {name: EntryPoint} for both groups, talkops' group winning a clash."""
    from importlib import metadata

    found = {}
    for group in reversed(GROUPS):
        try:
            eps = metadata.entry_points(group=group)
        except TypeError:  # Python < 3.10
            eps = metadata.entry_points().get(group, [])
        for ep in eps:
            found[ep.name] = ep
    return found


class BackendSource:
    """Sandboxes made by constructing a SandboxBackendProtocol class."""

    def __init__(self, spec, options):
        self.cls = load_object(spec)
        self.options = options
        self.capabilities = {"attach": False, "list": False, "snapshots": False, "ttl": False}

    def create(self, params):
        backend = self.cls(**self.options)
        return backend, getattr(backend, "working_dir", None)

    def attach(self, sandbox_id):
        raise ProtocolError("not_supported", "a backend class cannot attach to a sandbox by id")

    def delete(self, sandbox_id, backend):
        if backend is None:
            # Not "not_found": the sandbox may well exist, talkops must not forget it.
            raise ProtocolError("not_supported", "sandbox %r was created by an earlier bridge process; a backend "
                                "class can only delete its own sandboxes (register a SandboxProvider with delete() "
                                "to let talkops reap by id)" % sandbox_id)
        for name in TEARDOWN_METHODS:
            method = getattr(backend, name, None)
            if callable(method):
                method()
                return
        log("backend %s has none of %s; nothing to delete" % (type(backend).__name__, ", ".join(TEARDOWN_METHODS)))


class ProviderSource:
    """Sandboxes made by a SandboxProvider found by entry point."""

    def __init__(self, name, options):
        eps = entry_points()
        if name not in eps:
            raise ProtocolError("invalid", "no entry point %r in %s" % (name, " or ".join(GROUPS)))
        self.provider = eps[name].load()()
        self.options = options
        meta = getattr(self.provider, "metadata", None)
        self.working_dir = field(meta, "working_dir", None) if meta is not None else None
        attach = field(meta, "supports_sandbox_id", True) if meta is not None else True
        snapshots = field(meta, "supports_snapshot_name", False) if meta is not None else False
        self.capabilities = {"attach": bool(attach), "list": False, "snapshots": bool(snapshots), "ttl": False}

    def create(self, params):
        kwargs = dict(self.options)
        if params.get("snapshot"):
            kwargs["snapshot_name"] = params["snapshot"]
        return self.located(self.provider.get_or_create(sandbox_id=None, **kwargs))

    def located(self, backend):
        """The backend and its working directory: its own, else the provider's metadata."""
        return backend, getattr(backend, "working_dir", None) or self.working_dir

    def attach(self, sandbox_id):
        try:
            return self.located(self.provider.get_or_create(sandbox_id=sandbox_id, **self.options))
        except Exception as exc:
            if "NotFound" in type(exc).__name__:
                raise ProtocolError("not_found", str(exc))
            raise

    def delete(self, sandbox_id, backend):
        self.provider.delete(sandbox_id=sandbox_id, **self.options)


class Bridge:
    def __init__(self, out, mode, target):
        self.out = out
        self.out_lock = threading.Lock()
        self.mode, self.target = mode, target
        self.source = None
        self.lock = threading.Lock()
        self.sandboxes = {}  # id -> backend
        self.uploads = {}  # upload id -> (file, sandbox id, path, extract)
        self.reads = {}  # (sandbox id, path) -> bytes being read in pieces

    # transport

    def send(self, msg):
        line = json.dumps(msg, separators=(",", ":")).encode() + b"\n"
        with self.out_lock:
            self.out.write(line)
            self.out.flush()

    def serve(self, stdin):
        threads = []
        for raw in stdin:
            if not raw.strip():
                continue
            try:
                req = json.loads(raw)
            except ValueError as exc:
                log("bad request line:", exc)
                return 2
            if req.get("op") in ("hello", "shutdown"):
                self.handle(req)
                if req["op"] == "shutdown":
                    for t in threads:
                        t.join()
                    return 0
                continue
            t = threading.Thread(target=self.handle, args=(req,), daemon=True)
            t.start()
            threads.append(t)
            threads = [t for t in threads if t.is_alive()]
        # stdin closed without a shutdown: talkops is gone. Exit now (the request threads
        # are daemons); the sandboxes stay for `talkops sandbox gc`.
        log("stdin closed, exiting")
        return 0

    def handle(self, req):
        rid, op, params = req.get("id"), req.get("op"), req.get("params") or {}
        try:
            method = getattr(self, "op_" + str(op), None)
            if method is None:
                raise ProtocolError("not_supported", "unknown operation %r" % op)
            result = method(params)
            self.send({"id": rid, "result": result if result is not None else {}})
        except ProtocolError as exc:
            self.send({"id": rid, "error": {"code": exc.code, "message": str(exc)}})
        except Exception as exc:
            traceback.print_exc(file=sys.stderr)
            code = "not_found" if "NotFound" in type(exc).__name__ else "failed"
            self.send({"id": rid, "error": {"code": code, "message": "%s: %s" % (type(exc).__name__, exc)}})

    # operations

    def op_hello(self, params):
        options = params.get("options") or {}
        if self.mode == "backend":
            self.source = BackendSource(self.target, options)
        else:
            self.source = ProviderSource(self.target, options)
        caps = dict(self.source.capabilities)
        caps["combined_output"] = True  # execute returns stdout and stderr as one output
        return {"protocol": PROTOCOL, "name": self.target, "capabilities": caps}

    def op_shutdown(self, params):
        return {}

    def backend(self, sandbox_id):
        with self.lock:
            backend = self.sandboxes.get(sandbox_id)
        if backend is None:
            raise ProtocolError("not_found", "no sandbox %r" % sandbox_id)
        return backend

    def register(self, backend, working_dir, wanted):
        sandbox_id = backend.id
        if callable(sandbox_id):
            sandbox_id = sandbox_id()
        sandbox_id = str(sandbox_id)
        with self.lock:
            self.sandboxes[sandbox_id] = backend
        return {"sandbox_id": sandbox_id, "working_dir": wanted or working_dir or "/workspace"}

    def op_create(self, params):
        backend, working_dir = self.source.create(params)
        return self.register(backend, working_dir, params.get("working_dir"))

    def op_attach(self, params):
        backend, working_dir = self.source.attach(params["sandbox_id"])
        return self.register(backend, working_dir, None)

    def op_delete(self, params):
        sandbox_id = params["sandbox_id"]
        with self.lock:
            backend = self.sandboxes.pop(sandbox_id, None)
        self.source.delete(sandbox_id, backend)
        return {}

    def run(self, backend, command, timeout=None):
        if timeout:
            try:
                return backend.execute(command, timeout=timeout)
            except TypeError as exc:
                if "timeout" not in str(exc):
                    raise
                log("execute() takes no timeout; talkops bounds the command itself")
        return backend.execute(command)

    def op_exec(self, params):
        backend = self.backend(params["sandbox_id"])
        script = ""
        for key, value in sorted((params.get("env") or {}).items()):
            script += "export %s=%s\n" % (key, shlex.quote(value))
        if params.get("workdir"):
            script += "cd -- %s || exit 1\n" % shlex.quote(params["workdir"])
        script += params["command"]
        resp = self.run(backend, script, params.get("timeout_seconds") or None)
        output = field(resp, "output", "") or ""
        data = output.encode("utf-8", "replace") if isinstance(output, str) else bytes(output)
        truncated = bool(field(resp, "truncated", False))
        limit = int(params.get("output_limit") or 0)
        if limit and len(data) > limit:
            half = limit // 2
            data = data[:half] + data[len(data) - (limit - half):]
            truncated = True
        exit_code = field(resp, "exit_code", None)
        return {
            "exit_code": 125 if exit_code is None else int(exit_code),
            "stdout": base64.b64encode(data).decode(),
            "stderr": "",
            "truncated": truncated,
        }

    def op_upload_begin(self, params):
        self.backend(params["sandbox_id"])
        f = tempfile.TemporaryFile()
        upload_id = uuid.uuid4().hex
        with self.lock:
            self.uploads[upload_id] = (f, params["sandbox_id"], params["path"], bool(params.get("extract")))
        return {"upload_id": upload_id}

    def take_upload(self, upload_id, remove):
        with self.lock:
            up = self.uploads.pop(upload_id, None) if remove else self.uploads.get(upload_id)
        if up is None:
            raise ProtocolError("invalid", "no upload %r" % upload_id)
        return up

    def op_upload_chunk(self, params):
        f = self.take_upload(params["upload_id"], False)[0]
        f.write(base64.b64decode(params.get("data") or ""))
        return {}

    def op_upload_abort(self, params):
        self.take_upload(params["upload_id"], True)[0].close()
        return {}

    def op_upload_end(self, params):
        f, sandbox_id, path, extract = self.take_upload(params["upload_id"], True)
        with f:
            backend = self.backend(sandbox_id)
            f.seek(0)
            if not extract:
                self.upload(backend, [(path, f.read())])
                return {}
            self.extract(backend, f, path)
        return {}

    def upload(self, backend, files):
        for resp in backend.upload_files(files) or []:
            err = field(resp, "error", None)
            if err:
                raise ProtocolError("failed", "upload %s: %s" % (field(resp, "path", "?"), err))

    def extract(self, backend, f, target):
        """Unpacks a gzip tar through upload_files; directories, modes and symlinks, which
        upload_files cannot express, are made with one shell command."""
        dirs, links, executables, batch, size = {target}, [], [], [], 0
        with tarfile.open(fileobj=f, mode="r:gz") as tar:
            for m in tar:
                name = posixpath.normpath(m.name)
                if name.startswith("/") or name == ".." or name.startswith("../"):
                    raise ProtocolError("invalid", "archive entry %r leaves the target directory" % m.name)
                dest = posixpath.join(target, name)
                if m.isdir():
                    dirs.add(dest)
                elif m.issym():
                    links.append((m.linkname, dest))
                    dirs.add(posixpath.dirname(dest))
                elif m.isfile():
                    dirs.add(posixpath.dirname(dest))
                    if m.mode & 0o111:
                        executables.append(dest)
                    data = tar.extractfile(m).read()
                    batch.append((dest, data))
                    size += len(data)
                    if size >= UPLOAD_BATCH:
                        self.prepare(backend, dirs)
                        self.upload(backend, batch)
                        batch, size = [], 0
        self.prepare(backend, dirs)
        if batch:
            self.upload(backend, batch)
        script = ""
        if executables:
            script += "chmod +x -- %s\n" % " ".join(shlex.quote(p) for p in executables)
        for src, dest in links:
            script += "ln -sfn -- %s %s\n" % (shlex.quote(src), shlex.quote(dest))
        if script:
            self.check(backend, script, "set modes and links")

    def prepare(self, backend, dirs):
        if dirs:
            self.check(backend, "mkdir -p -- %s" % " ".join(shlex.quote(d) for d in sorted(dirs)), "make directories")
            dirs.clear()

    def check(self, backend, script, what):
        resp = self.run(backend, script)
        if field(resp, "exit_code", 0) not in (0, None):
            raise ProtocolError("failed", "%s: %s" % (what, field(resp, "output", "")))

    def op_read(self, params):
        sandbox_id, path = params["sandbox_id"], params["path"]
        offset, length = int(params.get("offset") or 0), int(params.get("length") or 1 << 20)
        key = (sandbox_id, path)
        with self.lock:
            content = self.reads.get(key) if offset else None
        if content is None:
            backend = self.backend(sandbox_id)
            resp = (backend.download_files([path]) or [None])[0]
            err = field(resp, "error", None) if resp is not None else "no response"
            if err:
                code = "not_found" if "not_found" in str(err) or "is_directory" in str(err) else "failed"
                raise ProtocolError(code, "download %s: %s" % (path, err))
            content = field(resp, "content", b"") or b""
            if isinstance(content, str):
                content = content.encode()
        piece = content[offset : offset + length]
        eof = offset + len(piece) >= len(content)
        with self.lock:
            if eof:
                self.reads.pop(key, None)
            else:
                self.reads[key] = content
        return {"data": base64.b64encode(piece).decode(), "eof": eof}


def main(argv):
    # talkops removes this script's directory once we answered hello; a directory of that
    # name made later by someone else must never be searched for modules.
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    ap = argparse.ArgumentParser(description="talkops plugin bridge for Python sandbox backends")
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--backend", metavar="MODULE:CLASS")
    g.add_argument("--entry-point", metavar="NAME")
    g.add_argument("--list-entry-points", action="store_true")
    args = ap.parse_args(argv)
    if args.list_entry_points:
        print(json.dumps(sorted(entry_points())))
        return 0
    # The protocol owns the real stdout; a backend that prints writes to stderr instead.
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    mode, target = ("backend", args.backend) if args.backend else ("entry-point", args.entry_point)
    return Bridge(out, mode, target).serve(sys.stdin.buffer)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
