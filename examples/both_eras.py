"""One flow, both MCP eras: run the same async-generator handler live and replayed.

    python examples/both_eras.py

Live (a legacy session) keeps the generator suspended between answers; modern (2026-07-28)
returns ``input_required`` with a signed ``requestState`` and replays the handler on each retry.
The script prints each round and checks that both eras end with the same value.
"""

from __future__ import annotations

import secrets
from typing import Any

import trio

from mrtr_trio import (
    Complete,
    Context,
    CreateMessageRequest,
    ElicitRequest,
    Runtime,
    create_message,
    done,
    elicit,
    list_roots,
)

CONFIRM = {
    "type": "object",
    "properties": {"confirm": {"type": "boolean"}},
    "required": ["confirm"],
}


async def deploy(ctx: Context, service: str, env: str = "staging"):
    ok = yield elicit(f"Deploy {service} to {env}?", CONFIRM)
    if not (ok.accepted and ok.content["confirm"]):
        yield done("Cancelled")
    answers = yield {
        "notes": create_message("Summarise the release", max_tokens=200),
        "roots": list_roots(),
    }
    roots = len(answers["roots"].roots)
    yield done(f"Deployed {service} ({roots} roots): {answers['notes'].text}")


def client_answer(key: str, request: Any) -> dict[str, Any]:
    """What a cooperative client would send back."""
    if isinstance(request, ElicitRequest):
        return {"action": "accept", "content": {"confirm": True}}
    if isinstance(request, CreateMessageRequest):
        text = {"type": "text", "text": "3 fixes"}
        return {"role": "assistant", "content": text, "model": "demo"}
    return {"roots": [{"uri": "file:///srv/app", "name": "app"}]}


def describe(request: Any) -> str:
    if isinstance(request, ElicitRequest):
        return f"{request.method} {request.message!r}"
    if isinstance(request, CreateMessageRequest):
        return f"{request.method} {request.messages[0]['content']['text']!r}"
    return request.method


async def main() -> None:
    runtime = Runtime([secrets.token_bytes(32)], replay="strict")
    arguments = {"service": "api", "env": "prod"}

    print("legacy era (live): the generator stays alive, each ask is a real request")

    async def ask(key: str, request: Any) -> Any:
        answer = client_answer(key, request)
        print(f"  server asks {key!r}: {describe(request)}")
        print(f"  client answers {answer}")
        return answer

    live = await runtime.run_live(deploy, arguments, ask)
    print(f"  result: {live!r}\n")

    print("modern era (2026-07-28): each round is a new call; state travels in requestState")
    responses: dict[str, Any] | None = None
    state: str | None = None
    for round_number in range(1, 11):
        outcome = await runtime.advance(
            deploy, arguments, input_responses=responses, request_state=state
        )
        if isinstance(outcome, Complete):
            print(f"  round {round_number}: complete -> {outcome.value!r}")
            break
        assert outcome.request_state is not None
        print(
            f"  round {round_number}: input_required, requestState "
            f"{len(outcome.request_state)} chars"
        )
        for key, request in outcome.input_requests.items():
            print(f"    asks {key!r}: {describe(request)}")
        responses = {k: client_answer(k, r) for k, r in outcome.input_requests.items()}
        state = outcome.request_state
    else:
        raise SystemExit("the flow did not finish within 10 rounds")

    assert outcome.value == live, (outcome.value, live)
    print("\nboth eras agree.")


if __name__ == "__main__":
    trio.run(main)
