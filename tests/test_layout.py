"""Tests for attn_helpers.layout: strides, reading order and the memory-layout figure (chapter 5)."""

import matplotlib

matplotlib.use("Agg")

import pytest
import torch

from attn_helpers import layout


def test_layout_line():
    a = torch.zeros(2, 3, 4)
    assert layout.layout(a) == "shape (2, 3, 4)  stride (12, 4, 1)  contiguous"
    assert layout.layout(a.transpose(1, 2)) == "shape (2, 4, 3)  stride (12, 1, 4)  NOT contiguous"
    with pytest.raises(TypeError, match="torch.Tensor"):
        layout.layout([1, 2])


def test_reading_order():
    a = torch.arange(12).view(3, 4)
    assert layout.reading_order(a).tolist() == list(range(12))
    assert layout.reading_order(a.T).tolist() == [0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11]
    assert torch.equal(a.T.flatten(), layout.reading_order(a.T))        # values equal their offsets here
    assert layout.reading_order(a[1:]).tolist() == list(range(4, 12))   # storage offset respected
    assert layout.storage_size(a[1:]) == 12
    with pytest.raises(TypeError, match="torch.Tensor"):
        layout.reading_order("x")


def test_plot_memory_layout():
    a = torch.arange(12.0).view(3, 4)
    fig = layout.plot_memory_layout({"a": a, "a.T": a.T, "copy": a.T.contiguous()}, title="T")
    assert len(fig.axes) == 6 and fig._suptitle.get_text() == "T"
    assert "not contiguous" in fig.axes[3].get_title() and "stride (1, 4)" in fig.axes[3].get_title()
    assert fig.axes[1].get_xlabel() == "memory address (in elements)"


def test_plot_memory_layout_bad_input():
    with pytest.raises(ValueError, match="non-empty dict"):
        layout.plot_memory_layout({})
    with pytest.raises(ValueError, match="at least one dimension"):
        layout.plot_memory_layout({"scalar": torch.tensor(1.0)})
    with pytest.raises(ValueError, match=r"smaller example"):
        layout.plot_memory_layout({"big": torch.zeros(10, 10)})
