"""Locations as URLs: a plain path, file://, or a remote store (s3a://, s3://, abfss://, gs://,
hdfs://, ...), for anything that may be remote (spark.checkpoint, delta.path).

pathlib is for local paths only: `Path("s3a://bucket/x")` is `s3a:/bucket/x`, a path of a
folder named "s3a:". Here a location stays a string; `join` adds path segments after the
scheme and authority, and small files beside a remote checkpoint (the app id, the
pending-signals marker) are read and written through pyarrow's file systems.

Storage options use delta-rs' names (the keys of `delta.storage_options`, e.g.
AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION, AWS_ALLOW_HTTP), so
one mapping reaches an S3 store both through delta-rs and through these helpers; without
them pyarrow takes the AWS SDK's defaults (environment, profile, instance role).
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Mapping
from urllib.parse import unquote

import pyarrow.fs as pafs

# scheme ':' — at least two characters, so a Windows drive (C:\x) stays a path
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]+):")
# scheme '://' authority: what `join` never touches
_AUTHORITY = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]+://[^/?#]*)(.*)$", re.S)
S3_SCHEMES = ("s3", "s3a", "s3n")


def scheme(location: str) -> str:
    """The URL scheme, lower-case ('s3a', 'file'); '' for a plain path."""
    match = _SCHEME.match(location)
    return match.group(1).lower() if match else ""


def is_local(location: str) -> bool:
    """Whether the location is on this machine's file system: a plain path or file:."""
    return scheme(location) in ("", "file")


def join(base: str, *parts: str) -> str:
    """`base` with `parts` appended as path segments, one '/' between each; the scheme and
    authority (s3a://bucket, file://, abfss://c@a.dfs.core.windows.net) are kept as given
    and a query string stays at the end. Leading and trailing slashes of `parts` are
    dropped and empty parts skipped, so join('s3a://b/', '/x/', 'y') is 's3a://b/x/y'."""
    query = ""
    if not is_local(base) and "?" in base:
        base, query = base.split("?", 1)
        query = "?" + query
    match = _AUTHORITY.match(base)
    prefix, path = (match.group(1), match.group(2)) if match else ("", base)
    segments = [s for s in (p.strip("/") for p in parts) if s]
    if not segments:
        return prefix + path + query
    head = path.rstrip("/")
    if not head and not path and not prefix:  # join("", "x") == "x", as os.path.join
        return "/".join(segments) + query
    return f"{prefix}{head}/{'/'.join(segments)}{query}"


def parent(location: str) -> str:
    """The folder holding `location` (its last path segment removed)."""
    query = ""
    if not is_local(location) and "?" in location:
        location, query = location.split("?", 1)
        query = "?" + query
    match = _AUTHORITY.match(location)
    prefix, path = (match.group(1), match.group(2)) if match else ("", location)
    head = path.rstrip("/")
    if "/" not in head:
        return (prefix or ".") + query
    return prefix + (head.rsplit("/", 1)[0] or "/") + query


def local_path(location: str) -> str:
    """The file-system path of a local location (file:///x, file:/x -> /x); raises
    ValueError for a remote one."""
    kind = scheme(location)
    if kind == "":
        return location
    if kind != "file":
        raise ValueError(f"{location!r} is not a local path")
    rest = location[len("file:"):]
    if rest.startswith("//"):
        authority, _, path = rest[2:].partition("/")
        if authority not in ("", "localhost"):
            raise ValueError(f"{location!r} names another host")
        rest = "/" + path
    return unquote(rest)


def _option(options: Mapping[str, str], *names: str) -> str | None:
    """The first of `names` set in `options`, case-insensitively, with or without `aws_`."""
    lowered = {k.lower(): v for k, v in options.items()}
    for name in names:
        for key in (name, f"aws_{name}"):
            if lowered.get(key) not in (None, ""):
                return str(lowered[key])
    return None


def _truthy(value: str | None) -> bool:
    return value is not None and value.strip().lower() in ("1", "true", "yes", "on")


def _s3_credentials(options: Mapping[str, str]) -> dict[str, str]:
    """The keys, session token and region set in delta-rs-style storage options, by
    pyarrow's S3FileSystem argument names (s3a_hadoop_conf renames them for S3A)."""
    found = {key: _option(options, *names)
             for key, names in (("access_key", ("access_key_id",)),
                                ("secret_key", ("secret_access_key",)),
                                ("session_token", ("session_token", "token")),
                                ("region", ("region", "default_region")))}
    return {key: value for key, value in found.items() if value}


S3A_CREDENTIALS = {"access_key": "fs.s3a.access.key", "secret_key": "fs.s3a.secret.key",
                   "session_token": "fs.s3a.session.token", "region": "fs.s3a.endpoint.region"}


def s3_filesystem(options: Mapping[str, str]) -> pafs.S3FileSystem:
    """A pyarrow S3 file system from delta-rs-style storage options (endpoint, keys,
    session token, region, allow_http, virtual_hosted_style_request); keys not named here
    (locking, conditional put) only concern delta-rs."""
    kwargs: dict[str, object] = {}
    endpoint = _option(options, "endpoint_url", "endpoint")
    if endpoint:
        kind, _, rest = endpoint.partition("://")
        if rest:
            kwargs["scheme"] = kind.lower()
            endpoint = rest
        kwargs["endpoint_override"] = endpoint.rstrip("/")
    if _truthy(_option(options, "allow_http")) and "scheme" not in kwargs:
        kwargs["scheme"] = "http"
    kwargs.update(_s3_credentials(options))
    if _truthy(_option(options, "virtual_hosted_style_request")):
        kwargs["force_virtual_addressing"] = True
    return pafs.S3FileSystem(**kwargs)


def s3a_hadoop_conf(options: Mapping[str, str]) -> dict[str, str]:
    """Spark's S3A settings (`spark.hadoop.fs.s3a.*`) for the same store as delta-rs-style
    storage options, so one set of options serves delta-rs, pyarrow and Spark's own
    checkpoint and delta-spark I/O. An endpoint of its own implies path-style access (the
    way S3-compatible servers answer); secrets stay in the returned mapping only (Spark
    redacts keys matching secret/access.key in its UI and logs)."""
    conf: dict[str, str] = {}
    endpoint = _option(options, "endpoint_url", "endpoint")
    if endpoint:
        conf["fs.s3a.endpoint"] = endpoint.rstrip("/")
        conf["fs.s3a.path.style.access"] = str(
            not _truthy(_option(options, "virtual_hosted_style_request"))).lower()
        if endpoint.lower().startswith("http://") or _truthy(_option(options, "allow_http")):
            conf["fs.s3a.connection.ssl.enabled"] = "false"
    conf.update({S3A_CREDENTIALS[key]: value
                 for key, value in _s3_credentials(options).items()})
    if "fs.s3a.session.token" in conf:
        conf["fs.s3a.aws.credentials.provider"] = (
            "org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider")
    return {f"spark.hadoop.{key}": value for key, value in conf.items()}


def filesystem(location: str, storage_options: Mapping[str, str] | None = None
               ) -> tuple[pafs.FileSystem, str]:
    """A pyarrow file system and the path inside it for `location`. s3a:// and s3n:// are
    read as s3://; with `storage_options` an S3 location uses them (see s3_filesystem),
    other stores take what their URL and environment say."""
    if is_local(location):
        return pafs.LocalFileSystem(), os.path.abspath(local_path(location))
    kind = scheme(location)
    if kind in S3_SCHEMES:
        rest = location.split("://", 1)[1] if "://" in location else location.split(":", 1)[1]
        if storage_options:
            return s3_filesystem(storage_options), rest.split("?", 1)[0].rstrip("/")
        return pafs.FileSystem.from_uri("s3://" + rest)
    return pafs.FileSystem.from_uri(location)


def exists(location: str, storage_options: Mapping[str, str] | None = None) -> bool:
    """Whether a file or folder is at `location`."""
    fs, path = filesystem(location, storage_options)
    return fs.get_file_info(path).type != pafs.FileType.NotFound


def numbered_files(folder: str, storage_options: Mapping[str, str] | None = None) -> list[int]:
    """The files directly in `folder` named by a whole number (a Spark checkpoint log's
    batches), as numbers, smallest first; none when the folder is not there. A store
    that cannot list it raises."""
    fs, path = filesystem(folder, storage_options)
    found = fs.get_file_info(pafs.FileSelector(path, allow_not_found=True))
    return sorted(int(info.base_name) for info in found
                  if info.type == pafs.FileType.File and info.base_name.isdigit())


def read_text(location: str, storage_options: Mapping[str, str] | None = None) -> str | None:
    """The UTF-8 text of the file at `location`; None when there is no such file."""
    fs, path = filesystem(location, storage_options)
    try:
        with fs.open_input_stream(path) as stream:
            return stream.read().decode("utf-8")
    except OSError:  # not every store says FileNotFoundError for a missing key
        if fs.get_file_info(path).type == pafs.FileType.NotFound:
            return None
        raise


def write_text(location: str, text: str, storage_options: Mapping[str, str] | None = None) -> None:
    """Write `text` (UTF-8) to the file at `location`, replacing it. Readers see the old or
    the new content, never a part: locally through a temp file and a rename in the same
    folder (created when missing); an object store makes one PUT visible at once."""
    fs, path = filesystem(location, storage_options)
    data = text.encode("utf-8")
    if isinstance(fs, pafs.LocalFileSystem):
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        partial = f"{path}.{uuid.uuid4().hex}.tmp"
        try:
            with open(partial, "wb") as handle:
                handle.write(data)
            os.replace(partial, path)
        finally:
            if os.path.exists(partial):
                os.unlink(partial)
        return
    with fs.open_output_stream(path) as stream:
        stream.write(data)


def delete(location: str, storage_options: Mapping[str, str] | None = None) -> None:
    """Remove the file at `location`; nothing to do when it is not there."""
    fs, path = filesystem(location, storage_options)
    try:
        fs.delete_file(path)
    except OSError:
        if fs.get_file_info(path).type != pafs.FileType.NotFound:
            raise


def read_or_create_text(location: str, make: str,
                        storage_options: Mapping[str, str] | None = None) -> str:
    """The stripped text of the file at `location`, written first with `make` when there is
    none (the checkpoint's app id: kept for the checkpoint's life)."""
    text = read_text(location, storage_options)
    if text is None:
        write_text(location, make, storage_options)
        text = read_text(location, storage_options) or make
    return text.strip()
