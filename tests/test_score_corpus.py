"""benchmarks/score_corpus.py: label placement, matching, sampling and precision.

A tiny synthetic corpus is written to a temp dir (CI has no real corpora); the end-to-end
test runs the real linter of this tree over it in a subprocess.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _load_scorer():
    spec = importlib.util.spec_from_file_location(
        "benchmarks_score_corpus", ROOT / "benchmarks" / "score_corpus.py"
    )
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


score_corpus = _load_scorer()

MODULE = textwrap.dedent(
    """\
    import torch

    BACKEND_EMPTY_CACHE = {"cuda": torch.cuda.empty_cache}


    class Pipeline:
        def decode(self, latents):
            video = self.vae.decode(latents)
            torch.cuda.empty_cache()
            return video

        def table(self):
            return {"cuda": torch.cuda.empty_cache}


    def outer():
        def inner():
            torch.cuda.empty_cache()

        return inner


    def clean():
        return 1
    """
)


def _corpus(tmp_path: Path) -> tuple[Path, Path]:
    corpus = tmp_path / "corpus"
    package = corpus / "demo" / "demo_pkg"
    package.mkdir(parents=True)
    (package / "pipe.py").write_text(MODULE, encoding="utf-8")
    labels = tmp_path / "labelled"
    labels.mkdir()
    entries = [
        {"repo": "demo", "path": "demo_pkg/pipe.py", "function": "Pipeline.decode",
         "line": 9, "label": "instance", "why": "raw call after a decode"},
        {"repo": "demo", "path": "demo_pkg/pipe.py", "function": "outer.inner",
         "line": 18, "label": "instance", "why": "nested function"},
        {"repo": "demo", "path": "demo_pkg/pipe.py", "function": "clean",
         "line": 24, "label": "instance", "why": "a label the linter cannot find"},
        {"repo": "demo", "path": "demo_pkg/pipe.py", "function": "Pipeline.table",
         "line": 13, "label": "negative", "why": "a reference, not a call"},
        {"repo": "demo", "path": "demo_pkg/pipe.py", "function": "<module>",
         "line": 3, "label": "negative", "why": "module-level dispatch table"},
    ]  # fmt: skip
    (labels / "LL004.json").write_text(json.dumps(entries), encoding="utf-8")
    return corpus, labels


def test_function_spans_are_qualified() -> None:
    spans = score_corpus.function_spans(MODULE)
    assert spans["Pipeline.decode"] == [(7, 10)]
    assert spans["outer.inner"] == [(17, 18)]
    assert spans["outer"] == [(16, 20)]
    assert spans["<module>"] == [(1, 24)]


def test_labels_outside_their_function_are_reported(tmp_path: Path) -> None:
    corpus, labels = _corpus(tmp_path)
    loaded = score_corpus.load_labels(str(labels))
    loaded[0].line = 3  # not inside Pipeline.decode
    loaded[1].function = "outer.missing"
    score_corpus.place_labels(loaded, str(corpus))
    assert "no function Pipeline.decode spanning line 3" in loaded[0].error
    assert "no function outer.missing" in loaded[1].error
    assert loaded[2].span == (23, 24)
    assert loaded[4].span == (3, 3)  # module level: its own line only
    scores = score_corpus.score(loaded)
    assert len(scores["LL004"].errors) == 2


def test_matching_by_rule_file_span_and_message(tmp_path: Path) -> None:
    corpus, labels = _corpus(tmp_path)
    loaded = score_corpus.load_labels(str(labels))
    score_corpus.place_labels(loaded, str(corpus))
    loaded[0].match = "`video`"

    def finding(code: str, row: int, message: str = "") -> dict:
        return {"code": code, "repo": "demo", "path": "demo_pkg/pipe.py",
                "location": {"row": row, "column": 1}, "message": message}  # fmt: skip

    findings = [
        finding("LL004", 9, "raw call, `video` is decoded"),  # decode: matches
        finding("LL005", 18),  # inner: wrong rule
        finding("LL004", 6),  # a class line: no labelled function
        finding("LL004", 3),  # the module-level negative's own line
    ]
    score_corpus.match_findings(loaded, findings)
    assert [len(label.findings) for label in loaded] == [1, 0, 0, 0, 1]
    loaded[0].match = "`latents`"
    score_corpus.match_findings(loaded, findings)
    assert loaded[0].findings == []
    scores = score_corpus.score(loaded)["LL004"]
    assert (scores.found, scores.instances, scores.flagged, scores.negatives) == (0, 3, 1, 2)


def test_end_to_end_runs_the_linter(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    corpus, labels = _corpus(tmp_path)
    out = tmp_path / "result.json"
    argv = ["--corpus", str(corpus), "--labels", str(labels), "--json", str(out), "-j", "1"]
    assert score_corpus.main([*argv, "--select", "LL004"]) == 0
    printed = capsys.readouterr().out
    assert "| LL004 | 2/3 | 67% | 0/2 | 0% |" in printed
    assert "demo/demo_pkg/pipe.py:24 clean" in printed  # the miss is listed
    results = {r["where"]: r for r in json.loads(out.read_text())}
    assert results["demo/demo_pkg/pipe.py:9 Pipeline.decode"]["matched"]
    # Extra CLI args reach the linter: with LL004 ignored nothing is found.
    assert score_corpus.main([*argv, "--select", "LL004", "--ignore", "LL004", "-q"]) == 0
    assert "| LL004 | 0/3 | 0% | 0/2 | 0% |" in capsys.readouterr().out


def test_settings_become_a_config_file(tmp_path: Path) -> None:
    config = tmp_path / "pyproject.toml"
    config.write_text('[tool.lifetime-lint]\nselect = ["LL004"]\n', encoding="utf-8")
    text = score_corpus.config_text(str(config), ['ignore = ["LL005"]'])
    assert text == 'select = ["LL004"]\nignore = ["LL005"]\n'
    assert score_corpus.config_text(None, []) is None
    with pytest.raises(SystemExit):
        score_corpus.config_text(None, ["not toml"])


def test_sample_is_reproducible_and_reuses_labels(tmp_path: Path) -> None:
    findings = [
        {"code": code, "repo": "demo", "path": f"m{i}.py", "location": {"row": i, "column": 0},
         "message": f"finding {i}", "significance": "high"}
        for code in ("LL001", "LL004") for i in range(10)
    ]  # fmt: skip
    first = score_corpus.draw_sample(findings, 3, seed=7)
    again = score_corpus.draw_sample(list(reversed(findings)), 3, seed=7)
    assert first == again
    assert [item["rule"] for item in first] == ["LL001"] * 3 + ["LL004"] * 3
    assert first[0]["properties"] == {"significance": "high"}
    first[0]["label"], first[0]["cause"] = False, "tiny tensor"
    first[1]["label"] = True
    renamed = [dict(item) for item in first]
    renamed[1]["message"] = "reworded"
    fresh = [dict(item, label=None, cause=None) for item in renamed]
    assert score_corpus.reuse_labels(fresh, first) == 2
    assert fresh[0]["label"] is False and fresh[0]["cause"] == "tiny tensor"
    assert fresh[1]["reused_from_message"] == first[1]["message"]
    table = score_corpus.render_precision(fresh)
    assert "| LL001 | 3 | 2 | 1 | 50% |" in table
    assert "| all | 6 | 2 | 1 | 50% |" in table
    assert "1  tiny tensor" in table


def test_saved_findings_are_made_relative(tmp_path: Path) -> None:
    corpus, _ = _corpus(tmp_path)
    saved = tmp_path / "run.json"
    filename = str(corpus / "demo" / "demo_pkg" / "pipe.py")
    saved.write_text(json.dumps([{"code": "LL004", "filename": filename}]), encoding="utf-8")
    (finding,) = score_corpus.load_findings(str(saved), str(corpus), "demo")
    assert (finding["repo"], finding["path"]) == ("demo", "demo_pkg/pipe.py")


def test_file_fraction_draws_a_reproducible_subset(tmp_path: Path) -> None:
    corpus, _ = _corpus(tmp_path)
    package = corpus / "demo" / "demo_pkg"
    for i in range(9):
        (package / f"m{i}.py").write_text("x = 1\n", encoding="utf-8")
    drawn = score_corpus.draw_files(str(corpus), "demo", 0.5, seed=3)
    assert drawn == score_corpus.draw_files(str(corpus), "demo", 0.5, seed=3)
    assert len(drawn) == 5 and all(p.startswith("demo_pkg/") for p in drawn)
    assert score_corpus.draw_files(str(corpus), "demo", 1.0, seed=3) is None
