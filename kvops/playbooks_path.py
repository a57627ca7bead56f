"""Where the playbooks are: the package's copy when installed, the repo's folder when editable."""

from pathlib import Path


def playbooks_dir() -> Path:
    packaged = Path(__file__).parent / "_playbooks"
    if packaged.is_dir() and any(packaged.glob("*.md")):
        return packaged
    return Path(__file__).resolve().parent.parent / "playbooks"
