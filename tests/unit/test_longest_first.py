"""The batch fan-out's order (service.steps.longest_first): pure, no database."""
from service.steps import longest_first, longest_scopes_first

SECONDS = {("a", "full"): 5.0, ("a", "visible"): 1.0, ("b", "full"): 100.0,
           ("b", "visible"): 3.0, ("c", "visible"): 50.0}


def test_posteriors_go_by_their_longest_stored_scope_and_the_unknown_ones_first():
    assert longest_first(["a", "b", "c", "d", "e"], SECONDS) == ["d", "e", "b", "c", "a"]


def test_with_no_history_the_submitters_order_stands():
    assert longest_first(["c", "a", "b"], {}) == ["c", "a", "b"]


def test_ties_keep_the_submitters_order():
    tied = {("x", "full"): 7.0, ("y", "full"): 7.0}
    assert longest_first(["y", "x"], tied) == ["y", "x"]


def test_scopes_longest_first_and_an_unknown_scope_before_them():
    assert longest_scopes_first("b", ["visible", "full"], SECONDS) == ["full", "visible"]
    assert longest_scopes_first("c", ["full", "visible"], SECONDS) == ["full", "visible"]
    assert longest_scopes_first("c", ["visible", "full"], SECONDS) == ["full", "visible"]
