"""Storage every node reaches: checkpoints and the workers' resume state under GROUPSCALE_STORAGE_URI.

A location is a string: a local folder (the default, the data dir: one machine, or a POSIX path shared by every
node) or a URI of any file system pyarrow knows (``s3://bucket/prefix``, ``gs://bucket/prefix``, ``hdfs://...``),
as Ray Train's ``storage_path``. Credentials and endpoints come from the environment each file system reads (for
S3: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_ENDPOINT_URL for an S3 API server such as MinIO) or from the
URI's query (``s3://bucket/prefix?endpoint_override=host:9000&scheme=http``). Writes of one object are atomic on
object stores (a PUT) and made so on a local disk (a temporary file, then a rename).
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyarrow import fs as pafs

_URI = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*://")


def is_remote(location: str | Path) -> bool:
    """Whether ``location`` is a URI of a file system other than this machine's disk (``file://`` is local)."""
    text = str(location)
    return bool(_URI.match(text)) and not text.startswith("file://")


def join(location: str | Path, *parts: str) -> str:
    """``location``/``parts``, keeping a URI's query (``s3://b/p?endpoint_override=..`` -> ``s3://b/p/x?endpoint..``)."""
    base, sep, query = str(location).partition("?")
    return "/".join([base.rstrip("/"), *parts]) + sep + query


def _pafs() -> Any:
    """pyarrow.fs, imported at first use: the settings (and so the client's CLI) use join and is_remote only."""
    from pyarrow import fs

    return fs


def filesystem(location: str | Path) -> tuple[pafs.FileSystem, str]:
    """(pyarrow file system, path inside it) of a location. Raises: pyarrow.ArrowInvalid for a URI no file system
    of this pyarrow takes, naming its scheme."""
    if not is_remote(location):
        return _pafs().LocalFileSystem(), str(Path(str(location).removeprefix("file://")).resolve())
    return _pafs().FileSystem.from_uri(str(location))


def exists(location: str | Path) -> bool:
    fs, path = filesystem(location)
    return fs.get_file_info(path).type != _pafs().FileType.NotFound


def read_bytes(location: str | Path) -> bytes | None:
    """The object's content, None when there is none."""
    fs, path = filesystem(location)
    try:
        with fs.open_input_stream(path) as f:
            return f.read()
    except FileNotFoundError:
        return None


def write_bytes(location: str | Path, data: bytes) -> None:
    """Write the object whole: a reader sees the old content or the new, never a part (local: temporary file and
    rename; an object store's PUT is atomic)."""
    if not is_remote(location):
        path = Path(str(location).removeprefix("file://"))
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_bytes(data)
        os.replace(tmp, path)
        return
    fs, path_in = filesystem(location)
    with fs.open_output_stream(path_in) as f:
        f.write(data)


def read_text(location: str | Path) -> str | None:
    data = read_bytes(location)
    return None if data is None else data.decode()


def write_text(location: str | Path, text: str) -> None:
    write_bytes(location, text.encode())


def delete(location: str | Path) -> None:
    """Remove the object or the folder with everything under it; nothing when there is none."""
    fs, path = filesystem(location)
    kind = fs.get_file_info(path).type
    if kind == _pafs().FileType.Directory:
        fs.delete_dir(path)
    elif kind == _pafs().FileType.File:
        fs.delete_file(path)


def listing(location: str | Path) -> dict[str, int]:
    """Every file under the folder: relative path -> size in bytes ({} when there is no folder)."""
    fs, path = filesystem(location)
    if fs.get_file_info(path).type != _pafs().FileType.Directory:
        return {}
    infos = fs.get_file_info(_pafs().FileSelector(path, recursive=True))
    return {i.path[len(path) :].lstrip("/"): i.size for i in infos if i.type == _pafs().FileType.File}


def upload_file(local: str | Path, location: str | Path) -> None:
    """Copy one local file to ``location`` (streamed: a checkpoint need not fit in memory)."""
    fs, path = filesystem(location)
    if not is_remote(location):  # an object store has no folders to make
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    _pafs().copy_files(str(Path(local).resolve()), path, _pafs().LocalFileSystem(), fs)


def download_file(location: str | Path, local: str | Path) -> None:
    """Copy the object at ``location`` to the local file ``local``."""
    fs, path = filesystem(location)
    _pafs().copy_files(path, str(Path(local).resolve()), fs, _pafs().LocalFileSystem())


def scratch(location: str | Path, under: str | Path | None = None) -> Path:
    """A local folder for the files of a remote location (the same one for the same location on this machine):
    under ``under`` when given, else the system's temporary folder."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", str(location).partition("?")[0])[-120:]
    return Path(under or tempfile.gettempdir(), "groupscale-storage", name)
