"""The bronze suite passes on good decoded samples and names what breaks."""

from __future__ import annotations

import pyarrow.compute as pc
import pytest

from streaming.decode.records import DecodeContext, decode_record_batch
from streaming.quality import BronzeValidator
from streaming.simulate.formats import jolokia
from streaming.simulate.model import ClusterModel
from streaming.simulate.samples import broker_samples
from tests.unit.test_jolokia import NOW, records


def good_bronze():
    model = ClusterModel("c", [1, 2, 3], {"t": 6})
    values = [v for b in model.brokers
              for _, v in jolokia("c", b, NOW.timestamp(), broker_samples(model, b, 15))]
    decoded = decode_record_batch(records(*values, key=b"c/1"), DecodeContext())
    return decoded.filter(pc.is_null(decoded["reject_reason"]))


def test_suite_passes_on_good_samples_and_samples_large_batches():
    validator = BronzeValidator(every_n_batches=1, sample_rows=50)
    bronze = good_bronze()
    assert bronze.num_rows > 50
    results = validator.validate(bronze, batch_id=3).to_pylist()
    assert results and all(r["success"] for r in results), results
    assert {r["rows_checked"] for r in results} == {50}


def test_suite_reports_each_broken_expectation():
    validator = BronzeValidator(every_n_batches=1)
    bronze = good_bronze()
    frame = bronze.to_pandas()
    frame.loc[frame["metric"] == "NetworkProcessorAvgIdlePercent", "value"] = 7.0
    frame.loc[0, "kind"] = "histogram"
    import pyarrow as pa

    broken = pa.Table.from_pandas(frame, schema=bronze.schema)
    failed = {r["expectation"] for r in validator.validate(broken, 0).to_pylist()
              if not r["success"]}
    assert any("value" in f and "NetworkProcessorAvgIdlePercent" in f for f in failed)
    assert "expect_column_values_to_be_in_set(kind)" in failed
    assert len(failed) == 2


def test_a_suite_that_cannot_be_built_fails_each_validation_not_the_constructor(monkeypatch):
    """The suite is built on a thread while the session starts: its failure surfaces where
    the job reports a validation that failed to run, never in the job's constructor."""
    def unreadable() -> dict:
        raise OSError("the suite file is unreadable")

    monkeypatch.setattr("streaming.quality.load_suite_dict", unreadable)
    validator = BronzeValidator(every_n_batches=1)
    with pytest.raises(RuntimeError, match="could not be built") as failed:
        validator.validate(good_bronze(), batch_id=0)
    assert isinstance(failed.value.__cause__, OSError)


def test_a_due_batch_goes_on_while_its_quality_check_runs(tmp_path, caplog):
    """The check reads its sample and validates it on a thread of its own: the batch's
    steps (paging among them) and the next batch do not wait for it; its results reach
    dq_results once it ends, and a sample that cannot be read is reported, not raised."""
    import threading

    import pyarrow as pa

    from streaming.config import Config
    from streaming.pipeline.batch import BatchProcessor
    from streaming.pipeline.signal_stages import WindowRows
    from streaming.pipeline.stats import BatchStats
    from tests.conftest import wait_for

    config = Config()
    config.delta.path = str(tmp_path)
    config.quality.validate_every_n_batches = 1
    processor = BatchProcessor(config, exporter=None)
    bronze = good_bronze()
    gate = threading.Event()

    def held_sample() -> pa.Table:
        gate.wait(60)
        return bronze

    facts = BatchStats(batch_id=0, bronze_rows=bronze.num_rows)
    concluded = threading.Thread(target=processor.after_bronze,
                                 args=(bronze, facts, None, WindowRows(None, {}), held_sample))
    concluded.start()
    wait_for(lambda: not concluded.is_alive(), 30, "the batch to conclude before its check")
    assert processor.history.newest_finished.batch_id == 0  # every step of the batch is done
    assert not processor.tables["dq_results"].committed(0)
    gate.set()
    processor.quality.wait()
    assert processor.tables["dq_results"].committed(0)
    results = processor.tables["dq_results"].read().to_pylist()
    assert results and {r["batch_id"] for r in results} == {0}

    def unreadable() -> pa.Table:
        raise OSError("the task file is gone")

    processor.after_bronze(bronze, BatchStats(batch_id=1, bronze_rows=1), None,
                           WindowRows(None, {}), unreadable)
    processor.quality.wait()
    assert "batch 1: the data-quality check failed" in caplog.text
    assert not processor.tables["dq_results"].committed(1)
