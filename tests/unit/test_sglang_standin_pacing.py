"""How fast the stand-in generates, checked in-process on its own pacing with a clock that moves only when slept
on (no test here measures the wall clock): the rate, speculative chunks, noise."""
import pytest

from tests.helpers.sglang_standin import EAGLE, FakeClock, generate, generation, in_process, paced, server_module


def test_step_deadlines_reach_n_tokens_at_n_over_the_rate():
    assert generation.step_deadlines([1, 1, 1, 1], 200.0) == [(1, 0.005), (2, 0.01), (3, 0.015), (4, 0.02)]
    assert generation.step_deadlines([3, 3, 1], 100.0) == [(3, 0.03), (6, 0.06), (7, 0.07)]
    assert generation.step_deadlines([], 100.0) == []


def test_a_request_is_paced_to_tokens_per_s(monkeypatch, tmp_path):
    rate, tokens = 200.0, 150
    server, clock = in_process(monkeypatch, tmp_path, {"tokens_per_s": rate})
    gen, steps = paced(server, clock, tokens)
    assert gen.rate == rate and len(gen.ids) == tokens and gen.finish_reason == {"type": "length", "length": tokens}
    # one token a step (no speculation), each sent at k / rate: 150 tokens at 200 tok/s end at 0.75 s
    assert [n for _, n in steps] == list(range(1, tokens + 1))
    assert [t for t, _ in steps] == pytest.approx([k / rate for k in range(1, tokens + 1)])
    assert clock.sleeps == pytest.approx([1 / rate] * tokens)


def test_a_late_step_is_made_up_by_the_next_pauses(monkeypatch, tmp_path):
    """The pauses aim at deadlines: a step that ran 35 ms late (a busy host) is followed by no pause until the
    request is back on time, and the request still ends at n / rate."""
    server, clock = in_process(monkeypatch, tmp_path, {"tokens_per_s": 100}, clock=FakeClock(late=[0.035]))
    _, steps = paced(server, clock, 10)
    assert [t for t, _ in steps] == pytest.approx([0.045, 0.045, 0.045, 0.045, 0.05, 0.06, 0.07, 0.08, 0.09, 0.1])
    assert clock.sleeps == pytest.approx([0.01, 0.005, 0.01, 0.01, 0.01, 0.01, 0.01])


def test_plain_tokens_per_s_paces_a_server_without_speculation(monkeypatch, tmp_path):
    config = {"tokens_per_s": 130, "plain_tokens_per_s": 85}
    plain, plain_clock = in_process(monkeypatch, tmp_path, config)
    spec, spec_clock = in_process(monkeypatch, tmp_path, config, EAGLE)
    assert paced(plain, plain_clock, 17)[1][-1] == (pytest.approx(17 / 85.0), 17)
    assert paced(spec, spec_clock, 26)[1][-1] == (pytest.approx(26 / 130.0), 26)


def test_speculative_chunks_keep_the_rate(standin, monkeypatch, tmp_path):
    rate = 200.0
    server, clock = in_process(monkeypatch, tmp_path, {"tokens_per_s": rate, "accept_length": 3.0}, EAGLE)
    gen, steps = paced(server, clock, 90)
    assert gen.verify_ct == 30 and [n for _, n in steps] == list(range(3, 91, 3))  # 3 tokens a verify step
    assert [t for t, _ in steps] == pytest.approx([n / rate for n in range(3, 91, 3)])  # the rate holds per token
    live = standin({"tokens_per_s": 1000, "accept_length": 3.0}, EAGLE).start().wait_ready()
    assert generate(live, "measure", max_new_tokens=90)["meta_info"]["spec_verify_ct"] == 30


def test_noise_is_bounded_and_seeded(monkeypatch, tmp_path):
    rate = 400.0
    assert server_module.noisy_rate(rate, 20, -1.0) == pytest.approx(320.0)
    assert server_module.noisy_rate(rate, 20, 1.0) == pytest.approx(480.0)
    assert server_module.noisy_rate(rate, 20, 0.0) == rate
    config = {"tokens_per_s": rate, "noise_pct": 20, "seed": 7}
    server, _ = in_process(monkeypatch, tmp_path, config)
    rates = [server.speed() for _ in range(200)]
    assert all(0.8 * rate <= r <= 1.2 * rate for r in rates)
    assert min(rates) < 0.85 * rate and max(rates) > 1.15 * rate  # it does vary, over the whole band
    again, _ = in_process(monkeypatch, tmp_path, config)
    assert [again.speed() for _ in range(200)] == rates  # the seed decides
    other, _ = in_process(monkeypatch, tmp_path, dict(config, seed=8))
    assert [other.speed() for _ in range(200)] != rates
    quiet, _ = in_process(monkeypatch, tmp_path, {"tokens_per_s": rate})
    assert {quiet.speed() for _ in range(20)} == {rate}
    # a request is paced at the rate drawn for it
    noisy, clock = in_process(monkeypatch, tmp_path, config)
    gen, steps = paced(noisy, clock, 60)
    assert gen.rate == rates[0] != rate and steps[-1] == (pytest.approx(60 / rates[0]), 60)
