"""ast.parse one thread at a time where CPython needs it (avo/util/pyast.py): two threads parsing at once failed a
compile on the compile-ahead pool in CI, and a package build beside another test's threads, with "SystemError: AST
constructor recursion depth mismatch"."""

from __future__ import annotations

import ast
import sys
import threading

import avo  # noqa: F401  (installs the serialized parse)
from avo.util import pyast


def test_the_releases_with_the_shared_recursion_depth_are_the_affected_ones():
    assert pyast.affected((3, 11, 7)) and pyast.affected((3, 11, 0)) and pyast.affected((3, 12, 1))
    assert not pyast.affected((3, 11, 8)) and not pyast.affected((3, 12, 2)) and not pyast.affected((3, 13, 0))
    assert not pyast.affected((3, 10, 14))


def test_importing_avo_serializes_the_parse_on_an_affected_python():
    assert getattr(ast.parse, "avo_serialized", False) == pyast.affected(tuple(sys.version_info[:3]))
    assert ast.parse("x = 1").body[0].targets[0].id == "x"
    before = ast.parse
    pyast.install()
    assert ast.parse is before, "installed once per process"


def test_no_two_threads_are_inside_a_serialized_parse_at_once():
    inside, most = [0], [0]
    arrived = threading.Barrier(2, timeout=0.5)

    def slow_parse(source):
        inside[0] += 1
        most[0] = max(most[0], inside[0])
        try:
            arrived.wait()  # a second parser gets here within the timeout only where parses overlap
        except threading.BrokenBarrierError:
            arrived.reset()
        inside[0] -= 1
        return ast.parse(source)

    parse = pyast.serialized(slow_parse)
    threads = [threading.Thread(target=parse, args=("y = 2",)) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert most[0] == 1


def test_a_parse_inside_a_parse_on_one_thread_does_not_wait_on_itself():
    parse = pyast.serialized(lambda source: pyast.serialized(ast.parse)(source))
    assert isinstance(parse("z = 3"), ast.Module)
