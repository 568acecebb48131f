"""Example flows the tests run in both eras, with answer functions for them."""

from __future__ import annotations

from typing import Any

from mrtr_trio import (
    Context,
    CreateMessageRequest,
    ElicitRequest,
    ListRootsRequest,
    accepted_content,
    create_message,
    done,
    elicit,
    input_required,
    list_roots,
    pause,
    step,
)

CONFIRM = {
    "type": "object",
    "properties": {"confirm": {"type": "boolean"}},
    "required": ["confirm"],
}
NAME = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
COLOR = {
    "type": "object",
    "properties": {"color": {"type": "string", "enum": ["red", "green", "blue"]}},
    "required": ["color"],
}
SIZE = {
    "type": "object",
    "properties": {"size": {"type": "integer", "minimum": 1, "maximum": 10}},
    "required": ["size"],
}


# ------------------------------------------------------------------------------ yield style


async def single_ask(ctx: Context, who: str = "world"):
    name = yield elicit(f"What is your name, {who}?", NAME)
    yield done(f"Hello, {name.content['name']}!" if name.accepted else "Hello, stranger!")


async def batch_of_three(ctx: Context):
    answers = yield {
        "user": elicit("Your name?", NAME),
        "capital": create_message("What is the capital of France?", max_tokens=100),
        "roots": list_roots(),
    }
    name = answers["user"].content["name"] if answers["user"].accepted else "?"
    roots = ",".join(r.uri for r in answers["roots"].roots)
    yield done(f"{name}|{answers['capital'].text}|{roots}")


async def wizard(ctx: Context, title: str):
    name = yield elicit(f"{title}: step 1, your name", NAME)
    color = yield elicit(f"{title}: step 2, {name.content['name']}, pick a color", COLOR)
    size = yield elicit(f"{title}: step 3, a size for {color.content['color']}", SIZE)
    yield done(
        {
            "name": name.content["name"],
            "color": color.content["color"],
            "size": size.content["size"],
        }
    )


async def decline_or_cancel(ctx: Context):
    answer = yield elicit("Proceed?", CONFIRM)
    if answer.action == "decline":
        again = yield elicit("Sure? Last chance.", CONFIRM)
        yield done(f"declined, then {again.action}")
    if answer.action == "cancel":
        yield done("cancelled")
    yield done(f"accepted confirm={answer.content['confirm']}")


STEP_CALLS: list[str] = []


def mint_ticket(prefix: str) -> str:
    STEP_CALLS.append(prefix)
    return f"{prefix}-{len(STEP_CALLS)}"


async def with_step(ctx: Context):
    ticket = yield step(mint_ticket, "T")
    ok = yield elicit(f"File ticket {ticket}?", CONFIRM)
    yield done(f"{ticket} filed={ok.accepted and ok.content['confirm']}")


async def with_pause(ctx: Context, n: int = 2):
    total = 0
    for i in range(n):
        yield pause()
        total += i + 1
    ok = yield elicit(f"Total is {total}. Keep?", CONFIRM)
    yield done(total if ok.accepted else None)


# ----------------------------------------------------------------------------- return style


async def return_confirm(ctx: Context, action: str = "deploy"):
    if ctx.input_responses is None:
        return input_required({"confirm": elicit(f"Really {action}?", CONFIRM)})
    content = accepted_content(ctx.input_responses, "confirm")
    return f"{action}: {'yes' if content and content['confirm'] else 'no'}"


async def return_chunked_sum(ctx: Context, numbers: list[int], chunk: int = 2):
    """State-only rounds: add *chunk* numbers per round, carrying the partial sum."""
    state = ctx.request_state() or {"index": 0, "total": 0}
    index, total = state["index"], state["total"]
    total += sum(numbers[index : index + chunk])
    index += chunk
    if index >= len(numbers):
        return total
    return input_required(
        request_state=await ctx.mint_request_state({"index": index, "total": total})
    )


# --------------------------------------------------------------------------------- answers


def happy_answer(key: str, request: Any) -> dict[str, Any]:
    """A cooperative client: accepts forms with plausible content."""
    if isinstance(request, ElicitRequest):
        if request.url is not None:
            return {"action": "accept"}
        content: dict[str, Any] = {}
        for name, prop in request.schema["properties"].items():
            content[name] = _plausible(prop, name)
        return {"action": "accept", "content": content}
    if isinstance(request, CreateMessageRequest):
        return {
            "role": "assistant",
            "content": {"type": "text", "text": "Paris"},
            "model": "test-model",
            "stopReason": "endTurn",
        }
    assert isinstance(request, ListRootsRequest)
    return {"roots": [{"uri": "file:///work", "name": "work"}, {"uri": "file:///tmp"}]}


def _plausible(prop: dict[str, Any], name: str) -> Any:
    if "enum" in prop:
        return prop["enum"][-1]
    kind = prop["type"]
    if kind == "boolean":
        return True
    if kind in ("integer", "number"):
        return prop.get("minimum", 0) + 1
    if kind == "array":
        return [prop["items"]["enum"][0]]
    return f"{name}-value"


def action_answer(*actions: str):
    """Answer elicitations with *actions* in turn (accept with plausible content)."""
    queue = list(actions)

    def answer(key: str, request: Any) -> dict[str, Any]:
        action = queue.pop(0)
        if action == "accept":
            return happy_answer(key, request)
        return {"action": action}

    return answer
