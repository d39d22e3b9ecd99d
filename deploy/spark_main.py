"""spark-submit entry point: `spark-submit [options] deploy/spark_main.py --config FILE [-v]`.

spark-submit needs a .py main file; this is it. It finds the config file and the
`metrics_schemas/` folder where the cluster manager put them, then runs
`kafka-health run --config FILE` (streaming.cli) in the driver.

Where things are on the driver:
- config: FILE as given (an absolute path, e.g. a mounted ConfigMap), else its base name in
  the working directory (`--files` lands there on YARN and on Kubernetes, Spark >= 3.4).
- schemas: $KAFKA_HEALTH_SCHEMAS if it names a folder with catalog.yaml (relative paths are
  taken from the working directory, where `--archives metrics_schemas.zip#metrics_schemas`
  unpacks); else the copy the installed package carries (streaming.package_data), found by
  import, not searched for; else, for a package that came without it (a `--py-files` zip),
  ./metrics_schemas or the copy inside a zip on sys.path, extracted to a temp folder. A folder
  named or found here is exported as an absolute KAFKA_HEALTH_SCHEMAS for this process.
  Executors do not run this file: they get KAFKA_HEALTH_SCHEMAS from spark.executorEnv (see
  deploy/spark-submit.sh) or the image (deploy/docker/Dockerfile), else read the package's.

No third-party imports here: it must run before the job's dependencies are known to work.
"""

from __future__ import annotations

import os
import sys
import tempfile
import zipfile
from collections.abc import Callable, MutableMapping
from pathlib import Path

SCHEMAS_ENV = "KAFKA_HEALTH_SCHEMAS"
SCHEMAS_MARKER = "catalog.yaml"
USAGE = "usage: spark_main.py --config FILE [-v]"


def resolve_config(path: str, cwd: Path | None = None) -> Path:
    """The config file as given, else its base name in the working directory."""
    cwd = cwd or Path.cwd()
    given = Path(path)
    candidates = [given if given.is_absolute() else cwd / given, cwd / given.name]
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    looked = ", ".join(str(c) for c in dict.fromkeys(candidates))
    raise FileNotFoundError(
        f"config file {path!r} not found (looked at {looked}). Ship it with "
        "`--files FILE` and pass its base name, or mount it and pass the absolute path."
    )


def _has_schemas(folder: Path) -> bool:
    return (folder / SCHEMAS_MARKER).is_file()


def _extract_from_zip(entries: list[str]) -> Path | None:
    for entry in entries:
        if not entry.endswith(".zip") or not os.path.isfile(entry):
            continue
        with zipfile.ZipFile(entry) as archive:
            names = [n for n in archive.namelist()
                     if n.startswith("metrics_schemas/") and not n.endswith("/")]
            if not names:
                continue
            target = Path(tempfile.mkdtemp(prefix="kafka-health-schemas-"))
            archive.extractall(target, members=names)
            return target / "metrics_schemas"
    return None


def package_has_schemas() -> bool:
    """Whether the importable `streaming` package carries its schemas (an installed wheel, a
    checkout): standard library only, as is streaming.package_data."""
    try:
        from streaming.package_data import has_packaged_schemas
    except ImportError:
        return False
    return has_packaged_schemas()


def resolve_schemas(environ: MutableMapping[str, str] | None = None, cwd: Path | None = None,
                    search_path: list[str] | None = None,
                    packaged: Callable[[], bool] = package_has_schemas) -> Path | None:
    """The metrics_schemas folder the driver reads, exported as an absolute
    KAFKA_HEALTH_SCHEMAS; None when the package's own copy is the one (nothing exported)."""
    environ = os.environ if environ is None else environ
    cwd = cwd or Path.cwd()
    if environ.get(SCHEMAS_ENV):
        given = Path(environ[SCHEMAS_ENV])
        looked = given if given.is_absolute() else cwd / given
        found = looked if _has_schemas(looked) else None
        where = ""
    elif packaged():
        return None
    else:
        looked = cwd / "metrics_schemas"
        found = looked if _has_schemas(looked) else _extract_from_zip(
            sys.path if search_path is None else search_path)
        where = " and in zips on sys.path"
    if found is None or not _has_schemas(found):
        raise FileNotFoundError(
            f"metrics_schemas/ not found (looked at {looked}{where}). Install the kafka-health "
            "package, which carries it, or ship it with `--archives "
            "metrics_schemas.zip#metrics_schemas` (deploy/spark-submit.sh does) and set "
            f"{SCHEMAS_ENV} to where it unpacks."
        )
    environ[SCHEMAS_ENV] = str(found.resolve())
    return found


def parse_args(argv: list[str]) -> tuple[str, bool]:
    config, verbose, rest = None, False, list(argv)
    while rest:
        arg = rest.pop(0)
        if arg == "--config" and rest:
            config = rest.pop(0)
        elif arg.startswith("--config="):
            config = arg.split("=", 1)[1]
        elif arg in ("-v", "--verbose"):
            verbose = True
        elif arg in ("-h", "--help"):
            raise SystemExit(f"{USAGE}\n\n{__doc__}")
        else:
            raise SystemExit(f"spark_main.py: unexpected argument {arg!r}\n{USAGE}")
    if not config:
        raise SystemExit(f"spark_main.py: --config is required\n{USAGE}")
    return config, verbose


def main(argv: list[str] | None = None) -> int:
    config, verbose = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        config_path = resolve_config(config)
        resolve_schemas()
    except FileNotFoundError as err:
        print(f"kafka-health: {err}", file=sys.stderr)
        return 2
    from streaming.cli import main as cli_main

    return cli_main([*(["-v"] if verbose else []), "run", "--config", str(config_path)])


if __name__ == "__main__":
    sys.exit(main())
