"""Small helpers for the whole package: public names that report their public module, bounded
memos (by key, and by an object's identity), the checks of numeric knobs, and short reprs for
error messages."""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any, Generic, TypeVar

__all__ = [
    "IdentityMemo",
    "Memo",
    "check_count",
    "check_seconds",
    "fixup_module_metadata",
    "short_repr",
    "slot_setter",
]

K = TypeVar("K")
T = TypeVar("T")
V = TypeVar("V")


def slot_setter(cls: type, name: str) -> Callable[[Any, Any], None]:
    """The setter of *cls*'s slot *name*: it writes a frozen attrs instance's field, for code
    that builds one from values already checked, without `__init__` (which runs the validators)
    and faster than `object.__setattr__` by name."""
    slot = cls.__dict__[name]
    assert type(slot).__name__ == "member_descriptor", f"{cls.__name__}.{name} is not a slot"
    setter: Callable[[Any, Any], None] = slot.__set__
    return setter


class Memo(Generic[K, V]):
    """A cache of values cheap enough to compute again: it forgets everything when it holds
    *limit* of them, and an unhashable key is simply never cached."""

    __slots__ = ("_limit", "_values", "lookup")

    def __init__(self, limit: int = 1024) -> None:
        self._limit = limit
        self._values: dict[K, V] = {}
        #: `get` without its guard, for keys known to be hashable (one call less).
        self.lookup: Callable[[K], V | None] = self._values.get

    def __len__(self) -> int:
        return len(self._values)

    def get(self, key: K) -> V | None:
        """The value remembered under *key*, or `None`."""
        try:
            return self._values.get(key)
        except TypeError:  # unhashable
            return None

    def clear(self) -> None:
        """Forget everything."""
        self._values.clear()  # the same dict: `lookup` is bound to it

    def put(self, key: K, value: V) -> V:
        """Remember *value* under *key* (if it is hashable); return *value*."""
        try:
            if len(self._values) >= self._limit:
                self._values.clear()
            self._values[key] = value
        except TypeError:
            pass
        return value


class IdentityMemo(Generic[T, V]):
    """A `Memo` keyed by an object's identity (for objects that are not
    hashable, or whose equality costs more than the value).

    An entry holds its object weakly when the object allows it, and goes when the object does
    (a legacy session's declared capabilities are forgotten with the session, not kept until
    the memo fills); otherwise strongly, so the object's `id` cannot be reused while it is
    remembered."""

    __slots__ = ("_memo",)

    def __init__(self, limit: int = 1024) -> None:
        self._memo: Memo[int, tuple[Any, V]] = Memo(limit)

    def get(self, obj: T) -> V | None:
        """The value remembered for *obj*, or `None`."""
        known = self._memo.lookup(id(obj))
        if known is None:
            return None
        held = known[0]
        return known[1] if (held() if type(held) is _Held else held[0]) is obj else None

    def put(self, obj: T, value: V) -> V:
        """Remember *value* for *obj*; return *value*."""
        key = id(obj)
        held: Any
        try:
            held = _Held(obj, self._forget)
        except TypeError:  # no weak references to it: hold it
            held = (obj,)
        else:
            held.key = key
        self._memo.put(key, (held, value))
        return value

    def _forget(self, held: _Held) -> None:
        """*held*'s object died: forget its entry, unless another has taken its place."""
        values = self._memo._values
        known = values.get(held.key)
        if known is not None and known[0] is held:
            del values[held.key]


class _Held(weakref.ref):  # type: ignore[type-arg]
    """A weak reference that knows its entry's key."""

    __slots__ = ("key",)
    key: int


def fixup_module_metadata(module_name: str, namespace: dict[str, Any]) -> None:
    """Make every public class and function in *namespace* (a package's `globals()`, filtered
    by its `__all__`) report *module_name* as its module, as trio does: a traceback, a repr,
    the docs and pickle then say `mrtr_trio.Complete`, not `mrtr_trio._replay.Complete`.

    Only objects defined inside the package are touched, and only once (the first public name
    an object is exported under wins).
    """
    package = module_name.split(".")[0]
    seen: set[int] = set()

    def fix(obj: Any) -> None:
        if id(obj) in seen:
            return
        seen.add(id(obj))
        module = getattr(obj, "__module__", None)
        if not isinstance(module, str) or not module.startswith(package + "."):
            return
        if module.split(".")[-1].startswith("_"):
            obj.__module__ = module_name
        if isinstance(obj, type):
            for attr in list(vars(obj).values()):
                if callable(attr) and getattr(attr, "__module__", None) == module:
                    attr.__module__ = module_name

    for name in namespace.get("__all__", ()):
        obj = namespace[name]
        if isinstance(obj, type) or callable(obj):
            fix(obj)


def check_seconds(name: str, value: Any, *, zero: bool = False, optional: bool = False) -> Any:
    """*value*, a knob called *name*, as a float of seconds: a real number above zero (at
    least zero with *zero*; `None` passes through with *optional*), else `ValueError` naming
    the knob and the value."""
    if optional and value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not (value >= 0 if zero else value > 0)
    ):
        kind = "non-negative" if zero else "positive"
        alternative = " or None" if optional else ""
        raise ValueError(f"{name} must be a {kind} number of seconds{alternative}, got {value!r}")
    return float(value)


def check_count(name: str, value: Any, minimum: int = 1) -> int:
    """*value*, a knob called *name*: an int of at least *minimum* (not a bool), else
    `ValueError` naming the knob and the value."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}")
    return value


def short_repr(value: object) -> str:
    """*value*'s repr for an error message, cut to 80 characters."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
