"""The node credential: written by ``enroll``, readable by the agent's user alone (mode 0600)."""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

CREDENTIAL_FILE = "credential.json"


@dataclass(frozen=True)
class Enrollment:
    server: str
    node_id: int | None
    credential: str
    reports_url: str
    interval_s: float | None = None
    enrolled_at: str | None = None


def credential_path(state_dir: str | Path) -> Path:
    return Path(state_dir) / CREDENTIAL_FILE


def save_enrollment(path: str | Path, enrollment: Enrollment) -> None:
    """Atomic write: the file is created 0600 before the secret goes in, then renamed into place."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".credential-", dir=path.parent)  # mkstemp creates it 0600
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(asdict(enrollment), handle, indent=2)
            handle.write("\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def load_enrollment(path: str | Path) -> Enrollment | None:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as err:
        raise ValueError(f"credential file {path} is unreadable: {err}") from err
    try:
        return Enrollment(**{key: data.get(key) for key in Enrollment.__dataclass_fields__})
    except TypeError as err:
        raise ValueError(f"credential file {path} is malformed: {err}") from err
