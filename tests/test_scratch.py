"""Buffers lent to compress for its temporaries (bench/compressors/scratch.py): the same message bit for bit as
without them, for every operator and both kinds of randomness; kept from one call to the next; never in a
message's parts."""
import pytest
import torch

from bench.compressors import COMPRESSORS, RowStream, make_compressor
from bench.compressors.scratch import Scratch, temporary

# every operator's examples, and a top-k small enough for the candidate path on the long layer
EXAMPLE_SPECS = [spec for name in COMPRESSORS.names() for spec in COMPRESSORS.get(name).examples] + ["top:0.01"]
# a layer long enough for that path (bench/compressors/sparsify.py largest_indices: 2^16 entries), a short one beside
LAYOUT = [70000, 7]


def _messages(spec, stream: bool, scratch: Scratch | None):
    comp = make_compressor(spec)
    x = torch.randn(6, sum(LAYOUT), generator=torch.Generator().manual_seed(1))
    gen = torch.Generator().manual_seed(2)
    source = RowStream(gen, 9, 2, 8) if stream else gen
    out = []
    for _ in range(3):  # the same buffers again each call
        if scratch is None:
            out.append(comp.compress(x, source, LAYOUT))
        else:
            with scratch.lent():
                out.append(comp.compress(x, source, LAYOUT))
        x = x * 0.5 + 0.1
    return out


@pytest.mark.parametrize("stream", [False, True], ids=["generator", "row-stream"])
@pytest.mark.parametrize("spec", EXAMPLE_SPECS)
def test_lent_buffers_give_the_same_messages_and_stay_out_of_them(spec, stream):
    scratch = Scratch()
    lent, fresh = _messages(spec, stream, scratch), _messages(spec, stream, None)
    for a, b in zip(lent, fresh):
        assert torch.equal(a.values, b.values)
        for pa, pb in zip(a.parts, b.parts):
            assert pa.keys() == pb.keys() and all(torch.equal(pa[k], pb[k]) for k in pa)
    held = {t.data_ptr() for t in scratch._held.values()}
    for message in lent:  # a message outlives the next call: none of its parts is a lent buffer
        assert not {t.data_ptr() for p in message.parts for t in p.values()} & held
    if spec.startswith(("top", "qsgd")):  # the operators whose temporaries are lent: kept, one per name and shape
        assert scratch._held and len({k[:2] for k in scratch._held}) == len(scratch._held)
    if spec == "top:0.01":  # the long first segment takes the candidate path, which writes nothing its size
        assert all(k[1] != (6, LAYOUT[0]) for k in scratch._held)


def test_a_temporary_is_fresh_where_nothing_is_lent_and_kept_where_a_scratch_is():
    a, b = temporary("t", (3, 4), torch.float32, "cpu"), temporary("t", (3, 4), torch.float32, "cpu")
    assert a.data_ptr() != b.data_ptr()
    scratch = Scratch()
    with scratch.lent():
        c, d = temporary("t", (3, 4), torch.float32, "cpu"), temporary("t", (3, 4), torch.float32, "cpu")
        e = temporary("t", (5,), torch.float32, "cpu")  # another shape (another layer): its own buffer
    assert c.data_ptr() == d.data_ptr() != e.data_ptr()
    assert temporary("t", (3, 4), torch.float32, "cpu").data_ptr() != c.data_ptr()  # the loan ended
