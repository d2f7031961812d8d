"""The Parquet store: every trial of every search, declared once and written atomically.

Layout under the store root (a local path or any URI pyarrow's filesystems understand)::

    orthotune-store.json                   marker: format and schema version
    trials/search=NAME/trial-ID.parquet    one row per trial (TRIALS_SCHEMA)
    epochs/search=NAME/trial-ID.parquet    per-epoch history of that trial (EPOCHS_SCHEMA)
    searches/NAME.json                     how the search was launched, and its state
    tune/NAME/                             Ray Tune's experiment (what ``--resume`` restores)
    optuna/NAME.journal                    the cells' Optuna studies (optuna-dashboard)
    tensorboard/NAME/                      TensorBoard event files

Both tables are hive-partitioned Parquet datasets:
``pyarrow.dataset.dataset(ROOT + "/trials", partitioning="hive")`` reads them, as do
DuckDB and pandas. Every write casts to the declared schema. A trial's file name is
derived from the search and trial id alone, so writing the same trial again (a report
replayed after ``Tuner.restore``) replaces the file instead of adding rows, and two
searches never share a file. Files are written under a hidden temporary name (readers
skip names starting with ``.``) and then moved into place, so no reader sees half a file.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute  # noqa: F401  (pa.compute)
import pyarrow.fs as pafs
import pyarrow.parquet as pq

if TYPE_CHECKING:
    import pyarrow.dataset as ds

from orthotune.core import OrthotuneError, TrainConfig, column_name, declared

#: v2 added the variant switches of the config (bound, transform, hybrid, ...) and
#: ``repeat_val_loss``; v1 files are read through :func:`upgrade_v1` (their runs used the
#: switches' v1 behaviour, which :data:`V1_VARIANT` states).
SCHEMA_VERSION = 2
MARKER = "orthotune-store.json"
STORE_FORMAT = "orthotune-store"
SEARCH_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")

#: The partition column both tables share (it lives in the path, not in the files).
PARTITION = pa.schema([pa.field("search", pa.string())])

_ints = pa.list_(pa.int32())
_floats = pa.list_(pa.float64())
_ARROW = {"int": pa.int32(), "float": pa.float64(), "bool": pa.bool_(), "str": pa.string(), "ints": _ints}
_REQUIRED = {"dataset", "setting", "backbone"}


def config_fields() -> list[pa.Field]:
    """One typed column per :class:`TrainConfig` field, derived from its declaration."""
    return [pa.field(column_name(f), _ARROW[f.metadata["rule"].kind], nullable=f.name not in _REQUIRED)
            for f in declared(TrainConfig)]


#: What a v1 store's runs did for the switches v1 had no column for (v1 trained the paper
#: text's literal Frobenius bounding, selected on validation accuracy, linear layout).
V1_VARIANT = dict(bound="frobenius", transform="newton", hybrid="init", target="cI", target_trainable=True,
                  input_T=0, variant="v1", layout="linear", conv_bias=True, batch_norm=False,
                  feature_transform=True, gcnii_variant=False, directed=False, selection="val_acc")

TRIALS_SCHEMA = pa.schema(
    [
        pa.field("search", pa.string(), nullable=False),
        pa.field("trial_id", pa.string(), nullable=False),
        pa.field("tune_trial_id", pa.string()),  # the Ray Tune trial that trained it
        pa.field("status", pa.string(), nullable=False),  # a Status value
        pa.field("reason", pa.string()),
        # the config, one typed column per declared field (Ortho-GConv values null for the original arm)
        *config_fields(),
        # the objective and what the reports read (test at the validation-best epoch)
        pa.field("val_acc", pa.float64()),
        pa.field("val_acc_std", pa.float64()),
        pa.field("test_acc", pa.float64()),
        pa.field("test_acc_std", pa.float64()),
        pa.field("repeat_split", _ints),
        pa.field("repeat_seed", _ints),
        pa.field("repeat_status", pa.list_(pa.string())),
        pa.field("repeat_val_acc", _floats),
        pa.field("repeat_test_acc", _floats),
        pa.field("repeat_val_loss", _floats),
        pa.field("repeat_best_epoch", _ints),
        pa.field("repeat_epochs", _ints),
        pa.field("epochs", pa.int32()),  # epochs trained (most over the repeats)
        pa.field("best_epoch", pa.int32()),  # latest validation-best epoch over the repeats
        pa.field("m_sig", pa.float64()),
        pa.field("smoothness", pa.float64()),
        pa.field("grad_norms", _floats),  # per layer, mean over the repeats
        pa.field("grad_norm_ratio", pa.float64()),  # first layer / last layer
        pa.field("seconds", pa.float64()),
        pa.field("seconds_per_epoch", pa.float64()),
        pa.field("device", pa.string()),
        pa.field("orthotune_version", pa.string()),
        pa.field("torch_version", pa.string()),
        pa.field("pyg_version", pa.string()),
        pa.field("ray_version", pa.string()),
        pa.field("optuna_version", pa.string()),
        pa.field("finished_at", pa.timestamp("ms", tz="UTC")),
    ],
    metadata={"orthotune.schema_version": str(SCHEMA_VERSION)},
)

EPOCHS_SCHEMA = pa.schema(
    [
        pa.field("search", pa.string(), nullable=False),
        pa.field("trial_id", pa.string(), nullable=False),
        pa.field("repeat", pa.int32(), nullable=False),
        pa.field("split", pa.int32()),
        pa.field("seed", pa.int32()),
        pa.field("epoch", pa.int32(), nullable=False),
        pa.field("train_loss", pa.float64()),
        pa.field("val_acc", pa.float64()),
        pa.field("test_acc", pa.float64()),
        pa.field("val_loss", pa.float64()),
        pa.field("grad_norms", _floats),  # per layer ||dL/dW(l)||_F, at the report epochs only
    ],
    metadata={"orthotune.schema_version": str(SCHEMA_VERSION)},
)

TABLES = {"trials": TRIALS_SCHEMA, "epochs": EPOCHS_SCHEMA}


def check_search_name(name: str) -> str:
    if not isinstance(name, str) or not SEARCH_NAME.match(name):
        raise OrthotuneError(
            f"search name {name!r} must start with a letter or digit and use only letters, "
            f"digits, '_', '.', '-' (at most 100 characters)"
        )
    return name


@dataclass(frozen=True)
class Store:
    """A store root on a pyarrow filesystem. Open it with :meth:`open`."""

    uri: str
    fs: pafs.FileSystem
    root: str

    @classmethod
    def open(cls, uri: str, create: bool = False) -> Store:
        """Open the store at ``uri``; with ``create``, make one where nothing is yet.

        A folder that holds other files but no orthotune marker is refused: it is not
        ours, and writing into it could mix our files with somebody else's.
        """
        fs, root = _filesystem(uri)
        store = cls(str(uri), fs, root.rstrip("/"))
        marker = fs.get_file_info(store.path(MARKER))
        if marker.type == pafs.FileType.File:
            store._check_marker()
            return store
        listing = fs.get_file_info(root)
        if listing.type == pafs.FileType.File:
            raise OrthotuneError(f"store {uri!r} is a file, not an orthotune store folder")
        exists = listing.type == pafs.FileType.Directory
        if exists and fs.get_file_info(pafs.FileSelector(root)):
            raise OrthotuneError(f"{uri!r} is not an orthotune store (no {MARKER}); refusing to use it")
        if not create:
            raise OrthotuneError(f"no orthotune store at {uri!r}")
        fs.create_dir(root, recursive=True)
        store.write_json(MARKER, {"format": STORE_FORMAT, "schema_version": SCHEMA_VERSION})
        return store

    def path(self, *parts: str) -> str:
        return "/".join([self.root, *parts])

    def _check_marker(self) -> None:
        try:
            marker = self.read_json(MARKER)
        except (ValueError, OSError) as error:
            raise OrthotuneError(f"store marker {self.path(MARKER)!r} is unreadable: {error}") from None
        if not isinstance(marker, dict) or marker.get("format") != STORE_FORMAT:
            raise OrthotuneError(f"{self.uri!r} is not an orthotune store (bad {MARKER})")
        version = marker.get("schema_version")
        if not isinstance(version, int) or version > SCHEMA_VERSION:
            raise OrthotuneError(
                f"store {self.uri!r} has schema version {version!r}; this orthotune reads "
                f"versions <= {SCHEMA_VERSION}: upgrade orthotune"
            )

    # -- small JSON documents (marker, search metadata) --------------------------------

    def read_json(self, relative: str) -> Any:
        with self.fs.open_input_stream(self.path(relative)) as stream:
            return json.loads(stream.read().decode())

    def write_json(self, relative: str, value: Any) -> None:
        self._atomic_write(relative, lambda sink: sink.write(json.dumps(value, indent=2).encode()))

    def exists(self, relative: str) -> bool:
        return self.fs.get_file_info(self.path(relative)).type != pafs.FileType.NotFound

    # -- the Parquet tables -------------------------------------------------------------

    def write_trial(self, trial: Mapping[str, Any], epochs: Iterable[Mapping[str, Any]]) -> None:
        """Write one trial's row and its epoch rows; writing it again replaces them."""
        search, trial_id = check_search_name(trial["search"]), str(trial["trial_id"])
        name = f"search={search}/trial-{_safe(trial_id)}.parquet"
        epoch_rows = [{**row, "search": search, "trial_id": trial_id} for row in epochs]
        # epochs first: a reader that sees the trial row also sees its history
        self._write_table("epochs", name, epoch_rows)
        self._write_table("trials", name, [trial])

    def _write_table(self, table: str, name: str, rows: list[Mapping[str, Any]]) -> None:
        schema = TABLES[table]
        data = pa.Table.from_pylist([dict(r) for r in rows], schema=schema).drop_columns(["search"])
        file_schema = data.schema.with_metadata(schema.metadata)
        data = data.cast(file_schema)
        self._atomic_write(f"{table}/{name}", lambda sink: pq.write_table(data, sink))

    def _atomic_write(self, relative: str, write) -> None:
        final = self.path(relative)
        folder = final.rsplit("/", 1)[0]
        self.fs.create_dir(folder, recursive=True)
        temporary = f"{folder}/.tmp-{uuid.uuid4().hex}"
        with self.fs.open_output_stream(temporary) as sink:
            write(sink)
        self.fs.move(temporary, final)

    def dataset(self, table: str) -> ds.Dataset:
        # imported here: pyarrow.dataset pulls in pandas, which `launch --help` does not need
        import pyarrow.dataset as ds

        schema = TABLES[table]
        base = self.path(table)
        if self.fs.get_file_info(base).type != pafs.FileType.Directory:
            return ds.dataset(pa.Table.from_pylist([], schema=schema))
        return ds.dataset(
            base, schema=schema, format="parquet", filesystem=self.fs,
            partitioning=ds.partitioning(PARTITION, flavor="hive"),
        )

    def read(self, table: str, search: str | None = None) -> pa.Table:
        """A whole table (optionally one search's rows), in the declared schema.

        Rows written by schema v1 (no variant columns) come back with :data:`V1_VARIANT`.
        """
        dataset = self.dataset(table)
        import pyarrow.dataset as ds

        where = None if search is None else ds.field("search") == search
        data = dataset.to_table(filter=where).cast(TABLES[table])
        return upgrade_v1(data) if table == "trials" else data

    # -- searches -----------------------------------------------------------------------

    def search_names(self) -> list[str]:
        folder = self.path("searches")
        if self.fs.get_file_info(folder).type != pafs.FileType.Directory:
            return []
        infos = self.fs.get_file_info(pafs.FileSelector(folder))
        return sorted(i.base_name[:-5] for i in infos if i.base_name.endswith(".json")
                      and not i.base_name.startswith("."))

    def search_meta(self, name: str) -> dict[str, Any]:
        relative = f"searches/{check_search_name(name)}.json"
        if not self.exists(relative):
            known = ", ".join(self.search_names()) or "none"
            raise OrthotuneError(f"no search {name!r} in store {self.uri!r}; searches: {known}")
        return self.read_json(relative)

    def save_search_meta(self, name: str, meta: Mapping[str, Any]) -> None:
        self.write_json(f"searches/{check_search_name(name)}.json", dict(meta))

    def local_folder(self, kind: str, search: str | None = None) -> str | None:
        """The local folder of a search's live-view files: ``optuna`` (the Optuna journals)
        or ``tensorboard/SEARCH`` (event files); None for a remote store, which has none."""
        if kind not in ("optuna", "tensorboard"):
            raise ValueError(f"unknown store folder kind {kind!r}")
        if not isinstance(self.fs, pafs.LocalFileSystem):
            return None
        return self.path(kind, check_search_name(search)) if search is not None else self.path(kind)

    def tune_path(self) -> str:
        """Where Ray Tune keeps its experiments: a path or URI Tune's storage understands."""
        if isinstance(self.fs, pafs.LocalFileSystem):
            return self.path("tune")
        return self.uri.rstrip("/") + "/tune"


def _filesystem(uri: str) -> tuple[pafs.FileSystem, str]:
    if "://" in str(uri):
        try:
            return pafs.FileSystem.from_uri(str(uri))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OSError) as error:
            raise OrthotuneError(f"store URI {uri!r} is not usable: {error}") from None
    return pafs.LocalFileSystem(), str(Path(uri).expanduser().resolve())


def _safe(trial_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", trial_id)


def now() -> datetime:
    return datetime.now(UTC)


def upgrade_v1(trials: pa.Table) -> pa.Table:
    """Fill the columns v1 rows lack (``selection`` is null only in v1 rows) with v1's behaviour."""
    if trials.num_rows == 0:
        return trials
    is_v1 = pa.compute.is_null(trials["selection"])
    if not pa.compute.any(is_v1).as_py():
        return trials
    for name, value in V1_VARIANT.items():
        index = trials.schema.get_field_index(name)
        column = trials[name]
        filled = pa.compute.if_else(is_v1, pa.scalar(value, column.type), column)
        trials = trials.set_column(index, trials.schema.field(index), filled)
    return trials
