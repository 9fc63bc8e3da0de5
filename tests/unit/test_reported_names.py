"""SPEC §2.3 names a program reports: strict grammar, dense indices, a total cap."""
from __future__ import annotations

import pytest

from workers.fit import MAX_SCALARS, ReportedNameError, check_reported_names


def test_valid_names_give_their_layout():
    names = ["mu", "theta[1]", "theta[2]", "b[1,1]", "b[1,2]", "b[2,1]", "b[2,2]"]
    assert check_reported_names(names) == {"mu": (), "theta": (2,), "b": (2, 2)}
    shapes = {"mu": [], "theta": [2], "b": [2, 2]}
    assert check_reported_names(names, shapes) == {"mu": (), "theta": (2,), "b": (2, 2)}
    assert check_reported_names([], {}) == {}
    assert check_reported_names([], {"empty": [0]}) == {"empty": (0,)}


@pytest.mark.parametrize(
    ("names", "bad"),
    [
        (["x]"], "x]"),
        (["alpha[200000]"], "alpha[200000]"),  # one scalar claiming a huge vector
        (["theta[2]", "theta[1]"], "theta[1]"),  # not row-major
        (["theta[1]", "theta[1]"], "theta[1]"),
        (["theta[1]", "theta[3]"], "theta[3]"),
        (["mu", "mu"], "mu"),
        (["b[1]", "b[1,1]"], "b[1,1]"),
        (["b[1,1]", "b[2,2]"], "b[2,2]"),
        (["t[01]"], "t[01]"),
        (["t[0]"], "t[0]"),
        (["t[1, 2]"], "t[1, 2]"),
        (["a b"], "a b"),
        (["1a"], "1a"),
        ([""], ""),
        (["x" * 101], "x" * 101),
    ],
)
def test_names_outside_spec_are_refused_naming_the_name(names, bad):
    with pytest.raises(ReportedNameError) as info:
        check_reported_names(names)
    assert info.value.name == bad
    assert bad in str(info.value)


@pytest.mark.parametrize(
    ("names", "shapes", "bad"),
    [
        (["x]"], {"x]": []}, "x]"),
        (["alpha[200000]"], {"alpha[200000]": []}, "alpha[200000]"),
        (["a[1]"], {"a": [200000, 200000]}, "a"),  # never expanded
        (["a[1]"], {"a": [2]}, "a[2]"),
        (["a[2]", "a[1]"], {"a": [2]}, "a[2]"),
        (["a[1]", "a[2]"], {"a": [True, 2]}, "a"),
        (["a[1]", "a[2]"], {"a": "2"}, "a"),
        (["a", "b"], {"a": []}, "b"),
    ],
)
def test_names_must_be_the_expansion_of_the_shapes(names, shapes, bad):
    with pytest.raises(ReportedNameError) as info:
        check_reported_names(names, shapes)
    assert info.value.name == bad


def test_total_scalars_are_capped():
    check_reported_names([f"v[{i}]" for i in range(1, MAX_SCALARS + 1)])
    with pytest.raises(ReportedNameError, match="more than the limit"):
        check_reported_names([f"v[{i}]" for i in range(1, MAX_SCALARS + 2)])
    with pytest.raises(ReportedNameError, match=f"more than {MAX_SCALARS}"):
        check_reported_names(["v[1]"], {"a": [MAX_SCALARS], "v": [1]})
    with pytest.raises(ReportedNameError):
        check_reported_names(None)
