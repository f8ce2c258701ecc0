"""attn_helpers.checks: the engine every exercise's self-check uses."""

import concurrent.futures
import subprocess
import sys
import threading

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import attn_helpers as ah
from attn_helpers.checks import (
    CheckFailed,
    Watch,
    as_number,
    check_tensor,
    check_value,
)


def test_correct_answer_prints_one_line(capsys):
    check_tensor(torch.tensor([1.0, 2.0]), torch.tensor([1.0, 2.0]), "w")
    assert capsys.readouterr().out == "✓ w: correct\n"


def test_known_mistake_gets_its_hint():
    with pytest.raises(CheckFailed, match="Hint: forgot the softmax"):
        check_tensor(torch.tensor([4.0, 2.0]), torch.tensor([0.88, 0.12]), "w",
                     {"forgot the softmax": torch.tensor([4.0, 2.0])})


def test_wrong_type_dtype_shape_and_values():
    expected = torch.zeros(2, 3)
    with pytest.raises(CheckFailed, match="should be a torch.Tensor, got list"):
        check_tensor([0.0], expected, "W")
    with pytest.raises(CheckFailed, match="dtype torch.int64"):
        check_tensor(torch.zeros(2, 3, dtype=torch.long), expected, "W")
    for half in (torch.float16, torch.bfloat16):  # a right answer in half precision: named, not "wrong values"
        with pytest.raises(CheckFailed, match=f"W is {half}, whose rounding .* compute in float32"):
            check_tensor(torch.full((2, 3), 100 / 3).to(half), torch.full((2, 3), 100 / 3), "W")
    with pytest.raises(CheckFailed, match=r"W is a torch.sparse_coo tensor; pass a dense one: W.to_dense\(\)"):
        check_tensor(torch.eye(2, 3).to_sparse(), expected, "W")
    # an answer on another device (a GPU; "meta" stands in for one here): named, not a crash inside torch
    with pytest.raises(CheckFailed, match=r"W is on the meta device, and the check compares on the CPU.*W.cpu\(\)"):
        check_tensor(torch.zeros(2, 3, device="meta"), expected, "W", {"a mistake": torch.ones(2, 3)})
    with pytest.raises(CheckFailed, match=r"shape \(3, 2\), expected \(2, 3\)"):
        check_tensor(torch.zeros(3, 2), expected, "W")
    with pytest.raises(CheckFailed, match=r"wrong values \(largest difference 1 at index \(1, 2\)\)"):
        check_tensor(torch.zeros(2, 3).index_put((torch.tensor(1), torch.tensor(2)), torch.tensor(1.0)), expected, "W")


def test_a_mistake_equal_to_the_answer_is_not_reported():
    check_tensor(torch.ones(2), torch.ones(2), "w", {"never shown": torch.ones(2)})


def test_gradients_are_ignored_and_numbers_work(capsys):
    check_tensor(torch.ones(2, requires_grad=True), torch.ones(2), "w")
    check_value(torch.tensor(0.5), 0.5, "p")
    with pytest.raises(CheckFailed, match="Hint: squared"):
        check_value(0.25, 0.5, "p", {"squared": 0.25})
    with pytest.raises(CheckFailed, match="should be a number"):
        check_value("0.5", 0.5, "p")


@pytest.mark.parametrize("answer", [
    6, 6.0, np.float32(6.0), np.float64(6.0), np.int64(6), np.int32(6), np.array(6.0), np.array([6.0]),
    torch.tensor(6.0), torch.tensor([6]), torch.tensor([[6.0]], requires_grad=True),
])
def test_check_value_accepts_any_real_number(answer, capsys):
    check_value(answer, 6.0, "x")
    assert capsys.readouterr().out == "✓ x: correct\n"


@pytest.mark.parametrize("answer, message", [
    (True, "got the bool True"),
    (np.bool_(True), "got the bool"),
    (torch.tensor(True), "got the bool"),
    ("6", "should be a number .*got str"),
    (None, "got NoneType"),
    (6 + 0j, "got complex"),
    ([6.0], "got list"),
    (np.array([6.0, 6.0]), r"single number, got a ndarray of shape \(2,\)"),
    (torch.ones(2, 2), r"single number, got a Tensor of shape \(2, 2\)"),
    (float("nan"), "not a finite number"),
    (np.float32("inf"), "not a finite number"),
])
def test_check_value_rejects_what_is_not_one_real_number(answer, message):
    with pytest.raises(CheckFailed, match=message):
        check_value(answer, 6.0, "x")


def test_check_value_tolerances():
    check_value(6.0 + 5e-5, 6.0, "x")
    with pytest.raises(CheckFailed, match="x = 6.01 is not right"):
        check_value(6.01, 6.0, "x")
    check_value(16385, 16384, "n", atol=0.5)  # the default relative tolerance allows 1.6 here
    with pytest.raises(CheckFailed, match="is not right"):
        check_value(16385, 16384, "n", atol=0.5, rtol=0)
    assert as_number(np.float32(0.5), "x") == 0.5


def test_watch_records_softmax_by_every_route():
    x = torch.randn(3, 4, requires_grad=True)
    for route in (lambda: torch.softmax(x, -1), lambda: F.softmax(x, -1), lambda: x.softmax(-1),
                  lambda: torch.nn.Softmax(-1)(x), lambda: F.log_softmax(x, -1), lambda: F.softmin(x, -1)):
        with Watch() as watch:
            route()
        assert watch.used_softmax()
    with Watch() as watch:
        torch.exp(x - x.amax(-1, keepdim=True))
    assert not watch.used_softmax() and not watch.used_fused_attention()


def test_watch_records_fused_attention_with_and_without_gradients():
    x = torch.randn(1, 5, 4)
    for grad in (True, False):
        with torch.set_grad_enabled(grad), Watch() as watch:
            F.scaled_dot_product_attention(x, x, x)
        assert watch.used_fused_attention()


def test_watch_records_calls_of_python_functions_however_reached():
    from attn_helpers.attention import attention as same_function

    x = torch.randn(5, 4)
    with Watch([ah.attention]) as watch:
        ah.softmax(x)
    assert watch.called == set()
    with Watch([ah.attention]) as watch:
        ah.SelfAttentionHead(4, 2)(x)  # reaches attention inside the module
    assert watch.called == {"attention"}
    with Watch([ah.attention]) as watch:
        same_function(x, x, x)
    assert watch.called == {"attention"}


def test_watch_restores_the_previous_profiler():
    import sys

    seen = []

    def profiler(frame, event, arg):
        seen.append(event)

    sys.setprofile(profiler)
    try:
        with Watch([ah.attention]):
            ah.softmax(torch.zeros(2))
        assert sys.getprofile() is profiler and seen  # restored, and called meanwhile
    finally:
        sys.setprofile(None)


def test_watch_sees_a_modules_forward_however_it_is_reached():
    torch.manual_seed(0)
    head, x = ah.SelfAttentionHead(6, 4), torch.randn(2, 3, 6)

    def copied(x):  # a fresh head with the same weights
        twin = ah.SelfAttentionHead(6, 4)
        twin.load_state_dict(head.state_dict())
        return twin(x)

    for route in (head, head.forward, lambda x: ah.SelfAttentionHead.forward(head, x), copied,
                  lambda x: torch.no_grad()(head)(x)):
        with Watch({ah.SelfAttentionHead.forward: "the head's forward"}) as watch:
            route(x)
        assert watch.called == {"the head's forward"}
    with Watch({ah.SelfAttentionHead.forward: "the head's forward"}) as watch:
        head.W_q(x)  # its layers are not the head
    assert not watch.called


@pytest.mark.parametrize("escape, named", [
    (lambda: threading.Thread(target=print).start(), "starts a thread"),
    (lambda: concurrent.futures.ThreadPoolExecutor().submit(abs, -1).result(), "starts a thread"),
    (lambda: subprocess.run(["true"], check=True), "starts a process"),
    (lambda: sys.setprofile(None), "switches off the check's profiler"),
    (lambda: sys.setprofile(sys.getprofile()), "switches off the check's profiler"),  # even put back
], ids=["thread", "pool", "process", "profiler-off", "profiler-reset"])
def test_watch_fails_when_the_code_gets_out_of_its_sight(escape, named):
    with pytest.raises(CheckFailed, match=named):
        with Watch([ah.attention]):
            escape()
    assert sys.getprofile() is None


def test_watch_lets_a_progress_bar_start_its_monitor_thread(monkeypatch):
    import io

    import tqdm

    if tqdm.tqdm.monitor is not None:  # started by an earlier bar in this process: stop it, to start a fresh one
        tqdm.tqdm.monitor.exit()
    monkeypatch.setattr(tqdm.tqdm, "monitor", None)
    try:
        with Watch([ah.attention]):
            for _ in tqdm.tqdm(range(3), file=io.StringIO()):
                torch.ones(2).softmax(0)
        assert type(tqdm.tqdm.monitor).__name__ == "TMonitor"  # it was started, under the Watch
    finally:
        if tqdm.tqdm.monitor is not None:
            tqdm.tqdm.monitor.exit()


def _both_records_off(fn):
    """``fn()`` with the torch-function and dispatch modes switched off: nothing of it reaches a record."""
    from torch.utils._python_dispatch import _disable_current_modes

    with _disable_current_modes(), torch._C.DisableTorchFunction():
        return fn()


def test_watch_is_not_fooled_by_code_that_switches_off_both_records():
    with pytest.raises(CheckFailed, match="switches off the check's record of PyTorch calls"), Watch([]) as watch:
        _both_records_off(lambda: torch.softmax(torch.ones(3), 0))
    assert not watch.used_softmax()  # unseen: hence the escape
    assert sys.getprofile() is None


def test_fused_attention_shows_even_with_the_torch_function_record_popped():
    from torch.overrides import _pop_mode_temporarily  # how PyTorch hands a call to a mode: no escape

    q = torch.randn(1, 2, 4, 3)
    with Watch([]) as watch, _pop_mode_temporarily():
        F.scaled_dot_product_attention(q, q, q)
    assert "scaled_dot_product_attention" not in watch.functions and watch.used_fused_attention()


def test_watch_takes_no_escape_for_what_pytorch_switches_off_itself(capsys):
    with Watch([]) as watch:  # printing a tensor and a device context both take modes off their stacks
        print(torch.ones(2))
        with torch.device("cpu"):
            torch.softmax(torch.ones(3), 0)
    assert watch.used_softmax() and "tensor([1., 1.])" in capsys.readouterr().out


def test_nested_watches_see_the_same_calls_and_no_escape():
    q = torch.ones(2, 3)
    with Watch([ah.attention]) as outer:
        with Watch([ah.attention]) as inner:
            ah.attention(q, q, q)
    assert outer.called == inner.called == {"attention"} and sys.getprofile() is None
