"""The OpenAI-compatible endpoints (POST /v1/completions, /v1/chat/completions): SGLang's answer shapes,
streamed or not, and its validation errors. A mixin of http_api.Handler: it uses the handler's plumbing."""
import json
import os
import time

from sglang_standin.generation import DEFAULT_MAX_NEW_TOKENS, Generation, run_batch

OPENAI_DEFAULT_MAX_TOKENS = 16  # CompletionRequest.max_tokens

# The real server's answer to a chat request when the tokenizer has no chat template (recorded from 0.5.17).
NO_CHAT_TEMPLATE = ("Cannot use chat template functions because tokenizer.chat_template is not set and no template "
                    "argument was passed! For information about writing templates and setting the "
                    "tokenizer.chat_template attribute, please see the documentation at "
                    "https://huggingface.co/docs/transformers/main/en/chat_templating")


def has_chat_template(model_path):
    """False only when the model directory's tokenizer_config.json is there and names no chat template."""
    config = os.path.join(model_path, "tokenizer_config.json")
    if not os.path.exists(config) or os.path.exists(os.path.join(model_path, "chat_template.jinja")):
        return True
    try:
        with open(config, encoding="utf-8") as handle:
            return bool(json.load(handle).get("chat_template"))
    except (OSError, ValueError):
        return True


def error_response(message, status=400):
    """ErrorResponse of the OpenAI-compatible layer (validation failures)."""
    return status, {"object": "error", "message": message, "type": "Bad Request", "param": None, "code": status}



class OpenAIRoutes(object):
    """r_v1completions and r_v1chat_completions, with what they need beyond the handler's plumbing."""

    def _openai_body(self):
        media = (self.headers.get("content-type") or "").lower().split(";", 1)[0].strip()
        if media != "application/json":
            self._send(*error_response("1 validation error: Unsupported Media Type: Only 'application/json' is "
                                       "allowed"))
            return None
        try:
            body = self._body()
        except ValueError as exc:
            self._send(*error_response("JSON decode error: %s" % exc))
            return None
        if not isinstance(body, dict):
            self._send(*error_response("the request body must be a JSON object"))
            return None
        return body

    @staticmethod
    def _include_usage(body):
        return bool((body.get("stream_options") or {}).get("include_usage"))

    @staticmethod
    def _openai_params(body):
        params = {"max_new_tokens": body.get("max_tokens", body.get("max_completion_tokens"))}
        if params["max_new_tokens"] is None:
            params["max_new_tokens"] = OPENAI_DEFAULT_MAX_TOKENS if "messages" not in body else DEFAULT_MAX_NEW_TOKENS
        params["temperature"] = body.get("temperature", 1.0)
        params["stop"] = body.get("stop")
        params["seed"] = body.get("seed")
        return params

    def r_v1completions(self):
        if self._not_ready():
            return None
        body = self._openai_body()
        if body is None:
            return None
        prompt = body.get("prompt")
        if prompt is None:
            return self._send(*error_response("1 validation error for CompletionRequest\nprompt\n  Field required"))
        if isinstance(prompt, list) and prompt and isinstance(prompt[0], (str, list)):
            prompts = prompt
        else:
            prompts = [prompt]
        model = body.get("model") or self.standin.served_model_name
        n = body.get("n") or 1
        try:
            gens = [Generation(self.standin, p, self._openai_params(body)) for p in prompts for _ in range(n)]
        except ValueError as exc:
            return self._send(*error_response(str(exc)))
        created = int(time.time())
        if body.get("stream"):
            if len(gens) != 1:
                return self._send(*error_response("sglang STAND-IN: streaming several prompts or n > 1 is not "
                                                  "supported by the stand-in"))
            head = {"id": gens[0].rid, "object": "text_completion", "created": created, "model": model}
            return self._stream(gens[0], completion_events(gens[0], head, self._include_usage(body)))
        outs = run_batch(gens)
        choices = []
        for index, out in enumerate(outs):
            finish = out["meta_info"]["finish_reason"]
            text = out["text"]
            if body.get("echo") and isinstance(gens[index].prompt, str):
                text = gens[index].prompt + text
            choices.append(dict({"index": index, "text": text, "logprobs": None}, **finish_fields(finish)))
        prompt_tokens = sum(g.prompt_tokens for g in gens[::n])
        completion_tokens = sum(len(g.ids) for g in gens)
        return self._send(200, {
            "id": outs[0]["meta_info"]["id"], "object": "text_completion", "created": created, "model": model,
            "choices": choices,
            "usage": openai_usage(prompt_tokens, completion_tokens),
            "metadata": {"weight_version": self.standin.args.weight_version}})

    def r_v1chat_completions(self):
        if self._not_ready():
            return None
        body = self._openai_body()
        if body is None:
            return None
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            return self._send(*error_response("1 validation error for ChatCompletionRequest\nmessages\n  "
                                              "Field required"))
        if not has_chat_template(self.standin.args.model_path):
            status, error = error_response(NO_CHAT_TEMPLATE)
            return self._send(status, dict(error, type="BadRequest"))
        prompt = "\n".join("%s: %s" % (m.get("role"), m.get("content")) for m in messages if isinstance(m, dict))
        model = body.get("model") or self.standin.served_model_name
        try:
            gen = Generation(self.standin, prompt, self._openai_params(body))
        except ValueError as exc:
            return self._send(*error_response(str(exc)))
        created = int(time.time())
        if body.get("stream"):
            head = {"id": gen.rid, "object": "chat.completion.chunk", "created": created, "model": model}
            return self._stream(gen, chat_events(gen, head, self._include_usage(body)))
        out = run_batch([gen])[0]
        finish = out["meta_info"]["finish_reason"]
        return self._send(200, {
            "id": gen.rid, "object": "chat.completion", "created": created, "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": out["text"],
                                                 "reasoning_content": None, "tool_calls": None},
                         "logprobs": None, **finish_fields(finish)}],
            "usage": openai_usage(gen.prompt_tokens, len(gen.ids)),
            "metadata": {"weight_version": self.standin.args.weight_version}})


def openai_usage(prompt_tokens, completion_tokens, streamed=False):
    """An OpenAI-style answer's `usage` (a streamed one's last chunk has no prompt_tokens_details)."""
    usage = {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens + completion_tokens,
             "completion_tokens": completion_tokens}
    if not streamed:
        usage["prompt_tokens_details"] = None
    usage["reasoning_tokens"] = 0
    return usage


def text_deltas(gen):
    """Run `gen`, yielding the text each step added and the finish reason so far."""
    sent = ""
    for state in gen.run():
        delta, sent = state.text[len(sent):], state.text
        yield delta, state.finish_reason


def finish_fields(finish):
    return {"finish_reason": finish["type"] if finish else None,
            "matched_stop": finish.get("matched") if finish else None}


def usage_event(gen, head, include_usage):
    """The last chunk of a stream whose request set stream_options.include_usage, else nothing."""
    if include_usage:
        yield dict(head, choices=[], usage=openai_usage(gen.prompt_tokens, len(gen.ids), streamed=True))


def completion_events(gen, head, include_usage):
    for delta, finish in text_deltas(gen):
        yield dict(head, choices=[dict({"index": 0, "text": delta, "logprobs": None}, **finish_fields(finish))],
                   usage=None)
    yield from usage_event(gen, head, include_usage)


def chat_events(gen, head, include_usage):
    yield dict(head, choices=[dict({"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None},
                                   **finish_fields(None))], usage=None)
    for delta, finish in text_deltas(gen):
        yield dict(head, choices=[dict({"index": 0, "delta": {"content": delta}, "logprobs": None},
                                       **finish_fields(finish))], usage=None)
    yield from usage_event(gen, head, include_usage)

