"""Decode throughput per format: decode_record_batch on pure Python, no Spark, no broker.

For each format (and Prometheus naming scheme) the simulator encodes scrapes of a model
cluster until about N samples exist, the records are cut into Arrow batches of the
kafka_records schema (10k records each, as the source yields), and decode_record_batch runs
over all of them. Reports decoded samples/s (good rows out per second of decode time),
records/s and bytes per sample; writes tests/benchmarks/results/decode.json.

    .venv/bin/python tests/benchmarks/bench_decode.py [--samples 200000] [--formats a,b]
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from datetime import UTC, datetime
from pathlib import Path

import streaming  # noqa: F401 - its __init__ sets mimalloc's purge delay: before pyarrow loads

# isort: split
import pyarrow as pa

from streaming.catalog import load_catalog
from streaming.decode.records import DecodeContext, decode_record_batch
from streaming.schemas import arrow_schema
from streaming.simulate.formats import ENCODERS
from streaming.simulate.model import ClusterModel
from streaming.simulate.samples import broker_samples

RESULTS = Path(__file__).resolve().parent / "results" / "decode.json"
BATCH_RECORDS = 10_000
T0 = 1_714_564_800.0
CTX = DecodeContext(max_skew_seconds=7200)


def encode(fmt: str, target_samples: int) -> list[tuple[bytes | None, bytes]]:
    """Scrapes of a 6-broker cluster (per-partition metrics on) until ~target decodable samples.

    A format carries only some of a scrape's samples (OTLP about a tenth), so the number of
    scrapes follows from how many samples one round of scrapes decodes to.
    """
    model = ClusterModel("bench", [1, 2, 3, 4, 5, 6], {"orders": 60, "payments": 30})
    model.broker_down(6)
    model.isr_flap(2)
    rounds = [[broker_samples(model, b, 15.0) for b in (1, 2, 3, 4, 5)] for _ in range(4)]
    probe: list[tuple[bytes | None, bytes]] = []
    for broker, samples in zip((1, 2, 3, 4, 5), rounds[0], strict=True):
        probe += ENCODERS[fmt](model.name, broker, T0, samples)
    per_round = decode_record_batch(batches(probe)[0], CTX).column("reject_reason").null_count
    if per_round == 0:
        raise SystemExit(f"{fmt}: carries none of the simulated samples")
    messages: list[tuple[bytes | None, bytes]] = []
    for i in range(-(-target_samples // per_round)):
        ts = T0 + 15.0 * (i % 240)  # stay within an hour of the record time
        for broker, samples in zip((1, 2, 3, 4, 5), rounds[i % len(rounds)], strict=True):
            messages += ENCODERS[fmt](model.name, broker, ts, samples)
    return messages


def batches(messages: list[tuple[bytes | None, bytes]]) -> list[pa.RecordBatch]:
    schema = arrow_schema("kafka_records")
    out = []
    when = datetime.fromtimestamp(T0 + 1800, UTC)
    for start in range(0, len(messages), BATCH_RECORDS):
        chunk = messages[start:start + BATCH_RECORDS]
        n = len(chunk)
        out.append(pa.RecordBatch.from_pydict({
            "key": [k for k, _ in chunk], "value": [v for _, v in chunk],
            "topic": ["kafka-metrics"] * n, "partition": [0] * n,
            "offset": list(range(start, start + n)), "timestamp": [when] * n,
            "timestampType": [0] * n,
        }, schema=schema))
    return out


def run(fmt: str, target: int) -> dict:
    messages = encode(fmt, target)
    record_batches = batches(messages)
    ctx = CTX
    catalog = load_catalog()
    decode_record_batch(record_batches[0].slice(0, 200), ctx, catalog)  # warm caches
    samples = rejects = 0
    start = time.perf_counter()
    for batch in record_batches:
        out = decode_record_batch(batch, ctx, catalog)
        bad = out.column("reject_reason").null_count
        samples += bad  # null reason = a good sample row
        rejects += out.num_rows - bad
    seconds = time.perf_counter() - start
    size = sum(len(v) for _, v in messages)
    return {
        "format": fmt, "records": len(messages), "samples": samples, "rejects": rejects,
        "seconds": round(seconds, 3), "samples_per_s": round(samples / seconds),
        "records_per_s": round(len(messages) / seconds),
        "bytes_per_sample": round(size / max(samples, 1), 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=200_000)
    parser.add_argument("--formats", default=",".join(ENCODERS))
    args = parser.parse_args()
    results = [run(fmt, args.samples) for fmt in args.formats.split(",")]
    header = f"{'format':<24}{'records':>9}{'samples':>9}{'rejects':>8}{'seconds':>9}" \
             f"{'samples/s':>11}{'records/s':>11}{'B/sample':>10}"
    print(header)
    print("-" * len(header))
    for r in results:
        print(f"{r['format']:<24}{r['records']:>9}{r['samples']:>9}{r['rejects']:>8}"
              f"{r['seconds']:>9.2f}{r['samples_per_s']:>11,}{r['records_per_s']:>11,}"
              f"{r['bytes_per_sample']:>10}")
    slowest = min(results, key=lambda r: r["samples_per_s"])
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "python": platform.python_version(), "machine": platform.machine(),
        "target_samples_per_format": args.samples, "batch_records": BATCH_RECORDS,
        "results": results,
        "slowest": {"format": slowest["format"], "samples_per_s": slowest["samples_per_s"]},
    }, indent=2) + "\n")
    print(f"\nwrote {RESULTS}")
    print(f"slowest format: {slowest['format']} at {slowest['samples_per_s']:,} samples/s "
          "decoded (one Python process, no Spark)")


if __name__ == "__main__":
    main()
