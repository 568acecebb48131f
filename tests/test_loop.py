"""mrtr_trio._loop, the seam between the drivers and the event loop: which loop a caller gets,
and the private state it reads to see a task enter a cancel scope (trio's
`Task._cancel_status`, anyio's record of an asyncio task's cancel scopes). The scope-mark tests
fail loudly, naming the module to update, when a trio or anyio release changes what they read."""

from __future__ import annotations

import asyncio

import anyio
import anyio.lowlevel
import trio
import trio.lowlevel

from mrtr_trio._loop import ANYIO, NO_LOOP, OFF_LOOP, TRIO, current_loop, scope_marks

UPDATE_TRIO = (
    f"trio {trio.__version__} changed what mrtr_trio._loop.scope_marks reads "
    "(Task._cancel_status): update that module, or the drive loop's scope guard sees nothing"
)
UPDATE_ANYIO = (
    f"anyio {anyio.__version__ if hasattr(anyio, '__version__') else ''} changed what "
    "mrtr_trio._loop reads on asyncio (anyio._backends._asyncio._task_states[task]"
    ".cancel_scope): update that module, or the drive loop's scope guard sees nothing"
)


def test_trio_tasks_still_have_the_private_cancel_status() -> None:
    async def main() -> None:
        task = trio.lowlevel.current_task()
        assert hasattr(task, "_cancel_status"), UPDATE_TRIO
        assert scope_marks(task) is not None, UPDATE_TRIO

    trio.run(main)


def test_the_scope_marks_change_exactly_when_a_scope_or_nursery_is_entered() -> None:
    async def main() -> None:
        assert current_loop() is TRIO
        task = TRIO.current_task()
        outside = scope_marks(task)
        with trio.CancelScope():  # noqa: ASYNC100 - entering it is what is measured
            assert scope_marks(task) is not outside, UPDATE_TRIO
        assert scope_marks(task) is outside, UPDATE_TRIO
        async with trio.open_nursery():
            assert scope_marks(task) is not outside, UPDATE_TRIO
        assert scope_marks(task) is outside, UPDATE_TRIO
        await trio.lowlevel.checkpoint()  # a checkpoint alone changes nothing
        assert scope_marks(task) is outside, UPDATE_TRIO

    trio.run(main)


def test_anyio_on_trio_is_trio() -> None:
    async def main() -> None:
        assert current_loop() is TRIO

    anyio.run(main, backend="trio")


def test_on_asyncio_the_marks_are_anyios_cancel_scopes() -> None:
    async def main() -> None:
        assert current_loop() is ANYIO
        task = ANYIO.current_task()
        outside = scope_marks(task)
        with anyio.CancelScope() as scope:  # noqa: ASYNC100 - entering it is what is measured
            assert scope_marks(task) is scope, UPDATE_ANYIO
            with anyio.move_on_after(10) as inner:  # noqa: ASYNC100
                assert scope_marks(task) is inner, UPDATE_ANYIO
            assert scope_marks(task) is scope, UPDATE_ANYIO
        assert scope_marks(task) is outside, UPDATE_ANYIO
        async with anyio.create_task_group():
            assert scope_marks(task) is not outside, UPDATE_ANYIO
        assert scope_marks(task) is outside, UPDATE_ANYIO
        await anyio.lowlevel.checkpoint()  # a checkpoint alone changes nothing
        assert scope_marks(task) is outside, UPDATE_ANYIO

    asyncio.run(main())


def test_asyncio_run_directly_and_through_anyio_both_get_anyio() -> None:
    async def main() -> None:
        assert current_loop() is ANYIO
        assert scope_marks(ANYIO.current_task()) is None  # no anyio scope entered yet

    asyncio.run(main())
    anyio.run(main, backend="asyncio")


def test_outside_any_loop_the_task_is_a_stand_in_without_scopes() -> None:
    assert current_loop() is NO_LOOP
    assert NO_LOOP.current_task() is OFF_LOOP
    assert scope_marks(OFF_LOOP) is None
