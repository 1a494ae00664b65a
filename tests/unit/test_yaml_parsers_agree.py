"""The YAML reader is fast (libyaml's C parser) and bounded the same way as the pure-Python one.

Class: a second parser with its own opinion (a C safe loader whose composer keeps last-wins keys and expands every
alias). Mechanism: one bounded composer and constructor (inputs/yamldoc.py `_Bounds`) over either parser, so the
duplicate-key refusal, the nesting and alias bounds are one code. Invariant in words: for any text, the C-parsed and
the Python-parsed readers give the same value or the same bound's error; only the syntax they accept may differ
(libyaml, YAML's reference parser, takes a few tab placements PyYAML's scanner refuses), and a document
`safe_dump` wrote reads the same in both.
"""

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from offhours.scripts.inputs import yamldoc
from offhours.scripts.inputs.errors import InputError

SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6), st.text(max_size=12),
                    st.floats(allow_nan=False, allow_infinity=False))
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                       st.dictionaries(st.text(max_size=6), inner, max_size=4)),
                      max_leaves=20)


def read_with(loader: type, text: str) -> object:
    """Read `text` as `load_yaml_all` does, with the given loader class."""
    def run() -> object:
        instance = loader(text, "doc.yaml")
        try:
            docs = []
            while instance.check_node():
                docs.append(instance.construct_document(instance.get_node()))
            return docs
        finally:
            instance.dispose()
    try:
        return run()
    except InputError as err:
        return ("InputError", str(err))
    except (yaml.YAMLError, ValueError, TypeError, RecursionError):
        return ("invalid",)  # the two parsers word a syntax error differently: both refuse it


def test_the_c_parser_is_the_one_in_use_where_pyyaml_has_it() -> None:
    assert yaml.__with_libyaml__, "this environment's PyYAML lacks libyaml: the fast path is untested"
    assert isinstance(yamldoc._loader("a: 1", "doc.yaml"), yamldoc._CParsedLoader)


@settings(max_examples=150, deadline=None)
@given(value=VALUES, cut=st.integers(0, 400), noise=st.sampled_from(["", "\n", "&a ", "*a", ": :", "[", "{", "\t"]))
def test_both_parsers_give_the_same_value_or_the_same_error(value: object, cut: int, noise: str) -> None:
    text = yaml.safe_dump(value)
    assert read_with(yamldoc._CParsedLoader, text) == read_with(yamldoc._PythonLoader, text) == [value], text
    variant = text[:cut] + noise + text[cut:]
    fast, slow = read_with(yamldoc._CParsedLoader, variant), read_with(yamldoc._PythonLoader, variant)
    if ("invalid",) not in (fast, slow):  # a syntax one parser refuses: no value to compare
        assert fast == slow, variant


def test_the_c_path_keeps_every_refusal() -> None:
    cases = {"a: 1\nb: 2\na: 3\n": "has the key 'a' twice: line 1 and line 3",
             "[" * 5000: "is nested too deeply",
             "a: &a [*a]\n": "alias inside its own anchor"}
    for text, words in cases.items():
        for loader in (yamldoc._CParsedLoader, yamldoc._PythonLoader):
            outcome = read_with(loader, text)
            assert isinstance(outcome, tuple) and outcome[0] == "InputError" and words in outcome[1], (loader, outcome)
