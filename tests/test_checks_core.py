"""attn_helpers.checks: the engine every exercise's self-check uses."""

import pytest
import torch

from attn_helpers.checks import CheckFailed, check_tensor, check_value


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
