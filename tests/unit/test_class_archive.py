"""The driver JVM's class-data archive (streaming/runtime/class_archive.py): which archive a
class path gets, and that only one a JVM can map is ever offered."""

from __future__ import annotations

import os
import shutil

from streaming.runtime.class_archive import archive_path, sharing_options
from streaming.runtime.class_archive_build import maps


def test_a_changed_jar_on_the_class_path_means_another_archive(tmp_path, monkeypatch):
    monkeypatch.setenv("KAFKA_HEALTH_CACHE", str(tmp_path / "cache"))
    jar = tmp_path / "extra.jar"
    jar.write_bytes(b"PK\x05\x06" + bytes(18))
    before = archive_path([str(jar)])
    assert before is not None and before != archive_path([])
    os.utime(jar, ns=(1, 1))  # replaced by an upgrade: the old archive no longer fits
    assert archive_path([str(jar)]) != before
    assert archive_path([str(tmp_path / "gone.jar")]) is None
    assert sharing_options([str(jar)]) == []  # none built for it: the JVM starts without


def test_the_builder_refuses_an_archive_a_jvm_cannot_map(tmp_path):
    """A JVM crashes on a truncated archive, so the builder checks before naming it."""
    built = archive_path([])
    assert built is not None and built.is_file(), (
        "deploy/bootstrap.sh builds the default session's archive; it is missing")
    assert maps(built)
    truncated = tmp_path / "truncated.jsa"
    with built.open("rb") as whole, truncated.open("wb") as part:
        shutil.copyfileobj(whole, part, 1 << 20)
        part.truncate(1 << 20)
    assert not maps(truncated)
