"""Our MAC control frame codec against scapy's (`scapy.contrib.mac_control`): frames we encode
dissect there field by field, frames scapy builds decode in ours, over random vectors and times.
Our codec is reached through `examples/mac_control.rs`: `scripts/test-all.sh` builds it in the
release-tests profile, where the Rust tests are built; a `cargo build --release --examples` serves
too.

scapy builds the 60 bytes before the FCS; ours are 64, with Ethernet's CRC-32 (checked here
against zlib's). scapy's `get_pause_time` doubles the quantum at 1 Gbit/s, so durations are
not taken from it: only fields."""

import subprocess
import zlib
from pathlib import Path

import pytest

scapy = pytest.importorskip("scapy", reason="scapy is installed by scripts/test-all.sh")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from scapy.contrib.mac_control import MACControlClassBasedFlowControl, MACControlPause  # noqa: E402
from scapy.layers.l2 import Ether  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
BUILT = [ROOT / "target" / profile / "examples" / "mac_control" for profile in ("release-tests", "release")]
CODEC = next((p for p in BUILT if p.exists()), BUILT[0])
MULTICAST = "01:80:c2:00:00:01"
ME = "02:00:5e:10:20:30"

pytestmark = pytest.mark.skipif(
    not CODEC.exists(), reason="cargo build --profile release-tests --examples first"
)


class Codec:
    """One long-running codec process: a request line in, an answer line out."""

    def __init__(self):
        self.p = subprocess.Popen([str(CODEC)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def ask(self, line):
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()
        return self.p.stdout.readline().strip()

    def close(self):
        self.p.stdin.close()
        assert self.p.wait(10) == 0


@pytest.fixture(scope="module")
def codec():
    c = Codec()
    yield c
    c.close()


def with_fcs(frame60):
    return frame60 + zlib.crc32(frame60).to_bytes(4, "little")


macs = st.binary(min_size=6, max_size=6).map(lambda b: ":".join(f"{x:02x}" for x in b))
quanta = st.integers(0, 0xFFFF)


@settings(max_examples=200, deadline=None)
@given(src=macs, q=quanta)
def test_our_pause_frames_dissect_in_scapy(codec, src, q):
    ours = bytes.fromhex(codec.ask(f"pause {MULTICAST} {src} {q}"))
    assert len(ours) == 64
    assert ours[60:] == zlib.crc32(ours[:60]).to_bytes(4, "little"), "Ethernet's FCS"
    p = Ether(ours[:60])
    assert (p.dst, p.src, p.type) == (MULTICAST, src, 0x8808)
    assert MACControlPause in p
    assert p[MACControlPause].pause_time == q
    assert ours[:60] == bytes(Ether(dst=MULTICAST, src=src) / MACControlPause(pause_time=q))


@settings(max_examples=200, deadline=None)
@given(src=macs, enabled=st.integers(0, 255), times=st.lists(quanta, min_size=8, max_size=8))
def test_our_pfc_frames_dissect_in_scapy_field_by_field(codec, src, enabled, times):
    ours = bytes.fromhex(codec.ask(f"pfc {MULTICAST} {src} {enabled} " + " ".join(map(str, times))))
    p = Ether(ours[:60])
    assert MACControlClassBasedFlowControl in p
    c = p[MACControlClassBasedFlowControl]
    assert [getattr(c, f"c{i}_enabled") for i in range(8)] == [enabled >> i & 1 for i in range(8)]
    assert [getattr(c, f"c{i}_pause_time") for i in range(8)] == times
    assert ours[60:] == zlib.crc32(ours[:60]).to_bytes(4, "little")


@settings(max_examples=200, deadline=None)
@given(src=macs, enabled=st.integers(0, 255), times=st.lists(quanta, min_size=8, max_size=8))
def test_scapys_pfc_frames_decode_in_ours(codec, src, enabled, times):
    fields = {f"c{i}_enabled": enabled >> i & 1 for i in range(8)}
    fields.update({f"c{i}_pause_time": t for i, t in enumerate(times)})
    theirs = bytes(Ether(dst=MULTICAST, src=src) / MACControlClassBasedFlowControl(**fields))
    assert len(theirs) == 60
    got = codec.ask(f"decode {with_fcs(theirs).hex()}")
    assert got == f"pfc {MULTICAST} {src} {enabled} " + " ".join(map(str, times))


@settings(max_examples=100, deadline=None)
@given(src=macs, q=quanta)
def test_scapys_pause_frames_decode_in_ours_and_unicast_needs_unicast_pause(codec, src, q):
    theirs = bytes(Ether(dst=MULTICAST, src=src) / MACControlPause(pause_time=q))
    assert codec.ask(f"decode {with_fcs(theirs).hex()}") == f"pause {MULTICAST} {src} {q}"
    to_me = bytes(Ether(dst=ME, src=src) / MACControlPause(pause_time=q))
    assert codec.ask(f"decode {with_fcs(to_me).hex()}").startswith("not Address")
    assert codec.ask(f"decode {with_fcs(to_me).hex()} {ME}") == f"pause {ME} {src} {q}"


def test_what_is_not_a_pause_frame_is_refused_with_its_reason(codec):
    good = bytes(Ether(dst=MULTICAST, src=ME) / MACControlPause(pause_time=9))
    assert codec.ask(f"decode {good.hex()}") == "not Length(60)", "no FCS"
    bad = bytearray(with_fcs(good))
    bad[17] ^= 1
    assert codec.ask(f"decode {bytes(bad).hex()}") == "not Fcs"
    gate = bytearray(good)
    gate[15] = 0x02  # MPCP GATE, another MAC control opcode
    assert codec.ask(f"decode {with_fcs(bytes(gate)).hex()}") == "not Opcode(2)"
    ip = bytes(Ether(dst=MULTICAST, src=ME, type=0x0800) / (b"\0" * 46))
    assert codec.ask(f"decode {with_fcs(ip).hex()}") == "not EtherType(2048)"
