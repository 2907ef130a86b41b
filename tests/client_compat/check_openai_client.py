"""The official `openai` Python SDK against docchat's compatible API (/compat_api/v1):
models.list, chat completions plain and streamed, responses plain and streamed, background
responses (created, streamed, resumed with starting_after, retrieved, cancelled), and the
errors it raises for an unknown model and an unknown response. docchat must serve the model `scripted` backed by
scripted_upstream.py (answer ANSWER, usage 11 + 7 tokens).

With --local-model NAME it also asks that local model (the built-in one scripts/run.sh
fetches) the newcomer's first question through the SDK and wants Paris in the answer.

Usage: check_openai_client.py <base_url> <api_key> [--local-model NAME]
"""

import sys
import traceback

import openai

ANSWER = "Paris is the capital of France."
BASE, KEY = sys.argv[1].rstrip("/"), sys.argv[2]
LOCAL = sys.argv[sys.argv.index("--local-model") + 1] if "--local-model" in sys.argv else None
client = openai.OpenAI(base_url=f"{BASE}/compat_api/v1", api_key=KEY, max_retries=0)
results = []


def check(name):
    def wrap(fn):
        try:
            fn()
            results.append((name, None))
            print(f"PASS {name}")
        except Exception:  # noqa: BLE001 - report every failure, keep going
            results.append((name, traceback.format_exc()))
            print(f"FAIL {name}\n{traceback.format_exc()}")
        return fn

    return wrap


MESSAGES = [
    {"role": "developer", "content": "Answer in one sentence."},
    {"role": "user", "content": "What is the capital of France?"},
]


@check("models.list: the list wrapper, ids, base_model extension")
def _():
    models = client.models.list()
    ids = [m.id for m in models.data]
    assert "scripted" in ids, ids
    scripted = next(m for m in models.data if m.id == "scripted")
    assert scripted.object == "model" and isinstance(scripted.created, int)
    assert scripted.owned_by
    assert scripted.model_extra["base_model"] == "scripted-base", scripted.model_extra
    assert scripted.model_extra["permission"][0]["allow_view"] is True


@check("chat.completions.create, plain")
def _():
    r = client.chat.completions.create(model="scripted", messages=MESSAGES, temperature=0, max_tokens=64)
    assert r.object == "chat.completion"
    assert r.model == "scripted"
    assert r.choices[0].message.role == "assistant"
    assert r.choices[0].message.content == ANSWER, r.choices[0].message.content
    assert r.choices[0].finish_reason == "stop"
    assert (r.usage.prompt_tokens, r.usage.completion_tokens, r.usage.total_tokens) == (11, 7, 18)


@check("chat.completions.create, streamed with include_usage")
def _():
    stream = client.chat.completions.create(
        model="Scripted", messages=MESSAGES, stream=True, stream_options={"include_usage": True}
    )
    text, reasons, usage = "", [], None
    for chunk in stream:
        assert chunk.object == "chat.completion.chunk"
        for choice in chunk.choices:
            text += choice.delta.content or ""
            if choice.finish_reason:
                reasons.append(choice.finish_reason)
        if chunk.usage:
            usage = chunk.usage
    assert text == ANSWER, text
    assert reasons == ["stop"], reasons
    assert usage is not None and usage.total_tokens == 18


@check("responses.create, plain")
def _():
    r = client.responses.create(model="scripted", input="What is the capital of France?", instructions="Be brief.")
    assert r.object == "response" and r.status == "completed", r
    assert r.output_text == ANSWER, r.output_text
    assert r.output[0].type == "message" and r.output[0].content[0].type == "output_text"
    assert r.usage.input_tokens == 11 and r.usage.output_tokens == 7


@check("responses.create, chat history input, streamed")
def _():
    stream = client.responses.create(
        model="scripted",
        input=[
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello! How can I help?"},
            {"role": "user", "content": "What is the capital of France?"},
        ],
        stream=True,
    )
    kinds, text, final = [], "", None
    for event in stream:
        kinds.append(event.type)
        if event.type == "response.output_text.delta":
            text += event.delta
        if event.type == "response.completed":
            final = event.response
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed", kinds
    assert text == ANSWER, text
    assert final.output_text == ANSWER


@check("responses.stream helper: the accumulated final response")
def _():
    with client.responses.stream(model="scripted", input="What is the capital of France?") as stream:
        deltas = "".join(e.delta for e in stream if e.type == "response.output_text.delta")
        final = stream.get_final_response()
    assert deltas == ANSWER and final.output_text == ANSWER


PACED = "[answer at a pace] Count for me."
PACED_TEXT = "".join(f"word{i} " for i in range(30))


@check("background responses: created at once, streamed, resumed after a sequence number, retrieved")
def _():
    r = client.responses.create(model="scripted", input=PACED, background=True)
    assert r.id.startswith("resp_") and r.status in ("queued", "in_progress"), r
    first = []
    stream = client.responses.retrieve(r.id, stream=True)
    for event in stream:
        first.append(event)
        if sum(e.type == "response.output_text.delta" for e in first) == 3:
            break
    stream.close()  # the connection drops: the response goes on
    assert [e.sequence_number for e in first] == list(range(len(first))), first
    assert first[0].type == "response.created" and first[0].response.status == "queued", first[0]
    n = first[-1].sequence_number
    rest = list(client.responses.retrieve(r.id, stream=True, starting_after=n))
    assert [e.sequence_number for e in rest] == list(range(n + 1, n + 1 + len(rest))), rest
    assert rest[-1].type == "response.completed", rest[-1]
    text = "".join(e.delta for e in first + rest if e.type == "response.output_text.delta")
    assert text == PACED_TEXT, text
    assert rest[-1].response.output_text == PACED_TEXT
    done = client.responses.retrieve(r.id)
    assert done.status == "completed" and done.output_text == PACED_TEXT, done
    assert done.usage.output_tokens == 7, done.usage
    # The whole stream again, from after its first event.
    again = list(client.responses.retrieve(r.id, stream=True, starting_after=0))
    assert [e.sequence_number for e in again] == list(range(1, rest[-1].sequence_number + 1))


@check("a background response cancelled: status cancelled, its text so far kept")
def _():
    r = client.responses.create(model="scripted", input="[answer word by word] Take your time.", background=True)
    cancelled = client.responses.cancel(r.id)
    assert cancelled.id == r.id and cancelled.status == "cancelled", cancelled
    later = client.responses.retrieve(r.id)
    assert later.status == "cancelled", later
    assert len(later.output_text.split()) < 80, later.output_text


@check("an unknown response raises NotFoundError")
def _():
    try:
        client.responses.retrieve("resp_nope")
    except openai.NotFoundError as e:
        assert e.status_code == 404
    else:
        raise AssertionError("no error for an unknown response")


@check("an unknown model raises NotFoundError with code model_not_found")
def _():
    try:
        client.chat.completions.create(model="no-such-model", messages=MESSAGES)
    except openai.NotFoundError as e:
        assert e.status_code == 404
        assert e.code == "model_not_found", e.code
        assert e.param == "model", e.param
        assert e.type == "invalid_request_error", e.type
        assert "no-such-model" in e.message, e.message
    else:
        raise AssertionError("no error for an unknown model")


@check("a wrong key raises AuthenticationError")
def _():
    bad = openai.OpenAI(base_url=f"{BASE}/compat_api/v1", api_key="sk-wrong", max_retries=0)
    try:
        bad.models.list()
    except openai.AuthenticationError as e:
        assert e.status_code == 401
    else:
        raise AssertionError("no error for a wrong key")


if LOCAL:
    @check(f"the built-in local model ({LOCAL}) answers the first question a newcomer asks")
    def _():
        ids = [m.id for m in client.models.list().data]
        assert LOCAL in ids, ids
        r = client.chat.completions.create(
            model=LOCAL, temperature=0, max_tokens=40,
            messages=[{"role": "user", "content": "What is the capital of France? Answer in one sentence."}])
        text = r.choices[0].message.content
        assert "Paris" in text, text
        assert r.usage.completion_tokens > 0, r.usage


failed = [name for name, err in results if err]
print(f"\n{len(results) - len(failed)}/{len(results)} openai SDK checks passed")
sys.exit(1 if failed else 0)
