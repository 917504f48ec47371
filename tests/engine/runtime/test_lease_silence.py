"""The silence rule of a replica's own Lease writes (engine.runtime.drive.lease.silent_longer): was the Lease left
unwritten for longer than a limit at any moment since a claim? Pure, over small lists of write times."""

from __future__ import annotations

import pytest

from engine.runtime.drive.lease import silent_longer


@pytest.mark.parametrize(("writes", "since", "now", "silent"), [
    ([0, 1, 2, 3], 1.5, 3.5, False),  # renewed every second, the claim at 1.5: never silent for 2 s
    ([0, 1, 2, 3], 1.5, 5.5, True),  # silent now (2.5 s since the last write)
    ([0, 1, 4.5, 5], 1.5, 5.2, True),  # a freeze from 1 to 4.5 after the claim, renewed since: still silent once
    ([0, 1, 4.5, 5], 4.6, 5.2, False),  # a freeze before the claim does not count against it
    ([0, 3.5, 4], 1.0, 4.2, True),  # the stretch the claim fell in (0 to 3.5) counts whole
    ([5, 6], 1.0, 6.5, True),  # no write kept from before the claim: nothing proves the Lease was held
    ([], 1.0, 1.1, True),
])
def test_a_stretch_without_a_write_longer_than_the_limit_since_the_claim_is_silence(
    writes: list[float], since: float, now: float, silent: bool,
) -> None:
    assert silent_longer(writes, since, now, 2.0) is silent
