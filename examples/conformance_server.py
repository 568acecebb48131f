"""The fixtures the official MCP conformance suite calls, written once with mrtr_trio.

Every interactive fixture is an ordinary mrtr_trio handler: on a 2025-era session it asks the
client live; on a 2026-07-28 request the same code returns ``input_required`` and is replayed
from its signed ``requestState``. Serve it with::

    mrtr-trio serve examples/conformance_server.py:app --http 127.0.0.1:3001

and point ``conformance server --url http://127.0.0.1:3001/mcp`` at it.
"""

from __future__ import annotations

import json
import os
import secrets
from typing import Any

import mcp_types as types
import trio

from mrtr_trio import Context, Runtime, create_message, done, elicit, list_roots, step
from mrtr_trio.mcp import App, background

KEY = bytes.fromhex(os.environ["MRTR_TRIO_KEY"]) if "MRTR_TRIO_KEY" in os.environ else None
app = App(
    "mrtr-trio-conformance",
    version="0.1.0",
    runtime=Runtime([KEY or secrets.token_bytes(32)]),
    instructions="Fixtures for the MCP conformance suite, served by mrtr_trio.",
)

PNG_1X1 = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5E"
    "rkJggg=="
)
WAV = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="


def text_schema(*names: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {name: {"type": "string"} for name in names},
        "required": list(names),
    }


# ----------------------------------------------------------------------- content tools


@app.tool()
async def test_simple_text(ctx: Context) -> str:
    """Returns a simple text block."""
    return "This is a simple text response for testing."


@app.tool()
async def test_image_content(ctx: Context) -> list[dict[str, Any]]:
    """Returns an image block."""
    return [{"type": "image", "data": PNG_1X1, "mimeType": "image/png"}]


@app.tool()
async def test_audio_content(ctx: Context) -> list[dict[str, Any]]:
    """Returns an audio block."""
    return [{"type": "audio", "data": WAV, "mimeType": "audio/wav"}]


@app.tool()
async def test_embedded_resource(ctx: Context) -> list[dict[str, Any]]:
    """Returns an embedded resource."""
    resource = {
        "uri": "test://embedded-resource",
        "mimeType": "text/plain",
        "text": "This is an embedded resource content.",
    }
    return [{"type": "resource", "resource": resource}]


@app.tool()
async def test_multiple_content_types(ctx: Context) -> list[dict[str, Any]]:
    """Returns text, an image and an embedded resource."""
    resource = {
        "uri": "test://mixed-content-resource",
        "mimeType": "application/json",
        "text": json.dumps({"test": "data", "value": 123}),
    }
    return [
        {"type": "text", "text": "Multiple content types test:"},
        {"type": "image", "data": PNG_1X1, "mimeType": "image/png"},
        {"type": "resource", "resource": resource},
    ]


@app.tool()
async def test_error_handling(ctx: Context) -> str:
    """Always fails: a tool execution error."""
    raise RuntimeError("This tool intentionally returns an error for testing")


@app.tool()
async def test_tool_with_progress(ctx: Context) -> str:
    """Reports progress three times, then finishes."""
    for percent in (0, 50, 100):
        await ctx.report_progress(percent, 100, f"Completed step {percent} of 100")
    return "Progress reported."


async def logs_three_times(ctx: Context) -> str:
    """Sends three log messages (modern clients get them only if they asked for logs)."""
    for message in ("Tool execution started", "Tool processing data", "Tool execution completed"):
        await ctx.log("info", message, logger="conformance")
    return "Tool with logging executed successfully"


app.tool(name="test_tool_with_logging")(logs_three_times)
app.tool(name="test_logging_tool")(logs_three_times)


# ------------------------------------------------------------------- interactive tools


@app.tool()
async def test_sampling(ctx: Context, prompt: str):
    """Asks the client's LLM to answer the prompt."""
    reply = yield create_message(prompt, max_tokens=100)
    yield done(f"LLM response: {reply.text}")


@app.tool()
async def test_elicitation(ctx: Context, message: str):
    """Asks the user for a username and an email address."""
    schema = {
        "type": "object",
        "properties": {
            "username": {"type": "string", "description": "Your username"},
            "email": {"type": "string", "format": "email", "description": "Your email"},
        },
        "required": ["username", "email"],
    }
    answer = yield elicit(message, schema)
    yield done(f"User response: action={answer.action}, content={json.dumps(answer.content)}")


@app.tool()
async def test_elicitation_sep1034_defaults(ctx: Context):
    """Asks with a form whose fields all have defaults (SEP-1034)."""
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "default": "John Doe", "description": "User name"},
            "age": {"type": "integer", "default": 30, "description": "User age"},
            "score": {"type": "number", "default": 95.5, "description": "User score"},
            "status": {
                "type": "string",
                "enum": ["active", "inactive", "pending"],
                "default": "active",
                "description": "User status",
            },
            "verified": {"type": "boolean", "default": True, "description": "Verified user"},
        },
    }
    answer = yield elicit("Please provide user information", schema)
    yield done(f"Elicitation result: action={answer.action}, content={json.dumps(answer.content)}")


@app.tool()
async def test_elicitation_sep1330_enums(ctx: Context):
    """Asks with all five enum forms (SEP-1330)."""
    options = ["option1", "option2", "option3"]
    titled = [{"const": f"value{i}", "title": f"Value {i}"} for i in (1, 2, 3)]
    schema = {
        "type": "object",
        "properties": {
            "untitledSingle": {"type": "string", "enum": options},
            "titledSingle": {"type": "string", "oneOf": titled},
            "legacyEnum": {
                "type": "string",
                "enum": ["opt1", "opt2", "opt3"],
                "enumNames": ["Option One", "Option Two", "Option Three"],
            },
            "untitledMulti": {"type": "array", "items": {"type": "string", "enum": options}},
            "titledMulti": {"type": "array", "items": {"anyOf": titled}},
        },
        "required": [
            "untitledSingle",
            "titledSingle",
            "legacyEnum",
            "untitledMulti",
            "titledMulti",
        ],
    }
    answer = yield elicit("Please select values using different enum schema types", schema)
    yield done(
        f"Elicitation completed: action={answer.action}, content={json.dumps(answer.content)}"
    )


@app.tool()
async def test_missing_capability(ctx: Context):
    """Needs the client's sampling capability."""
    reply = yield create_message("Say hello", max_tokens=20)
    yield done(f"Client declared sampling capability; the model said: {reply.text}")


@app.tool()
async def test_streaming_elicitation(ctx: Context):
    """Asks for a name; on 2026-07-28 this is an input_required result, never a request."""
    answer = yield elicit("What is your name?", text_schema("name"))
    yield done(f"Hello, {answer.content['name'] if answer.accepted else 'stranger'}!")


# --------------------------------------------------------------- SEP-2322 MRTR fixtures

NAME = text_schema("name")


@app.tool()
async def test_input_required_result_elicitation(ctx: Context):
    """Asks for the user's name (key user_name)."""
    answers = yield {"user_name": elicit("What is your name?", NAME)}
    answer = answers["user_name"]
    yield done(f"Hello, {answer.content['name'] if answer.accepted else 'stranger'}!")


@app.tool()
async def test_input_required_result_sampling(ctx: Context):
    """Asks the client's LLM a question."""
    answers = yield {
        "capital_question": create_message("What is the capital of France?", max_tokens=100)
    }
    yield done(f"Model said: {answers['capital_question'].text}")


@app.tool()
async def test_input_required_result_list_roots(ctx: Context):
    """Asks for the client's roots."""
    answers = yield {"client_roots": list_roots()}
    yield done(f"Client exposed {len(answers['client_roots'].roots)} root(s).")


CONFIRM = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}


@app.tool()
async def test_input_required_result_request_state(ctx: Context):
    """Asks for a confirmation; the flow travels in requestState."""
    answers = yield {"confirm": elicit("Please confirm", CONFIRM)}
    yield done(f"state-ok: confirmation {answers['confirm'].action}")


@app.tool()
async def test_input_required_result_multiple_inputs(ctx: Context):
    """Asks for a name, a greeting and the roots in one round."""
    answers = yield {
        "user_name": elicit("What is your name?", NAME),
        "greeting": create_message("Generate a greeting", max_tokens=50),
        "client_roots": list_roots(),
    }
    name = answers["user_name"].content["name"] if answers["user_name"].accepted else "?"
    roots = len(answers["client_roots"].roots)
    yield done(f"All inputs received: {name}, {answers['greeting'].text!r}, {roots} root(s).")


@app.tool()
async def test_input_required_result_multi_round(ctx: Context):
    """Asks for a name, then a favourite colour: two rounds."""
    first = yield {"step1": elicit("Step 1: What is your name?", NAME)}
    name = first["step1"].content["name"] if first["step1"].accepted else "Someone"
    second = yield {
        "step2": elicit(f"Step 2: {name}, what is your favorite color?", text_schema("color"))
    }
    color = second["step2"].content["color"] if second["step2"].accepted else "no colour"
    yield done(f"{name} likes {color}.")


@app.tool()
async def test_input_required_result_tampered_state(ctx: Context):
    """Asks for a confirmation; a tampered requestState is rejected."""
    answers = yield {"confirm": elicit("Please confirm", CONFIRM)}
    yield done(f"state-ok: {answers['confirm'].action}")


@app.tool()
async def test_input_required_result_capabilities(ctx: Context):
    """Asks only for what the client declared it can do."""
    asks: dict[str, Any] = {}
    if "sampling" in ctx.client_capabilities:
        asks["sample"] = create_message("Say hello", max_tokens=50)
    if "elicitation" in ctx.client_capabilities:
        asks["ask"] = elicit("What is your name?", NAME)
    if "roots" in ctx.client_capabilities:
        asks["roots"] = list_roots()
    if not asks:
        yield done("The client declared no capability to ask with.")
    answers = yield asks
    yield done(f"Received {', '.join(sorted(answers))}.")


@app.prompt()
async def test_input_required_result_prompt(ctx: Context):
    """A prompt that first asks the user for context."""
    answers = yield {
        "user_context": elicit("What context should the prompt use?", text_schema("context"))
    }
    answer = answers["user_context"]
    context = answer.content["context"] if answer.accepted else "none"
    yield done(f"Use the following context: {context}")


# ------------------------------------------------ tasks extension fixtures (SEP-2663)
#
# The same kind of handler again: it runs live in the background once it yields
# background(), and its later asks become the task's inputRequests.


@app.tool()
async def greet(ctx: Context, name: str) -> str:
    """Greets synchronously; never a task."""
    return f"Hello, {name}!"


@app.tool(task="optional")
async def slow_compute(ctx: Context, seconds: int, label: str):
    """Sleeps for the given seconds, in the background when the client supports tasks."""
    if seconds > 0:
        yield background()
        yield step(trio.sleep, seconds)
    yield done(f"{label}: computed after {seconds} s")


@app.tool(task="required")
async def failing_job(ctx: Context):
    """A task whose tool fails: it ends completed, with isError."""
    yield background()
    yield step(trio.sleep, 0.2)
    raise RuntimeError("the job failed (a tool error, not a protocol error)")


@app.tool(task="required")
async def protocol_error_job(ctx: Context):
    """A task that ends failed: it needs the roots capability, which a client declaring only
    elicitation and sampling lacks (-32021, a protocol error)."""
    yield background()
    roots = yield list_roots()
    yield done(f"{len(roots.roots)} roots")


CONFIRM_DELETE = {
    "type": "object",
    "properties": {"confirm": {"type": "boolean"}},
    "required": ["confirm"],
}


@app.tool(task="required")
async def confirm_delete(ctx: Context, filename: str):
    """Asks, inside its task, whether to delete the file."""
    yield background()
    answer = yield elicit(f"Delete {filename}?", CONFIRM_DELETE)
    confirmed = answer.accepted and answer.content["confirm"]
    yield done(f"{filename}: {'deleted' if confirmed else 'kept'}")


@app.tool(task="required")
async def multi_input(ctx: Context):
    """Asks two questions at once inside its task."""
    yield background()
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "confirm": {"type": "boolean"}},
        "required": ["name"],
    }
    answers = yield {
        "first": elicit("First input?", schema),
        "second": elicit("Second input?", schema),
    }
    names = [a.content["name"] if a.accepted else "-" for a in answers.values()]
    yield done(f"Received {', '.join(names)}")


@app.tool(task="required")
async def test_tool_with_task(ctx: Context):
    """Asks for a name before the task exists (MRTR), then greets from the task."""
    answers = yield {"user_name": elicit("What is your name?", NAME)}
    answer = answers["user_name"]
    name = answer.content["name"] if answer.accepted else "stranger"
    yield background()
    yield step(trio.sleep, 0.2)
    yield done(f"Hello from the task, {name}!")


# ------------------------------------------- JSON Schema 2020-12 and SEP-2243 fixtures

JSON_SCHEMA_2020_12 = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}


@app.tool(input_schema=JSON_SCHEMA_2020_12)
async def json_schema_2020_12_tool(
    ctx: Context,
    name: str | None = None,
    address: dict[str, str] | None = None,
    contactMethod: str | None = None,
    phone: str | None = None,
    email: str | None = None,
) -> str:
    """Advertises a JSON Schema 2020-12 input schema verbatim."""
    return f"contact {name or 'someone'} by {contactMethod or 'any means'}"


@app.tool(headers={"region": "Region"})
async def test_x_mcp_header(ctx: Context, region: str = "<none>") -> str:
    """Its region argument travels in the Mcp-Param-Region header too."""
    return f"region={region}"


# ------------------------------------------------------------------------------ prompts


@app.prompt()
async def test_simple_prompt(ctx: Context) -> str:
    """A simple prompt without arguments."""
    return "This is a simple prompt for testing."


@app.prompt()
async def test_prompt_with_arguments(ctx: Context, arg1: str, arg2: str) -> str:
    """A prompt with two required arguments."""
    return f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"


@app.prompt()
async def test_prompt_with_embedded_resource(ctx: Context, resourceUri: str) -> list[Any]:
    """A prompt that embeds a resource."""
    resource = {
        "uri": resourceUri,
        "mimeType": "text/plain",
        "text": "Embedded resource content for testing.",
    }
    return [
        {"role": "user", "content": {"type": "resource", "resource": resource}},
        {
            "role": "user",
            "content": {"type": "text", "text": "Please process the embedded resource above."},
        },
    ]


@app.prompt()
async def test_prompt_with_image(ctx: Context) -> list[Any]:
    """A prompt with an image."""
    return [
        {"role": "user", "content": {"type": "image", "data": PNG_1X1, "mimeType": "image/png"}},
        {"role": "user", "content": {"type": "text", "text": "Please analyze the image above."}},
    ]


# ---------------------------------------------------------------------------- resources


@app.resource("test://static-text", name="static_text_resource", mime_type="text/plain")
async def static_text(ctx: Context) -> str:
    """A static text resource."""
    return "This is the content of the static text resource."


@app.resource("test://static-binary", name="static_binary_resource", mime_type="image/png")
async def static_binary(ctx: Context) -> bytes:
    """A static binary resource (a 1x1 PNG)."""
    import base64

    return base64.b64decode(PNG_1X1)


@app.resource("test://watched-resource", name="watched_resource", mime_type="text/plain")
async def watched(ctx: Context) -> str:
    """A resource clients may subscribe to."""
    return "Watched resource content"


@app.resource("test://template/{id}/data", name="template_resource", mime_type="application/json")
async def template(ctx: Context, id: str) -> str:
    """A templated resource."""
    return json.dumps({"id": id, "templateTest": True, "data": f"Data for ID: {id}"})


# ------------------------------------------------- legacy utilities, on the SDK server


async def _complete(ctx: Any, params: types.CompleteRequestParams) -> types.CompleteResult:
    return types.CompleteResult(completion=types.Completion(values=[], total=0, has_more=False))


async def _empty(ctx: Any, params: Any) -> types.EmptyResult:
    return types.EmptyResult()


app.server.add_request_handler("completion/complete", types.CompleteRequestParams, _complete)
app.server.add_request_handler("logging/setLevel", types.SetLevelRequestParams, _empty)
app.server.add_request_handler("resources/subscribe", types.SubscribeRequestParams, _empty)
app.server.add_request_handler("resources/unsubscribe", types.UnsubscribeRequestParams, _empty)


if __name__ == "__main__":
    import sys

    port = int(sys.argv[1]) if len(sys.argv) > 1 else 3001
    app.run("http", "127.0.0.1", port)
