"""Element-count transformations: repeat, take, skip, shard, cache, and options."""

from __future__ import annotations

import os
from typing import Any

from multidev._core.errors import InvalidArgumentError
from multidev._core.user_warnings import warn_user
from multidev.data import cardinality as _card
from multidev.data import cache_file, fingerprint
from multidev.data._checks import as_int, count_or_all
from multidev.data.dataset import Dataset
from multidev.data.options import Options

SHARD_HINT = -1  # md.data.experimental.SHARD_HINT: replaced by the worker count under HINT policy


class _UnaryDataset(Dataset):
    """A dataset with one input whose element spec is unchanged."""

    def __init__(self, input_dataset: Dataset):
        if not isinstance(input_dataset, Dataset):
            raise TypeError(f"Expected a md.data.Dataset, got {type(input_dataset).__name__}.")
        self._inputs = (input_dataset,)

    @property
    def _input(self) -> Dataset:
        return self._inputs[0]

    def _compute_element_spec(self) -> Any:
        return self._input.element_spec


class RepeatDataset(_UnaryDataset):
    """The input ``count`` times (-1: forever); each pass re-iterates (and re-shuffles) it."""

    def __init__(self, input_dataset: Dataset, count: int):
        super().__init__(input_dataset)
        self._count = count_or_all("count", count)

    def _iterate(self):
        return self._repeated(self._input._iterate)

    def _index_source(self):
        source = self._input._index_source()
        if source is None:
            return None
        make_indices, gather = source
        return (lambda: self._repeated(make_indices)), gather

    def _repeated(self, make_source):
        epoch = 0
        while self._count < 0 or epoch < self._count:
            produced = False
            for element in make_source():
                produced = True
                yield element
            epoch += 1
            if not produced:  # repeating an empty dataset forever ends at once, as TF
                return

    def _cardinality(self) -> int:
        return _card.repeated(self._input._cardinality(), self._count)


class TakeDataset(_UnaryDataset):
    """The first ``count`` elements (-1: all)."""

    def __init__(self, input_dataset: Dataset, count: int):
        super().__init__(input_dataset)
        self._count = count_or_all("count", count)

    def _iterate(self):
        if self._count == 0:
            return
        source = self._input._iterate()
        try:
            for i, element in enumerate(source, start=1):
                yield element
                if i == self._count:
                    return
        finally:
            source.close()

    def _cardinality(self) -> int:
        return _card.taken(self._input._cardinality(), self._count)


class SkipDataset(_UnaryDataset):
    """All but the first ``count`` elements (-1: all skipped)."""

    def __init__(self, input_dataset: Dataset, count: int):
        super().__init__(input_dataset)
        self._count = count_or_all("count", count)

    def _iterate(self):
        if self._count < 0:
            return
        for i, element in enumerate(self._input._iterate()):
            if i >= self._count:
                yield element

    def _cardinality(self) -> int:
        return _card.skipped(self._input._cardinality(), self._count)


class ShardDataset(_UnaryDataset):
    """Elements ``index, index + num_shards, ...`` of the input.

    ``require_non_empty`` (set by FILE auto-sharding) raises when the input has fewer
    elements (files) than shards, as TF's auto-shard rewrite does.
    """

    def __init__(self, input_dataset: Dataset, num_shards: int, index: int, require_non_empty: bool = False):
        super().__init__(input_dataset)
        self._num_shards = as_int("num_shards", num_shards)
        self._index = as_int("index", index)
        self._require_non_empty = require_non_empty
        if self._num_shards == SHARD_HINT:
            return  # placeholder, replaced by auto_shard under AutoShardPolicy.HINT
        _check_shard_args(self._num_shards, self._index)

    @property
    def num_shards(self) -> int:
        return self._num_shards

    @property
    def index(self) -> int:
        return self._index

    def _iterate(self):
        n, index = self._num_shards, self._index
        if n == SHARD_HINT:
            raise InvalidArgumentError(
                "shard(SHARD_HINT, ...) is a placeholder for auto-sharding with AutoShardPolicy.HINT; "
                "it cannot be iterated directly. Distribute the dataset or use shard(num_shards, index)."
            )
        seen = 0
        for i, element in enumerate(self._input._iterate()):
            seen = i + 1
            if i % n == index:
                yield element
        if self._require_non_empty and seen < n:
            raise InvalidArgumentError(file_shard_message(seen, n))

    def _cardinality(self) -> int:
        if self._num_shards == SHARD_HINT:
            return _card.UNKNOWN_CARDINALITY
        return _card.sharded(self._input._cardinality(), self._num_shards, self._index)


def _check_shard_args(num_shards: int, index: int) -> None:
    if num_shards <= 0:
        raise InvalidArgumentError(f"Number of shards must be greater than zero (currently num_shards = {num_shards}).")
    if not 0 <= index < num_shards:
        raise InvalidArgumentError(
            f"Index must be between 0 and {num_shards - 1} (currently index = {index}) for num_shards={num_shards}."
        )


def file_shard_message(num_files: int, num_shards: int) -> str:
    """The error for FILE sharding over fewer files than workers (TF's content, our words)."""
    return (
        f"Could not apply FILE based sharding: the dataset only has {num_files} file(s), which is not "
        f"enough for the required {num_shards} shards/workers. If you are using datasets with a "
        "distribution strategy, set options.experimental_distribute.auto_shard_policy to "
        "AutoShardPolicy.DATA or OFF (md.data.Options), or split the input into at least as many "
        "files as workers."
    )


class CacheDataset(_UnaryDataset):
    """Replays the elements of the first complete pass (memory, or the file ``filename`` + ".mdcache.safetensors").

    A pass that stops early caches nothing (TF discards partial caches too). A file cache is keyed
    by the pipeline's fingerprint (``data.fingerprint``): a file written by another pipeline is
    not replayed (a warning says it is rebuilt); a damaged file raises ``md.errors.DataLossError``.
    Format and crash safety: ``data.cache_file``.
    """

    def __init__(self, input_dataset: Dataset, filename: str = ""):
        super().__init__(input_dataset)
        if not isinstance(filename, (str, os.PathLike)):
            raise TypeError(f"cache filename must be a str path, got {filename!r}.")
        self._filename = os.fspath(filename)
        self._store: dict = {}

    def _with_inputs(self, *inputs: Dataset) -> Dataset:
        clone = super()._with_inputs(*inputs)
        clone._store = {}  # a rewritten pipeline must not replay the old pipeline's elements
        return clone

    def _iterate(self):
        cached = self._load()
        if cached is not None:
            yield from cached
            return
        elements = []
        for element in self._input._iterate():
            elements.append(element)
            yield element
        self._save(elements)

    def _key(self) -> tuple[str, str]:
        if "key" not in self._store:
            description = fingerprint.describe_pipeline(self._input)
            self._store["key"] = (fingerprint.pipeline_fingerprint(self._input), description)
        return self._store["key"]

    def _load(self) -> list | None:
        if "elements" in self._store:
            return self._store["elements"]
        if not self._filename:
            return None
        path = cache_file.cache_path(self._filename)
        elements, other = cache_file.read(path, self._key()[0])
        if other is not None:
            warn_user(f"The dataset cache {path!r} was written by another input pipeline (fingerprint "
                      f"{str(other.get('key'))[:12]}, this one {self._key()[0][:12]}); it is not replayed and "
                      "will be rewritten after this pass. Use a different cache filename per pipeline.")
        if elements is not None:
            self._store["elements"] = elements
        return elements

    def _save(self, elements: list) -> None:
        self._store["elements"] = elements
        if self._filename:
            key, description = self._key()
            cache_file.write(cache_file.cache_path(self._filename), elements, key, description)

    def _cardinality(self) -> int:
        return self._input._cardinality()


class OptionsDataset(_UnaryDataset):
    """Attaches options; elements pass through unchanged."""

    def __init__(self, input_dataset: Dataset, options: Options):
        super().__init__(input_dataset)
        if not isinstance(options, Options):
            raise TypeError(f"with_options expects a md.data.Options, got {options!r}.")
        self._options = options

    def options(self) -> Options:
        return self._input.options().merge(self._options)

    def _iterate(self):
        return self._input._iterate()

    def _cardinality(self) -> int:
        return self._input._cardinality()
