"""Which sys.path entries the worker daemon drops: only pyspark's own bundled archives."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pyspark

from streaming.runtime.spark_daemon import bundled_archives, moduleless_archives


def test_only_archives_inside_an_installed_pyspark_are_dropped(tmp_path: Path) -> None:
    installed = Path(pyspark.__file__).parent / "python" / "lib"
    shipped = sorted(str(p) for p in installed.glob("*.zip"))
    assert shipped, "pip's pyspark ships pyspark.zip and py4j in python/lib"
    distribution = tmp_path / "spark" / "python" / "lib"  # a Spark tarball: no package
    distribution.mkdir(parents=True)
    (distribution / "pyspark.zip").write_bytes(b"")
    path = [*shipped, str(distribution / "pyspark.zip"), "/opt/app/deps.zip", str(tmp_path)]
    assert bundled_archives(path) == shipped


def test_archives_without_python_are_dropped_and_the_others_kept(tmp_path: Path) -> None:
    jar, deps = tmp_path / "core.jar", tmp_path / "deps.zip"
    with zipfile.ZipFile(jar, "w") as archive:
        archive.writestr("org/apache/spark/SparkContext.class", b"\xca\xfe")
    with zipfile.ZipFile(deps, "w") as archive:
        archive.writestr("mylib/__init__.py", "")
    path = [str(jar), str(deps), str(tmp_path / "missing.zip"), str(tmp_path)]
    assert moduleless_archives(path) == [str(jar)]


def test_workers_still_import_pyspark_without_the_archives() -> None:
    installed = Path(pyspark.__file__).parent / "python" / "lib"
    archives = ":".join(str(p) for p in installed.glob("*.zip"))
    probe = ("import sys; from streaming.runtime.spark_daemon import bundled_archives; "
             "sys.path[:] = [p for p in sys.path if p not in bundled_archives(sys.path)]; "
             "import pyspark.daemon, py4j; print(pyspark.daemon.__file__)")
    out = subprocess.run([sys.executable, "-c", probe], env={"PYTHONPATH": archives},
                         capture_output=True, text=True, check=True).stdout
    assert ".zip" not in out and out.strip().endswith("daemon.py")


def test_the_daemon_leaves_no_zip_importer_for_invalidate_caches_to_reread(tmp_path: Path
                                                                          ) -> None:
    installed = Path(pyspark.__file__).parent
    archives = ":".join([*(str(p) for p in (installed / "python" / "lib").glob("*.zip")),
                         *(str(p) for p in (installed / "jars").glob("spark-core_*.jar"))])
    probe = ("import runpy, sys, zipimport; runpy.run_module = lambda *a, **k: None; "
             "from streaming.runtime import spark_daemon; spark_daemon.main(); "
             "print(sum(isinstance(f, zipimport.zipimporter) "
             "for f in sys.path_importer_cache.values()))")
    # from elsewhere than the repo, finding `streaming` walks the archives first
    out = subprocess.run([sys.executable, "-c", probe], env={"PYTHONPATH": archives},
                         cwd=tmp_path, capture_output=True, text=True, check=True).stdout
    assert out.strip() == "0"
