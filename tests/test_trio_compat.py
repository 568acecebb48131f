"""mrtr_trio._trio_compat reads trio's private `Task._cancel_status`: these tests fail loudly,
naming the module to update, when a trio release changes it."""

from __future__ import annotations

import trio
import trio.lowlevel

from mrtr_trio._trio_compat import OFF_TRIO, current_task, scope_marks

UPDATE = (
    f"trio {trio.__version__} changed what mrtr_trio._trio_compat.scope_marks reads "
    "(Task._cancel_status): update that module, or the drive loop's scope guard sees nothing"
)


def test_trio_tasks_still_have_the_private_cancel_status() -> None:
    async def main() -> None:
        task = trio.lowlevel.current_task()
        assert hasattr(task, "_cancel_status"), UPDATE
        assert scope_marks(task) is not None, UPDATE

    trio.run(main)


def test_the_scope_marks_change_exactly_when_a_scope_or_nursery_is_entered() -> None:
    async def main() -> None:
        task = current_task()
        outside = scope_marks(task)
        with trio.CancelScope():  # noqa: ASYNC100 - entering it is what is measured
            assert scope_marks(task) is not outside, UPDATE
        assert scope_marks(task) is outside, UPDATE
        async with trio.open_nursery():
            assert scope_marks(task) is not outside, UPDATE
        assert scope_marks(task) is outside, UPDATE
        await trio.lowlevel.checkpoint()  # a checkpoint alone changes nothing
        assert scope_marks(task) is outside, UPDATE

    trio.run(main)


def test_outside_trio_the_task_is_a_stand_in_without_scopes() -> None:
    assert current_task() is OFF_TRIO
    assert scope_marks(OFF_TRIO) is None
