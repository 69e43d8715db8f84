"""What a model's output dataclass answers besides its attributes: HF's ``ModelOutput`` access, so that code written for
transformers' models (``transformers.Trainer``, accelerate scripts, plain loops reading ``outputs[0]`` or
``outputs["logits"]``) runs on litebert's.

As HF's ``ModelOutput`` (transformers/utils/generic.py), the fields that are None do not count: ``out[0]`` is the
first field that is set (the loss when labels were given, else the logits), ``out["loss"]`` is a KeyError when no loss
was computed, and ``to_tuple()``, ``keys()``, ``values()`` and ``items()`` list the set fields in declaration order.
Unlike HF's, the outputs stay plain dataclasses (not dicts): attribute access, ``dataclasses.replace`` and torch's
handling of dataclass outputs (DDP, compile) are unchanged.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Iterator


class ModelOutputAccess:
    """Mixed into a ``@dataclass`` of model outputs: HF ``ModelOutput``'s index and key access (module docstring)."""

    def keys(self) -> list[str]:
        """The names of the fields that are set, in declaration order."""
        return [f.name for f in dataclasses.fields(self) if getattr(self, f.name) is not None]

    def values(self) -> list[Any]:
        return [getattr(self, k) for k in self.keys()]

    def items(self) -> list[tuple[str, Any]]:
        return [(k, getattr(self, k)) for k in self.keys()]

    def to_tuple(self) -> tuple:
        """The set fields' values, in order (HF's ``ModelOutput.to_tuple``)."""
        return tuple(self.values())

    def get(self, key: str, default: Any = None) -> Any:
        return getattr(self, key) if key in self.keys() else default

    def __getitem__(self, key: int | slice | str) -> Any:
        if isinstance(key, str):
            if key not in self.keys():  # a field left None is absent, as in HF's
                raise KeyError(key)
            return getattr(self, key)
        return self.to_tuple()[key]

    def __contains__(self, key: object) -> bool:
        return key in self.keys()

    def __iter__(self) -> Iterator[str]:  # as a dict's (HF's ModelOutput is an OrderedDict): the set fields' names
        return iter(self.keys())

    def __len__(self) -> int:
        return len(self.keys())
