"""pylance 14's module layout under ``lance_format``: ``progress``, ``debug``, ``commit``,
``vector``, ``util``, ``lance`` (the native module's names), ``dataset``'s exports and
``_dataset.sharded_batch_iterator``, each used the way pylance's users use it, side by side with
pylance (``import lance_format as lance`` code must run unchanged)."""

from __future__ import annotations

import importlib
import json
import re
import warnings
from datetime import datetime, timedelta
from types import ModuleType

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_format

ENGINES = [lance, lance_format]
IDS = ["pylance", "ours"]


def _sub(engine: ModuleType, name: str) -> ModuleType:
    return importlib.import_module(f"{engine.__name__}.{name}")


# -- progress ----------------------------------------------------------------------------------


def _progress_files(engine: ModuleType, tmp_path) -> list:
    progress_dir = tmp_path / f"progress-{engine.__name__}"
    tracker = _sub(engine, "progress").FileSystemFragmentWriteProgress(str(progress_dir), metadata={"w": "1"})
    uri = str(tmp_path / f"ds-{engine.__name__}")
    fragment = engine.LanceFragment.create(uri, pa.table({"a": range(10)}), fragment_id=3, progress=tracker)
    written = json.loads((progress_dir / "fragment_3.json").read_text())

    batch = pa.record_batch([pa.array(range(5))], names=["a"])

    def failing():
        yield batch
        raise RuntimeError("the source broke")

    with pytest.raises(Exception, match="the source broke"):
        engine.LanceFragment.create(uri, pa.RecordBatchReader.from_batches(batch.schema, failing()),
                                    fragment_id=4, progress=tracker)
    pending = json.loads((progress_dir / "fragment_4.in_progress").read_text())
    return [sorted(p.name for p in progress_dir.iterdir()), written["id"], len(written["files"]),
            written["files"][0]["path"] == fragment.files[0].path, pending]


def test_file_system_progress_leaves_pylances_files(tmp_path):
    ours, theirs = _progress_files(lance_format, tmp_path), _progress_files(lance, tmp_path)
    assert ours == theirs
    assert ours[0] == ["fragment_3.json", "fragment_4.in_progress", "fragment_4.json"]
    assert ours[4] == {"fragment_id": 4, "metadata": {"w": "1"}}


@pytest.mark.parametrize("engine", ENGINES, ids=IDS)
def test_progress_subclasses_are_called_like_pylance(tmp_path, engine: ModuleType):
    progress = _sub(engine, "progress")

    class Recorder(progress.FragmentWriteProgress):
        def __init__(self) -> None:
            self.calls: list[tuple[str, int, int]] = []

        def begin(self, fragment, **kwargs) -> None:
            self.calls.append(("begin", fragment.id, len(fragment.files)))

        def complete(self, fragment, **kwargs) -> None:
            self.calls.append(("complete", fragment.id, fragment.physical_rows))

    created = Recorder()
    engine.LanceFragment.create(str(tmp_path / "a"), pa.table({"a": range(7)}), fragment_id=2, progress=created)
    assert created.calls == [("begin", 2, 1), ("complete", 2, 7)]
    with pytest.raises(TypeError):
        progress.FragmentWriteProgress()  # abstract
    progress.NoopFragmentWriteProgress().begin(None)


# -- debug -------------------------------------------------------------------------------------


def _debug_dumps(engine: ModuleType, tmp_path) -> list:
    debug = _sub(engine, "debug")
    uri = str(tmp_path / f"debug-{engine.__name__}")
    ds = engine.write_dataset(pa.table({"a": range(10), "s": ["x"] * 10, "b": [True] * 10}), uri)
    ds.delete("a < 3")
    ds = engine.dataset(uri)
    fragment = debug.format_fragment(ds.get_fragments()[0].metadata, ds)
    # the file name and the deletion file id are random
    fragment = re.sub(r'path: "[^"]+"', "path: P", re.sub(r"\bid: \d{6,}", "id: N", fragment))
    transactions = debug.list_transactions(ds)
    return [debug.format_schema(ds), fragment, len(transactions),
            [re.search(r"operation: (\w+) \{", t).group(1) for t in transactions],
            debug.format_manifest(ds).startswith("Manifest {\n    schema: Schema {")]


def test_debug_dumps_like_pylance(tmp_path):
    ours, theirs = _debug_dumps(lance_format, tmp_path), _debug_dumps(lance, tmp_path)
    assert ours == theirs
    assert "major_version: 2" in ours[1] and ours[3] == ["Delete", "Overwrite"]


# -- commit, vector, util ------------------------------------------------------------------------


def test_commit_conflict_error_is_the_engines_and_an_os_error():
    import lance.commit

    import lance_format.commit

    assert lance_format.commit.CommitConflictError is lance_format.CommitConflictError
    for module in (lance.commit, lance_format.commit):
        assert issubclass(module.CommitConflictError, OSError)
        with pytest.raises(OSError, match="lost the race"):
            raise module.CommitConflictError("lost the race")


@pytest.mark.parametrize("call", [
    lambda m: m.vec_to_table({"x": [1.0, 2.0], "y": [3.5, 4.25]}),
    lambda m: m.vec_to_table([[1, 2, 3], [4, 5, 6]], names="emb"),
    lambda m: m.vec_to_table(np.arange(12, dtype=np.float64).reshape(4, 3)),
    lambda m: m.vec_to_table({"k": [1, 2]}, names=["key", "v"], ndim=2),
])
def test_vec_to_table_like_pylance(call):
    import lance.vector

    import lance_format.vector

    assert call(lance_format.vector) == call(lance.vector)


def test_vec_to_table_refuses_ragged_vectors_like_pylance():
    import lance.vector

    import lance_format.vector

    for module in (lance.vector, lance_format.vector):
        with pytest.raises(ValueError, match="Expected 2 dimensions but got 3"):
            module.vec_to_table([[1, 2], [1, 2, 3]])


def test_util_helpers_like_pylance(tmp_path):
    import lance.util

    import lance_format.util

    for value in [datetime(2024, 5, 6, 7, 8, 9), "2024-05-06 07:08:09"]:
        assert lance_format.util.sanitize_ts(value) == lance.util.sanitize_ts(value)
    delta = timedelta(seconds=3, microseconds=7)
    assert lance_format.util.td_to_micros(delta) == lance.util.td_to_micros(delta) == 3_000_007
    ds = lance_format.write_dataset(pa.table({"v": [[1.0, 2.0]]}), str(tmp_path / "v"))
    with pytest.raises(NotImplementedError, match="no vector indices"):
        lance_format.util.validate_vector_index(ds, "v")


# -- lance.lance, lance.dataset, lance._dataset ------------------------------------------------------


def _native_names(engine: ModuleType, tmp_path) -> list:
    native = _sub(engine, "lance")
    uri = str(tmp_path / f"native-{engine.__name__}")
    for _ in range(3):
        ds = engine.write_dataset(pa.table({"a": range(5)}), uri, mode="append")
    plan = native.Compaction.plan(ds, {"target_rows_per_fragment": 100})
    results = [task.execute(ds) for task in plan.tasks]
    metrics = native.Compaction.commit(ds, results)
    return [native.manifest_needs_migration(ds), plan.num_tasks(), isinstance(metrics, native.CompactionMetrics),
            (metrics.fragments_removed, metrics.fragments_added), engine.dataset(uri).to_table()]


def test_native_module_names_like_pylance(tmp_path):
    import lance.lance  # noqa: F401 - the native module of pylance

    assert _native_names(lance_format, tmp_path) == _native_names(lance, tmp_path)
    assert lance_format.lance.stable_version() == lance.lance.stable_version()


def test_dataset_module_exports_like_pylance():
    import sys

    import lance.dataset  # noqa: F401

    theirs, ours = sys.modules["lance.dataset"], sys.modules["lance_format.dataset"]
    assert ours.LANCE_COMMIT_MESSAGE_KEY == theirs.LANCE_COMMIT_MESSAGE_KEY
    from lance_format.dataset import AutoCleanupConfig, LanceDataset, LanceScanner, write_dataset

    assert LanceDataset is lance_format.LanceDataset and LanceScanner is lance_format.LanceScanner
    assert write_dataset is lance_format.write_dataset
    assert AutoCleanupConfig(interval=5, older_than_seconds=60) == {"interval": 5, "older_than_seconds": 60}
    for name in ours.__all__:
        assert hasattr(theirs, name), name
        getattr(ours, name)
    with pytest.raises(AttributeError):
        ours.NoSuchName  # noqa: B018


def _shards(engine: ModuleType, tmp_path) -> list:
    from importlib import import_module

    sharded = import_module(f"{engine.__name__}._dataset.sharded_batch_iterator").ShardedBatchIterator
    uri = str(tmp_path / f"shards-{engine.__name__}")
    ds = engine.write_dataset(pa.table({"a": range(250), "b": range(250)}), uri, max_rows_per_file=60)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        by_fragment = [b["a"].to_pylist() for b in sharded(uri, 1, 2, columns=["a"], batch_size=25)]
        by_batch = [b.num_rows for b in sharded(ds, 0, 3, columns=["b"], batch_size=40, granularity="batch")]
        batch_values = [b["b"].to_pylist() for b in sharded(ds, 2, 3, columns=["b"], batch_size=40,
                                                             granularity="batch")]
    return [by_fragment, by_batch, batch_values]


def test_sharded_batch_iterator_like_pylance(tmp_path):
    ours, theirs = _shards(lance_format, tmp_path), _shards(lance, tmp_path)
    assert ours[1:] == theirs[1:]
    # fragment sharding: the same rows (pylance may cut batches at other places)
    assert sum(ours[0], []) == sum(theirs[0], []) == list(range(60, 120)) + list(range(180, 240))


# -- what code written for these modules also calls ------------------------------------------------


def _distributed_reprs(engine: ModuleType, tmp_path) -> list:
    native = _sub(engine, "lance")
    ds = engine.write_dataset(pa.table({"a": range(80)}), str(tmp_path / f"reprs-{engine.__name__}"),
                              max_rows_per_file=20)
    plan = native.Compaction.plan(ds, {"target_rows_per_fragment": 40})
    result = plan.tasks[0].execute(ds)
    shape = re.sub(r"\[.+\]", "[...]", repr(result))
    return [repr(plan), repr(plan.tasks[0]).startswith("CompactionTask(read_version=1, fragments=[FragmentMetadata("),
            shape, [f.id for f in result.original_fragments]]


def test_compaction_reprs_like_pylance(tmp_path):
    ours = _distributed_reprs(lance_format, tmp_path)
    assert ours == _distributed_reprs(lance, tmp_path)
    assert ours[0] == "CompactionPlan(read_version=1, tasks=<2 compaction tasks>)"


@pytest.mark.parametrize("engine", ENGINES, ids=IDS)
def test_write_dataset_keywords_and_scanner_input_like_pylance(tmp_path, engine: ModuleType):
    source = engine.write_dataset(data_obj=pa.table({"a": range(6)}), uri=str(tmp_path / "src"), max_rows_per_file=3)
    empty = engine.write_dataset(data_obj=[], uri=str(tmp_path / "dst"), schema=source.schema)
    assert empty.count_rows() == 0
    fragments = [engine.LanceFragment.create(str(tmp_path / "dst"), source.scanner(fragments=[f]),
                                             fragment_id=f.fragment_id) for f in source.get_fragments()]
    ds = engine.LanceDataset.commit(str(tmp_path / "dst"), engine.LanceOperation.Overwrite(source.schema, fragments),
                                    read_version=1)
    assert ds.to_table() == source.to_table()


@pytest.mark.parametrize("engine", ENGINES, ids=IDS)
def test_update_columns_refuses_metadata_columns_like_pylance(tmp_path, engine: ModuleType):
    ds = engine.write_dataset(pa.table({"id": [1, 2, 3], "v": [10, 20, 30]}), str(tmp_path / "t"))
    fragment = ds.get_fragments()[0]
    for name, join in [("_rowaddr", "_rowid"), ("_rowid", "id")]:
        update = pa.table({join: pa.array([0, 1], pa.uint64() if join == "_rowid" else pa.int64()),
                           name: pa.array([9, 8], pa.uint64())})
        with pytest.raises(ValueError, match=f"Column {name} is a reserved metadata column and cannot be updated"):
            fragment.update_columns(update, left_on=join)


# -- arrow ---------------------------------------------------------------------------------------


def test_bfloat16_arrays_like_pylance(tmp_path):
    import lance.arrow  # pylance registers its type unconditionally: it must come first

    import lance_format.arrow

    values = [1.0, 1.1, -2.5, None, 3.0e38, 0.0078125]
    ours, theirs = lance_format.arrow.bfloat16_array(values), lance.arrow.bfloat16_array(values)
    assert ours.type.extension_name == theirs.type.extension_name == "lance.bfloat16"
    assert ours.storage.equals(theirs.storage)  # the same 2-byte patterns and nulls
    table = pa.table({"bf": ours})
    for writer in ENGINES:
        uri = str(tmp_path / f"bf-{writer.__name__}")
        writer.write_dataset(table, uri)
        for reader in ENGINES:
            assert reader.dataset(uri).to_table() == table


def test_bfloat16_type_is_registered_by_ours_alone(tmp_path):
    """Without pylance, importing ``lance_format.arrow`` registers the type: columns read back as
    bfloat16 arrays whose values are ``BFloat16`` numbers (printed as pylance prints them), and
    ``to_numpy`` gives ``ml_dtypes.bfloat16`` values."""
    import subprocess
    import sys

    script = (
        "import sys, pyarrow as pa, lance_format, lance_format.arrow as arrow\n"
        "assert 'lance' not in sys.modules\n"
        f"uri = {str(tmp_path / 'alone')!r}\n"
        "lance_format.write_dataset(pa.table({'bf': arrow.bfloat16_array([1.5, None, -2.0])}), uri)\n"
        "col = lance_format.dataset(uri).to_table().column('bf').chunk(0)\n"
        "print(type(col).__name__, col.to_pylist())\n"
        "print(arrow.bfloat16_array([1.0, 1.1, -2.5, 0.0078125]).to_numpy().tolist())\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == ["BFloat16Array [1.5, None, -2]", "[1.0, 1.1015625, -2.5, 0.0078125]"]


# -- log -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["DEBUG", "trace", "", "lance-core=debug,WARNING", "DEBUG,lance=warn", "info"])
def test_log_level_from_lance_log_like_pylance(monkeypatch, value):
    import lance.log

    import lance_format.log

    monkeypatch.setenv(lance_format.log.ENV_NAME_PYLANCE_LOGGING_LEVEL, value)
    assert lance_format.log.ENV_NAME_PYLANCE_LOGGING_LEVEL == lance.log.ENV_NAME_PYLANCE_LOGGING_LEVEL
    assert lance_format.log.get_log_level() == lance.log.get_log_level()
    # both name the "pylance" logger (pylance's module global may have been replaced by set_logger)
    assert lance_format.log.LOGGER.name == "pylance"


# -- sampler -------------------------------------------------------------------------------------


@pytest.mark.parametrize("args", [
    dict(rank=0, world_size=4, total_num_rows=1000, batch_size=250),
    dict(rank=3, world_size=4, total_num_rows=1003, batch_size=100),
    dict(rank=2, world_size=4, total_num_rows=2, batch_size=10),
    dict(rank=1, world_size=3, total_num_rows=500, batch_size=7, randomize=True, seed=5),
])
def test_fixed_batch_sampler_indices_like_pylance(args):
    import lance.sampler

    import lance_format.sampler

    ours, theirs = (m.ShardedFixedBatchSampler(**args) for m in (lance_format.sampler, lance.sampler))
    assert len(ours) == len(theirs) and list(ours) == list(theirs)
    ours.set_epoch(3)
    theirs.set_epoch(3)
    assert list(ours) == list(theirs)


def _sampled(engine: ModuleType, tmp_path) -> list:
    sampler = _sub(engine, "sampler")
    uri = str(tmp_path / f"sampler-{engine.__name__}")
    ds = engine.write_dataset(pa.table({"id": range(1000), "v": [i * 0.5 for i in range(1000)]}), uri,
                              max_rows_per_file=150)

    def ids(batches) -> list:
        return [b["id"].to_pylist() for b in batches]

    return [
        ids(sampler.ShardedBatchSampler(1, 3)(ds, batch_size=64, columns=["id"])),
        ids(sampler.ShardedBatchSampler(2, 3, randomize=True, seed=7)(ds, batch_size=50, columns=["id", "v"])),
        ids(sampler.ShardedBatchSampler(0, 4)(ds, batch_size=40, filter="id % 3 = 0", columns=["id"])),
        ids(sampler.ShardedFixedBatchSampler(0, 4)(ds, batch_size=100, filter="id < 500", columns=["id"])),
        sorted(sum(ids(sampler.ShardedFragmentSampler(1, 2, randomize=True, seed=3)(ds, columns=["id"])), [])),
        sum(len(b) for b in ids(sampler.FullScanSampler()(ds, columns=["id"]))),
        [(b.num_rows, b.schema.names) for b in sampler.maybe_sample(ds, 2000, ["v"])],
        sum(b.num_rows for b in sampler.maybe_sample(ds, 100, "v")),
        sum(b.num_rows for b in sampler.maybe_sample(uri, 300, ["id"], max_takes=30)),
    ]


def test_samplers_like_pylance(tmp_path):
    ours = _sampled(lance_format, tmp_path)
    theirs = _sampled(lance, tmp_path)
    assert ours == theirs
    assert [len(b) for b in ours[2]][:-1] == [40] * (len(ours[2]) - 1)
    assert ours[7:] == [100, 300]


def test_submodules_are_attributes_after_import_like_pylance():
    """``import lance`` alone makes ``lance.file``, ``lance.fragment``, ``lance.lance``,
    ``lance.log``, ``lance.progress``, ``lance.util`` usable; so does ``import lance_format``."""
    import subprocess
    import sys

    names = ["file", "fragment", "lance", "log", "progress", "util"]
    for package in ("lance", "lance_format"):
        script = (f"import types, {package} as p\n"
                  f"print([n for n in {names!r} if not isinstance(getattr(p, n, None), types.ModuleType)])\n")
        out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
        assert out.strip() == "[]", (package, out)


# -- lance.schema.LanceSchema ----------------------------------------------------------------------


def test_lance_schema_repr_pickle_and_equality_like_pylance(tmp_path):
    import pickle

    import lance
    import lance.schema

    import lance_format.schema

    data = pa.table({
        "x": range(2),
        "s": [{"a": 1, "b": "hello"}, {"a": 2, "b": "world"}],
        "y": [[1.0, 2.0], [3.0, 4.0]],
        "u": pa.array(["a", None], pa.large_utf8()),
    })
    theirs = lance.write_dataset(data, tmp_path / "theirs").lance_schema
    ours_ds = lance_format.write_dataset(data, tmp_path / "ours")
    ours = ours_ds.lance_schema
    assert repr(ours) == repr(theirs)  # Rust's Debug text of the schema, field for field
    assert pickle.loads(pickle.dumps(ours)) == ours
    assert ours.to_pyarrow() == theirs.to_pyarrow() == data.schema
    # a schema read from the manifest equals the same schema built from Arrow, as in pylance
    assert (lance_format.schema.LanceSchema.from_pyarrow(data.schema) == ours) == \
        (lance.schema.LanceSchema.from_pyarrow(data.schema) == theirs) is True
    assert [(f.name(), f.id(), [(c.name(), c.id()) for c in f.children()]) for f in ours.fields()] == \
        [(f.name(), f.id(), [(c.name(), c.id()) for c in f.children()]) for f in theirs.fields()]
    ours_ds.alter_columns({"path": "s.a", "name": "renamed"})
    assert [(c.name(), c.id()) for c in ours_ds.lance_schema.fields()[1].children()] == [("renamed", 2), ("b", 3)]
