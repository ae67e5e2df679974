"""AcmeProvider: a SandboxProvider, the kind third-party packages register by entry point.

It hands out AcmeSandboxBackend sandboxes; `get_or_create(sandbox_id=...)` reconnects to
one by id, `delete(sandbox_id=...)` removes it, as the seeds' provider interface says.
"""

import os
from dataclasses import dataclass

from .backend import AcmeSandboxBackend


class SandboxNotFoundError(Exception):
    pass


@dataclass
class SandboxProviderMetadata:
    name: str = "acmeep"
    working_dir: str = "/workspace"
    supports_sandbox_id: bool = True
    supports_snapshot_name: bool = False


class AcmeProvider:
    metadata = SandboxProviderMetadata()

    def get_or_create(self, *, sandbox_id=None, root=None, **kwargs):
        root = root or _default_root()
        if sandbox_id is None:
            backend = AcmeSandboxBackend(root, **kwargs)
        else:
            backend = AcmeSandboxBackend.reconnect(root, sandbox_id)
            if backend is None:
                raise SandboxNotFoundError(sandbox_id)
        return backend

    def delete(self, *, sandbox_id, root=None, **kwargs):
        root = root or _default_root()
        backend = AcmeSandboxBackend.reconnect(root, sandbox_id)
        if backend is not None:
            backend.close()


def _default_root():
    """Where sandboxes go when talkops passes no options: under the user's home."""
    return os.path.join(os.environ["HOME"], "acme-root")
