"""The batcher's scheduling (issue 40): short requests are not starved by long ones, nothing waits
forever, the token budget holds, FIFO is still there, and refusals come early with Retry-After.

No test here depends on timing: policies are pure functions over plain data, and the batcher is
driven one batch at a time (``step``, no worker thread) with a fake clock that a fake model advances
by a fixed number of seconds per token.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from longembed.serving.batcher import DynamicBatcher, QueueFull, QueueTimeout, ShuttingDown
from longembed.serving.scheduling import Fair, Fifo, policy_named
from longembed.serving.throughput import Throughput, retry_after_seconds

LONG, SHORT, BUDGET = 1900, 20, 16384


# ------------------------------------------------------------------ the policies, on plain data
@dataclass(eq=False)
class Item:
    name: str
    n_tokens: int
    request: Request


@dataclass(eq=False)
class Request:
    seq: int
    queued_at_batch: int
    pending: list[Item] = field(default_factory=list)

    @property
    def pending_tokens(self) -> int:
        return sum(i.n_tokens for i in self.pending)


class Queue:
    """A queue the way the batcher keeps it, to run a policy batch after batch."""

    def __init__(self, policy):
        self.policy, self.requests, self.batches, self.arrivals = policy, [], 0, 0

    def add(self, name: str, *token_counts: int) -> Request:
        request = Request(self.arrivals, self.batches)
        request.pending = [Item(f"{name}.{i}" if len(token_counts) > 1 else name, n, request)
                           for i, n in enumerate(token_counts)]
        self.arrivals += 1
        self.requests.append(request)
        return request

    def next_batch(self, budget: int = BUDGET) -> list[str]:
        batch = self.policy.select(list(self.requests), budget, self.batches)
        taken = set(map(id, batch))
        assert len(taken) == len(batch), "an input was taken twice"
        for request in self.requests:
            request.pending = [i for i in request.pending if id(i) not in taken]
        self.requests = [r for r in self.requests if r.pending]
        self.batches += 1
        return [i.name for i in batch]


def test_a_short_request_behind_many_long_ones_is_in_the_next_batch() -> None:
    """Ten requests of four ~1,900-token inputs (76,000 tokens, 4.6 batches) wait; a short question
    arrives last.  fair: it is in the very next batch; fifo (the old order): only after every long
    input, as the budget is full of long inputs for five batches."""
    for policy, expected_batch in ((Fair(), 0), (Fifo(), 5)):
        queue = Queue(policy)
        for r in range(10):
            queue.add(f"long{r}", LONG, LONG, LONG, LONG)
        queue.add("short", SHORT)
        budget = 8 * LONG  # holds eight long inputs and no room for anything else
        batches = [queue.next_batch(budget) for _ in range(6)]
        assert [i for i, batch in enumerate(batches) if "short" in batch] == [expected_batch], policy


def test_fair_serves_cheapest_requests_first_and_fills_the_rest_with_long_inputs() -> None:
    queue = Queue(Fair())
    for r in range(3):
        queue.add(f"long{r}", LONG, LONG, LONG, LONG)
    for s in range(40):
        queue.add(f"short{s}", SHORT)
    batch = queue.next_batch()
    assert batch[:40] == [f"short{s}" for s in range(40)]  # every short request, oldest first
    longs = batch[40:]
    assert longs == ["long0.0", "long0.1", "long0.2", "long0.3", "long1.0", "long1.1", "long1.2", "long1.3"]
    assert 40 * SHORT + 8 * LONG <= BUDGET < 40 * SHORT + 9 * LONG  # the budget is as full as it can be


def test_a_long_request_is_served_within_the_aging_bound_under_a_constant_stream_of_shorts() -> None:
    """Cheaper requests keep arriving, more than fill every batch on their own: without aging the long
    request would never run (checked with aging switched off), with it it runs after max_skips batches."""
    def run(policy, n_batches: int) -> int | None:
        queue = Queue(policy)
        queue.add("long", LONG)
        for b in range(n_batches):
            for s in range(BUDGET // SHORT + 10):  # a batch's worth of short requests, and more
                queue.add(f"s{b}.{s}", SHORT)
            if "long" in queue.next_batch():
                return b
        return None

    assert run(Fair(max_skips=10**9), 40) is None  # pure shortest-first starves it: the test can fail
    for max_skips in (0, 1, 4, 9):
        served = run(Fair(max_skips=max_skips), 40)
        assert served is not None and served <= max_skips  # bound: max_skips + k + 1 batches, k = 0


@settings(max_examples=60, deadline=None)
@given(
    arrivals=st.lists(st.lists(st.integers(1, 600), min_size=1, max_size=4), min_size=1, max_size=60),
    per_batch=st.integers(1, 6),
    max_skips=st.integers(0, 5),
    budget=st.integers(600, 2000),
)
def test_fair_keeps_the_budget_and_the_aging_bound_for_any_arrivals(arrivals, per_batch, max_skips, budget) -> None:
    """Requests arrive ``per_batch`` at a time between batches; every batch stays within the budget
    (or is one input), every input is served once, and each within max_skips + k + 1 batches of its
    arrival, k being the inputs queued ahead of it then (the bound of longembed.serving.scheduling)."""
    queue, bound, served_at, names = Queue(Fair(max_skips=max_skips)), {}, {}, {}
    pending = list(enumerate(arrivals))
    while pending or queue.requests:
        for index, counts in pending[:per_batch]:
            ahead = sum(len(r.pending) for r in queue.requests)
            request = queue.add(f"r{index}", *counts)
            for position, item in enumerate(request.pending):
                names[item.name] = item.n_tokens
                bound[item.name] = queue.batches + max_skips + ahead + position + 1
        pending = pending[per_batch:]
        batch = queue.next_batch(budget)
        assert batch and (sum(names[n] for n in batch) <= budget or len(batch) == 1)
        for name in batch:
            assert name not in served_at
            served_at[name] = queue.batches  # served by the batch-th batch formed
    assert served_at.keys() == names.keys()
    late = {n: (served_at[n], bound[n]) for n in names if served_at[n] > bound[n]}
    assert not late


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(st.integers(1, 300), min_size=1, max_size=5), min_size=1, max_size=30))
def test_fifo_is_arrival_order_filling_the_room_left(arrivals) -> None:
    """fifo against a direct statement of it: the oldest input, then later ones in order that fit."""
    queue, order = Queue(Fifo()), []
    for index, counts in enumerate(arrivals):
        request = queue.add(f"r{index}", *counts)
        order += [(i.name, i.n_tokens) for i in request.pending]
    while order:
        room, want, left = 500, [], []
        for name, n in order:
            if not want or n <= room:
                want.append(name)
                room -= n
            else:
                left.append((name, n))
        assert queue.next_batch(500) == want
        order = left


def test_policies_by_name() -> None:
    assert isinstance(policy_named("fifo"), Fifo) and isinstance(policy_named("fair"), Fair)
    with pytest.raises(ValueError, match="fair, fifo"):
        policy_named("lottery")


# ------------------------------------------------------------------ the batcher, stepped by hand
class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def stepped_batcher(clock: FakeClock, seconds_per_token: float = 0.001, **options) -> tuple[DynamicBatcher, list]:
    """An unstarted batcher whose model advances ``clock`` by ``seconds_per_token`` per token and
    records what each call saw."""
    calls: list[list[str]] = []

    def encode(inputs, prompt, normalize, budget):
        calls.append(list(inputs))
        clock.now += seconds_per_token * sum(int(x.split(":")[1]) for x in inputs)
        return np.array([[float(int(x.split(":")[1]))] for x in inputs], dtype=np.float32)

    options = {"max_batch_tokens": 1000, "max_queue_tokens": 100_000, **options}
    return DynamicBatcher(encode, clock=clock, **options), calls


def submit(batcher: DynamicBatcher, name: str, *token_counts: int, **options):
    return batcher.submit([f"{name}.{i}:{n}" for i, n in enumerate(token_counts)], list(token_counts), **options)


def test_the_batcher_runs_the_fair_order_and_answers_short_inputs_before_the_long_ones_run() -> None:
    """A batch runs as the encoder's own length sub-batches, shortest first, and each is answered at
    once: the short requests are done before the long inputs of the same batch start."""
    clock = FakeClock()
    batcher, calls = stepped_batcher(clock)
    long = submit(batcher, "long", 400, 400, 400)
    shorts = [submit(batcher, f"short{i}", 10) for i in range(3)]
    done_when_called, encode = [], batcher.encode

    def spy(inputs, *rest):
        done_when_called.append([f.done() for f in shorts])
        return encode(inputs, *rest)

    batcher.encode = spy
    assert batcher.step() == 5  # the shorts first, then long inputs that fit (two of three)
    assert calls == [["short0.0:10", "short1.0:10", "short2.0:10"], ["long.0:400", "long.1:400"]]
    assert done_when_called == [[False] * 3, [True] * 3]
    assert not long.done()
    assert batcher.step() == 1 and long.result().ravel().tolist() == [400.0, 400.0, 400.0]
    assert (batcher.queued_tokens, batcher.queued_inputs, batcher.step()) == (0, 0, 0)


def test_scheduler_fifo_is_still_available() -> None:
    batcher, calls = stepped_batcher(FakeClock(), scheduler="fifo")
    submit(batcher, "long", 400, 400, 400)
    submit(batcher, "short", 10)
    batcher.step()
    assert calls == [["long.0:400", "long.1:400", "short.0:10"]]  # arrival order; one call, as before


@pytest.mark.parametrize("scheduler", ["fair", "fifo"])
def test_a_request_submitted_alone_shares_the_batch_but_never_a_model_call(scheduler) -> None:
    """A search's query (``alone``) is batched, budgeted and scheduled with the rest, but runs in a
    call of its own: beside longer inputs it would be padded, which changes its vector's last bits."""
    batcher, calls = stepped_batcher(FakeClock(), scheduler=scheduler)
    submit(batcher, "a", 12)
    query = submit(batcher, "query", 10, alone=True)
    submit(batcher, "b", 14)
    assert batcher.queued_tokens == 36
    assert batcher.step() == 3 and batcher.batches_formed == 1
    assert sorted(sorted(call) for call in calls) == [["a.0:12", "b.0:14"], ["query.0:10"]]
    assert query.result().ravel().tolist() == [10.0]


def test_a_request_that_would_wait_past_its_limit_is_refused_at_once_with_retry_after() -> None:
    """After one measured batch (1 ms per token: 1,000 tokens/s), three queued 1,000-token requests
    mean 3 s of waiting for another one: with a 2 s limit it is refused on submit, Retry-After 3 - 2 =
    1 s.  A short request runs before that work under fair (accepted even with a 0.5 s limit of its
    own), after it under fifo (refused)."""
    for scheduler in ("fair", "fifo"):
        clock = FakeClock()
        batcher, _ = stepped_batcher(clock, max_queue_seconds=2.0, scheduler=scheduler)
        submit(batcher, "warm", 500)
        assert batcher.estimated_wait(10) is None  # nothing measured: nothing refused on time
        batcher.step()
        assert batcher.throughput.tokens_per_second == pytest.approx(1000.0)
        for i in range(3):
            submit(batcher, f"q{i}", 1000)  # waits of 0, 1 and 2 s: within the limit
        assert batcher.estimated_wait(1000) == pytest.approx(3.0)
        with pytest.raises(QueueFull, match="would wait about 3 s") as refused:
            submit(batcher, "late", 1000)
        assert refused.value.retry_after == pytest.approx(1.0)
        with pytest.raises(QueueFull) as refused:
            submit(batcher, "own limit", 1000, queue_seconds=1.5)  # the client's limit is the smaller one
        assert refused.value.retry_after == pytest.approx(1.5)
        if scheduler == "fair":
            assert not submit(batcher, "short", 10, queue_seconds=0.5).done()
        else:
            with pytest.raises(QueueFull):
                submit(batcher, "short", 10, queue_seconds=0.5)


def test_queue_full_says_when_room_will_be_free() -> None:
    clock = FakeClock()
    batcher, _ = stepped_batcher(clock, max_queue_tokens=1000)
    submit(batcher, "a", 500)
    batcher.step()  # 1,000 tokens/s measured
    submit(batcher, "b", 900)
    with pytest.raises(QueueFull, match="would pass the limit of 1000") as refused:
        submit(batcher, "c", 300)
    assert refused.value.retry_after == pytest.approx(0.2)  # 200 tokens over the limit, at 1,000 tokens/s


def test_a_request_still_waiting_at_its_limit_fails_with_queue_timeout() -> None:
    clock = FakeClock()
    batcher, calls = stepped_batcher(clock)
    waiting = submit(batcher, "w", 10, queue_seconds=5.0)
    clock.now += 4.9
    batcher.check_deadline(waiting)
    assert not waiting.done()
    clock.now += 0.2
    batcher.check_deadline(waiting)
    with pytest.raises(QueueTimeout, match="waited its whole limit"):
        waiting.result(0)
    assert (batcher.queued_inputs, batcher.step(), calls) == (0, 0, [])
    expired_in_queue = submit(batcher, "x", 10, queue_seconds=1.0)
    clock.now += 2
    assert batcher.step() == 0 and isinstance(expired_in_queue.exception(0), QueueTimeout)


def test_a_started_request_is_never_expired() -> None:
    clock = FakeClock()
    batcher, _ = stepped_batcher(clock, max_batch_tokens=500)
    both = submit(batcher, "two batches", 400, 400, queue_seconds=1.0)
    batcher.step()
    clock.now += 10
    batcher.check_deadline(both)
    batcher.step()
    assert both.result(0).ravel().tolist() == [400.0, 400.0]


def test_closing_runs_what_can_finish_by_the_deadline_and_answers_the_rest_503_at_once() -> None:
    """One token a second measured; a 1,500 s shutdown: the 1,000-token batch runs, the next one
    cannot finish by the deadline, so it and all still queued are answered ShuttingDown without
    running; nothing new is taken."""
    clock = FakeClock()
    batcher, calls = stepped_batcher(clock, seconds_per_token=1.0)  # fake seconds: the real deadline timer
    submit(batcher, "warm", 1000)                                    # (1,500 s) never fires in the test
    batcher.step()
    first = submit(batcher, "first", 1000)
    second = submit(batcher, "second", 1000)
    third = submit(batcher, "third", 500, 500)
    batcher.begin_close(1500)
    with pytest.raises(ShuttingDown) as refused:
        submit(batcher, "new", 1)
    assert refused.value.retry_after is not None
    assert batcher.step() == 1 and first.result(0).shape == (1, 1)
    assert batcher.step() == 0  # no time for another second of work: given up, not run
    for future in (second, third):
        with pytest.raises(ShuttingDown, match="cannot finish this request within --shutdown-seconds"):
            future.result(0)
    assert len(calls) == 2 and batcher.queued_inputs == 0
    batcher.close()


def test_throughput_fits_a_cost_per_call_and_a_cost_per_token() -> None:
    """Issue 51: one long call, then twenty one-line questions (the fairness benchmark's warm-up and
    idle requests), on a model whose call costs 0.05 s plus 0.5 ms a token.  The fit recovers both, so
    the next 7,600-token call is estimated at 3.85 s; the old single rate, an average per batch, came
    from the overhead-bound short calls (276 tokens/s) and put it at 27.5 s."""
    rate = Throughput()
    assert rate.tokens_per_second is None and rate.seconds_for(10) is None
    rate.record(100, 1.0)  # one call: a rate alone, no overhead yet
    assert rate.tokens_per_second == pytest.approx(100) and rate.seconds_for(250) == pytest.approx(2.5)

    model = Throughput()
    for n in [7600] + [16] * 20:
        model.record(n, 0.05 + 0.0005 * n)
    assert model.costs == (pytest.approx(0.05), pytest.approx(0.0005))
    assert model.seconds_for(7600) == pytest.approx(3.85) and model.seconds_for(16) == pytest.approx(0.058)
    assert model.seconds_for(32, calls=2) == pytest.approx(0.116)


def test_throughput_follows_the_model_over_its_horizon_of_model_time() -> None:
    """Older calls count less as model time passes: after the model became twice as fast, a few
    horizons of calls at the new speed bring the estimate to it."""
    rate = Throughput(horizon_seconds=10.0)
    for n in (1000, 2000) * 10:
        rate.record(n, 0.002 * n)
    assert rate.seconds_for(1000) == pytest.approx(2.0)
    for n in (1000, 2000) * 40:  # 120 s of model time: 12 horizons
        rate.record(n, 0.001 * n)
    assert rate.seconds_for(1000) == pytest.approx(1.0, rel=1e-3)
    assert [retry_after_seconds(s) for s in (0.0, 0.2, 1.0, 1.01)] == [1, 1, 1, 2]


def test_a_random_mix_is_served_completely_in_any_policy() -> None:
    """Every submitted input comes back, once, with its own vector, whichever policy batches it."""
    for scheduler in ("fair", "fifo"):
        rng = random.Random(7)
        batcher, calls = stepped_batcher(FakeClock(), scheduler=scheduler)
        requests = [[rng.randint(1, 600) for _ in range(rng.randint(1, 4))] for _ in range(40)]
        futures = [submit(batcher, f"r{i}", *counts) for i, counts in enumerate(requests)]
        while batcher.step():
            pass
        for counts, future in zip(requests, futures, strict=True):
            assert future.result(0).ravel().tolist() == [float(n) for n in counts]
        assert all(sum(int(x.split(":")[1]) for x in call) <= 1000 for call in calls)


# ------------------------------------------------------------------ between the calls of a running batch
def test_fair_admits_only_requests_cheaper_than_what_the_batch_has_left() -> None:
    """Between two calls: the waiting requests cheaper than the running batch's cheapest, cheapest
    first, within one call's budget; fifo admits nothing (a batch is one call)."""
    queue = Queue(Fair())
    queue.add("long", LONG, LONG)
    queue.add("medium", 900)
    queue.add("short", SHORT)
    queue.add("twin", LONG)  # exactly as dear as what is left: not cheaper, waits for the next batch
    names = lambda items: [i.name for i in items]  # noqa: E731
    assert names(Fair().admit(queue.requests, LONG, 4096)) == ["short", "medium"]
    assert names(Fair().admit(queue.requests, LONG, 500)) == ["short"]  # medium does not fit the call
    assert names(Fair().admit(queue.requests, 900, 4096)) == ["short"]
    assert names(Fair().admit(queue.requests, SHORT, 4096)) == []
    assert Fifo().admit(queue.requests, LONG, 4096) == []


def arriving_batcher(clock: FakeClock, arrivals: dict[int, list[tuple[str, list[int]]]], **options):
    """A stepped batcher whose model call number ``c`` (counted from 0) submits ``arrivals[c]``
    while it runs (requests that arrive during that call); (batcher, calls, futures by name, the
    numbers of the calls that ran inputs admitted between two calls of a batch)."""
    batcher, calls = stepped_batcher(clock, **options)
    futures: dict[str, object] = {}
    admitted_calls: set[int] = set()
    encode, admit = batcher.encode, batcher._admit

    def arriving(inputs, *rest):
        for name, counts in arrivals.get(len(calls), []):
            futures[name] = submit(batcher, name, *counts)
        return encode(inputs, *rest)

    def admitting(remaining):
        admitted = admit(remaining)
        admitted_calls.update(range(len(calls), len(calls) + len(batcher._calls(admitted))))
        return admitted

    batcher.encode, batcher._admit = arriving, admitting
    return batcher, calls, futures, admitted_calls


def test_a_short_request_arriving_mid_batch_runs_after_the_current_call_not_the_whole_batch() -> None:
    """A batch of four 400-token inputs runs as four calls of one (sub_batch_tokens 400); a short
    request arriving during the first runs right after it, before the three left; with one call per
    batch (sub_batch_tokens = the budget: the server before this change) it waited for all four."""
    for sub_batch, expected in ((400, [["long.0:400"], ["short.0:10"], ["long.1:400"], ["long.2:400"],
                                       ["long.3:400"]]),
                                (None, [["long.0:400", "long.1:400", "long.2:400", "long.3:400"], ["short.0:10"]])):
        clock = FakeClock()
        batcher, calls, futures, _ = arriving_batcher(clock, {0: [("short", [10])]}, max_batch_tokens=1600,
                                                      sub_batch_tokens=sub_batch)
        long = submit(batcher, "long", 400, 400, 400, 400)
        while batcher.step():
            pass
        assert calls == expected
        assert futures["short"].result(0).ravel().tolist() == [10.0]
        assert long.result(0).ravel().tolist() == [400.0] * 4


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(
    longs=st.lists(st.lists(st.integers(200, 400), min_size=1, max_size=4), min_size=1, max_size=5),
    arrivals=st.dictionaries(st.integers(0, 30), st.integers(1, 3), max_size=12),
)
def test_a_short_request_waits_at_most_the_call_running_when_it_arrived(longs, arrivals) -> None:
    """Long requests wait; short ones (10 tokens) arrive during random calls.  Each short request is
    in the call right after the one it arrived during, or, if it arrived during a call that itself
    ran between two calls of a batch (an admitted one), at most two calls later; every input comes
    back with its own vector (the calls of a batch change nothing but the order)."""
    clock = FakeClock()
    shorts = {c: [(f"s{c}.{k}", [10]) for k in range(n)] for c, n in arrivals.items()}
    batcher, calls, futures, admitted_calls = arriving_batcher(clock, shorts, max_batch_tokens=1200,
                                                               sub_batch_tokens=400)
    long_futures = [submit(batcher, f"long{r}", *counts) for r, counts in enumerate(longs)]
    while batcher.step():
        pass
    for arrived, names in shorts.items():
        for name, _ in names:
            if name not in futures:
                continue  # that call never ran
            ran = next(c for c, call in enumerate(calls) if any(x.startswith(name + ".") for x in call))
            assert arrived < ran <= arrived + (2 if arrived in admitted_calls else 1), (name, calls)
            assert futures[name].result(0).ravel().tolist() == [10.0]
    for counts, future in zip(longs, long_futures, strict=True):
        assert future.result(0).ravel().tolist() == [float(n) for n in counts]
    assert all(sum(int(x.split(":")[1]) for x in call) <= 400 or len(call) == 1 for call in calls)


def test_admissions_never_starve_the_running_batch() -> None:
    """Short requests arrive during every call, forever: each gap of the batch admits one call of
    them (all that arrived since the last), and the batch's long inputs still finish, one call each."""
    clock = FakeClock()
    stream = {c: [(f"s{c}", [10])] for c in range(1000)}
    batcher, calls, _, _ = arriving_batcher(clock, stream, max_batch_tokens=1200, sub_batch_tokens=400)
    long = submit(batcher, "long", 400, 400, 400)
    batcher.step()
    assert long.result(0).ravel().tolist() == [400.0] * 3
    assert calls == [["long.0:400"], ["s0.0:10"], ["long.1:400"], ["s1.0:10", "s2.0:10"], ["long.2:400"]]


def test_metrics_record_each_call_and_the_longest() -> None:
    from longembed.serving.batcher import BatchRecord
    from longembed.serving.metrics import ServerMetrics

    metrics = ServerMetrics()
    metrics.record_batch(BatchRecord(3, 900, 2.5, [0.5, 2.0]))
    metrics.record_batch(BatchRecord(1, 10, 0.25, [0.25]))
    text = metrics.exposition().decode()
    assert "longembed_model_call_seconds_count 3.0" in text and "longembed_model_call_seconds_sum 2.75" in text
    assert "longembed_model_call_seconds_max 2.0" in text


def test_the_wait_estimate_of_a_request_taken_between_calls_is_the_running_call() -> None:
    """1,000 tokens/s measured; a batch of four 400-token calls starts.  A short request would be
    taken at the next gap, so it waits about the running call (0.4 s), not the batch (1.6 s): an
    early 429 on its X-Longembed-Queue-Seconds must not count the whole batch.  A request dearer
    than what the batch has left still waits for all of it."""
    clock = FakeClock()
    batcher, _ = stepped_batcher(clock, max_batch_tokens=1600, sub_batch_tokens=400)
    submit(batcher, "warm", 100)
    batcher.step()
    estimates, encode = [], batcher.encode

    def spy(inputs, *rest):
        if not estimates:
            estimates.extend([batcher.estimated_wait(10), batcher.estimated_wait(2000)])
        return encode(inputs, *rest)

    batcher.encode = spy
    submit(batcher, "long", 400, 400, 400, 400)
    batcher.step()
    assert estimates == [pytest.approx(0.4), pytest.approx(1.6)]


# ------------------------------------------------------------------ the wait estimate follows the policy
def backlog_of_overdue_long_requests(clock: FakeClock, **options) -> DynamicBatcher:
    """1,000 tokens/s measured, then ten requests of four 400-token inputs, four of them run: the six
    left have been passed over for four batches, so they are overdue (fair's aging lane)."""
    batcher, _ = stepped_batcher(clock, max_batch_tokens=1600, sub_batch_tokens=400, **options)
    submit(batcher, "warm", 100)
    batcher.step()
    for r in range(10):
        submit(batcher, f"long{r}", 400, 400, 400, 400)
    for _ in range(4):
        batcher.step()
    assert batcher.queued_tokens == 6 * 1600
    return batcher


def test_a_short_request_behind_overdue_long_ones_is_served_not_refused_for_the_backlog() -> None:
    """Issue 51 part 5: under fair a short request's call is the first of the next batch, whatever
    the overdue backlog (9.6 s of it here), so with a 1 s limit it is accepted, and it runs at once;
    the old estimate counted every overdue request as ahead of it and answered 429.  A long request,
    which does wait for the backlog, is still refused, and under fifo the short one is too."""
    clock = FakeClock()
    batcher = backlog_of_overdue_long_requests(clock)
    assert batcher.estimated_wait(10) == pytest.approx(0.0)
    assert batcher.estimated_wait(400, 400, 400, 400) == pytest.approx(9.6)
    submitted_at = clock.now
    short = submit(batcher, "short", 10, queue_seconds=1.0)
    with pytest.raises(QueueFull, match="would wait more than 2 s"):  # the simulation stops past 2 x the limit
        submit(batcher, "another long", 400, 400, 400, 400, queue_seconds=1.0)
    started, encode = [], batcher.encode

    def spy(inputs, *rest):
        started.append((list(inputs), clock.now))
        return encode(inputs, *rest)

    batcher.encode = spy
    batcher.step()
    assert started[0] == (["short.0:10"], submitted_at) and short.result(0).ravel().tolist() == [10.0]

    fifo = backlog_of_overdue_long_requests(FakeClock(), scheduler="fifo")
    with pytest.raises(QueueFull):
        submit(fifo, "short", 10, queue_seconds=1.0)


def test_a_short_request_arriving_mid_batch_is_estimated_at_the_running_call_despite_the_backlog() -> None:
    """During a batch's first call (400 tokens: 0.4 s), with overdue long requests queued, a short
    request is taken at the next gap: its wait is that call, not the backlog after it."""
    clock = FakeClock()
    batcher = backlog_of_overdue_long_requests(clock)
    estimates, encode = [], batcher.encode

    def spy(inputs, *rest):
        if not estimates:
            estimates.append(batcher.estimated_wait(10))
        return encode(inputs, *rest)

    batcher.encode = spy
    batcher.step()
    assert estimates == [pytest.approx(0.4)]


@settings(max_examples=60, deadline=None)
@given(
    scheduler=st.sampled_from(["fair", "fifo"]),
    longs=st.lists(st.lists(st.integers(1, 400), min_size=1, max_size=4), min_size=1, max_size=8),
    arrives_during=st.integers(0, 12),
    new=st.lists(st.integers(1, 400), min_size=1, max_size=3),
)
def test_the_wait_estimate_is_the_wait_the_scheduler_gives(scheduler, longs, arrives_during, new) -> None:
    """With a model of exactly 1 ms per token and no later arrivals, the estimate is the wait: a
    request arriving during call ``arrives_during`` starts its first call exactly as many seconds
    later as estimated, under either policy (aging, admissions between calls and call splitting
    included): the estimate simulates the order the batcher then follows."""
    clock = FakeClock()
    batcher, calls = stepped_batcher(clock, max_batch_tokens=1200, sub_batch_tokens=400, scheduler=scheduler)
    submit(batcher, "warm", 100)
    batcher.step()
    for r, counts in enumerate(longs):
        submit(batcher, f"r{r}", *counts)
    arrival, starts, encode = {}, [], batcher.encode

    def spy(inputs, *rest):
        if len(starts) == arrives_during and "at" not in arrival:
            arrival["estimate"], arrival["at"] = batcher.estimated_wait(*new), clock.now
            arrival["future"] = submit(batcher, "new", *new)
        starts.append((list(inputs), clock.now))
        return encode(inputs, *rest)

    batcher.encode = spy
    while batcher.step():
        pass
    if "at" not in arrival:  # fewer calls than that: it arrives at an idle batcher
        arrival["estimate"], arrival["at"] = batcher.estimated_wait(*new), clock.now
        arrival["future"] = submit(batcher, "new", *new)
        while batcher.step():
            pass
    first_call = next(at for inputs, at in starts if any(x.startswith("new.") for x in inputs))
    assert first_call - arrival["at"] == pytest.approx(arrival["estimate"])
    assert arrival["future"].result(0).ravel().tolist() == [float(n) for n in new]
