"""The bindings reach the real Rust channel layer."""
import pytest

import secinfer


def test_version_matches_package():
    assert secinfer.core().version() == "0.1.0"


@pytest.mark.parametrize("net", ["mem", "tcp"])
def test_echo_cost_counts_bytes_and_rounds(net):
    cost = secinfer.core().echo_cost(1000, net=net)
    setup = cost["setup"]
    assert setup["bytes_sent"] == 8000
    assert setup["bytes_received"] == 8000
    assert setup["rounds"] == 2
    assert cost["online"]["bytes_sent"] == 0


def test_echo_rejects_unknown_profile():
    with pytest.raises(ValueError, match="unknown network profile"):
        secinfer.core().echo_cost(10, profile="moon")
