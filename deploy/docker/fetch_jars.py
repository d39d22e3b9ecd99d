"""Build-time helper of the image: put Maven Central jars into $SPARK_HOME/jars.

    python fetch_jars.py group:artifact:version [...]

Used by the Dockerfile's EXTRA_JARS build arg (hadoop-aws for s3a:// checkpoints,
spark-sql-kafka for source.engine=spark, delta-spark jars for delta.engine=delta-spark).
Nothing is fetched at run time.
"""

from __future__ import annotations

import os
import sys
import urllib.request

MAVEN = os.environ.get("MAVEN_REPOSITORY", "https://repo1.maven.org/maven2")


def jar_url(coordinate: str) -> tuple[str, str]:
    parts = coordinate.split(":")
    if len(parts) != 3 or not all(parts):
        raise SystemExit(f"fetch_jars.py: {coordinate!r} is not group:artifact:version")
    group, artifact, version = parts
    name = f"{artifact}-{version}.jar"
    return f"{MAVEN}/{group.replace('.', '/')}/{artifact}/{version}/{name}", name


def main(coordinates: list[str]) -> int:
    jars = os.path.join(os.environ["SPARK_HOME"], "jars")
    for coordinate in coordinates:
        url, name = jar_url(coordinate)
        print(f"fetching {url}", flush=True)
        urllib.request.urlretrieve(url, os.path.join(jars, name))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
