"""bench/catalog (no torch) and the implementations agree: the same names, each implementation built on its
entry."""
from bench.algorithms import ALGORITHMS
from bench.catalog.algorithms import METHODS



def test_algorithms_are_their_catalog_entries_plus_the_maths():
    assert ALGORITHMS.names() == METHODS.names()
    for name in METHODS.names():
        assert issubclass(ALGORITHMS.get(name), METHODS.get(name))
        assert ALGORITHMS.get(name).describe() == METHODS.get(name).describe()
