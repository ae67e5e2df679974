"""AcmeSandboxBackend: a SandboxBackendProtocol class that runs commands in a directory.

It is written the way the seeds' users write backends: `id`, `execute`, `upload_files`,
`download_files`, and a `close` that deletes the sandbox. The response types mirror
deepagents.backends.protocol (not installed here), field for field.
"""

import os
import shutil
import signal
import subprocess
import uuid
from dataclasses import dataclass
from typing import List, Optional, Tuple


@dataclass
class ExecuteResponse:
    output: str
    exit_code: Optional[int] = None
    truncated: bool = False


@dataclass
class FileUploadResponse:
    path: str
    error: Optional[str] = None


@dataclass
class FileDownloadResponse:
    path: str
    content: Optional[bytes] = None
    error: Optional[str] = None


class AcmeSandboxBackend:
    """One sandbox: a directory under root; commands run in its workspace."""

    def __init__(self, root: str, region: str = "us-east-1", timeout: int = 600):
        self._id = "acme-" + uuid.uuid4().hex[:12]
        self._dir = os.path.join(root, "sandboxes", self._id)
        self.working_dir = os.path.join(self._dir, "workspace")
        os.makedirs(self.working_dir)
        self.region, self.default_timeout = region, timeout
        self._running = set()
        pids = os.path.join(root, "pids")
        os.makedirs(pids, exist_ok=True)
        open(os.path.join(pids, str(os.getpid())), "w").close()

    @classmethod
    def reconnect(cls, root: str, sandbox_id: str) -> "Optional[AcmeSandboxBackend]":
        """The sandbox sandbox_id under root, or None if there is none."""
        d = os.path.join(root, "sandboxes", sandbox_id)
        if "/" in sandbox_id or not os.path.isdir(d):
            return None
        self = cls.__new__(cls)
        self._id, self._dir = sandbox_id, d
        self.working_dir = os.path.join(d, "workspace")
        self.region, self.default_timeout, self._running = "", 600, set()
        return self

    @property
    def id(self) -> str:
        return self._id

    def execute(self, command: str, *, timeout: Optional[int] = None) -> ExecuteResponse:
        proc = subprocess.Popen(
            command, shell=True, cwd=self.working_dir, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
        )
        self._running.add(proc.pid)
        try:
            out, _ = proc.communicate(timeout=timeout or self.default_timeout)
        except subprocess.TimeoutExpired:
            _kill_session(proc.pid)
            out, _ = proc.communicate()
            return ExecuteResponse(output=out.decode(errors="replace"), exit_code=124)
        finally:
            self._running.discard(proc.pid)
        return ExecuteResponse(output=out.decode(errors="replace"), exit_code=proc.returncode)

    def upload_files(self, files: List[Tuple[str, bytes]]) -> List[FileUploadResponse]:
        responses = []
        for path, content in files:
            try:
                with open(path, "wb") as f:
                    f.write(content)
                responses.append(FileUploadResponse(path=path))
            except OSError as exc:
                responses.append(FileUploadResponse(path=path, error=str(exc)))
        return responses

    def download_files(self, paths: List[str]) -> List[FileDownloadResponse]:
        responses = []
        for path in paths:
            try:
                with open(path, "rb") as f:
                    responses.append(FileDownloadResponse(path=path, content=f.read()))
            except FileNotFoundError:
                responses.append(FileDownloadResponse(path=path, error="file_not_found"))
            except IsADirectoryError:
                responses.append(FileDownloadResponse(path=path, error="is_directory"))
        return responses

    def close(self) -> None:
        """Deletes the sandbox: everything still running in it, then its files."""
        for sid in list(self._running):
            _kill_session(sid)
        shutil.rmtree(self._dir, ignore_errors=True)


def _kill_session(sid: int) -> None:
    """Kills every process of a session (a command's whole tree, whatever groups it made)."""
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.getsid(int(entry)) == sid:
                    os.kill(int(entry), signal.SIGKILL)
            except OSError:
                pass
