"""Spark's Python worker daemon (`pyspark.daemon`), started without the archives on
sys.path that add nothing: pyspark's own zips when the same pyspark is installed as a
package, and archives that hold no Python module at all (Spark puts spark-core's jar,
5,362 entries and not one .py, on the workers' PYTHONPATH).

Why: before every task a Python worker calls importlib.invalidate_caches() (pyspark's
`setup_spark_files`). On Python 3.11 that makes each zipimporter re-read its archive's
whole directory: about 0.1 s per task for pyspark.zip (1,328 files) and 25 ms for the jar,
most of a small read task's time. With a pip-installed pyspark the zips hold the very files of the package
next to them, so the workers import that package instead; a Spark distribution whose
pyspark lives only in its zip keeps the zip.

Selected by `spark.python.daemon.module` (see `spark_session.spark_conf`).
"""

from __future__ import annotations

import os
import runpy
import sys
import zipfile


def bundled_archives(path: list[str]) -> list[str]:
    """The entries of `path` that are zip archives shipped inside an installed pyspark
    package (…/site-packages/pyspark/python/lib/*.zip), so redundant with it."""
    out = []
    for entry in path:
        if not entry.endswith(".zip"):
            continue
        lib = os.path.dirname(os.path.abspath(entry))
        package = os.path.dirname(os.path.dirname(lib))  # …/pyspark
        if (os.path.basename(package) == "pyspark" and os.path.basename(lib) == "lib"
                and os.path.isfile(os.path.join(package, "__init__.py"))):
            out.append(entry)
    return out


def moduleless_archives(path: list[str]) -> list[str]:
    """The archive entries of `path` (zip, jar, egg) with no Python module inside."""
    out = []
    for entry in path:
        if not entry.endswith((".zip", ".jar", ".egg")) or not os.path.isfile(entry):
            continue
        try:
            with zipfile.ZipFile(entry) as archive:
                names = archive.namelist()
        except (OSError, zipfile.BadZipFile):
            continue
        if not any(name.endswith((".py", ".pyc")) for name in names):
            out.append(entry)
    return out


def main() -> None:
    redundant = set(bundled_archives(sys.path)) | set(moduleless_archives(sys.path))
    sys.path[:] = [entry for entry in sys.path if entry not in redundant]
    # Finding this very module already opened them: invalidate_caches walks this cache.
    for entry in redundant:
        sys.path_importer_cache.pop(entry, None)
    runpy.run_module("pyspark.daemon", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
