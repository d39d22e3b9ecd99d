"""The image gets its JVM artifacts the way a machine does: deploy/jvm/resolve.sh (Maven,
with dependencies, pinned in deploy/jvm/pom.xml), in build stages; the runtime takes the
Spark components' folders and links them into $SPARK_HOME/jars, and has neither Maven nor
the test bed's Kafka. No Docker engine here: the Dockerfile is checked by parsing, its
build context against the .dockerignore, and its link step by running it on a fake layout."""

from __future__ import annotations

import fnmatch
import re
import shlex
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
DOCKERFILE = REPO / "deploy" / "docker" / "Dockerfile"
IGNORE = REPO / "deploy" / "docker" / "Dockerfile.dockerignore"


def instructions() -> list[tuple[str, str]]:
    """(KEYWORD, arguments) per instruction, continuation lines joined as Docker joins them
    (backslash and newline removed), comment lines dropped."""
    out: list[tuple[str, str]] = []
    pending = ""
    for line in DOCKERFILE.read_text().splitlines():
        if line.lstrip().startswith("#"):
            continue
        pending += line
        if pending.endswith("\\"):
            pending = pending[:-1]
            continue
        if pending.strip():
            keyword, _, args = pending.strip().partition(" ")
            out.append((keyword.upper(), args.strip()))
        pending = ""
    return out


def stages() -> list[tuple[str, str, list[tuple[str, str]]]]:
    """(name, base, instructions) per FROM, in order; an unnamed stage's name is ""."""
    out: list[tuple[str, str, list[tuple[str, str]]]] = []
    for keyword, args in instructions():
        if keyword == "FROM":
            words = args.split()
            name = words[2] if len(words) == 3 and words[1].upper() == "AS" else ""
            out.append((name, words[0], []))
        elif out:
            out[-1][2].append((keyword, args))
    return out


def chain(name: str) -> list[tuple[str, str, list[tuple[str, str]]]]:
    """The stage and every stage it is built on, the stage first."""
    by_name = {n: stage for stage in stages() for n in [stage[0]] if n}
    out = [by_name[name]]
    while out[-1][1] in by_name:
        out.append(by_name[out[-1][1]])
    return out


def arg_default(name: str) -> str:
    for keyword, args in instructions():
        if keyword == "ARG" and args.split("=", 1)[0] == name:
            return shlex.split(args.split("=", 1)[1])[0] if "=" in args else ""
    raise AssertionError(f"no ARG {name}")


def sent_in_context(path: str) -> bool:
    """Whether the .dockerignore lets `path` into the build context: the last pattern that
    matches the path or one of its parents decides (a '!' pattern lets it in)."""
    verdict = True
    parts = path.strip("/").split("/")
    prefixes = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
    for raw in IGNORE.read_text().splitlines():
        rule = raw.strip()
        if not rule or rule.startswith("#"):
            continue
        include = rule.startswith("!")
        pattern = rule.lstrip("!").strip("/")
        if any(fnmatch.fnmatchcase(p, pattern) or fnmatch.fnmatchcase(p, pattern.replace("**/", ""))
               for p in prefixes):
            verdict = include
    return verdict


def test_every_copied_path_is_in_the_build_context() -> None:
    copied = []
    for keyword, args in instructions():
        if keyword == "COPY" and "--from=" not in args:  # --from copies from another stage
            words = [w for w in shlex.split(args) if not w.startswith("--")]
            copied += words[:-1]
    assert "deploy/jvm" in copied
    missing = [p for p in copied if not sent_in_context(p)]
    assert not missing, f"the .dockerignore keeps {missing} out of the build context"
    for path in copied:
        assert (REPO / path).exists(), path


def test_jars_come_from_maven_only() -> None:
    assert not (REPO / "deploy" / "docker" / "fetch_jars.py").exists()
    text = DOCKERFILE.read_text() + IGNORE.read_text()
    assert "fetch_jars" not in text and "EXTRA_JARS" not in text
    assert "repo1.maven.org" not in text
    runs = [args for keyword, args in instructions() if keyword == "RUN"]
    assert any("bash deploy/jvm/resolve.sh $components" in run for run in runs)


def test_named_components_are_modules_of_the_pom() -> None:
    ns = {"m": "http://maven.apache.org/POM/4.0.0"}
    root = ET.parse(REPO / "deploy" / "jvm" / "pom.xml").getroot()
    modules = {m.text for m in root.findall("m:modules/m:module", ns)}
    spark = arg_default("SPARK_COMPONENTS").split()
    assert spark == ["spark-kafka", "hadoop-aws"]
    (_, _, steps), *_ = chain("testbed-jars")
    resolve = next(a for k, a in steps if k == "RUN" and "resolve.sh" in a)
    broker = re.search(r'components="([^"]+)"', resolve).group(1).split()
    assert broker == ["kafka", "jolokia", "jmx-exporter"]
    assert set(spark + broker + ["delta"]) <= modules


def test_the_runtime_has_no_maven_and_no_broker() -> None:
    """The default target is the runtime: JRE, Python, the package and the Spark components'
    jars. Maven and the test bed's Kafka stay in the build stages (and the testbed target)."""
    all_stages = stages()
    final_name, final_base, final_steps = all_stages[-1]
    assert final_base == "runtime" and not final_steps, "the default target must be the runtime"
    runtime = chain("runtime")
    assert [name for name, _, _ in runtime] == ["runtime", "jre"]
    steps = [step for _, _, s in runtime for step in s]
    text = "\n".join(args for _, args in steps)
    assert "maven" not in text and "resolve.sh" not in text and "deploy/jvm" not in text
    assert "default-jre-headless" in text
    sources = {re.search(r"--from=(\S+)", a).group(1) for k, a in steps if k == "COPY" and "--from=" in a}
    assert sources == {"spark-jars"}
    # The Maven stages really run Maven; the testbed adds exactly the broker's components.
    (_, _, maven_steps), *_ = chain("maven")
    assert any(k == "RUN" and "install" in a and "maven" in a for k, a in maven_steps)
    (_, base, testbed_steps), *_ = chain("testbed")
    assert base == "runtime"
    copied = sorted(a.split()[1].rsplit("/", 1)[1] for k, a in testbed_steps if k == "COPY")
    assert copied == ["jmx-exporter", "jolokia", "kafka"]
    assert all("--from=testbed-jars" in a for k, a in testbed_steps if k == "COPY")


def test_compose_builds_the_testbed_target() -> None:
    """`kafka-health cluster` (compose's broker service) needs the test bed's Kafka."""
    compose = yaml.safe_load((REPO / "deploy" / "compose.yaml").read_text())
    builds = [s["build"] for s in compose["services"].values() if "build" in s]
    assert builds and all(b.get("target") == "testbed" for b in builds)
    assert "testbed" in {name for name, _, _ in stages()}


def test_the_run_steps_parse_with_the_image_shell() -> None:
    for keyword, args in instructions():
        if keyword == "RUN":
            done = subprocess.run(["sh", "-n", "-c", args], capture_output=True, text=True)
            assert done.returncode == 0, f"{args}\n{done.stderr}"


def link_step() -> str:
    return next(a for k, a in instructions() if k == "RUN" and "ln -s" in a)


def run_link_step(tmp_path: Path, components: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", "SPARK_COMPONENTS": components,
           "KAFKA_HEALTH_CACHE": str(tmp_path / "cache"), "SPARK_HOME": str(tmp_path / "spark")}
    return subprocess.run(["sh", "-c", link_step()], env=env, capture_output=True, text=True,
                          timeout=30)


@pytest.fixture
def layout(tmp_path: Path) -> Path:
    (tmp_path / "spark" / "jars").mkdir(parents=True)
    (tmp_path / "spark" / "jars" / "spark-core_2.13-4.1.4.jar").write_bytes(b"core")
    for component, jars in {"spark-kafka": ["spark-sql-kafka-0-10_2.13-4.1.3.jar",
                                            "kafka-clients-3.9.1.jar"],
                            "hadoop-aws": ["hadoop-aws-3.4.2.jar", "bundle-2.29.52.jar"]}.items():
        folder = tmp_path / "cache" / "jvm" / component
        folder.mkdir(parents=True)
        for name in jars:
            (folder / name).write_bytes(name.encode())
    return tmp_path


def test_the_link_step_puts_the_spark_components_on_sparks_classpath(layout: Path) -> None:
    done = run_link_step(layout, arg_default("SPARK_COMPONENTS"))
    assert done.returncode == 0, done.stderr
    jars = layout / "spark" / "jars"
    linked = sorted(p.name for p in jars.iterdir() if p.is_symlink())
    assert linked == ["bundle-2.29.52.jar", "hadoop-aws-3.4.2.jar", "kafka-clients-3.9.1.jar",
                      "spark-sql-kafka-0-10_2.13-4.1.3.jar"]
    assert (jars / "hadoop-aws-3.4.2.jar").read_bytes() == b"hadoop-aws-3.4.2.jar"
    assert run_link_step(layout, "").returncode == 0


def test_the_link_step_fails_on_a_jar_spark_has_or_a_component_not_resolved(layout: Path) -> None:
    (layout / "spark" / "jars" / "kafka-clients-3.9.1.jar").write_bytes(b"theirs")
    clash = run_link_step(layout, "spark-kafka")
    assert clash.returncode != 0 and "kafka-clients-3.9.1.jar is already in" in clash.stderr
    missing = run_link_step(layout, "delta")
    assert missing.returncode != 0 and "delta: no jars" in missing.stderr
