"""VectorQuantizer checks a given sigma whatever its kind, as SoftKMeans does (issue 36,
item 11): a bad sigma with the default kind ("hard") was ignored."""

from __future__ import annotations

import numpy as np
import pytest

from softkmeans import SoftKMeans

torch = pytest.importorskip("torch")
skt = pytest.importorskip("softkmeans.torch")


@pytest.mark.parametrize("sigma", [-1.0, 0.0, float("nan"), float("inf"), "abc"])
def test_a_bad_sigma_is_refused_with_the_default_kind_as_by_softkmeans(sigma):
    with pytest.raises((TypeError, ValueError), match="sigma"):
        skt.VectorQuantizer(4, 2, sigma)  # kind="hard", the default
    with pytest.raises((TypeError, ValueError), match="sigma"):
        SoftKMeans(2, assignment="hard", sigma=sigma).fit(np.random.default_rng(0).random((10, 2)))


def test_a_good_sigma_is_accepted_and_ignored_by_hard():
    assert skt.VectorQuantizer(4, 2, 0.5).sigma is None
    assert skt.VectorQuantizer(4, 2).sigma is None
    assert skt.VectorQuantizer(4, 2, 0.5, "softmax").sigma == 0.5
    with pytest.raises(ValueError, match="sigma is required"):
        skt.VectorQuantizer(4, 2, None, "softmax")
