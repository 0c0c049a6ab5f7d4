"""poptorch.DataLoader and poptorch.AsynchronousDataAccessor.

DataLoader is torch's DataLoader with the batch size PopTorch computes: one call of the model
takes batch_size x deviceIterations x replicationFactor x gradientAccumulation samples. Under
PopDist (Options.Distributed with several processes) each process reads its own share of a
map-style dataset. With mode=DataLoaderMode.Async the batches come through an
AsynchronousDataAccessor: a worker process (which may itself use torch's worker processes)
iterates the loader ahead of the model and hands batches over in shared memory, at most
`buffer_size` ahead.
"""
from __future__ import annotations

import atexit
import os
import queue as queue_mod
import threading
from typing import Optional

import torch
import torch.multiprocessing as tmp

from . import enums
from .errors import createPoptorchError
from .options import Options

_EPOCH_END = "__poptorch_epoch_end__"


class _SubDataset:
    """The share of a map-style dataset that process `processId` of `numProcesses` reads: whole
    combined batches, the same number for every process."""

    def __init__(self, dataset, options: Options, step: int):
        n = len(dataset)
        per_proc = step * (n // (step * options.Distributed.numProcesses))
        self._offset = options.Distributed.processId * per_proc
        self._length = min(per_proc, n - self._offset)
        self._dataset = dataset

    def __len__(self):
        return self._length

    def __getitem__(self, index):
        if not 0 <= index < self._length:
            raise IndexError(index)
        return self._dataset[index + self._offset]


class DataLoader(torch.utils.data.DataLoader):
    """torch.utils.data.DataLoader giving one model call's worth of samples per batch."""

    def __init__(self, options: Options, dataset, batch_size: Optional[int] = 1, shuffle: bool = False,
                 num_workers: int = 0, drop_last: bool = True, persistent_workers: Optional[bool] = None,
                 auto_distributed_partitioning: bool = True, mode: enums.DataLoaderMode = enums.DataLoaderMode.Sync,
                 async_options: Optional[dict] = None, rebatched_worker_size: Optional[int] = None, **kwargs):
        if not isinstance(options, Options):
            raise createPoptorchError(f"DataLoader: options must be a poptorch.Options, not {type(options).__name__}")
        if persistent_workers is None:
            persistent_workers = num_workers > 0
        self._options = options
        self._mode = enums.DataLoaderMode(mode)
        self._async_options = dict(async_options or {})
        if batch_size is None:
            self._combined_batch_size = None
        else:
            input_groups = options.replication_factor // options.input_group_size  # inputReplicaGrouping
            self._combined_batch_size = (batch_size * options.device_iterations * input_groups *
                                         options.Training.gradient_accumulation)
        self._is_iterable = isinstance(dataset, torch.utils.data.IterableDataset)
        procs = options.Distributed.numProcesses
        if not self._is_iterable:
            n = len(dataset)
            if not drop_last and self._combined_batch_size is not None and \
                    n % (self._combined_batch_size * procs):
                raise createPoptorchError(
                    f"The number of elements in the dataset ({n}) is not divisible by the number of elements "
                    f"processed per step ({self._combined_batch_size * procs}) and drop_last=False. Switch to "
                    f"drop_last=True.")
            if procs > 1 and auto_distributed_partitioning:
                if shuffle and not options.exists("random_seed"):
                    raise createPoptorchError("When using distributed execution you must set "
                                              "poptorch.Options.randomSeed()")
                if self._combined_batch_size is None:
                    raise createPoptorchError("batch_size=None not allowed for distributed execution.")
                dataset = _SubDataset(dataset, options, self._combined_batch_size)
        elif procs > 1 and auto_distributed_partitioning:
            raise createPoptorchError("IterableDatasets are not supported for distributed execution with "
                                      "auto_distributed_partitioning; partition the dataset yourself")
        loader_batch = self._combined_batch_size
        if self._mode == enums.DataLoaderMode.AsyncRebatched:
            if rebatched_worker_size is None:
                rebatched_worker_size = max(1, (self._combined_batch_size or 1) // max(num_workers, 1))
            loader_batch = rebatched_worker_size
            self._async_options.setdefault("rebatched_size", self._combined_batch_size)
        if shuffle and options.exists("random_seed") and "generator" not in kwargs:
            g = torch.Generator()
            g.manual_seed(int(options.random_seed))
            kwargs["generator"] = g
        super().__init__(dataset, batch_size=loader_batch, shuffle=shuffle, num_workers=num_workers,
                         drop_last=drop_last, persistent_workers=persistent_workers and num_workers > 0, **kwargs)
        self._accessor = None

    @property
    def combinedBatchSize(self) -> Optional[int]:  # noqa: N802
        return self._combined_batch_size

    @property
    def options(self) -> Options:
        return self._options

    def __iter__(self):
        if self._mode == enums.DataLoaderMode.Sync:
            return super().__iter__()
        if self._accessor is None:
            self._accessor = AsynchronousDataAccessor(_SyncView(self), **self._async_options)
        return iter(self._accessor)

    def __len__(self):
        if self._mode == enums.DataLoaderMode.AsyncRebatched and self._combined_batch_size:
            n = len(self.dataset) if not self._is_iterable else super().__len__()
            return n // self._combined_batch_size
        return super().__len__()

    def terminate(self) -> None:
        if self._accessor is not None:
            self._accessor.terminate()
            self._accessor = None

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_accessor"] = None
        return state


class _SyncView:
    """A picklable view of a poptorch.DataLoader that iterates it synchronously (the worker
    process's side of an Async loader)."""

    def __init__(self, loader: DataLoader):
        self.loader = loader

    def __iter__(self):
        return torch.utils.data.DataLoader.__iter__(self.loader)

    def __len__(self):
        return len(self.loader)


def _worker(dataset, q, stop, load_indefinitely: bool, rebatched_size: Optional[int], parent: int):
    # not a daemon, so that the loader's own worker processes can start; it stops when told to or
    # when the process that started it is gone
    threading.Thread(target=_watch_parent, args=(parent, stop), daemon=True).start()
    try:
        while not stop.is_set():
            pending = []
            for item in dataset:
                if stop.is_set():
                    return
                if rebatched_size is not None:
                    pending.append(item)
                    n = sum(_batch_len(p) for p in pending)
                    if n < rebatched_size:
                        continue
                    item = _concat_batches(pending)
                    pending = []
                _put(q, item, stop)
            _put(q, _EPOCH_END, stop)
            if not load_indefinitely:
                break
    except Exception as e:  # handed to the model's process, which raises it
        _put(q, ("__poptorch_worker_error__", f"{type(e).__name__}: {e}"), stop)
    # stay alive until told to stop: tensors in the queue are shared through this process (their
    # file descriptors are handed over when the consumer takes them)
    stop.wait()


def _watch_parent(parent: int, stop) -> None:
    import time
    while not stop.is_set():
        if os.getppid() != parent:
            stop.set()
            os._exit(0)
        time.sleep(0.5)


def _put(q, item, stop) -> None:
    while not stop.is_set():
        try:
            q.put(item, timeout=0.05)
            return
        except queue_mod.Full:
            continue


def _batch_len(b) -> int:
    if isinstance(b, torch.Tensor):
        return b.shape[0]
    if isinstance(b, (list, tuple)):
        return _batch_len(b[0])
    if isinstance(b, dict):
        return _batch_len(next(iter(b.values())))
    raise createPoptorchError(f"AsyncRebatched: cannot rebatch a batch of type {type(b).__name__}")


def _concat_batches(parts):
    first = parts[0]
    if isinstance(first, torch.Tensor):
        return torch.cat(parts)
    if isinstance(first, (list, tuple)):
        return type(first)(_concat_batches([p[i] for p in parts]) for i in range(len(first)))
    if isinstance(first, dict):
        return {k: _concat_batches([p[k] for p in parts]) for k in first}
    raise createPoptorchError(f"AsyncRebatched: cannot rebatch a batch of type {type(first).__name__}")


_START_METHODS = {enums.SharingStrategy.SharedMemory: "spawn", enums.SharingStrategy.FileSystem: "spawn",
                  enums.SharingStrategy.Fork: "fork", enums.SharingStrategy.ForkServer: "forkserver"}


class AsynchronousDataAccessor:
    """Iterate `dataset` (any iterable; usually a poptorch.DataLoader) in a separate process,
    `buffer_size` batches ahead of the consumer. The worker is started with the `spawn` method
    (as PopTorch does, to avoid OpenMP and fork() hangs), so the dataset must be picklable;
    SharingStrategy.Fork forks instead."""

    def __init__(self, dataset, buffer_size: int = 3, miss_sleep_time_in_ms: float = 0.1,
                 load_indefinitely: bool = True, early_preload: bool = False,
                 sharing_strategy: enums.SharingStrategy = enums.SharingStrategy.FileSystem,
                 rebatched_size: Optional[int] = None):
        if buffer_size < 1:
            raise createPoptorchError("AsynchronousDataAccessor: buffer_size must be at least 1")
        self._dataset = dataset
        self._buffer_size = int(buffer_size)
        self._miss_sleep = float(miss_sleep_time_in_ms) / 1000.0
        self._load_indefinitely = bool(load_indefinitely)
        self._sharing = enums.SharingStrategy(sharing_strategy)
        self._rebatched_size = rebatched_size
        self._process = None
        self._queue = None
        self._stop = None
        self._finished = False
        self._lock = threading.Lock()
        atexit.register(self.terminate)
        if early_preload:
            self._start()

    def _start(self) -> None:
        if self._process is not None:
            return
        ctx = tmp.get_context(_START_METHODS[self._sharing])
        if self._sharing == enums.SharingStrategy.FileSystem:
            tmp.set_sharing_strategy("file_system")
        self._queue = ctx.Queue(maxsize=self._buffer_size)
        self._stop = ctx.Event()
        self._process = ctx.Process(target=_worker, args=(self._dataset, self._queue, self._stop,
                                                          self._load_indefinitely, self._rebatched_size, os.getpid()),
                                    daemon=False)
        self._process.start()
        self._finished = False

    def terminate(self) -> None:
        """Stop the worker process."""
        with self._lock:
            if self._process is None:
                return
            self._stop.set()
            try:
                while True:  # let the worker's pending put return
                    self._queue.get_nowait()
            except (queue_mod.Empty, OSError, ValueError, EOFError):
                # EOFError / ConnectionError: a batch whose tensors the worker shares through file
                # descriptors cannot be read once the worker has gone; it is dropped with the queue
                pass
            self._process.join(timeout=5)
            if self._process.is_alive():
                self._process.terminate()
                self._process.join(timeout=5)
            self._queue.close()
            self._process = None
            self._queue = None

    def __del__(self):
        try:
            self.terminate()
        except Exception:
            pass

    def __len__(self):
        return len(self._dataset)

    def __iter__(self):
        self._start()
        if self._finished and self._load_indefinitely:
            self._finished = False
        elif self._finished:
            self.terminate()
            self._start()
        return self

    def __next__(self):
        if self._process is None:
            raise StopIteration
        while True:
            try:
                item = self._queue.get(timeout=max(self._miss_sleep, 0.001))
            except queue_mod.Empty:
                if not self._process.is_alive():
                    raise createPoptorchError("AsynchronousDataAccessor: the worker process stopped (exit code "
                                              f"{self._process.exitcode})") from None
                continue
            if isinstance(item, str) and item == _EPOCH_END:
                self._finished = True
                raise StopIteration
            if isinstance(item, tuple) and len(item) == 2 and item[0] == "__poptorch_worker_error__":
                self.terminate()
                raise createPoptorchError(f"AsynchronousDataAccessor: the worker process failed: {item[1]}")
            return item
