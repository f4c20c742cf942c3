"""The encoder's contract: exact for short inputs, batch-independent, clear errors."""

from __future__ import annotations

import inspect
import threading
import warnings

import numpy as np
import pytest
import torch
from conftest import LO, fast_sample, words
from transformers import AutoTokenizer

from longembed import load_encoder
from longembed.loading import load_transformer
from longembed.model_runner import RunOptions
from longembed.pooling import pool

METHODS_BY_FAMILY = {
    "bert": ["truncate", "pcw", "gp", "rp", "pi"],
    "xlmr": ["truncate", "pcw", "gp", "rp", "pi"],
    "nomic": ["truncate", "pcw", "gp", "pi", "ntk", "yarn", "selfextend"],
    "modernbert": ["truncate", "pcw", "gp", "pi", "ntk", "yarn", "selfextend"],
    "llama": ["truncate", "pcw", "gp", "pi", "ntk", "yarn", "selfextend"],
    "jina": ["truncate", "native", "pcw"],
}
POOLING = {"llama": "last"}
CASES = [(family, method) for family, methods in METHODS_BY_FAMILY.items() for method in methods]
#: one method of each family, each kind of method once (APE pi and rp, RoPE selfextend, ntk and yarn, ALiBi):
#: the fast tier's sample of a family x method matrix (conftest.fast_sample)
FAST_CASES = {("bert", "pi"), ("xlmr", "rp"), ("nomic", "selfextend"), ("modernbert", "ntk"), ("llama", "yarn"),
              ("jina", "native")}


def encoder_for(tiny_models, family, method, **options):
    max_length = None if method == "truncate" else 4 * LO
    if family == "jina" and method == "truncate":
        max_length = LO
    return load_encoder(
        tiny_models[family],
        method=method,
        max_length=max_length,
        pooling=POOLING.get(family, "mean"),
        **options,
    )


def reference_embeddings(folder, texts, pooling="mean"):
    """The unmodified model: plain transformers forward (default attention), one text at a time."""
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = load_transformer(folder).eval()
    out = []
    with torch.no_grad():
        for text in texts:
            batch = tokenizer([text], return_tensors="pt")
            accepted = inspect.signature(model.forward).parameters
            hidden = model(**{k: v for k, v in batch.items() if k in accepted}).last_hidden_state
            out.append(pool(hidden, batch["attention_mask"].bool(), pooling)[0])
    return torch.stack(out).numpy()


SHORT_TEXTS = [words(5, seed=1), words(12, seed=2), words(25, seed=3)]  # all at most Lo tokens


@pytest.mark.parametrize(("family", "method"), CASES)
def test_short_inputs_equal_the_unmodified_model(tiny_models, family, method):
    reference = reference_embeddings(tiny_models[family], SHORT_TEXTS, POOLING.get(family, "mean"))
    for options in ({}, {"attention_scale": "logn"}):
        encoder = encoder_for(tiny_models, family, method, **options)
        assert max(len(encoder.tokenizer(t)["input_ids"]) for t in SHORT_TEXTS) <= LO
        got = encoder.encode(SHORT_TEXTS, batch_size=2)
        assert got.dtype == np.float32 and got.shape == reference.shape
        np.testing.assert_allclose(got, reference, atol=1e-5, rtol=0)


@pytest.mark.parametrize(
    ("family", "method", "scale"),
    fast_sample([(f, m, scale) for f, m in CASES for scale in ("fixed", "per_document")
                 if m != "truncate" or scale == "fixed"], FAST_CASES),
)
def test_embedding_does_not_depend_on_batch_neighbours(tiny_models, family, method, scale):
    encoder = encoder_for(tiny_models, family, method, scale=scale, attention_scale="logn")
    texts = [words(100, seed=4), words(7, seed=5), words(60, seed=6), words(30, seed=7), words(110, seed=8)]
    batched = encoder.encode(texts, batch_size=5, max_tokens_per_batch=10_000)
    for i, text in enumerate(texts):
        alone = encoder.encode([text])
        np.testing.assert_allclose(alone[0], batched[i], atol=1e-5, rtol=0)
    # input order is preserved whatever the batching
    shuffled = encoder.encode(texts[::-1], batch_size=2)
    np.testing.assert_allclose(shuffled[::-1], batched, atol=1e-5, rtol=0)


@pytest.mark.parametrize(("family", "method"), [c for c in CASES if c[1] not in ("truncate", "pcw", "native")])
def test_methods_change_long_inputs(tiny_models, family, method):
    """A method must actually act on inputs longer than Lo (guards against a silent no-op)."""
    text = words(100, seed=9)
    plain = encoder_for(tiny_models, family, "pcw").encode([text])
    extended = encoder_for(tiny_models, family, method).encode([text])
    assert np.abs(plain - extended).max() > 1e-3


@pytest.mark.parametrize("family", ["nomic", "jina", "llama", "modernbert"])
def test_blocked_attention_equals_unblocked(tiny_models, family):
    """Query blocking (what keeps memory linear) changes nothing but memory.

    It applies where scores are explicit: SelfExtend, ALiBi, causal attention over a padded
    batch, local (sliding-window) layers.
    """
    method = {"nomic": "selfextend", "jina": "native", "llama": "pi", "modernbert": "pi"}[family]
    encoder = encoder_for(tiny_models, family, method)
    texts = [words(120, seed=10), words(40, seed=11)]
    full = encoder.encode(texts)
    encoder.runner.max_score_elements = 64  # forces blocks of a single query row
    np.testing.assert_allclose(encoder.encode(texts), full, atol=1e-5, rtol=0)


def test_two_encoders_side_by_side_share_nothing(tiny_models):
    folder = tiny_models["bert"]
    text = words(100, seed=12)
    truncate_before = encoder_for(tiny_models, "bert", "pcw").encode([text])
    pi = encoder_for(tiny_models, "bert", "pi", attention_scale="logn", temperature=0.7)
    gp = encoder_for(tiny_models, "bert", "gp")
    pi_vec, gp_vec = pi.encode([text]), gp.encode([text])
    truncate_after = encoder_for(tiny_models, "bert", "pcw").encode([text])
    np.testing.assert_array_equal(truncate_before, truncate_after)
    assert np.abs(pi_vec - gp_vec).max() > 1e-3
    np.testing.assert_allclose(pi.encode([text]), pi_vec, atol=1e-6)
    # a plain model loaded afterwards still uses the library's own attention and positions
    plain = load_transformer(folder)
    assert plain.config._attn_implementation != "longembed"
    assert type(plain.embeddings.position_embeddings) is torch.nn.Embedding
    short = SHORT_TEXTS[:1]
    np.testing.assert_allclose(reference_embeddings(folder, short), gp.encode(short), atol=1e-5)


def test_pcw_is_the_mean_of_end_aligned_token_windows(tiny_models):
    encoder = encoder_for(tiny_models, "bert", "pcw")
    plain = encoder_for(tiny_models, "bert", "truncate")
    text = words(70, seed=13)
    ids = encoder.tokenizer(text, add_special_tokens=False)["input_ids"]
    room = LO - 2
    assert len(ids) > 2 * room
    cls, sep = encoder.tokenizer.cls_token_id, encoder.tokenizer.sep_token_id
    spans = [(0, room), (room, 2 * room), (len(ids) - room, len(ids))]
    windows = [[cls, *ids[a:b], sep] for a, b in spans]
    with torch.no_grad():
        expected = torch.stack([plain.runner._pooled([w])[0] for w in windows]).mean(0).numpy()
    got, stats = encoder.encode([text], normalize_embeddings=False, return_stats=True)
    np.testing.assert_allclose(got[0], expected, atol=1e-5)
    assert stats.n_sequences == 3


def test_overflow_is_reported_or_rejected(tiny_models):
    encoder = encoder_for(tiny_models, "bert", "truncate")
    texts = [words(5), words(200, seed=1), words(3), words(300, seed=2)]
    with pytest.warns(UserWarning, match="2 of 4 inputs exceed max_length=32"):
        out, stats = encoder.encode(texts, return_stats=True)
    assert out.shape[0] == 4
    assert stats.n_truncated == 2 and stats.truncated_indices == [1, 3]
    # the truncated text embeds as its first Lo tokens, with the closing special token kept
    ids = encoder.tokenizer(texts[1])["input_ids"]
    kept = ids[: LO - 1] + ids[-1:]
    with torch.no_grad():
        np.testing.assert_allclose(out[1], encoder.runner._pooled([kept])[0].numpy(), atol=1e-6)
    strict = encoder_for(tiny_models, "bert", "truncate", on_overflow="error")
    with pytest.raises(ValueError, match="exceed max_length"):
        strict.encode(texts)


def test_clear_errors(tiny_models, tmp_path):
    bert = tiny_models["bert"]
    with pytest.raises(ValueError, match="unknown method 'nope'"):
        load_encoder(bert, method="nope")
    with pytest.raises(ValueError, match="does not apply to APE models.*gp, rp, pi"):
        load_encoder(bert, method="ntk", max_length=128)
    with pytest.raises(ValueError, match="does not apply to ROPE"):
        load_encoder(tiny_models["nomic"], method="rp", max_length=128)
    with pytest.raises(ValueError, match="pass max_length"):
        load_encoder(bert, method="pi")
    with pytest.raises(ValueError, match="truncate keeps at most 32"):
        load_encoder(bert, method="truncate", max_length=64)
    with pytest.raises(FileNotFoundError, match="no model folder"):
        load_encoder(tmp_path / "missing" / "model")
    with pytest.raises(FileNotFoundError, match="not a model folder"):
        load_encoder(tmp_path)
    with pytest.raises(TypeError, match="unknown option"):
        load_encoder(bert, temprature=0.5)
    with pytest.raises(ValueError, match="temperature must be in"):
        load_encoder(bert, temperature=1.5)
    encoder = load_encoder(bert)
    with pytest.raises(ValueError, match=r"texts\[1\] is empty"):
        encoder.encode(["fine", "  "])
    with pytest.raises(TypeError, match=r"texts\[0\] is int"):
        encoder.encode([3])
    with pytest.raises(ValueError, match="unknown prompt_name"):
        encoder.encode(["a"], prompt_name="query")


def test_prompt_is_prepended(tiny_models):
    encoder = load_encoder(tiny_models["bert"], prompts={"query": "the "})
    np.testing.assert_allclose(
        encoder.encode(["cat"], prompt_name="query"), encoder.encode(["the cat"]), atol=1e-6
    )
    np.testing.assert_allclose(encoder.encode(["cat"], prompt="the "), encoder.encode(["the cat"]), atol=1e-6)


def test_temperature_one_is_exact_and_lower_temperature_changes(tiny_models):
    plain = load_encoder(tiny_models["nomic"])
    text = [words(20, seed=3)]
    np.testing.assert_array_equal(
        load_encoder(tiny_models["nomic"], temperature=1.0).encode(text), plain.encode(text)
    )
    cooled = load_encoder(tiny_models["nomic"], temperature=0.5).encode(text)
    assert np.abs(cooled - plain.encode(text)).max() > 1e-5  # far above float noise (1e-7)
    np.testing.assert_allclose(plain.encode(text, temperature=0.5), cooled, atol=1e-6)


def test_length_temperature_with_decay_one_is_logn_scaling(tiny_models):
    """tau(n) = (log Lo / log n) is exactly log-n attention scaling."""
    text = [words(100, seed=4)]
    logn = encoder_for(tiny_models, "bert", "pi", attention_scale="logn").encode(text)
    decay = encoder_for(tiny_models, "bert", "pi", temperature_decay=1.0, temperature_reference=LO).encode(
        text
    )
    np.testing.assert_allclose(decay, logn, atol=1e-5)


def test_hub_id_that_cannot_be_fetched_names_the_fix(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(
        OSError, match="(?s)could not be fetched from the Hugging Face hub.*downloaded model folder"
    ):
        load_encoder("someone/not-a-cached-model")


def test_repr_names_the_method_options_and_precision(tiny_models):
    """The line ``longembed eval`` prints first: dynamic NTK must not read as the static default."""
    dynamic = repr(load_encoder(tiny_models["nomic"], method="ntk", max_length=128, ntk_variant="dynamic",
                                ntk_factor=16, dtype="bfloat16"))
    assert "method='ntk', ntk_factor=16, ntk_variant='dynamic'," in dynamic and dynamic.endswith(", dtype='bfloat16')")
    selfextend = repr(load_encoder(tiny_models["nomic"], method="selfextend", max_length=128, group_size=3, window=8))
    assert "method='selfextend', group_size=3, window=8," in selfextend and "dtype" not in selfextend
    assert "method='pi', scheme=" in repr(load_encoder(tiny_models["bert"], method="pi", max_length=128))


def test_config_round_trips(tiny_models, tmp_path):
    from longembed import EncoderConfig

    encoder = load_encoder(
        tiny_models["nomic"], method="selfextend", max_length=128, group_size=3, window=8, temperature=0.8
    )
    encoder.config.save(tmp_path / "encoder.json")
    loaded = EncoderConfig.load(tmp_path / "encoder.json")
    assert loaded == encoder.config
    again = load_encoder(
        loaded.model,
        method=loaded.method,
        max_length=loaded.max_length,
        **{k: v for k, v in loaded.to_dict().items() if k not in ("model", "method", "max_length")},
    )
    text = [words(90, seed=3)]
    np.testing.assert_array_equal(again.encode(text), encoder.encode(text))


def test_default_batches_hold_batch_size_full_length_inputs(tiny_models, monkeypatch):
    """Uniform long inputs are not split into batches of one (memory is linear in tokens)."""
    encoder = encoder_for(tiny_models, "bert", "pi")
    sizes = []
    forward = encoder.runner._pooled
    monkeypatch.setattr(encoder.runner, "_pooled", lambda seqs, **kw: sizes.append(len(seqs)) or forward(seqs, **kw))
    encoder.encode([words(110, seed=i) for i in range(10)], batch_size=4)
    assert sizes == [4, 4, 2]
    sizes.clear()
    encoder.encode([words(110, seed=i) for i in range(10)], batch_size=4, max_tokens_per_batch=250)
    assert sizes == [2, 2, 2, 2, 2]


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"method": "ntk", "max_length": 128, "ntk_factor": float("nan")}, ValueError, "ntk_factor must be a finite"),
        ({"method": "ntk", "max_length": 128, "ntk_factor": float("inf")}, ValueError, "ntk_factor must be a finite"),
        ({"method": "pi", "max_length": True}, ValueError, "max_length must be a positive integer"),
        ({"method": "pi", "max_length": 10**9}, ValueError, "above the 1,048,576 tokens"),
        ({"method": "pi", "max_length": 128, "temperature_reference": 1}, ValueError, "at least 2 tokens"),
        ({"method": "pi", "max_length": 128, "ntk_variant": "dynamic"}, ValueError, "applies to method 'ntk' only"),
        ({"method": "ntk", "max_length": 128, "yarn_options": {"beta": 1}}, ValueError, "unknown yarn_options"),
        ({"method": "pi", "max_length": 128, "temperature": float("nan")}, ValueError, "temperature must be in"),
    ],
)
def test_bad_options_are_clear_errors(tiny_models, options, error, message):
    """Values that would silently give wrong vectors (NaN factors, True as a length, ...) are refused."""
    family = "nomic" if options["method"] == "ntk" else "bert"
    with pytest.raises(error, match=message):
        load_encoder(tiny_models[family], **options)


def test_original_length_beyond_the_position_table_fails_at_load(tiny_models):
    """An Lo larger than the model's position table is refused at load, not deep in a forward."""
    with pytest.raises(ValueError, match="original_length=64 is larger than this model's position table"):
        load_encoder(tiny_models["bert"], method="pi", max_length=256, original_length=64)
    with pytest.raises(ValueError, match="original_length=40 is larger"):
        load_encoder(tiny_models["xlmr"], method="pi", max_length=256, original_length=40)  # table 33 - offset 2


def test_a_scale_factor_beyond_the_papers_warns(tiny_models):
    """max_length above 64 x Lo is allowed, with a warning that says how far beyond the papers it is."""
    with pytest.warns(UserWarning, match="128 times this model's Lo=32"):
        load_encoder(tiny_models["bert"], method="pi", max_length=128 * LO)


def test_a_device_the_machine_lacks_is_a_clear_error(tiny_models):
    """A missing or unknown device fails at load with a message naming it."""
    missing = "cuda:99" if torch.cuda.is_available() else "cuda"
    with pytest.raises(ValueError, match=f"device '{missing}'"):
        load_encoder(tiny_models["bert"], device=missing)
    with pytest.raises(ValueError, match="unknown device 'gpu-please'"):
        load_encoder(tiny_models["bert"], device="gpu-please")


def test_encode_takes_what_sentence_transformers_takes(tiny_models):
    """An empty list gives a (0, dim) array; a numpy array of strings equals the list; bad text is named."""
    encoder = load_encoder(tiny_models["bert"])
    empty = encoder.encode([])
    assert empty.shape == (0, 32) and empty.dtype == np.float32
    texts = [words(5, seed=1), words(9, seed=2)]
    np.testing.assert_array_equal(encoder.encode(np.array(texts)), encoder.encode(texts))
    with pytest.raises(TypeError, match="1-D strings"):
        encoder.encode(np.array([texts]))
    with pytest.raises(ValueError, match=r"texts\[1\] holds a lone surrogate \(U\+D800\) at character 3"):
        encoder.encode(["fine", "the\ud800 rest"])


@pytest.mark.parametrize("family", list(METHODS_BY_FAMILY))
def test_tempscale_and_logn_act_in_every_family(tiny_models, family):
    """Every family runs through longembed's attention: a lower tau and log-n scaling change long inputs
    (JinaBERT once silently kept its own attention, so both were no-ops there)."""
    method = {"jina": "native"}.get(family, "pcw")
    long_method = {"bert": "pi", "xlmr": "pi", "jina": "native"}.get(family, "ntk")
    lo = {"original_length": LO} if family == "jina" else {}  # JinaBERT's Lo is its training length, 512
    text = [words(100, seed=30)]
    plain = encoder_for(tiny_models, family, long_method, **lo)
    assert plain.model.config._attn_implementation == "longembed"
    assert np.abs(encoder_for(tiny_models, family, method, temperature=0.5).encode(text)
                  - encoder_for(tiny_models, family, method).encode(text)).max() > 1e-5
    assert np.abs(encoder_for(tiny_models, family, long_method, attention_scale="logn", **lo).encode(text)
                  - plain.encode(text)).max() > 1e-5


def test_a_model_that_refuses_longembeds_attention_is_an_error(tiny_models, monkeypatch):
    """If transformers will not switch a model's attention, loading fails instead of silently ignoring it."""
    from transformers import PreTrainedModel

    monkeypatch.setattr(PreTrainedModel, "set_attn_implementation", lambda self, name: None)
    with pytest.raises(ValueError, match="cannot switch to longembed's attention function"):
        load_encoder(tiny_models["bert"])


def test_loading_prints_no_transformers_progress_bar(tiny_models, capfd):
    """transformers' per-load "Loading weights" bar is off; the CLI's own progress is what shows."""
    load_encoder(tiny_models["nomic"], method="ntk", max_length=128)
    captured = capfd.readouterr()
    assert "Loading weights" not in captured.err + captured.out


def test_token_states_runs_id_sequences_as_they_are(tiny_models):
    """token_states (what the server batches: windows it planned) is the model's last hidden state of
    each id sequence, whatever its batch neighbours; a sequence longer than one model input is refused."""
    from transformers import AutoModel

    folder = tiny_models["bert"]
    enc = load_encoder(folder, "pi", max_length=2 * LO)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    sequences = [tokenizer(words(n, seed=n))["input_ids"] for n in (5, 2 * LO - 2, 20)]
    got = enc.runner.token_states(sequences, RunOptions(max_tokens_per_batch=2 * LO))
    model = AutoModel.from_pretrained(folder).eval()
    for ids, states in zip(sequences[::2], got[::2], strict=True):  # within Lo: the plain model is the reference
        with torch.no_grad():
            reference = model(input_ids=torch.tensor([ids])).last_hidden_state[0].numpy()
        assert states.dtype == np.float32 and states.shape == reference.shape
        np.testing.assert_allclose(states, reference, atol=1e-5)
    alone = enc.runner.token_states([sequences[1]], RunOptions())[0]  # past Lo: the extension method's states, batch-independent
    np.testing.assert_allclose(got[1], alone, atol=1e-5)
    np.testing.assert_allclose(got[1], enc.encode(tokenizer.decode(sequences[1][1:-1]), output_value="token_embeddings"),
                               atol=1e-5)
    with pytest.raises(ValueError, match="more than one model input holds"):
        enc.runner.token_states([list(range(2 * LO + 1))], RunOptions())


def test_each_call_gets_its_own_stats_when_threads_share_an_encoder(tiny_models):
    """encode(..., return_stats=True) returns the call's own stats: two threads encoding at once on one
    encoder (as the server's and the corpus workers' do) never see each other's (issue 44)."""
    encoder = encoder_for(tiny_models, "bert", "truncate")
    # thread a: nothing truncated, 3 inputs; thread b: 2 of 2 truncated
    jobs = {"a": [words(4, seed=i) for i in range(3)], "b": [words(200, seed=7), words(300, seed=8)]}
    expected = {"a": (3, []), "b": (2, [0, 1])}
    start = threading.Barrier(2)
    seen: dict[str, list] = {"a": [], "b": []}

    def work(name: str) -> None:
        start.wait()
        for _ in range(20):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)
                _, stats = encoder.encode(jobs[name], batch_size=1, return_stats=True)
            seen[name].append((stats.n_inputs, stats.truncated_indices))

    threads = [threading.Thread(target=work, args=(name,)) for name in jobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for name in jobs:
        assert seen[name] == [expected[name]] * 20


def test_token_states_report_their_stats_and_the_encoder_keeps_none(tiny_models):
    """encode_tokens(..., return_stats=True) returns the call's stats as encode does; no call leaves
    stats behind on the encoder (the old last_stats side channel is gone)."""
    encoder = encoder_for(tiny_models, "bert", "pcw")
    tokens, stats = encoder.encode_tokens([words(5), words(70, seed=13)], return_stats=True)
    assert len(tokens) == 2 and (stats.n_inputs, stats.n_sequences, stats.n_truncated) == (2, 4, 0)
    assert not hasattr(encoder, "last_stats") and not hasattr(encoder.runner, "last_stats")


def test_a_truncation_warning_points_at_the_callers_line(tiny_models):
    """However deep in the encoder the cut is made (encode_query -> encode -> the runner), its warning
    names the line that called the encoder, as does a direct call of the runner (the server's way)."""
    encoder = encoder_for(tiny_models, "bert", "truncate")
    long = [words(200, seed=1)]
    calls = [encoder.encode, encoder.encode_query, encoder.encode_tokens,
             lambda texts: encoder.encode_chunks(texts, "tokens:64", late=False),
             lambda texts: encoder.runner.encode_tokenized(encoder.runner.tokenize(texts), RunOptions())]
    for call in calls:
        with pytest.warns(UserWarning, match="exceed max_length") as caught:
            call(long)
        assert [w.filename for w in caught] == [__file__]
