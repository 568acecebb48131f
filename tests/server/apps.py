"""The App the interop tests serve (in-process, over stdio and over HTTP).

Run as a server: ``mrtr-trio serve tests/server/apps.py:app [--http HOST:PORT]``.
"""

from __future__ import annotations

import os
import secrets
from typing import Any

import trio

from mrtr_trio import (
    Context,
    Runtime,
    accepted_content,
    create_message,
    done,
    elicit,
    input_required,
    list_roots,
    step,
)
from mrtr_trio.mcp import App

CONFIRM = {
    "type": "object",
    "properties": {"confirm": {"type": "boolean"}},
    "required": ["confirm"],
}
NAME = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}

#: The signing key; a served copy takes it from MRTR_TEST_KEY (hex), so restarts can share it.
KEY = (
    bytes.fromhex(os.environ["MRTR_TEST_KEY"])
    if "MRTR_TEST_KEY" in os.environ
    else secrets.token_bytes(32)
)
app = App("interop", version="1.0", runtime=Runtime([KEY]))

#: Accounting for the in-process tests: generators started and finally blocks run, by task.
STARTED: list[str] = []
FINALISED: list[str] = []
RELEASE = trio.Event()
ALL_CLOSED = trio.Event()


def reset_accounting() -> None:
    global ALL_CLOSED
    STARTED.clear()
    FINALISED.clear()
    ALL_CLOSED = trio.Event()


async def all_closed() -> None:
    """Wait until every generator of ``tracked`` that started has run its finally block."""
    await ALL_CLOSED.wait()


@app.tool()
async def deploy(ctx: Context, service: str, env: str = "staging"):
    """Deploy after a confirmation, with notes and the client's roots."""
    ok = yield elicit(f"Deploy {service} to {env}?", CONFIRM)
    if not (ok.accepted and ok.content["confirm"]):
        yield done("Cancelled")
    answers = yield {
        "notes": create_message("Summarise the release", max_tokens=50),
        "roots": list_roots(),
    }
    roots = len(answers["roots"].roots)
    yield done(f"Deployed {service} to {env} ({roots} roots): {answers['notes'].text}")


@app.tool()
async def confirm_return_style(ctx: Context, action: str) -> Any:
    """Return style: ask, then get called again with the answer."""
    if ctx.input_responses is None:
        state = await ctx.mint_request_state({"action": action})
        return input_required({"confirm": elicit(f"Really {action}?", CONFIRM)}, state)
    content = accepted_content(ctx.input_responses, "confirm")
    return f"{ctx.request_state()['action']}: {'yes' if content and content['confirm'] else 'no'}"


@app.tool()
async def needs_sampling(ctx: Context):
    """Asks the client's LLM."""
    reply = yield create_message("Hi", max_tokens=5)
    yield done(reply.text)


@app.tool()
async def fails_after_asking(ctx: Context):
    """Asks, then fails."""
    yield elicit("Name?", NAME)
    raise ValueError("the handler gave up")


@app.tool()
async def counts(ctx: Context, count: int, label: str = "n"):
    """Validated arguments: count must be an integer."""
    yield done(f"{label}={count * 2}")


@app.tool()
async def tracked(ctx: Context, tag: str):
    """Asks, then waits on a step until released; records the task that runs its finally
    block (the runtime's aclose, not a garbage-collection finalizer, must run it)."""
    task = trio.lowlevel.current_task()
    STARTED.append(f"{tag}@{id(task)}")
    try:
        yield elicit(f"Proceed with {tag}?", CONFIRM)
        yield step(_wait_for_release)
        yield done(f"{tag} done")
    finally:
        FINALISED.append(f"{tag}@{id(trio.lowlevel.current_task())}")
        if len(FINALISED) == len(STARTED):
            ALL_CLOSED.set()


async def _wait_for_release() -> None:
    await RELEASE.wait()


@app.tool()
async def only_steps(ctx: Context, n: int):
    """No asks at all: works even without a back channel."""
    doubled = yield step(lambda: n * 2)
    yield done(f"doubled={doubled}")


@app.prompt()
async def greeting(ctx: Context, tone: str = "warm"):
    """A prompt that asks for a name first."""
    answer = yield elicit("Whom should I greet?", NAME)
    yield done(f"Write a {tone} greeting for {answer.content['name']}.")


@app.prompt()
async def failing_prompt(ctx: Context):
    """A prompt whose flow fails."""
    yield elicit("Name?", NAME)
    raise RuntimeError("prompt flow failed")


@app.resource("interop://report/{name}", mime_type="text/plain")
async def report(ctx: Context, name: str):
    """A resource that asks before it answers."""
    ok = yield elicit(f"Share report {name}?", CONFIRM)
    yield done(f"report {name}: {'shared' if ok.accepted else 'withheld'}")


@app.tool()
async def marks_its_end(ctx: Context, path: str):
    """Asks, and writes "closed" to *path* when its generator is closed (for subprocess
    servers, whose finally blocks a test cannot see)."""
    try:
        answer = yield elicit("Name?", NAME)
        yield done(f"hello {answer.content['name']}")
    finally:
        with open(path, "w") as marker:  # noqa: ASYNC230 - a tiny write in a finally block
            marker.write("closed")


@app.tool()
async def stray_output(ctx: Context):
    """Prints to stdout and reads stdin, as careless handler code might (for the stdio tests:
    neither may touch the wire)."""
    print("stray print")
    os.write(1, b"stray write\n")
    seen = os.read(0, 100)
    yield done(f"stdin gave {seen!r}")


@app.tool()
async def echo_name(ctx: Context):
    """Asks for a name and says it back."""
    answer = yield elicit("Name?", NAME)
    yield done(f"hello {answer.content['name']}" if answer.accepted else answer.action)


@app.tool()
async def echo_roots(ctx: Context):
    """Asks for the client's roots and lists their URIs."""
    answer = yield list_roots()
    yield done(",".join(root.uri for root in answer.roots))


@app.tool()
async def waits_then_marks(ctx: Context, path: str):
    """Sleeps a minute in a step, and writes "closed" to *path* when its generator is closed."""
    try:
        yield step(trio.sleep, 60)
        yield done("slept")
    finally:
        with open(path, "w") as marker:  # noqa: ASYNC230 - a tiny write in a finally block
            marker.write("closed")


async def _env_delay() -> str:
    await trio.sleep(float(os.environ.get("MRTR_TEST_STEP_DELAY", "0")))
    return str(os.getpid())


@app.tool()
async def confirm_then_work(ctx: Context, job: str):
    """Asks, then works in a step that takes MRTR_TEST_STEP_DELAY seconds in this process."""
    ok = yield elicit(f"Run {job}?", CONFIRM)
    worker = yield step(_env_delay)
    yield done(f"{job}: {'ran' if ok.accepted and ok.content['confirm'] else 'skipped'} ({worker})")
