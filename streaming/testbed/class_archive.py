"""Build the class-data sharing archive of the test bed's Kafka nodes (and the demo's):

    python -m streaming.testbed.class_archive [--force]

A one-node cluster is started with `-XX:ArchiveClassesAtExit`, a topic created and written,
and the node stopped (SIGTERM: the JVM writes the archive as it exits); the archive is
checked and renamed into place as the Spark driver's is
(streaming.runtime.class_archive_build.publish). Idempotent: an archive already in place
is kept unless --force. `deploy/bootstrap.sh` runs it after the driver's.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from streaming.runtime.class_archive import kafka_archive_path
from streaming.runtime.class_archive_build import publish
from streaming.testbed.kafka import KafkaCluster, create_topic


def build_kafka(force: bool = False) -> tuple[Path | None, str]:
    """(the archive, what happened) for the test bed's Kafka JVMs."""
    from confluent_kafka import Producer

    def dump(partial: Path) -> None:
        cluster = KafkaCluster(size=1, agents=False, name="class-archive")
        cluster.nodes[0].archive_to = partial
        with cluster:
            create_topic(cluster.bootstrap, "warm-up", partitions=2)
            producer = Producer({"bootstrap.servers": cluster.bootstrap})
            for i in range(100):
                producer.produce("warm-up", b"x" * 100, key=str(i).encode())
            producer.flush(30)

    return publish(kafka_archive_path(), "kafka", dump, force)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m streaming.testbed.class_archive",
        description="Build the class-data sharing archive that makes the test bed's and "
                    "the demo's Kafka nodes start sooner. Safe to rerun: an archive in "
                    "place is kept.")
    parser.add_argument("--force", action="store_true", help="build it again even if present")
    args = parser.parse_args(argv)
    path, what = build_kafka(args.force)
    print(f"Kafka test bed class-data archive: {path or '-'} ({what})")
    return 0 if path is not None else 1


if __name__ == "__main__":
    sys.exit(main())
