"""A KV cache that writes each decode step's keys and values into room kept for them, instead of concatenating.

transformers' `DynamicLayer` grows a layer's keys and values with `torch.cat` at every step, so a decode step over
L cached positions copies the whole (b, Hkv, L, D) cache of every layer twice: on SmolLM2-135M at 32 rows and
96-128 positions a tenth of a step (docs/results.md). A `BufferedLayer` keeps each layer's keys
and values in a (b, Hkv, capacity, D) tensor with room after the cached positions: a step writes its position in
place and hands the attention a view of the first n positions (strided: its batch and head strides span the
capacity). Dropping finished rows (`batch_select_indices`) and copying a prompt's cache for its samples
(`batch_repeat_interleave`) copy the buffer's rows, as `DynamicLayer` copies its tensors; when the room runs out
the buffer grows by `room` more positions (one copy).

    with buffering():                   # this thread's rollouts (decode.sample_kept) use buffered caches
        ...
    buffered(cache, room) -> cache      # a cache's plain DynamicLayers as BufferedLayers (their data copied in)

Whether it pays depends on the machine (a strided view can make the attention's products slower than the copies it
saves), so it is one of the kernels `generation.cpu_decode=auto` times (kernel_choice.py), not a default.
Not here: sliding-window or recurrent layers (left as they are), a static cache for `torch.compile`, a cache shared
between prompts.
"""
from __future__ import annotations

import contextlib
import threading
from typing import Iterator

import torch
from transformers.cache_utils import DynamicLayer

_owners: set[int] = set()  # threads within a `buffering` block


class BufferedLayer(DynamicLayer):
    """A `DynamicLayer` whose keys and values are views of the first n positions of a larger buffer."""

    def __init__(self, room: int) -> None:
        super().__init__()
        self.room = max(1, int(room))
        self.key_buffer: torch.Tensor | None = None  # (b, Hkv, capacity, D)
        self.value_buffer: torch.Tensor | None = None

    def _held(self) -> bool:
        """Whether `keys` is still this layer's view of its buffer (anything that replaced it, a reset, is not)."""
        k = self.keys
        return (self.key_buffer is not None and k is not None and k.dim() == 4
                and k.data_ptr() == self.key_buffer.data_ptr() and k.shape[0] == self.key_buffer.shape[0])

    def _rebuffer(self, capacity: int, new_keys: torch.Tensor, new_values: torch.Tensor) -> None:
        """New buffers of `capacity` positions holding the cached keys and values (shaped as the new states)."""
        n = self.get_seq_length()
        kb = new_keys.new_empty(*new_keys.shape[:2], capacity, new_keys.shape[-1])
        vb = new_values.new_empty(*new_values.shape[:2], capacity, new_values.shape[-1])
        if n:
            kb[:, :, :n].copy_(self.keys)
            vb[:, :, :n].copy_(self.values)
        self.key_buffer, self.value_buffer = kb, vb

    def _show(self, n: int) -> None:
        """`keys` and `values`: the buffers' first n positions, as views."""
        self.keys, self.values = self.key_buffer[:, :, :n], self.value_buffer[:, :, :n]

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs
               ) -> tuple[torch.Tensor, torch.Tensor]:
        """Write the new states (b, Hkv, t, D) after the cached n positions; -> the first n + t, as views."""
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        n, t = self.get_seq_length(), key_states.shape[-2]
        if not n or not self._held() or n + t > self.key_buffer.shape[-2]:
            # the first states; states put here another way (a plain layer's); or the room ran out
            self._rebuffer(n + t + self.room, key_states, value_states)
        self.key_buffer[:, :, n:n + t].copy_(key_states)
        self.value_buffer[:, :, n:n + t].copy_(value_states)
        self._show(n + t)
        return self.keys, self.values

    def batch_repeat_interleave(self, repeats: int) -> None:
        if self.get_seq_length() > 0 and self._held():
            self.key_buffer = self.key_buffer.repeat_interleave(repeats, dim=0)
            self.value_buffer = self.value_buffer.repeat_interleave(repeats, dim=0)
            self._show(self.keys.shape[-2])
        else:
            super().batch_repeat_interleave(repeats)

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        if self.get_seq_length() > 0 and self._held():
            self.key_buffer, self.value_buffer = self.key_buffer[indices], self.value_buffer[indices]
            self._show(self.keys.shape[-2])
        else:
            super().batch_select_indices(indices)

    def reset(self) -> None:
        self.key_buffer = self.value_buffer = None
        super().reset()


def buffered(cache, room: int):
    """`cache` (a transformers Cache) with each plain `DynamicLayer` replaced by a `BufferedLayer` with `room`
    positions to grow into, holding the same keys and values (copied into its buffer now); other layers, and
    layers already buffered, stay as they are."""
    for i, layer in enumerate(cache.layers):
        if type(layer) is not DynamicLayer:
            continue
        new = BufferedLayer(room)
        if layer.is_initialized and layer.get_seq_length() > 0:
            new.lazy_initialization(layer.keys, layer.values)
            new.keys, new.values = layer.keys, layer.values
            n = layer.get_seq_length()
            new._rebuffer(n + new.room, layer.keys, layer.values)  # copied in now, not at the next step
            new._show(n)
        cache.layers[i] = new
    return cache


def active() -> bool:
    """Whether this thread is within a `buffering` block."""
    return threading.get_ident() in _owners


@contextlib.contextmanager
def buffering() -> Iterator[None]:
    """Within the block, this thread's rollouts (decode.sample_kept) keep their caches in `BufferedLayer`s."""
    owner = threading.get_ident()
    nested = owner in _owners
    _owners.add(owner)
    try:
        yield
    finally:
        if not nested:
            _owners.discard(owner)
