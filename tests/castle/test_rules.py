"""The rules file is validated the same way by the operator (castle.rules) and by the
checker's own reader (verify.castle): wrong types get our one-line message naming the line
of the rules file, a tree file is validated (indentation, tabs, ARX's CSV form) and its
errors name the tree file."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from streamanon.castle import RuleSet
from streamanon.cli import app
from streamanon.data import ashrae
from streamanon.errors import ConfigError
from streamanon.verify.castle import load_rules

HEAD = 'id = "u"\n[[attribute]]\nname = "age"\ngeneralizer = "range"\n'


def _readers():
    return [("operator", RuleSet.load), ("checker", load_rules)]


@pytest.mark.parametrize("reader", [r for _, r in _readers()], ids=[n for n, _ in _readers()])
@pytest.mark.parametrize(("text", "line", "words"), [
    (HEAD + '[[attribute]]\nname = "dx"\nsensitive = "false"\n', 7, "sensitive must be true"),
    (HEAD + "domain = [387, \"x\"]\n", 5, "domain must be [lo, hi]"),
    (HEAD + "domain = [1, 2, 3]\n", 5, "domain must be [lo, hi]"),
    (HEAD + "domain = [9, 1]\n", 5, "lo <= hi"),
])
def test_wrong_types_are_refused_with_the_line(tmp_path, reader, text, line, words) -> None:
    path = tmp_path / "rules.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as exc:
        reader(path)
    assert str(exc.value).startswith(f"line {line}: attribute "), exc.value
    assert words in str(exc.value)


def _tree_rules(tmp_path, tree: str):
    (tmp_path / "use.txt").write_text(tree)
    path = tmp_path / "rules.toml"
    path.write_text('id = "u"\n[[attribute]]\nname = "use"\ngeneralizer = "hierarchy"\n'
                    'tree = "use.txt"\n')
    return path


@pytest.mark.parametrize("reader", [r for _, r in _readers()], ids=[n for n, _ in _readers()])
@pytest.mark.parametrize(("tree", "words"), [
    ("*\n    public\n      Education\n  private\n", "line 4: inconsistent indentation"),
    ("*\n  public\n    Education\n   Office\n", "line 4: inconsistent indentation"),
    ("*\n\tpublic\n", "line 2: indent with spaces, not tabs"),
    ("Paris;FR;EU\nLyon\n", "line"),
    ("Paris;FR;EU\nLyon;FR\n", "line 2"),
])
def test_a_tree_file_is_validated_and_its_errors_name_it(tmp_path, reader, tree,
                                                         words) -> None:
    with pytest.raises(ConfigError) as exc:
        reader(_tree_rules(tmp_path, tree))
    assert "use.txt" in str(exc.value) and words in str(exc.value), exc.value
    assert "rules.toml" not in str(exc.value)


def test_an_arx_csv_tree_is_read_leaf_first_by_both_readers(tmp_path) -> None:
    path = _tree_rules(tmp_path, "Paris;FR;EU\nLyon;FR;EU\nBerlin;DE;EU\n")
    h = RuleSet.load(path).qi_rules[0].generalizer.tree
    assert h.root == "EU" and h.n_leaves == 3 and h.lca("Paris", "Lyon") == "FR"
    tree = load_rules(path).attributes[0].tree
    assert tree.root == "EU" and tree.ancestors("Paris") == ["Paris", "FR", "EU"]


def test_a_consistent_outline_still_reads(tmp_path) -> None:
    path = _tree_rules(tmp_path, "*\n  public\n    Education\n    Office\n  private\n"
                                 "    Lodging\n")
    h = RuleSet.load(path).qi_rules[0].generalizer.tree
    assert h.n_leaves == 3 and h.lca("Education", "Lodging") == "*"
    assert load_rules(path).attributes[0].tree.ancestors("Office") == ["Office", "public", "*"]


runner = CliRunner()


def test_a_misspelt_time_column_is_refused_without_max_delay(tmp_path) -> None:
    data = ashrae.write_csv(tmp_path / "in.csv", ashrae.generate(50, seed=2))
    rules = tmp_path / "rules.toml"
    rules.write_text(ashrae.rules_toml().replace('"timestamp"', '"nosuchcolumn"', 1))
    res = runner.invoke(app, ["castle", "--rules", str(rules), "--k", "2", "--l", "0",
                              str(data), "-o", str(tmp_path / "out.csv")])
    assert res.exit_code == 2, res.output
    assert "lacks column(s) nosuchcolumn" in res.stderr


def test_data_beyond_the_configured_domain_is_counted_and_warned(tmp_path) -> None:
    data = ashrae.write_csv(tmp_path / "in.csv", ashrae.generate(300, seed=2))
    text = ashrae.rules_toml()
    assert "domain" not in text
    text = text.replace('name = "square_feet"\ngeneralizer = "range"',
                        'name = "square_feet"\ngeneralizer = "range"\ndomain = [0, 10]')
    assert "domain = [0, 10]" in text
    rules = tmp_path / "rules.toml"
    rules.write_text(text)
    res = runner.invoke(app, ["castle", "--rules", str(rules), "--k", "2", "--l", "0",
                              str(data), "-o", str(tmp_path / "out.csv"), "--json"])
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout)
    lo, hi = summary["domains_widened"]["square_feet"]
    assert lo == 0 and hi > 10
    assert any("square_feet" in w and "outside" in w for w in summary["warnings"])
