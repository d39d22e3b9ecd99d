"""The Spark session's jars: which components a config needs, the error when one was never
resolved, and the resolved components' agreement with the installed pyspark (same Spark
line, Hadoop and Jackson versions, and no jar the wheel already ships)."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pyspark
import pytest

from streaming.config import Config, DeltaConfig, SourceConfig, SparkConfig
from streaming.runtime.jvm_jars import MissingJars, required_components, session_jars, spark_jars_dir

ROOT = Path(__file__).resolve().parents[2]
POM = ROOT / "deploy" / "jvm" / "pom.xml"
SPARK_COMPONENTS = ("spark-kafka", "delta", "hadoop-aws")
NAME_VERSION = re.compile(r"^(?P<name>.+?)-(?P<version>\d[^-]*(?:-[A-Za-z][\w.]*)?)"
                          r"(?:-(?P<classifier>[a-z][\w-]*))?\.jar$")


def pom_property(name: str) -> str:
    ns = {"m": "http://maven.apache.org/POM/4.0.0"}
    found = ET.parse(POM).getroot().find(f"m:properties/m:{name}", ns)
    assert found is not None and found.text, f"{name} missing from {POM}"
    return found.text


def pyspark_jar_version(artifact: str) -> str:
    jars_dir = spark_jars_dir()
    assert jars_dir is not None
    for jar in jars_dir.glob(f"{artifact}-*.jar"):
        match = NAME_VERSION.match(jar.name)
        if match and match["name"] == artifact:
            return match["version"]
    raise AssertionError(f"no {artifact} jar in {jars_dir}")


def config(engine: str = "python", delta: str = "delta-rs", checkpoint: str = "data/checkpoint",
           path: str = "data/delta") -> Config:
    return Config(spark=SparkConfig(checkpoint=checkpoint), source=SourceConfig(engine=engine),
                  delta=DeltaConfig(engine=delta, path=path))


def test_required_components_follow_the_config() -> None:
    assert required_components(config()) == {}
    assert list(required_components(config(engine="spark"))) == ["spark-kafka"]
    assert list(required_components(config(delta="delta-spark"))) == ["delta"]
    assert list(required_components(config(checkpoint="s3a://b/c"))) == ["hadoop-aws"]
    assert list(required_components(config(path="s3a://b/d"))) == ["hadoop-aws"]
    # delta-rs reaches s3:// itself; Spark is not involved in a plain s3:// table
    assert required_components(config(path="s3://b/d")) == {}
    everything = required_components(config("spark", "delta-spark", "s3a://b/c", "s3a://b/d"))
    assert list(everything) == ["spark-kafka", "delta", "hadoop-aws"]
    assert everything["hadoop-aws"] == "spark.checkpoint is an s3a:// location"


@pytest.fixture
def fake_homes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    cache, spark_home = tmp_path / "cache", tmp_path / "spark"
    (spark_home / "jars").mkdir(parents=True)
    (spark_home / "jars" / "spark-core_2.13-4.1.4.jar").write_bytes(b"")
    (spark_home / "jars" / "commons-pool2-2.12.1.jar").write_bytes(b"")
    monkeypatch.setenv("KAFKA_HEALTH_CACHE", str(cache))
    monkeypatch.setenv("SPARK_HOME", str(spark_home))
    return cache, spark_home


def test_session_jars_lists_the_cache_folder_less_what_spark_has(fake_homes) -> None:
    cache, _ = fake_homes
    folder = cache / "jvm" / "spark-kafka"
    folder.mkdir(parents=True)
    for name in ("spark-sql-kafka-0-10_2.13-4.1.3.jar", "kafka-clients-3.9.1.jar",
                 "commons-pool2-2.12.1.jar"):
        (folder / name).write_bytes(b"")
    assert session_jars(config()) == []
    jars = session_jars(config(engine="spark"))
    assert [Path(j).name for j in jars] == ["kafka-clients-3.9.1.jar",
                                            "spark-sql-kafka-0-10_2.13-4.1.3.jar"]
    assert all(Path(j).is_absolute() for j in jars)


def test_a_missing_component_names_the_reason_and_bootstrap(fake_homes) -> None:
    cache, _ = fake_homes
    with pytest.raises(MissingJars) as err:
        session_jars(config(checkpoint="s3a://bucket/kh/checkpoint"))
    message = str(err.value)
    assert "spark.checkpoint is an s3a:// location" in message
    assert "'hadoop-aws'" in message and str(cache / "jvm" / "hadoop-aws") in message
    assert "bash deploy/bootstrap.sh" in message


def test_a_component_baked_into_sparks_jars_needs_no_cache(fake_homes) -> None:
    _, spark_home = fake_homes
    (spark_home / "jars" / "hadoop-aws-3.4.2.jar").write_bytes(b"")
    assert session_jars(config(checkpoint="s3a://bucket/kh/checkpoint")) == []


def test_pinned_versions_match_the_installed_pyspark() -> None:
    spark_line = ".".join(pyspark.__version__.split(".")[:2])
    assert pom_property("spark-kafka.version").startswith(spark_line + ".")
    assert pom_property("spark-token-provider.version").startswith(spark_line + ".")
    delta_pom = (ROOT / "deploy" / "jvm" / "delta" / "pom.xml").read_text()
    assert f"<artifactId>delta-spark_{spark_line}_2.13</artifactId>" in delta_pom
    assert pom_property("hadoop.version") == pyspark_jar_version("hadoop-client-api")
    assert pom_property("jackson.version") == pyspark_jar_version("jackson-databind")
    assert pyspark_jar_version("spark-core_2.13") == pyspark.__version__


@pytest.mark.parametrize("component", SPARK_COMPONENTS)
def test_resolved_components_ship_nothing_pyspark_has(component: str) -> None:
    """Against the real cache (deploy/jvm/resolve.sh, run by bootstrap): no artifact of a
    Spark component is also in the wheel's jars, at any version."""
    from streaming.runtime.jvm import cache_dir

    folder = cache_dir() / "jvm" / component
    jars = sorted(folder.glob("*.jar"))
    if not jars:
        pytest.skip(f"{component} not resolved in {folder}")
    jars_dir = spark_jars_dir()
    assert jars_dir is not None
    theirs = {m["name"] for j in jars_dir.glob("*.jar") if (m := NAME_VERSION.match(j.name))}
    ours = {m["name"]: j.name for j in jars if (m := NAME_VERSION.match(j.name))}
    assert len(ours) == len(jars), f"unparsed jar names in {folder}"
    assert not sorted(set(ours) & theirs), f"{component} duplicates pyspark's jars"
